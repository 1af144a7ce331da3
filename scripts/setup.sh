#!/usr/bin/env bash
# Everything servelab needs on a fresh Debian machine, idempotent:
#   1. Debian packages: nginx (proxy under test), apache2-utils (ab), wrk, util-linux (taskset),
#      iproute2 (ss, ip netns), python3-venv, chromium (the HTML report in a real browser).
#   2. A virtualenv in .venv with servelab, its test tools and Locust (an optional driver).
#   3. The oha load generator, built once with cargo into servelab's cache and reused.
#   4. toxiproxy (a slow link in front of PostgreSQL), built once with go into the cache.
#   5. As root: www-data (mod_wsgi's daemons) may traverse to the project's Python.
set -euo pipefail
cd "$(dirname "$0")/.."

OHA_VERSION="${OHA_VERSION:-1.16.0}"
CACHE="${SERVELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/servelab}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

# 1. Debian packages -------------------------------------------------------------
packages=(nginx-light apache2-utils wrk util-linux iproute2 procps python3-venv ca-certificates
  chromium  # chromium: opens the HTML report headless (screenshot, browser test)
  gcc libc6-dev python3-dev  # pip builds uWSGI from source (Debian's Python needs its headers)
  postgresql  # servelab starts its own PostgreSQL (initdb, pg_ctl) for the Django reference app
  apache2 apache2-dev  # Apache httpd as a front; apache2-dev's apxs lets pip build mod_wsgi
  acl)  # setfacl: lets mod_wsgi's daemons (www-data) reach a Python under a closed /root
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts nginx as a service on install; servelab runs its own instances only.
if command -v service >/dev/null 2>&1 && [ -e /run/nginx.pid ]; then
  $SUDO service nginx stop >/dev/null 2>&1 || true
fi
if command -v service >/dev/null 2>&1 && [ -e /run/apache2/apache2.pid ]; then
  $SUDO service apache2 stop >/dev/null 2>&1 || true
fi

# 2. Python virtualenv -------------------------------------------------------------
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: servelab needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.servelab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing servelab and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test,locust]'  # locust: --driver locust and its tests
  touch "$stamp"
fi

# 3. oha, built with cargo into the cache -------------------------------------------
OHA="$CACHE/cargo/bin/oha"
if ! { [ -x "$OHA" ] && "$OHA" --version 2>/dev/null | grep -q "$OHA_VERSION"; }; then
  CARGO="$(command -v cargo || true)"
  [ -z "$CARGO" ] && [ -x "$HOME/.cargo/bin/cargo" ] && CARGO="$HOME/.cargo/bin/cargo"
  if [ -z "$CARGO" ]; then
    say "installing Debian's cargo (no cargo found)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends cargo >/dev/null
    CARGO="$(command -v cargo)"
  fi
  say "building oha $OHA_VERSION with cargo into $CACHE/cargo (a few minutes, once)"
  "$CARGO" install oha --locked --version "$OHA_VERSION" --root "$CACHE/cargo" --quiet
fi

# 4. toxiproxy, built with go into the cache ------------------------------------------
TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-v2.12.0}"
TOXIPROXY="$CACHE/go/bin/toxiproxy-server-$TOXIPROXY_VERSION"
if [ ! -x "$TOXIPROXY" ]; then
  GO="$(command -v go || true)"
  [ -z "$GO" ] && [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go
  if [ -z "$GO" ]; then
    say "installing Debian's golang-go (no go found)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    GO="$(command -v go)"
  fi
  say "building toxiproxy $TOXIPROXY_VERSION with go into $CACHE/go (about 20 s, once)"
  GOBIN="$CACHE/go/bin" "$GO" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv "$CACHE/go/bin/server" "$TOXIPROXY"
fi
# 5. mod_wsgi's daemon processes run as www-data when servelab is root; they read the
#    project's Python (stdlib, .venv) and the checkout. Grant traverse (x, no listing) on
#    each directory on the way that is closed to www-data, and nothing else.
if [ "$(id -u)" -eq 0 ] && id www-data >/dev/null 2>&1; then
  as_www_data() { setpriv --reuid=www-data --regid=www-data --clear-groups "$@"; }
  for target in "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" \
                "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
                "$PWD/src"; do
    dir=""
    IFS=/ read -ra parts <<< "${target#/}"
    for part in "${parts[@]}"; do
      dir="$dir/$part"
      if ! as_www_data test -x "$dir"; then
        say "letting www-data traverse $dir (mod_wsgi's daemons read the project's Python)"
        setfacl -m u:www-data:x "$dir"
      fi
    done
  done
fi
say "ready: $("$OHA" --version), $(nginx -v 2>&1), $(apache2 -v | head -1), $(.venv/bin/python --version)"
