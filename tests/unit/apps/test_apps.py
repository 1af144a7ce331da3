"""Resolving apps: the built-in ones and the user's, by import path, in a separate process."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.apps import BUILTIN_APPS, ResolvedApp, app_environment, resolve_app
from servelab.config.stack import AppSpec
from servelab.errors import SpecError

USER_APP = '''
print("the app prints at import")

async def asgi_app(scope, receive, send):
    pass

def wsgi_app(environ, start_response):
    return [b""]

def create():
    return wsgi_app

def create_broken():
    raise RuntimeError("missing setting\\nDATABASE_URL")

class Callable:
    async def __call__(self, scope, receive, send):
        pass

instance = Callable()
not_an_app = 42

def create_configured(config):
    return None
'''


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "web.py").write_text(USER_APP)
    (package / "broken.py").write_text("import os\nraise ImportError('cannot load the config')\n")
    (package / "envcheck.py").write_text(
        "import os\nif os.environ.get('SERVELAB_TEST_FLAG') != 'yes':\n    raise SystemExit(1)\n"
        "def app(environ, start_response):\n    return []\n"
    )
    (package / "hardexit.py").write_text("import os\nos._exit(3)\n")
    return tmp_path


def test_builtin_apps() -> None:
    assert resolve_app(AppSpec(ref="fastapi")) == ResolvedApp(
        BUILTIN_APPS["fastapi"], "asgi", None, is_factory=False
    )
    assert resolve_app(AppSpec(ref="sleepy")).interface == "wsgi"


@pytest.mark.parametrize("name", sorted(BUILTIN_APPS))
def test_builtin_table_matches_real_import(name: str) -> None:
    """The shortcut for built-ins says what importing them would say."""
    real = resolve_app(AppSpec(ref=BUILTIN_APPS[name]))
    assert real == resolve_app(AppSpec(ref=name))


@pytest.mark.parametrize(
    ("attr", "interface", "is_factory"),
    [("asgi_app", "asgi", False), ("wsgi_app", "wsgi", False), ("instance", "asgi", False),
     ("create", "wsgi", True), ("create()", "wsgi", True)],
)
def test_user_app_kinds(app_dir: Path, attr: str, interface: str, is_factory: bool) -> None:
    resolved = resolve_app(AppSpec(ref=f"userpkg.web:{attr}", app_dir=app_dir))
    assert resolved == ResolvedApp(
        f"userpkg.web:{attr.removesuffix('()')}", interface, app_dir.resolve(), is_factory  # type: ignore[arg-type]
    )


def test_app_env_is_set_for_the_import(app_dir: Path) -> None:
    spec = AppSpec(ref="userpkg.envcheck:app", app_dir=app_dir, env={"SERVELAB_TEST_FLAG": "yes"})
    assert resolve_app(spec).interface == "wsgi"


def test_missing_module(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.nothere:app", app_dir=app_dir))
    assert "No module named 'userpkg.nothere'" in caught.value.problem


def test_import_error_message_on_one_line(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.broken:app", app_dir=app_dir))
    assert "ImportError: cannot load the config" in caught.value.problem
    assert "\n" not in caught.value.one_line()
    assert "broken.py" in caught.value.detail  # the traceback tail, for who wants it


def test_a_factory_that_needs_arguments_says_so(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.web:create_configured", app_dir=app_dir))
    assert "create_configured(config) looks like an app factory that needs 1" in (
        caught.value.problem
    )
    assert "give config a default" in caught.value.fix


def test_failing_factory(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.web:create_broken", app_dir=app_dir))
    assert "RuntimeError: missing setting DATABASE_URL" in caught.value.problem


@pytest.mark.parametrize(("attr", "says"), [("not_an_app", "neither"), ("nope", "no attribute")])
def test_not_an_app(app_dir: Path, attr: str, says: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref=f"userpkg.web:{attr}", app_dir=app_dir))
    assert says in caught.value.problem


def test_process_exit_during_import(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.envcheck:app", app_dir=app_dir))
    assert "SystemExit: 1" in caught.value.problem


def test_hard_exit_during_import(app_dir: Path) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref="userpkg.hardexit:app", app_dir=app_dir))
    assert "exit code 3" in caught.value.problem


@pytest.mark.parametrize(
    "ref", ["userpkg", "userpkg.web", "userpkg.web:", ":app", "a:b:c", "mod:app(1)",
            "bad path:app", "mod:obj.attr", "1mod:app", ""],
)
def test_malformed_paths(ref: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_app(AppSpec(ref=ref))
    assert "expected package.module:attr" in caught.value.fix


def test_app_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not a directory"):
        resolve_app(AppSpec(ref="m:app", app_dir=tmp_path / "missing"))


def test_app_environment_puts_app_dir_first(tmp_path: Path) -> None:
    env = app_environment({"PYTHONPATH": "/extra", "X": "1"}, tmp_path)
    parts = env["PYTHONPATH"].split(":")
    assert parts[:2] == [str(tmp_path), "/extra"]
    assert env["X"] == "1"
