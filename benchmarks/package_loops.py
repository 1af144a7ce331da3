"""Packages on import loops, and the edges that close them, at any commit.

Counted as ``tests/unit/test_layout.py`` counts them (``package_loops``): a package of
``src/servelab`` (or a module at its top level) is a node, every module counted in its
package, and an import of another package is an edge, inside a function, at module
level or under ``if TYPE_CHECKING:`` (the module's annotations stand on it). An edge is
on a loop when the package it imports leads back. Static, deterministic: one count is the
figure. Reads the commit's ``src/servelab`` through ``git archive`` into a temporary
directory (removed after), so nothing is checked out.

    PYTHONPATH=src .venv/bin/python benchmarks/package_loops.py 7654ff5 HEAD
    PYTHONPATH=src .venv/bin/python benchmarks/package_loops.py --places 7654ff5

Prints, per commit, the packages on loops and the loop edges (with ``--places``, each
edge with the imports that make it, as the test names them).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from test_layout import floor_edges, package_loops  # noqa: E402


def count(rev: str, places: bool) -> str:
    archive = subprocess.run(
        ["git", "archive", rev, "src/servelab"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="servelab-loops-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / "src" / "servelab"
        packages, edges = package_loops(src)
        where = floor_edges(src)
    lines = [
        f"{rev}: {len(packages)} packages on loops ({', '.join(packages) or 'none'}), "
        f"{len(edges)} loop edges"
    ]
    for a, b in edges:
        lines.append(f"  {a} -> {b}" + (f": {', '.join(where[(a, b)])}" if places else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="*", default=["HEAD"], help="commits (default HEAD)")
    parser.add_argument("--places", action="store_true", help="each edge's imports")
    args = parser.parse_args()
    for rev in args.revs:
        print(count(rev, args.places))


if __name__ == "__main__":
    main()
