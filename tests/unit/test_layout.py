"""The house's rule: a server's, front's or driver's name appears in its own module, its
registry and the studies that choose it; everything else asks the registries.

The exceptions are the same word in another vocabulary (a gunicorn worker class named
uvicorn, the uwsgi protocol). The export asks the modules too (``Front.deploy``,
``AppServer.deploy``)."""

from __future__ import annotations

import ast
from pathlib import Path

import servelab
from servelab.fronts.registry import PROCESS_FRONTS
from servelab.load.registry import DRIVER_NAMES
from servelab.servers.registry import SERVER_KINDS

SRC = Path(servelab.__file__).parent
KINDS = {*SERVER_KINDS, *PROCESS_FRONTS, *DRIVER_NAMES}
OWN_DIRS = {"servers", "fronts", "load"}
# (file, name): why the name is there.
EXCEPTIONS = {
    ("config/stack.py", "uvicorn"): "gunicorn's worker class 'uvicorn' (a knob value)",
    ("config/stack.py", "uwsgi"): "the uwsgi protocol a front speaks",
    ("cli/measure.py", "uvicorn"): "gunicorn's worker class 'uvicorn' (ramp --worker-class)",
    ("measuring/ramp.py", "uvicorn"): "gunicorn's worker class 'uvicorn' for ASGI apps",
    ("tune/space.py", "uvicorn"): "gunicorn's worker class 'uvicorn', tried for ASGI apps",
    ("servers/gunicorn.py", "uvicorn"): "gunicorn's worker class 'uvicorn'",
    ("fronts/nginx.py", "uwsgi"): "the uwsgi protocol (uwsgi_pass) and its temp dir",
    ("fronts/apache.py", "uwsgi"): "the uwsgi protocol (mod_proxy_uwsgi)",
    ("servers/mod_wsgi.py", "apache"): "mod_wsgi runs inside Apache (inside_front)",
    ("host/procs.py", "ab"): "open(..., 'ab'): a file mode",
    ("launch/templates/__init__.py", "nginx"): "the Jinja filter quoting nginx strings",
}


def _named(path: Path) -> set[str]:
    """The kinds ``path`` names in string constants, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in KINDS
        and id(node) not in docstrings
    }


def _own(rel: str, kind: str) -> bool:
    folder, _, name = rel.partition("/")
    return rel.startswith("studies/") or (
        folder in OWN_DIRS and name in (f"{kind}.py", "registry.py")
    )


def test_kinds_are_named_only_where_they_live() -> None:
    found = {
        (rel, kind)
        for path in SRC.rglob("*.py")
        for rel in [path.relative_to(SRC).as_posix()]
        for kind in _named(path)
        if not _own(rel, kind)
    }
    assert found - EXCEPTIONS.keys() == set(), "ask the registries instead"
    assert EXCEPTIONS.keys() - found == set(), "an exception no longer needed: remove it"


def test_few_modules_at_the_top_level() -> None:
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "api.py", "errors.py", "registry.py", "session.py"]
