"""The commands over stored results: bad input, --overwrite, results by id."""


from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

from servelab.results.store import ResultStore

RESULTS = Path(__file__).resolve().parents[2] / "fixtures" / "results"
SLEEPY = RESULTS / "sleepy-workers"
QUICK = RESULTS / "quick"
servelab = run_cli  # in-process, as the shell sees it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "no-such-result"], "no result 'no-such-result'"),
        (["report", "17"], "no result #17: there is no results database at"),
        (["export", str(SLEEPY), "--variant", "fastest"], "no variant 'fastest' in"),
        (["export", str(QUICK)], "no clear winner in"),
        (["export", str(SLEEPY), "--name", "Web App"], "is not usable as a user"),
        (["export", str(SLEEPY), "--listen", "notaport"], "--listen 'notaport' has no port"),
        (["export", str(SLEEPY), "--listen", "99999"], "has no port between 1 and 65535"),
        (["export", str(SLEEPY), "--listen", "localhost:80"], "is not an IP address to listen on"),
        (["export", str(SLEEPY), "--listen", "::1:80"], "is not an IP address to listen on"),
    ],
)
def test_bad_input_is_one_clear_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = servelab(*args, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    first = done.stderr.splitlines()[0]
    assert message in first and "(fix: " in first
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_non_empty_out_and_writes_with_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.md").write_text("mine")
    done = servelab("report", str(SLEEPY), "--out", str(out))
    assert done.returncode == 2 and "exists and is not empty" in done.stderr
    assert (out / "report.md").read_text() == "mine"
    done = servelab("report", str(SLEEPY), "--out", str(out), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert (out / "report.md").read_text().startswith("# sleepy-workers")
    assert (out / "report.html").is_file() and (out / "charts" / "rps.png").is_file()


def test_report_and_export_by_result_id(tmp_path: Path) -> None:
    """RESULT as an id of the results database, stored the way `servelab run` stores it."""
    source = ResultStore.open(SLEEPY)
    root = tmp_path / "results"
    store = ResultStore.create(root, source.experiment, source.environment)
    for run in source.runs():
        store.add(run)
    done = servelab("report", str(store.id), "--results", str(root))
    assert done.returncode == 0, done.stderr
    assert (store.path / "report" / "report.html").is_file()
    done = servelab("export", str(store.id), "--results", str(root), "--no-check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gthread-2x4-unix-keepalive: the best variant")
    readme = (store.path / "export" / "README.md").read_text()
    assert f"from #{store.id} ({store.path})" in readme


def test_example_lists_prints_and_refuses_unknown_names() -> None:
    listed = run_cli("example")
    assert listed.returncode == 0
    names = listed.stdout.split()
    assert "port-vs-socket" in names
    shown = run_cli("example", "port-vs-socket")
    assert shown.returncode == 0 and 'name = "my-port-vs-socket"' in shown.stdout
    import tomllib

    from servelab.prepare.building import experiment_from_dict

    assert experiment_from_dict(tomllib.loads(shown.stdout)).name == "my-port-vs-socket"
    unknown = run_cli("example", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"servelab: error: no example named 'nope' (fix: choose one of: {', '.join(names)})"
    ]


def test_version_is_servelabs_own() -> None:
    import servelab

    shown = run_cli("--version")
    assert shown.returncode == 0
    assert shown.stdout.strip() == f"servelab, version {servelab.__version__}"


def _stored(root: Path, slowdown: float = 0.0):
    """The port-vs-socket seed's runs stored in ``root``, every requests/s times
    (1 - slowdown)."""
    from support import PORT_VS_SOCKET, PORT_VS_SOCKET_RUNS

    store = ResultStore.create(root, PORT_VS_SOCKET, {"hostname": "here"})
    for run in PORT_VS_SOCKET_RUNS:
        load = run.load.model_copy(update={"rps": run.load.rps * (1 - slowdown)})
        store.add(run.model_copy(update={"load": load}))
    return store


def test_compare_fails_on_worse_with_checks_exit_codes(tmp_path: Path) -> None:
    root = tmp_path / "results"
    first, same, slower = _stored(root), _stored(root), _stored(root, slowdown=0.2)
    ids = [str(s.id) for s in (first, same, slower)]
    kept = servelab("results", "compare", ids[0], ids[1], "--results", str(root),
                    "--fail-on", "worse")
    assert kept.returncode == 0, kept.stderr
    worse = servelab("results", "compare", ids[0], ids[2], "--results", str(root),
                     "--fail-on", "worse")
    assert worse.returncode == 1, worse.stderr
    assert "worse" in worse.stdout
    # Without --fail-on the comparison only reports.
    assert servelab("results", "compare", ids[0], ids[2], "--results", str(root)).returncode == 0


def test_results_as_json(tmp_path: Path) -> None:
    import json

    root = tmp_path / "results"
    first, slower = _stored(root), _stored(root, slowdown=0.2)
    listed = json.loads(servelab("results", "list", "--results", str(root), "--json").stdout)
    assert [row["id"] for row in listed] == [first.id, slower.id]
    assert listed[0]["name"] == "port-vs-socket" and listed[0]["runs"] == 6
    compared = json.loads(servelab(
        "results", "compare", str(first.id), str(slower.id), "--results", str(root), "--json"
    ).stdout)
    rps = [c for c in compared if c["metric"] == "rps"]
    assert {(c["variant"], c["verdict"]) for c in rps} == {("tcp", "worse"), ("unix", "worse")}
    assert all(-21 < c["change_pct"] < -19 for c in rps)


def test_options_from_the_environment_and_h(tmp_path: Path) -> None:
    root = tmp_path / "results"
    first = _stored(root)
    listed = servelab("results", "list", "--json", env={"SERVELAB_RESULTS": str(root)})
    assert f'"id": {first.id}' in listed.stdout
    assert "SERVELAB_RESULTS" in servelab("results", "list", "-h").stdout
    # Any option by SERVELAB_<COMMAND>_<OPTION> (click's auto_envvar_prefix).
    done = servelab("study", "quick", env={"SERVELAB_STUDY_REPETITIONS": "0"})
    assert done.returncode == 2 and "--repetitions must be 1 or more" in done.stderr


def test_shell_completion_offers_studies_and_result_ids(tmp_path: Path) -> None:
    """As bash asks the installed `servelab` script (docs: eval "$(_SERVELAB_COMPLETE=...")."""
    import os
    import subprocess
    import sys

    root = tmp_path / "results"
    first = _stored(root)
    script = str(Path(sys.executable).with_name("servelab"))
    env = {"_SERVELAB_COMPLETE": "bash_complete", "SERVELAB_RESULTS": str(root)}

    def complete(words: str, cword: int) -> list[str]:
        done = subprocess.run(
            [script], capture_output=True, text=True, timeout=60,
            env={**os.environ, **env, "COMP_WORDS": words, "COMP_CWORD": str(cword)},
        )
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert complete("servelab study qu", 2) == ["quick"]
    assert complete("servelab results show ", 3) == [str(first.id)]
    assert complete("servelab report ", 2) == [str(first.id)]


def test_a_results_directory_copied_elsewhere_is_reported_and_exported_there(
    tmp_path: Path,
) -> None:
    """A results directory moved (a CI artifact downloaded elsewhere), the original gone:
    report, export and the listing use where it is now, never the old absolute path."""
    import json
    import shutil

    source = ResultStore.open(SLEEPY)
    old = tmp_path / "ci" / "servelab-results"
    store = ResultStore.create(old, source.experiment, source.environment)
    for run in source.runs():
        store.add(run)
    new = tmp_path / "laptop" / "results"
    shutil.copytree(old, new)
    shutil.rmtree(tmp_path / "ci")
    moved = new / store.path.name
    done = servelab("report", str(store.id), "--results", str(new))
    assert done.returncode == 0, done.stderr
    assert (moved / "report" / "report.html").is_file()
    done = servelab("export", str(store.id), "--results", str(new), "--no-check")
    assert done.returncode == 0, done.stderr
    assert f"({moved})" in (moved / "export" / "README.md").read_text()
    done = servelab("report", str(moved), "--out", str(tmp_path / "by-dir"))
    assert done.returncode == 0, done.stderr
    listed = json.loads(servelab("results", "list", "--results", str(new), "--json").stdout)
    assert [Path(row["experiment_dir"]) for row in listed] == [moved]
    assert not (tmp_path / "ci").exists()  # nothing written where it used to be
