"""The house's rules. A server's, front's or driver's name appears in its own module, its
registry's table (``servelab/registry.py``) and the studies that choose it; everything
else asks the registries. Imports look down the floors, module by module and package by
package, imports inside functions and for the type checker counted: no package loop, and
no circle of files inside a package. No module is over 500 lines.

The exceptions are the same word in another vocabulary (a gunicorn worker class named
uvicorn, the uwsgi protocol). The export asks the modules too (``Front.deploy``,
``AppServer.deploy``)."""

from __future__ import annotations

import ast
import functools
import itertools
import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import servelab
from servelab.registry import DRIVER_NAMES, PROCESS_FRONTS, SERVER_KINDS

SRC = Path(servelab.__file__).parent
KINDS = {*SERVER_KINDS, *PROCESS_FRONTS, *DRIVER_NAMES}
OWN_DIRS = {"servers", "fronts", "load"}
# (file, name): why the name is there.
EXCEPTIONS = {
    ("config/stack.py", "uvicorn"): "gunicorn's worker class 'uvicorn' (a knob value)",
    ("config/stack.py", "uwsgi"): "the uwsgi protocol a front speaks",
    ("cli/measure.py", "uvicorn"): "gunicorn's worker class 'uvicorn' (ramp --worker-class)",
    ("cli/capacity.py", "uvicorn"): "gunicorn's worker class 'uvicorn' (its --worker-class)",
    ("measuring/ramp.py", "uvicorn"): "gunicorn's worker class 'uvicorn' for ASGI apps",
    ("tune/space.py", "uvicorn"): "gunicorn's worker class 'uvicorn', tried for ASGI apps",
    ("servers/gunicorn.py", "uvicorn"): "gunicorn's worker class 'uvicorn'",
    ("fronts/nginx.py", "uwsgi"): "the uwsgi protocol (uwsgi_pass) and its temp dir",
    ("fronts/apache_conf.py", "uwsgi"): "the uwsgi protocol (mod_proxy_uwsgi)",
    ("servers/mod_wsgi.py", "apache"): "mod_wsgi runs inside Apache (inside_front)",
    ("host/procs.py", "ab"): "open(..., 'ab'): a file mode",
    ("host/templates/__init__.py", "nginx"): "the Jinja filter quoting nginx strings",
    ("host/parts.py", "nginx"): "the service Debian's nginx-light package brings",
    ("host/parts.py", "wrk"): "Debian's package of wrk, installed by the set-up",
    ("host/parts.py", "apache"): "the set-up part of Apache httpd and mod_wsgi",
    ("host/parts.py", "uwsgi"): "pyproject's extra of that name",
    ("host/parts.py", "locust"): "pyproject's extra of that name",
    ("host/parts.py", "oha"): "the crate the set-up builds with cargo",
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
    """Its module, the registries' tables, the studies."""
    folder, _, name = rel.partition("/")
    return rel in ("registry.py",) or folder == "studies" or (
        folder in OWN_DIRS and name == f"{kind}.py"
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


# -- floors: no import loops between packages ----------------------------------------------
#
# A package (or a module at servelab's top level) is a floor of this graph, every module in
# it counted, none set apart; an import of another package, at module level, inside a
# function or for the type checker only (under ``if TYPE_CHECKING:``), is an edge. Imports
# only look down (the model -> the plug-ins -> preparation -> analysis -> measuring ->
# output -> commands -> the CLI), so no two packages may import each other, directly or
# through others; a new loop fails naming its places.
# ``package_loops`` counts them (``benchmarks/package_loops.py`` at any commit). Without
# the imports for the type checker: 13 packages on loops at first; 7 until each package
# stood on one floor of FLOORS below; 8, counted with the plug-ins' registries in their
# packages (config imported fronts/registry.py, fronts/ and servers/ imported each other
# for Apache and mod_wsgi); none since their tables moved to servelab/registry.py and the
# front asks the server it hosts by name. With them, 12 (registry.py named the
# plug-ins' bases for its tables' types, config/run.py prepare's request and database
# values); none since the tables hand out what they import by name, and those values
# stand in config. The bases and their typed lookups stand in servelab/plugins/, a floor
# above the model and below the plug-ins.
FLOOR_RULE = (
    "imports only look down (docs/contributing.md, 'Layout'): a package that imports another "
    "may not be imported by it, directly or through other packages; move the shared part to "
    "the floor both stand on, or the caller above both"
)


def _floor(module: str) -> str | None:
    """The package of a servelab module, or the top-level module itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "servelab" and len(parts) > 1 else None


def _module(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules(src: Path) -> frozenset[str]:
    """Every module of the servelab package at ``src``, packages by their name."""
    return frozenset(_module(path, src) for path in src.rglob("*.py"))


def _imported(path: Path, src: Path = SRC) -> list[tuple[str, int]]:
    """Every servelab module ``path`` imports (anywhere in it: inside functions, and under
    ``if TYPE_CHECKING:`` too, whose names the module's annotations stand on), with the
    line. ``from package import name`` imports the module ``package.name`` when there is
    one, else the package."""
    me = _module(path, src)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module] if node.level else [node.module or ""])
            module = module.rstrip(".")
            found += [
                (f"{module}.{alias.name}" if f"{module}.{alias.name}" in _modules(src)
                 else module, node.lineno)
                for alias in node.names
            ]
    return [(m, line) for m, line in found if m.startswith("servelab.")]


def floor_edges(src: Path = SRC) -> dict[tuple[str, str], list[str]]:
    """(package, package it imports) -> where ("config/stack.py:16", ...), for the
    servelab package at ``src``."""
    floors = {_floor(_module(p, src)) for p in src.rglob("*.py")} - {None}
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(src.rglob("*.py")):
        mine = _floor(_module(path, src))
        for module, line in _imported(path, src):
            theirs = _floor(module)
            if mine and theirs in floors and theirs != mine:
                where = f"{path.relative_to(src).as_posix()}:{line}"
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


def loop_problems(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """One line per edge on a loop: where it is, and the way back."""
    return [
        f"{a} imports {b} ({', '.join(edges[(a, b)][:3])}), and {b} leads back to {a}: "
        + " -> ".join(
            f"{x} ({edges[(x, y)][0]})" for x, y in itertools.pairwise(way)
        )
        + f" -> {a}"
        for (a, b), way in sorted(loop_edges(edges).items())
    ]


def package_loops(src: Path = SRC) -> tuple[list[str], list[tuple[str, str]]]:
    """The packages that stand on an import loop, and the edges (package, package it
    imports) that make the loops, function-level imports counted."""
    edges = sorted(loop_edges(floor_edges(src)))
    return sorted({package for edge in edges for package in edge}), edges


def test_floors_make_no_import_loops() -> None:
    problems = loop_problems(floor_edges())
    assert not problems, f"an import loop; the rule: {FLOOR_RULE}\n" + "\n".join(problems)


def test_a_loop_is_told_with_its_places() -> None:
    edges = {
        ("config", "prepare"): ["config/experiment.py:157"],
        ("prepare", "config"): ["prepare/building.py:13", "prepare/checks.py:12"],
        ("prepare", "host"): ["prepare/doctor.py:12"],
    }
    assert loop_problems(edges) == [
        "config imports prepare (config/experiment.py:157), and prepare leads back to "
        "config: prepare (prepare/building.py:13) -> config",
        "prepare imports config (prepare/building.py:13, prepare/checks.py:12), and config "
        "leads back to prepare: config (config/experiment.py:157) -> prepare",
    ]


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A servelab package of ``files`` (path -> source) under ``root``."""
    src = root / "servelab"
    for rel, text in {"__init__.py": "", **files}.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_a_package_loop_fails_naming_its_places(tmp_path: Path) -> None:
    """A loop closed by an import inside a function, through a plug-in package's own
    table module (as config -> fronts/registry.py was), is a loop of the packages."""
    src = _tree(tmp_path, {
        "config/__init__.py": "",
        "config/stack.py": "from servelab.fronts.registry import FRONTS\n",
        "fronts/__init__.py": "",
        "fronts/registry.py": "FRONTS = {}\n",
        "fronts/nginx.py": "def f():\n    from servelab.config.stack import x\n",
        "host/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from servelab import config\n",
    })
    loops = (["config", "fronts"], [("config", "fronts"), ("fronts", "config")])
    assert package_loops(src) == loops
    assert loop_problems(floor_edges(src)) == [
        "config imports fronts (config/stack.py:1), and fronts leads back to config: "
        "fronts (fronts/nginx.py:2) -> config",
        "fronts imports config (fronts/nginx.py:2), and config leads back to fronts: "
        "config (config/stack.py:1) -> fronts",
    ]


def test_an_import_for_the_type_checker_closes_a_loop_too(tmp_path: Path) -> None:
    """A name imported under ``if TYPE_CHECKING:`` never runs, but the module's annotations
    stand on it: a table below the plug-ins that names their base for its type climbs."""
    src = _tree(tmp_path, {
        "registry.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from servelab.plugins.front import Front\n",
        "plugins/__init__.py": "",
        "plugins/front.py": "from servelab.registry import FRONTS\n",
    })
    assert package_loops(src) == (["plugins", "registry"], [("plugins", "registry"),
                                                           ("registry", "plugins")])


def test_plug_ins_ask_each_other_by_name() -> None:
    """No server, front or driver module imports another plug-in package: a front that
    runs its server (Apache, mod_wsgi) gets what the server says from the launcher
    (``AppServer.hosting``), and the server asks its front by name
    (``plugins.front.get_front``)."""
    plug_ins = {"servers", "fronts", "load"}
    edges = floor_edges()
    assert {(a, b): w for (a, b), w in edges.items() if {a, b} <= plug_ins} == {}


def test_the_floor_graph_sees_imports_inside_functions() -> None:
    edges = floor_edges()
    # prepare/user_app.py imports launch only inside its functions (the preflight).
    assert any(w.startswith("prepare/user_app.py:") for w in edges[("prepare", "launch")])
    # The user's request and database values stand in config, below prepare.
    assert ("config", "prepare") not in edges
    # ``from servelab import api`` is an import of the module api.
    assert ("cli", "api") in edges


# -- inside a package: no circle of files ------------------------------------------------
#
# The files of one package (one directory) import each other one way only, counted as the
# floors are (inside functions and for the type checker too): a circle is closed by a value
# or a function defined a file too high; move it to the file below, or to one both import.
# Five at first: analysis's validity.py took VariantAnalysis from analyze.py; check's and
# studies' modules took the package's values from its __init__.py, which imports them;
# config's experiment.py read its file through building.py, which built Experiments (the
# building moved beside Experiment, the shapes' helpers below); report's formats.py named
# its writers' types from exports.py and files.py.
CIRCLE_RULE = (
    "the files of a package import each other one way only (docs/contributing.md, "
    "'Layout'): move what closes the circle to the file below, or to a file both import"
)
# (file, file) of a circle left on purpose: why.
CIRCLES_LEFT: dict[tuple[str, str], str] = {}


def file_edges(src: Path = SRC) -> dict[tuple[str, str], list[str]]:
    """(file, file of the same package it imports) -> where ("report/files.py:26", ...)."""
    files = {_module(path, src): path for path in src.rglob("*.py")}
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(src.rglob("*.py")):
        mine = path.relative_to(src).as_posix()
        for module, line in _imported(path, src):
            there = files.get(module)
            if there is None or there == path or there.parent != path.parent:
                continue
            places = edges.setdefault((mine, there.relative_to(src).as_posix()), [])
            if f"{mine}:{line}" not in places:
                places.append(f"{mine}:{line}")
    return edges


def file_circles(src: Path = SRC) -> list[tuple[str, ...]]:
    """The circles of files inside one package: each the files that import one another
    (through others of the package), sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in file_edges(src):
        graph.setdefault(a, set()).add(b)
    reach = {file: set(_reach(graph, file)) for file in graph}
    circles = {
        tuple(sorted(other for other in reach[file] if file in reach.get(other, ())))
        for file in graph
    }
    return sorted(circle for circle in circles if len(circle) > 1)


def circle_problems(src: Path = SRC, left: Collection[tuple[str, ...]] = ()) -> list[str]:
    """One line per circle of files (but those ``left``): its files, then each import on
    it with its places and the way back."""
    edges = file_edges(src)
    problems = []
    for circle in file_circles(src):
        if circle not in left:
            on = {(a, b): w for (a, b), w in edges.items() if {a, b} <= set(circle)}
            problems.append(f"{', '.join(circle)}: " + "; ".join(loop_problems(on)))
    return problems


def test_no_circle_of_files_inside_a_package() -> None:
    left = {tuple(sorted(pair)) for pair in CIRCLES_LEFT}
    problems = circle_problems(SRC, left)
    assert not problems, f"a circle of files; the rule: {CIRCLE_RULE}\n" + "\n".join(problems)
    assert left <= set(file_circles()), "a circle no longer there: remove it from CIRCLES_LEFT"


def test_a_circle_of_files_fails_naming_them(tmp_path: Path) -> None:
    """Closed by an import for the type checker only, as report's formats.py named its
    writers' types; ``from package import module`` is an import of that module."""
    src = _tree(tmp_path, {
        "report/__init__.py": "",
        "report/formats.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from servelab.report.files import FileWriter\n",
        "report/files.py": "from servelab.report import formats\n",
        "report/html.py": "from servelab.report.formats import OUTPUT_FORMATS\n",
    })
    assert circle_problems(src) == [
        "report/files.py, report/formats.py: report/files.py imports report/formats.py "
        "(report/files.py:1), and report/formats.py leads back to report/files.py: "
        "report/formats.py (report/formats.py:3) -> report/files.py; report/formats.py "
        "imports report/files.py (report/formats.py:3), and report/files.py leads back to "
        "report/formats.py: report/files.py (report/files.py:1) -> report/formats.py"
    ]


# -- no module over 500 lines --------------------------------------------------------------
#
# A module that long holds parts with different reasons to change: split it where they
# part (the executor's contract, the machine's executor and its switched passes; Locust's
# options and its driver; the runner and a run's record; the race's rounds and its
# recommendation; the holding curve's likelihood, its fit and its search), not by its
# line count.
MOST_LINES = 500
# (file): why it is longer for now.
LONG_LEFT: dict[str, str] = {}


def long_modules(src: Path = SRC) -> dict[str, int]:
    """Module -> its lines, for those over MOST_LINES."""
    lines = {
        path.relative_to(src).as_posix(): len(path.read_text().splitlines())
        for path in src.rglob("*.py")
    }
    return {rel: n for rel, n in sorted(lines.items()) if n > MOST_LINES}


def test_no_module_is_over_500_lines() -> None:
    found = long_modules()
    over = {rel: n for rel, n in found.items() if rel not in LONG_LEFT}
    assert not over, (
        f"over {MOST_LINES} lines, {over}: split where the parts have different reasons to "
        "change"
    )
    assert LONG_LEFT.keys() <= found.keys(), "no longer long: remove it from LONG_LEFT"


def test_a_long_module_is_named(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"measuring/executor.py": "x = 1\n" * 501, "api.py": "x = 1\n"})
    assert long_modules(src) == {"measuring/executor.py": 501}


# -- floors in order: every import looks down ------------------------------------------------
#
# The floors, lowest first (docs/contributing.md, 'Layout'); each package stands on one
# (launch's readiness, running stack and config templates serve the plug-ins, so they live
# in host; the user's app is prepared in prepare; the environment record, which asks every
# plug-in's version, too).
# A floor names packages or modules; a module stands on the floor of the longest name that
# covers it. A module may import its own floor and the floors below; anything else is a
# climb, and the test names the rule it broke.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("errors", ("errors",)),
    # names and import strings only ("module:Class", imported when first asked for)
    ("registry", ("registry",)),
    ("model", ("config", "examples", "traffic")),  # specs and their own shapes; asks no plug-in
    ("machine", ("host", "results", "services")),
    ("the app", ("apps",)),  # the user's app: its module, its Python, its environment
    # what a plug-in is (AppServer, Front, LoadDriver) and each kind's typed lookup
    ("plug-in bases", ("plugins",)),
    # reads what the stack did; asks the bases which front or server wrote a log line
    ("observing", ("observe",)),
    ("plug-ins", ("servers", "fronts", "load")),
    # asks the plug-ins, once: checks, building from user input, the user's app, the
    # environment record, the doctor, launching a stack, setting up the machine
    ("preparation", ("prepare", "launch", "setup")),
    ("analysis", ("analysis",)),  # statistics; the stopping rule asks it while measuring
    ("measuring", ("measuring",)),
    ("output", ("report", "export")),
    ("commands", ("studies", "check", "tune", "capacity", "history", "session", "api")),
    ("cli", ("cli", "__main__")),
]
LAYER_RULE = (
    "a module imports only its own floor and those below (FLOORS, lowest first; "
    "docs/contributing.md, 'Layout'): move the shared part down to a floor both stand on, "
    "or the caller up"
)


def floor_of(module: str) -> int | None:
    """The index in FLOORS of ``module`` (``servelab.x.y``): its longest covering name."""
    name = module.removeprefix("servelab.")
    covering = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(FLOORS)
        for prefix in prefixes
        if name == prefix or name.startswith(prefix + ".")
    ]
    return max(covering)[1] if covering else None


def climbs() -> dict[tuple[str, str], str]:
    """(importer, imported) -> 'file:line' for every import that looks up."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted(SRC.rglob("*.py")):
        me = _module(path)
        mine = floor_of(me)
        for module, line in _imported(path):
            theirs = floor_of(module)
            if mine is not None and theirs is not None and theirs > mine:
                key = (me.removeprefix("servelab."), module.removeprefix("servelab."))
                found.setdefault(key, f"{path.relative_to(SRC).as_posix()}:{line}")
    return found


def test_every_module_stands_on_a_floor() -> None:
    modules = {_module(p) for p in SRC.rglob("*.py")} - {"servelab"}
    assert sorted(m for m in modules if floor_of(m) is None) == [], "add it to FLOORS"


def climb_problems(found: dict[tuple[str, str], str]) -> list[str]:
    """One line per climb: where, and the floors it joins."""
    return [
        f"{where}: {a} (floor {FLOORS[floor_of('servelab.' + a) or 0][0]}) imports {b} "
        f"(floor {FLOORS[floor_of('servelab.' + b) or 0][0]}, above it)"
        for (a, b), where in sorted(found.items())
    ]


def test_imports_only_look_down() -> None:
    problems = climb_problems(climbs())
    assert not problems, f"an import climbs; the rule: {LAYER_RULE}\n" + "\n".join(problems)


def test_a_climb_fails_naming_its_floors() -> None:
    # The climb that was the last one (Experiment.from_toml building through prepare),
    # told as the check tells any.
    found = {("config.experiment", "prepare.building"): "config/experiment.py:157"}
    assert climb_problems(found) == [
        "config/experiment.py:157: config.experiment (floor model) imports prepare.building "
        "(floor preparation, above it)"
    ]
    assert floor_of("servelab.config.stack") < floor_of("servelab.prepare.checks")  # type: ignore[operator]
    assert floor_of("servelab.registry") < floor_of("servelab.config")  # type: ignore[operator]
    assert floor_of("servelab.host.readiness") < floor_of("servelab.servers.gunicorn")  # type: ignore[operator]
    assert floor_of("servelab.launch") > floor_of("servelab.fronts.nginx")  # type: ignore[operator]


def test_each_package_stands_on_one_floor() -> None:
    floors: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        module = _module(path)
        index = floor_of(module)
        if index is not None and module != "servelab":
            floors.setdefault(_floor(module) or "", set()).add(FLOORS[index][0])
    assert {p: f for p, f in floors.items() if len(f) > 1} == {}


def _plug_ins_loaded_by(code: str) -> str:
    """The server, front, driver and prepare packages and modules loaded once ``code`` has
    run in a fresh interpreter."""
    code += (
        "import sys\n"
        "print(sorted(m for m in sys.modules if m.startswith('servelab.') and "
        "m.split('.')[1] in ('servers', 'fronts', 'load', 'prepare')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def test_the_model_loads_no_plug_in() -> None:
    """Building and validating a model (config alone) imports no server, front or driver
    module: the plug-ins are asked in servelab.prepare."""
    code = (
        "from servelab.config.experiment import Experiment\n"
        "Experiment.model_validate({'name': 'x', 'baseline': {'server': {'kind': 'uwsgi', "
        "'threads': 3}, 'proxy': {'kind': 'apache'}}, 'driver': 'locust', "
        "'workloads': [{'name': 'w', 'load': {'duration_s': 2}}]})\n"
    )
    assert _plug_ins_loaded_by(code) == "[]"


def test_from_toml_loads_no_plug_in(tmp_path: Path) -> None:
    """Reading an experiment file checks shapes only: the server, front and driver it
    names are asked in servelab.prepare. (Without ``slices``, the file's driver is asked
    whether it can measure in slices, to choose them: ``config.building.default_slices``.)"""
    path = tmp_path / "exp.toml"
    path.write_text(
        "slices = 1\ndriver = 'locust'\n[baseline.server]\nkind = 'uwsgi'\nthreads = 3\n"
        "[baseline.proxy]\nkind = 'apache'\n[[workloads]]\nname = 'w'\n"
        "load = { duration_s = 2 }\n"
    )
    code = (
        "from servelab.config.experiment import Experiment\n"
        f"Experiment.from_toml({str(path)!r})\n"
    )
    assert _plug_ins_loaded_by(code) == "[]"


# matplotlib is the "charts" extra: only the modules that draw may import it at their top.
DRAWING_MODULES = {"servelab.report.charts", "servelab.report.drawing"}


def test_only_the_drawing_modules_need_matplotlib_to_import() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        "sys.modules['matplotlib'] = None\n"
        "import servelab\n"
        "for m in pkgutil.walk_packages(servelab.__path__, 'servelab.'):\n"
        "    if m.name.endswith('__main__') or m.name.startswith('servelab.apps.'):\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except ImportError:\n"
        "        print(m.name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert set(done.stdout.split()) == DRAWING_MODULES, done.stderr


def test_the_command_line_starts_without_the_heavy_statistics() -> None:
    # Every `servelab` command pays the CLI's imports first: scipy.stats took 1 of its
    # 2.2 s (capacity's curve, through tune's objective), and statsmodels and matplotlib
    # are loaded where a command analyses or draws, not to parse its options.
    code = (
        "import sys\n"
        "import servelab.cli\n"
        "print(' '.join(m for m in ('scipy.stats', 'statsmodels', 'matplotlib')\n"
        "               if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == [], done.stdout
