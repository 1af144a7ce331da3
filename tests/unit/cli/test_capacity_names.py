"""`servelab capacity` names what it measures: the user's app, its server and transport (a
variant named after the built-in app, or a directory called "capacity-capacity-...",
told a user nothing)."""

from __future__ import annotations

from typing import Any

import pytest
from support import run_cli

from servelab import api
from servelab.cli.capacity import app_name


@pytest.mark.parametrize(("ref", "name"), [
    ("shop.wsgi:app", "shop"), ("myproject.asgi:application", "myproject"),
    ("sleepy", "sleepy"), ("app:create_app()", "app"),
])
def test_an_app_is_named_by_its_top_level_package(ref: str, name: str) -> None:
    assert app_name(ref) == name


def test_the_variant_and_the_experiment_carry_the_apps_name(monkeypatch) -> None:
    seen: dict[str, Any] = {}

    def capture(experiment, plan, run, user, **kwargs) -> None:
        seen["experiment"] = experiment

    monkeypatch.setattr(api, "capacity", capture)
    done = run_cli("capacity", "--app", "servelab.apps.sleepy_wsgi:app", "--transport", "tcp")
    assert done.returncode == 0, done.stderr
    experiment = seen["experiment"]
    assert experiment.name == "servelab"
    assert [s.name for s in experiment.stacks] == ["servelab-gunicorn-tcp"]
    run_cli("capacity")
    assert [s.name for s in seen["experiment"].stacks] == ["sleepy-gunicorn-unix"]
    assert seen["experiment"].name == "sleepy"
