# The two commands of the README: `make quick` (main job) and `make test`.
VENV := .venv

.PHONY: setup quick test lint docs

setup:
	./scripts/setup.sh

quick: setup
	$(VENV)/bin/servelab study quick

docs: setup
	$(VENV)/bin/mkdocs build --strict

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks

test: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/pytest -q
