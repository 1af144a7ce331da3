"""The user's app in its own virtualenv, for real: a Flask app factory (Flask 3.0.3, which
servelab does not install) measured with its venv's Python, then exported, the export
booted and answering; a venv without gunicorn but with granian: the granian experiment
runs, the gunicorn study says what to install; a src-layout project's venv, found from
``--app-dir src`` up at the project's root."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from servelab.results.store import ResultStore

pytestmark = pytest.mark.integration

FLASK = "flask==3.0.3"
FACTORY_APP = """
import os
import sqlite3

from flask import Flask


def create_app(test_config=None):
    app = Flask(__name__)
    os.makedirs(app.instance_path, exist_ok=True)
    db = os.path.join(app.instance_path, "visits.sqlite")

    @app.route("/")
    def index():
        with sqlite3.connect(db) as con:
            con.execute("create table if not exists visit (at)")
            count = con.execute("select count(*) from visit").fetchone()[0]
        return f"hello from flaskr ({count})"

    return app
"""

GRANIAN_EXPERIMENT = """
name = "granian-own-venv"
repetitions = 1
[warmup]
requests = 20
max_rounds = 1
[baseline]
name = "granian-1"
app = {{ ref = "flaskr:create_app", app_dir = "{app_dir}" }}
server = {{ kind = "granian", workers = 1 }}
proxy = {{ kind = "nginx", transport = "tcp" }}
[[workloads]]
name = "root"
load = {{ concurrency = 4, requests = 300 }}
"""


def servelab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servelab", *args],
        capture_output=True, text=True, timeout=300, cwd=cwd, check=False,
    )


def make_venv(where: Path, *packages: str) -> Path:
    """A real virtualenv with ``packages`` (pip, from the package index); its python.

    Made without its own pip (ensurepip takes most of the time) and filled by this
    Python's pip (``--python``): servelab never runs the app's pip, only names it."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120
    )
    python = where / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--disable-pip-version-check", *packages],
        check=True, timeout=600,
    )
    return python


def write_app(app_dir: Path) -> Path:
    (app_dir / "flaskr").mkdir(parents=True)
    (app_dir / "flaskr" / "__init__.py").write_text(textwrap.dedent(FACTORY_APP))
    return app_dir


def stored_environment(results: Path) -> dict:
    """The environment recorded with the one experiment in ``results``."""
    [experiment_dir] = [p for p in results.iterdir() if p.is_dir()]
    return dict(ResultStore.open(experiment_dir).environment)


@pytest.fixture(scope="module")
def granian_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An app dir whose .venv has Flask and granian, and no gunicorn."""
    app_dir = write_app(tmp_path_factory.mktemp("granian-app"))
    make_venv(app_dir / ".venv", FLASK, "granian>=2.0")
    return app_dir


def test_a_venv_without_gunicorn_says_what_to_install(granian_app: Path, tmp_path: Path) -> None:
    done = servelab(
        "study", "quick", "--app", "flaskr:create_app", "--app-dir", str(granian_app),
        "-r", "1", "-d", "1", "--results", str(tmp_path / "results"),
    )
    python = granian_app / ".venv" / "bin" / "python"
    assert done.returncode == 2, done.stderr
    assert f"app's Python: {python} (Python" in done.stderr  # found in the app dir, said
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert errors == [
        f"servelab: error: gunicorn not installed in the app's Python {python} (needed by "
        f"nginx-tcp, nginx-unix, nginx-unix-keepalive) (fix: {python} -m pip install gunicorn)"
    ]
    results = tmp_path / "results"
    assert not results.exists() or not [p for p in results.iterdir() if p.is_dir()]


def test_granian_runs_the_app_with_its_venvs_python(
    granian_app: Path, tmp_path: Path, no_leftover_processes
) -> None:
    experiment = tmp_path / "granian.toml"
    experiment.write_text(GRANIAN_EXPERIMENT.format(app_dir=granian_app))
    results = tmp_path / "results"
    done = servelab("run", str(experiment), "--results", str(results))
    assert done.returncode == 0, done.stderr
    [python] = stored_environment(results)["app_python"]
    assert python["path"] == str(granian_app / ".venv" / "bin" / "python")
    assert python["frameworks"]["flask"] == "3.0.3"
    assert python["packages"]["granian"]
    assert "gunicorn" not in python["packages"]


def test_a_factory_measured_with_python_then_exported_boots_and_answers(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, no_leftover_processes
) -> None:
    # The venv lives outside the app dir: --python names it.
    venv = tmp_path_factory.mktemp("flask-venv") / "env"
    python = make_venv(venv, FLASK, "gunicorn>=22")
    app_dir = write_app(tmp_path / "app")
    results = tmp_path / "results"
    measured = servelab(
        "study", "quick", "--app", "flaskr:create_app", "--app-dir", str(app_dir),
        "--python", str(python), "-r", "1", "-d", "1", "--warmup", "0", "--results", str(results),
    )
    assert measured.returncode == 0, measured.stderr
    assert "app flaskr:create_app: WSGI factory" in measured.stderr
    [recorded] = stored_environment(results)["app_python"]
    assert recorded["path"] == str(python) and recorded["frameworks"]["flask"] == "3.0.3"

    out = tmp_path / "export"
    exported = servelab(
        "export", "1", "--variant", "nginx-unix", "--results", str(results), "--out", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    assert (
        "booted: GET / through the exported nginx and app server answered HTTP 200"
        in exported.stdout
    )
    conf = (out / "gunicorn.conf.py").read_text()
    assert "wsgi_app = 'flaskr:create_app()'" in conf
    assert f"chdir = '{app_dir}'" in conf
    unit = (out / "webapp-app.service").read_text()
    assert f"ExecStart={venv}/bin/gunicorn -c /etc/webapp/gunicorn.conf.py" in unit
    assert f"WorkingDirectory={app_dir}" in unit


def test_a_src_layout_projects_venv_is_found_at_its_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: Quart's blog example (pyproject.toml and .venv at the root, the code in
    src/) with `--app-dir src` looked for the venv in src/ only, and the app's import
    failed in servelab's Python. Offline: the venv has no pip and no server, its one
    package is the app's dependency, so the run stops, quickly, at the missing gunicorn."""
    project = tmp_path / "blog"
    (project / "src" / "blog").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "blog"\nversion = "0"\n')
    (project / "src" / "blog" / "__init__.py").write_text(textwrap.dedent("""
        import blogdeps  # installed in the project's venv only


        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [blogdeps.GREETING]
    """))
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")],
        check=True, timeout=120,
    )
    python = project / ".venv" / "bin" / "python"
    [site_packages] = (project / ".venv" / "lib").glob("python*/site-packages")
    (site_packages / "blogdeps.py").write_text('GREETING = b"hello"\n')
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    done = servelab(
        "study", "quick", "--app", "blog:app", "--app-dir", "src", "--path", "/",
        "-r", "1", "-d", "1", "--results", str(tmp_path / "results"), cwd=project,
    )
    assert done.returncode == 2, done.stderr
    assert f"app's Python: {python} (Python" in done.stderr
    assert "found in the project's .venv; --python to choose another" in done.stderr
    assert "app blog:app: WSGI" in done.stderr  # imported with the venv's blogdeps
    assert f"gunicorn not installed in the app's Python {python}" in done.stderr
