#!/usr/bin/env bash
# A checkout's set-up on a fresh Debian machine, idempotent: a virtualenv in .venv with
# servelab from this checkout (editable), then `servelab setup` with the same options,
# which installs everything else. One route: a tool install (pipx, uv tool) runs the
# same `servelab setup`.
#
#   scripts/setup.sh                  the core: what `make quick` needs
#   scripts/setup.sh --with apache,postgres
#   scripts/setup.sh --all            every optional part and the test tools (`make test`)
#   scripts/setup.sh --undo-acl       take back the www-data access `--with apache` granted
#
# The parts and what each brings: `.venv/bin/servelab setup --help` (docs/install.md).
# Here only what servelab needs before it can run: Debian's python3-venv (with sudo when
# not root) and the venv. PYTHON=/path/to/python3.11+ picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 2; }

for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
done

PYTHON="${PYTHON:-python3}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! command -v "$PYTHON" >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
  say "installing Debian's python3-venv (servelab's virtualenv needs it)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    python3 python3-venv ca-certificates >/dev/null
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  die "servelab needs Python 3.11 or newer (fix: set PYTHON=/path/to/python3.11)"
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.servelab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing servelab from this checkout into .venv"
  # uv installs the same packages as pip in about a third of the time (73 s -> 25-36 s
  # for every extra, measured on a 2-CPU VM); `servelab setup` installs the parts' extras
  # with it too. pip stays the fallback (an index only pip.conf names, no uv wheel).
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  if .venv/bin/python -m pip install -q --disable-pip-version-check "uv>=0.5" \
      && .venv/bin/uv pip install -q --python .venv/bin/python -e .; then
    :
  else
    say "uv could not install; installing with pip"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e .
  fi
  touch "$stamp"
fi
exec .venv/bin/servelab setup "$@"
