"""The house's rule: a server's, front's or driver's name appears in its own module, its
registry and the studies that choose it; everything else asks the registries.

The exceptions are the same word in another vocabulary (a gunicorn worker class named
uvicorn, the uwsgi protocol). The export asks the modules too (``Front.deploy``,
``AppServer.deploy``)."""

from __future__ import annotations

import ast
import itertools
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


# -- floors: no new import loops between packages ------------------------------------------
#
# A package (or a module at servelab's top level) is a floor; an import of another floor,
# at module level or inside a function, is an edge of the graph below. DESIGN's rule:
# imports only look down (model -> plug-ins -> validation and preparation -> measuring ->
# analysis -> report/export -> cli), so no two floors may import each other, directly or
# through others. Today one loop of 13 packages breaks it (67 edges lay on it at first);
# the edges that lie on it are listed here, and the list may only shrink: a new edge on a
# loop fails with the loop it closes, and an edge no longer on one must be taken off.
KNOWN_LOOP_EDGES = {
    "analysis": {"config", "host", "results"},
    "apps": {"config", "host", "launch", "servers", "services"},
    "config": {"analysis", "apps", "fronts", "load", "servers"},
    "fronts": {"apps", "config", "host", "launch", "observe", "servers"},
    "host": {"config", "fronts", "load", "measuring", "servers", "services"},
    "launch": {"apps", "config", "fronts", "host", "servers"},
    "load": {"config", "host", "launch", "results"},
    "measuring": {
        "analysis", "config", "fronts", "host", "launch", "load", "observe", "results",
        "servers",
    },
    "observe": {"fronts", "host", "launch", "results", "servers"},
    "report": {
        "analysis", "config", "fronts", "host", "load", "measuring", "observe", "results",
    },
    "results": {"analysis", "config", "report"},
    "servers": {"apps", "config", "fronts", "host", "launch"},
    "services": {"host", "launch"},
}
FLOOR_RULE = (
    "imports only look down (DESIGN.md, 'Floors'): a floor that imports another may not be "
    "imported by it, directly or through other floors; move the shared part to the floor "
    "both stand on, or the caller above both"
)


# The plug-ins' registries hold names and import strings only ("module:Class", imported
# when first asked for): they stand on the registry floor, below the model that names them.
REGISTRIES = {f"servelab.{kind}.registry" for kind in ("servers", "fronts", "load")}


def _floor(module: str) -> str | None:
    """The floor of a servelab module: its package, or the top-level module itself (the
    plug-ins' registries: the registry floor)."""
    if module in REGISTRIES:
        return "registry"
    parts = module.split(".")
    return parts[1] if parts[0] == "servelab" and len(parts) > 1 else None


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


TYPE_CHECKING = {"TYPE_CHECKING", "typing.TYPE_CHECKING"}


def _imported(path: Path) -> list[tuple[str, int]]:
    """Every servelab module ``path`` imports (anywhere in it), with the line; imports for
    the type checker only (under ``if TYPE_CHECKING:``) never run and are left out."""
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    tree = ast.parse(path.read_text())
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module] if node.level else [node.module or ""])
            module = module.rstrip(".")
            # ``from servelab import api``: the module api, when there is one.
            found += [
                (f"{module}.{alias.name}" if module == "servelab" else module, node.lineno)
                for alias in node.names
            ]
    return [(m, line) for m, line in found if m.startswith("servelab.")]


def floor_edges() -> dict[tuple[str, str], list[str]]:
    """(floor, floor it imports) -> where ("config/stack.py:16", ...)."""
    floors = {_floor(_module(p)) for p in SRC.rglob("*.py")} - {None}
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        mine = _floor(_module(path))
        for module, line in _imported(path):
            theirs = _floor(module)
            if mine and theirs in floors and theirs != mine:
                where = f"{path.relative_to(SRC).as_posix()}:{line}"
                places = edges.setdefault((mine, theirs), [])
                if where not in places:
                    places.append(where)
    return edges


def _reach(graph: dict[str, set[str]], start: str) -> dict[str, str | None]:
    """Every floor reachable from ``start``, each with the floor it was reached from."""
    came_from: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        here = todo.pop(0)
        for there in sorted(graph.get(here, ())):
            if there not in came_from:
                came_from[there] = here
                todo.append(there)
    return came_from


def loop_edges(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """The edges that lie on a loop: a -> b where b leads back to a. Each maps to the way
    back (b, ..., a)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found = {}
    for a, b in edges:
        came_from = _reach(graph, b)
        if a in came_from:
            way: list[str] = [a]
            while way[-1] != b:
                step = came_from[way[-1]]
                assert step is not None
                way.append(step)
            found[(a, b)] = way[::-1]
    return found


def test_floors_make_no_new_import_loops() -> None:
    edges = floor_edges()
    loops = loop_edges(edges)
    known = {(a, b) for a, theirs in KNOWN_LOOP_EDGES.items() for b in theirs}
    new = [
        f"{a} imports {b} ({', '.join(edges[(a, b)][:3])}), and {b} leads back to {a}: "
        + " -> ".join(
            f"{x} ({edges[(x, y)][0]})" for x, y in itertools.pairwise(way)
        )
        + f" -> {a}"
        for (a, b), way in sorted(loops.items())
        if (a, b) not in known
    ]
    assert not new, f"a new import loop; the rule: {FLOOR_RULE}\n" + "\n".join(new)
    gone = sorted(known - loops.keys())
    assert not gone, (
        "no longer on an import loop, take them off KNOWN_LOOP_EDGES (the list only "
        f"shrinks): {gone}"
    )


def test_the_floor_graph_sees_imports_inside_functions() -> None:
    edges = floor_edges()
    # config/experiment.py imports analysis.thresholds inside a validator.
    assert any(w.startswith("config/experiment.py:") for w in edges[("config", "analysis")])
    # ``from servelab import api`` is an import of the module api.
    assert ("cli", "api") in edges
