# The two commands of the README: `make quick` (main job) and `make test`.
VENV := .venv

.PHONY: setup setup-all quick test lint docs

# The core: nginx, oha, servelab with gunicorn and uvicorn (scripts/setup.sh --help).
setup:
	./scripts/setup.sh

# Every optional part (Apache, PostgreSQL, toxiproxy, Chromium, the other app servers)
# and the test tools.
setup-all:
	./scripts/setup.sh --all

quick: setup
	$(VENV)/bin/servelab study quick

docs: setup-all
	$(VENV)/bin/mkdocs build --strict

lint: setup-all
	$(VENV)/bin/ruff check src tests benchmarks

test: setup-all
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q
