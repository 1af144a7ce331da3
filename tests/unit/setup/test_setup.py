"""`servelab setup` without touching the machine: a Machine that records the commands it
would run, and the steps' look-ups stood in for, so the order, the sudo lines and the
idempotence are checked here; tests/integration runs the real thing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from servelab.cli import cli
from servelab.host import parts
from servelab.setup import run, steps


class Recorder:
    """Runs nothing but remembers every command line; a go build leaves an empty file
    where the real one would leave the tool."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        self.commands.append(argv)
        if "-o" in argv:
            Path(argv[argv.index("-o") + 1]).touch()
        env = kwargs.get("env")
        if isinstance(env, dict) and "GOBIN" in env:
            Path(env["GOBIN"], "tool").touch()
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine with nothing: every Debian package and Python requirement missing, no
    oha, no go tools, cargo and go found."""
    monkeypatch.setenv("SERVELAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(steps, "missing_debian", lambda packages: list(dict.fromkeys(packages)))
    monkeypatch.setattr(steps, "satisfied", lambda requirement: False)
    monkeypatch.setattr(steps.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(steps, "installer", lambda: ["uv", "pip", "install"])
    monkeypatch.setattr(steps, "usable_go", lambda say: "/usr/bin/go")
    monkeypatch.setattr(steps, "executable", lambda path: False)
    monkeypatch.setattr(run, "executable", lambda path: False)
    monkeypatch.setattr(steps, "oha_built", lambda: False)
    monkeypatch.setattr(run, "oha_built", lambda: False)
    monkeypatch.setattr(steps, "find_cargo", lambda: "/usr/bin/cargo")
    monkeypatch.setattr(run, "find_cargo", lambda: "/usr/bin/cargo")
    return tmp_path


def test_parts_parse_and_name_their_fix() -> None:
    assert parts.parse_parts(" apache, replay ,") == ("apache", "replay")
    with pytest.raises(ValueError, match="unknown part 'nginx'"):
        parts.parse_parts("nginx")
    assert [p.name for p in parts.chosen(("replay", "servers"))] == ["core", "servers", "replay"]
    assert parts.part_with_extra("uwsgi") == "servers"
    assert parts.part_with_extra("charts") == "core"
    assert parts.setup_command("core") == "servelab setup"
    assert parts.setup_command("postgres") == "servelab setup --with postgres"


def test_a_cargo_too_old_for_oha_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"/usr/bin/cargo": "cargo 1.65.0", "/home/cargo": "cargo 1.95.0 (f2d3ce0bd)"}

    def version(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, versions.get(argv[0], ""), "")

    monkeypatch.setattr(steps.subprocess, "run", version)
    assert steps.cargo_version("/home/cargo") == (1, 95)
    assert steps.cargo_version("/nowhere") is None
    monkeypatch.setattr(steps.shutil, "which", lambda name: "/usr/bin/cargo")
    monkeypatch.setattr(steps, "executable", lambda path: False)
    assert steps.find_cargo() is None  # Debian 12's cargo: the set-up asks for cargo-web
    versions["/usr/bin/cargo"] = "cargo 1.88.0"
    assert steps.find_cargo() == "/usr/bin/cargo"


def test_an_extras_requirements_come_from_servelabs_metadata() -> None:
    names = {requirement.name for requirement in steps.extra_requirements(["servers"])}
    assert names == {"granian", "hypercorn"}
    assert all(r.marker is None for r in steps.extra_requirements(["test", "docs"]))


def test_without_root_the_debian_step_prints_sudo_lines_and_runs_nothing(bare: Path) -> None:
    recorder = Recorder()
    machine = steps.Machine(root=False, run=recorder, policy_rc=bare / "policy-rc.d")
    report = run.run_setup(("apache",), lambda line: None, machine=machine)
    assert report.commands[0] == "sudo apt-get update"
    assert report.commands[1].startswith("sudo DEBIAN_FRONTEND=noninteractive apt-get install")
    assert "apache2-dev" in report.commands[1] and "nginx-light" in report.commands[1]
    assert " make" in report.commands[1]  # oha's build needs it
    # mod_wsgi builds against apache2-dev: its install waits, and says so.
    extras = next(step for step in report.steps if step.name.startswith("Python packages"))
    assert extras.state == "todo" and "again" in extras.detail
    # What needs no root still ran: oha and no apt-get.
    assert not any(argv[0] == "apt-get" for argv in recorder.commands)
    assert any(argv[1:3] == ["install", parts.OHA_CRATE] for argv in recorder.commands)


def test_as_root_packages_install_with_services_held_back(bare: Path) -> None:
    recorder = Recorder()
    policy = bare / "policy-rc.d"
    seen_policy: list[bool] = []

    def runner(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        if argv[:2] == ["apt-get", "install"]:
            seen_policy.append(policy.exists())
        return recorder(argv, **kwargs)

    machine = steps.Machine(root=True, run=runner, policy_rc=policy)
    lines: list[str] = []
    report = run.run_setup(("postgres", "replay"), lines.append, machine=machine)
    assert report.left == ()
    names = [argv[:2] for argv in recorder.commands]
    assert names.index(["apt-get", "update"]) < names.index(["apt-get", "install"])
    assert seen_policy == [True] and not policy.exists()  # held back while installing only
    assert any("postgresql without starting it" in line for line in lines)
    assert [step.state for step in report.steps] == ["done"] * len(report.steps)
    built = [argv for argv in recorder.commands if argv[:2] == ["/usr/bin/go", "build"]]
    assert len(built) == 1  # the replay sender, from the package's own source


def test_a_set_up_machine_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    recorder = Recorder()
    monkeypatch.setattr(steps, "missing_debian", lambda packages: [])
    monkeypatch.setattr(steps, "satisfied", lambda requirement: True)
    monkeypatch.setattr(steps, "oha_built", lambda: True)
    monkeypatch.setattr(run, "oha_built", lambda: True)
    monkeypatch.setattr(steps, "executable", lambda path: True)
    monkeypatch.setattr(run, "executable", lambda path: True)
    machine = steps.Machine(root=True, run=recorder, policy_rc=tmp_path / "policy-rc.d")
    report = run.run_setup(("replay", "toxiproxy"), lambda line: None, machine=machine)
    assert {step.state for step in report.steps} == {"present"}
    assert recorder.commands == []


def test_a_failed_command_is_one_line_with_its_output(bare: Path) -> None:
    def failing(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise subprocess.CalledProcessError(100, argv, "", "E: Unable to locate package wrk")

    machine = steps.Machine(root=True, run=failing, policy_rc=bare / "policy-rc.d")
    with pytest.raises(steps.SetupFailed) as caught:
        run.run_setup((), lambda line: None, machine=machine)
    assert caught.value.problem.startswith("apt-get update failed (exit 100)")
    assert "Unable to locate package" in caught.value.tail
    assert not (bare / "policy-rc.d").exists()


def test_the_command_says_what_is_left_and_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    left = run.SetupReport(("core",), (steps.StepResult(
        "Debian packages", "todo", "wrk needs root",
        commands=("sudo apt-get update", "sudo apt-get install -y wrk"),
    ),))
    def run_setup(parts: tuple[str, ...], say, said=None) -> run.SetupReport:
        say("installing into servelab's Python: psycopg[binary]>=3.2")
        return left

    monkeypatch.setattr(run, "run_setup", run_setup)
    done = CliRunner().invoke(cli, ["setup", "--with", "replay"])
    assert "psycopg[binary]>=3.2" in done.output  # a requirement's extra, not rich markup
    assert done.exit_code == 3
    assert "  sudo apt-get install -y wrk" in done.output
    assert "`servelab setup --with replay` again" in done.output
    bad = CliRunner().invoke(cli, ["setup", "--with", "nginx"])
    assert bad.exit_code == 2 and "unknown part 'nginx'" in bad.output


def test_a_choice_of_packages_takes_the_first_apt_can_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def installable(package: str) -> bool:
        asked.append(package)
        return package == "cargo-web"

    monkeypatch.setattr(steps, "installable", installable)
    assert steps.resolve(["wrk", steps.CARGO_PACKAGES]) == ["wrk", "cargo-web"]
    assert asked == ["cargo-web"]  # a single name is not looked up
    monkeypatch.setattr(steps, "installable", lambda package: False)
    assert steps.resolve([steps.CARGO_PACKAGES]) == ["cargo"]
