"""Bad input: one line naming the problem and the fix, an exit code, no traceback."""

from pathlib import Path

import pytest
from support import run_cli

servelab = run_cli  # in-process, as the shell sees it


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["study", "nope"], 2, "unknown study 'nope'"),
        (["study", "quick", "--repetitions", "0"], 2, "--repetitions must be 1 or more"),
        (["study", "quick", "--duration", "-3"], 2, "--duration must be positive"),
        (["study", "workers-threads", "--workers", "0-2"], 2, "workers must be 1 or more"),
        (["study", "workers-threads", "--threads", "x"], 2, "invalid threads list"),
        (["study", "quick", "--endpoints", "huge"], 2, "unknown endpoint 'huge'"),
        (["study", "quick", "--stack-cpus", "0"], 2, "only one of --stack-cpus / --driver-cpus"),
        (
            ["study", "quick", "--stack-cpus", "0", "--driver-cpus", "999"],
            2,
            "driver CPUs 999 are not available",
        ),
        (["run", "/nonexistent.toml"], 2, "does not exist"),
        (["study", "quick", "-d", "2", "--slices", "5"], 2, "under 1 s each"),
        (["results", "show", "/"], 2, "not a servelab results directory"),
    ],
)
def test_bad_input_is_one_clear_line(args, code, message, tmp_path):
    done = servelab(*args, "--out", str(tmp_path)) if args[0] == "study" else servelab(*args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert "fix:" in done.stderr or "Usage" in done.stderr
    assert not any(tmp_path.iterdir()), "nothing is written for input rejected up front"


def test_bad_knob_in_experiment_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        '[baseline]\nserver = { workers = 0 }\n[[workloads]]\nname = "w"\n'
        "load = { requests = 10 }\n"
    )
    done = servelab("run", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "baseline.server.workers: Input should be greater than or equal to 1" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_load_driver_is_named_with_the_fix(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "SERVELAB_CACHE": str(tmp_path / "empty")}
    done = servelab("study", "quick", "--out", str(tmp_path / "out"), env=env)
    assert done.returncode == 3
    assert "oha is not installed" in done.stderr
    assert "servelab setup" in done.stderr
    assert "Traceback" not in done.stderr


def test_studies_lists_every_seed_study():
    done = servelab("studies")
    assert done.returncode == 0
    for name in ("quick", "port-vs-socket", "keepalive", "workers-threads", "gunicorn-vs-uvicorn"):
        assert name in done.stdout


def _stored_quick(root: Path, repetitions: int = 3, switching: bool = True) -> int:
    """An unfinished 'quick' experiment in root's database, as an interrupted study leaves it
    (built as `servelab study quick` builds it on this machine)."""
    from servelab.api import build_study
    from servelab.config.run import RunOptions
    from servelab.results.store import ResultStore
    from servelab.studies import StudyOptions, get_study

    experiment, _ = build_study(
        get_study("quick"), StudyOptions(repetitions=repetitions), RunOptions()
    )
    # switching False: begun before switched passes were the default.
    experiment = experiment.model_copy(update={"switching": switching})
    store = ResultStore.create(root, experiment, {"hostname": "elsewhere"})
    return store.id


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("stored", ["results", "show", "42"], "no experiment with id 42"),
        ("none", ["results", "list"], "no servelab results database at"),
        ("garbage", ["results", "list"], "is not a usable SQLite database"),
        ("foreign", ["results", "list"], "is an SQLite database, but not servelab's"),
        ("none", ["study", "quick", "--resume"], "nothing to resume"),
        ("stored", ["study", "quick", "--resume", "-r", "2"], "has changed since #1"),
        ("stored-anew", ["study", "quick", "--resume"], "resume with --no-switch"),
        # ... which then resumes it (to the next check: the machine it began on).
        ("stored-anew", ["study", "quick", "--resume", "--no-switch"], "was measured on another"),
        ("stored", ["study", "quick", "--resume"], "was measured on another machine"),
        ("stored2", ["results", "compare", "1", "2"], "measured on different machines"),
    ],
)
def test_bad_results_input(setup, args, message, tmp_path):
    import sqlite3

    db = tmp_path / "servelab.db"
    if setup == "stored":
        _stored_quick(tmp_path)
    elif setup == "stored-anew":
        _stored_quick(tmp_path, switching=False)
    elif setup == "stored2":
        _stored_quick(tmp_path)
        from servelab.results.store import ResultStore
        from servelab.studies import StudyOptions, get_study

        ResultStore.create(
            tmp_path, get_study("quick").build(StudyOptions()), {"hostname": "somewhere-else"}
        )
    elif setup == "garbage":
        db.write_bytes(b"not a database" * 100)
    elif setup == "foreign":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        conn.close()
    before = db.read_bytes() if db.exists() else None
    done = servelab(*args, "--results", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    if setup in ("garbage", "foreign"):
        assert db.read_bytes() == before, "a foreign file is never written to"


def test_square_brackets_in_an_error_survive(tmp_path):
    """A message naming a TOML table must print it, not lose it as rich markup."""
    path = tmp_path / "bad.toml"
    path.write_text('[baseline]\n[[workloads]]\nname = "w"\nload = { requests = 10 }\n[bogus]\n')
    done = servelab("run", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "bogus: unknown key" in done.stderr
    study = servelab("study", "quick", "--app", "x[y]:app", "--out", str(tmp_path / "o2"))
    assert study.returncode != 0 and "x[y]" in study.stderr, study.stderr


def test_a_load_the_driver_cannot_send_is_refused_before_anything_starts(tmp_path):
    path = tmp_path / "wrk.toml"
    path.write_text(
        'driver = "wrk"\n[baseline]\n[[workloads]]\nname = "w"\nload = { requests = 100 }\n'
    )
    done = servelab("run", str(path), "--results", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "load driver wrk cannot do this (workload 'w')" in done.stderr
    assert not (tmp_path / "out" / "servelab.db").exists()  # nothing stored, nothing started


def test_more_than_the_machine_holds_is_refused_and_nothing_stored(tmp_path):
    from servelab.results.database import Database

    done = servelab(
        "study", "workers-threads", "--workers", "1000000000", "-r", "1", "-d", "1",
        "--results", str(tmp_path),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "1,000,000,000 app workers with 5,000,000,000 threads in stack" in done.stderr
    assert "--allow-beyond-machine to try anyway" in done.stderr
    db = tmp_path / "servelab.db"
    assert not db.exists() or not Database(db).list_experiments()  # nothing stored
