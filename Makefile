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
	# The pure parts in parallel, a process per CPU (pytest-xdist); then the tests with
	# real stacks, three at a time (they mostly wait on their stacks), each in a temp dir
	# of its own (tests/conftest.py). Each pins its stack and its load driver apart; the
	# tests that assert a measured effect run one after the other on one worker
	# (SERIAL_GROUPS in tests/conftest.py); last, the ones that need the machine to
	# themselves, one at a time.
	$(VENV)/bin/pytest -q -n auto -m "not integration"
	$(VENV)/bin/pytest -q tests/integration -m "integration and not alone" -n 3 --dist loadscope
	$(VENV)/bin/pytest -q tests/integration -m "integration and alone"
