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

    from servelab.config.building import experiment_from_dict

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
