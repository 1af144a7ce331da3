#!/usr/bin/env bash
# Everything servelab needs on a fresh Debian machine, idempotent.
#
#   scripts/setup.sh                  the core: what `make quick` needs
#   scripts/setup.sh --with apache,postgres
#   scripts/setup.sh --all            every optional part and the test tools (`make test`)
#   scripts/setup.sh --undo-acl       take back the www-data access `--with apache` granted
#
# The core: Debian's nginx-light, apache2-utils (ab), wrk, util-linux (taskset), iproute2
# (ss, ip netns), python3-venv; a virtualenv in .venv with servelab (core + charts); the oha
# load generator, built once with cargo into servelab's cache.
# Optional parts (--with, comma-separated):
#   servers   granian, hypercorn and uWSGI (pyuwsgi wheels) in .venv
#   apache    Apache httpd as a front, and mod_wsgi (built by pip: gcc, apache2-dev); as root,
#             www-data (mod_wsgi's daemons) may traverse to .venv's Python (--undo-acl)
#   postgres  PostgreSQL (servelab runs its own instances) and the Django reference app
#   toxiproxy a slow link in front of PostgreSQL (--db-latency), built once with go
#   replay    the sender that replays access logs (vegeta's attacker paced by the log),
#             built once with go (Go 1.22 or newer; an older Go fetches go1.22.12 from the Go proxy) from src/servelab/load/vegeta_replay
#   chromium  opens the HTML report headless (screenshot, browser test)
#   test      pytest, ruff, mypy, hypothesis, build, mkdocs, Locust, py-spy, git (the test command)
#
# It never stops a service that runs on this machine, and the services Debian's packages
# bring (nginx, apache2, postgresql) are installed without being started or enabled at
# boot: servelab runs its own instances on its own ports.
set -euo pipefail
cd "$(dirname "$0")/.."

OHA_VERSION="${OHA_VERSION:-1.16.0}"
TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-v2.12.0}"
GO_TOOLCHAIN="${GO_TOOLCHAIN:-go1.22.12}"  # fetched where the machine's Go is older than 1.22
CACHE="${SERVELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/servelab}"
ACL_RECORD="$CACHE/www-data-acl.txt"
ALL_PARTS="servers,apache,postgres,toxiproxy,replay,chromium,test"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 2; }

parts=""
undo_acl=0
while [ $# -gt 0 ]; do
  case "$1" in
    --all) parts="$ALL_PARTS" ;;
    --with) [ $# -ge 2 ] || die "--with needs a list, e.g. --with apache,postgres"
            parts="${parts:+$parts,}$2"; shift ;;
    --with=*) parts="${parts:+$parts,}${1#--with=}" ;;
    --undo-acl) undo_acl=1 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (fix: scripts/setup.sh [--with $ALL_PARTS | --all | --undo-acl])" ;;
  esac
  shift
done
IFS=, read -ra wanted <<< "$parts"
for part in "${wanted[@]}"; do
  [[ ",$ALL_PARTS," == *",$part,"* ]] || die "unknown part '$part' (fix: choose from $ALL_PARTS)"
done
want() { [[ ",$parts," == *",$1,"* ]]; }

# --undo-acl: remove exactly the ACL entries this script added, as recorded. -----------
if [ "$undo_acl" -eq 1 ]; then
  if [ ! -s "$ACL_RECORD" ]; then say "no www-data access to take back ($ACL_RECORD is empty)"; exit 0; fi
  while IFS= read -r dir; do
    [ -n "$dir" ] && [ -e "$dir" ] && setfacl -x u:www-data "$dir" && say "www-data may no longer traverse $dir"
  done < "$ACL_RECORD"
  rm -f "$ACL_RECORD"
  exit 0
fi

# 1. Debian packages -------------------------------------------------------------
# valgrind: check and bisect count the app's instructions per request (--fail-if instructions).
packages=(nginx-light apache2-utils wrk util-linux iproute2 procps python3-venv ca-certificates valgrind)
want apache && packages+=(apache2 apache2-dev gcc libc6-dev python3-dev acl)
want postgres && packages+=(postgresql)
want chromium && packages+=(chromium)
want test && packages+=(git)  # the check tests make repositories and worktrees
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# The services that the missing packages bring: installed, not started, not enabled at boot.
new_services=()
for pkg in "${missing[@]}"; do
  case "$pkg" in
    nginx-light) new_services+=(nginx) ;;
    apache2) new_services+=(apache2) ;;
    postgresql) new_services+=(postgresql) ;;
  esac
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ "${#new_services[@]}" -gt 0 ] && [ ! -e "$policy" ]; then
    # Debian's way to keep packages from starting their services on install (exit 101).
    printf '#!/bin/sh\n# servelab setup: no service starts while it installs packages\nexit 101\n' \
      | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    own_policy=1
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ "$own_policy" -eq 1 ]; then $SUDO rm -f "$policy"; trap - EXIT; fi
  for service in "${new_services[@]}"; do
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
      $SUDO systemctl disable --quiet "$service" 2>/dev/null || true
    elif command -v update-rc.d >/dev/null 2>&1; then
      $SUDO update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
    say "installed $service without starting it or enabling it at boot (servelab runs its own;" \
        "for Debian's service: systemctl enable --now $service)"
  done
fi

# 2. Python virtualenv -------------------------------------------------------------
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  die "servelab needs Python 3.11 or newer (fix: set PYTHON=/path/to/python3.11)"
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
extras=charts
want servers && extras+=",servers,uwsgi"
want apache && extras+=",apache"
want postgres && extras+=",django"
want test && extras+=",test,docs,locust,profile"
stamp=.venv/.servelab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! grep -qx "$extras" "$stamp"; then
  say "installing servelab[$extras] into .venv"
  # uv installs the same packages as pip in about a third of the time (73 s -> 25-36 s
  # for every extra, measured on a 2-CPU VM); pip stays the fallback (an index that only
  # pip.conf names, or no uv wheel for this platform).
  .venv/bin/python -m pip install -q --upgrade pip
  if .venv/bin/python -m pip install -q "uv>=0.5" \
      && .venv/bin/uv pip install -q --python .venv/bin/python -e ".[$extras]"; then
    :
  else
    say "uv could not install; installing with pip"
    .venv/bin/python -m pip install -q -e ".[$extras]"
  fi
  echo "$extras" > "$stamp"
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

# 4. toxiproxy and the replay sender, built with go into the cache ---------------------
find_go() {
  GO="$(command -v go || true)"
  [ -z "$GO" ] && [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go
  if [ -z "$GO" ]; then
    say "installing Debian's golang-go (no go found)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    GO="$(command -v go)"
  fi
  # The replay sender's go.mod needs Go 1.22; Debian 12's golang-go is 1.19, which knows
  # no toolchain downloads. Then Go's own release is taken from the Go module proxy, as
  # GOTOOLCHAIN would (golang.org/toolchain, about 70 MB, once), into the cache.
  minor="$("$GO" env GOVERSION | sed -nE 's/^go1\.([0-9]+).*/\1/p')"
  if [ -z "$minor" ] || [ "$minor" -lt 22 ]; then
    arch="$(uname -m | sed -e 's/x86_64/amd64/' -e 's/aarch64/arm64/')"
    dist="$CACHE/go/toolchain-$GO_TOOLCHAIN"
    if [ ! -x "$dist/bin/go" ]; then
      say "$("$GO" env GOVERSION) is older than 1.22: fetching $GO_TOOLCHAIN from proxy.golang.org into $dist (once)"
      mkdir -p "$CACHE/go"
      .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])' \
        "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.linux-$arch.zip" "$dist.zip"
      rm -rf "$dist.tmp" && .venv/bin/python -m zipfile -e "$dist.zip" "$dist.tmp"
      chmod -R a+x "$dist.tmp"/golang.org/toolchain@*/bin "$dist.tmp"/golang.org/toolchain@*/pkg/tool
      mv "$dist.tmp"/golang.org/toolchain@* "$dist" && rm -rf "$dist.tmp" "$dist.zip"
    fi
    GO="$dist/bin/go"
  fi
}
TOXIPROXY="$CACHE/go/bin/toxiproxy-server-$TOXIPROXY_VERSION"
if want toxiproxy && [ ! -x "$TOXIPROXY" ]; then
  find_go
  say "building toxiproxy $TOXIPROXY_VERSION with go into $CACHE/go (about 20 s, once)"
  GOBIN="$CACHE/go/bin" "$GO" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv "$CACHE/go/bin/server" "$TOXIPROXY"
fi
# Named after its source's hash (servelab.load.vegeta.source_digest): a changed source is
# built anew, never run as an old binary.
SENDER_SRC="src/servelab/load/vegeta_replay"
SENDER="$CACHE/go/bin/servelab-replay-sender-$(cat "$SENDER_SRC/main.go" "$SENDER_SRC/go.mod" "$SENDER_SRC/go.sum" | sha256sum | cut -c1-12)"
if want replay && [ ! -x "$SENDER" ]; then
  find_go
  say "building the replay sender (vegeta) with go into $CACHE/go (about a minute, once)"
  mkdir -p "$CACHE/go/bin"
  (cd "$SENDER_SRC" && "$GO" build -trimpath -o "$SENDER.tmp" .) && mv "$SENDER.tmp" "$SENDER"
fi

# 5. mod_wsgi's daemon processes run as www-data when servelab is root; they read the
#    project's Python (stdlib, .venv) and the checkout. Grant traverse (x, no listing) on
#    each directory on the way that is closed to www-data, and nothing else; each grant is
#    recorded, and `scripts/setup.sh --undo-acl` takes them back.
if want apache && [ "$(id -u)" -eq 0 ] && id www-data >/dev/null 2>&1; then
  as_www_data() { setpriv --reuid=www-data --regid=www-data --clear-groups "$@"; }
  mkdir -p "$CACHE"
  for target in "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" \
                "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
                "$PWD/src"; do
    dir=""
    IFS=/ read -ra path_parts <<< "${target#/}"
    for part in "${path_parts[@]}"; do
      dir="$dir/$part"
      if ! as_www_data test -x "$dir"; then
        setfacl -m u:www-data:x "$dir"
        grep -qxF "$dir" "$ACL_RECORD" 2>/dev/null || echo "$dir" >> "$ACL_RECORD"
        say "let www-data traverse $dir (mod_wsgi's daemons read the project's Python;" \
            "undo: scripts/setup.sh --undo-acl)"
      fi
    done
  done
fi
say "ready: $("$OHA" --version), $(nginx -v 2>&1), $(.venv/bin/python --version), servelab[$extras]"
