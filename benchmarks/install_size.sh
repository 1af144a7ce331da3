#!/usr/bin/env bash
# Issue "Your app, your environment": install time and size of servelab's core vs [all],
# from its wheel, each into a fresh venv (pip's cache as this machine has it: warm, with
# the wheels it built before, e.g. mod_wsgi's). Prints figures; asserts nothing.
#   benchmarks/install_size.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
work="$(mktemp -d /tmp/servelab-install-XXXXXX)"
trap 'rm -rf "$work"' EXIT
git ls-files -z | xargs -0 cp --parents -t "$work" 2>/dev/null || cp -r src pyproject.toml README.md LICENSE "$work"
.venv/bin/python -m build --wheel --outdir "$work/dist" "$work" >/dev/null 2>&1
wheel="$(ls "$work"/dist/servelab-*.whl)"
for round in $(seq "$rounds"); do
  for what in core all; do
    rm -rf "$work/v"; python3 -m venv "$work/v"
    spec="$wheel"; [ "$what" = all ] && spec="$wheel[all]"
    start=$(date +%s.%N)
    "$work/v/bin/pip" install -q --disable-pip-version-check "$spec"
    end=$(date +%s.%N)
    printf '%s %-4s %6.1f s %4s MiB %3s distributions\n' "$round" "$what" \
      "$(echo "$end - $start" | bc)" "$(du -sm "$work/v" | cut -f1)" \
      "$("$work/v/bin/pip" list --format=freeze 2>/dev/null | wc -l)"
  done
done
