"""The environment's facts: declared once, collected, compared and shown from there."""

import pytest

from servelab.prepare.environment import (
    FACT_BY_KEY,
    FACTS,
    collect_environment,
    describe_environment,
    machine_differences,
)

PLAN = {"stack": "0", "driver": "1", "stack_quota": None, "cpu_priority": False}


def test_every_collected_or_recorded_key_is_a_fact_with_a_label() -> None:
    environment = collect_environment({"database": "SQLite file"})
    assert list(environment) == [f.key for f in FACTS if f.collect is not None] + ["database"]
    labels = [FACT_BY_KEY[key].label for key in environment]
    assert all(labels) and len(set(labels)) == len(labels)


def test_every_fact_is_shown_under_its_label_and_unknown_keys_last() -> None:
    environment = {
        **collect_environment(),
        "database": "SQLite file",
        "app_python": [{"path": "/app/.venv/bin/python", "version": "3.12.1",
                        "packages": {"gunicorn": "23.0.0"}, "frameworks": {"flask": "3.1.0"}}],
        "app_versions": {
            "candidate": {"commit": "a1b2c3d4e5f6", "time": "2026-11-26T10:00:00+00:00",
                          "dirty": True, "dir": "/app"},
            "baseline": {"dir": "/old"},
        },
        "driver_version": "1.16.0",
        "cpu_plan": PLAN,
        "from_elsewhere": {"a": 1},
    }
    rows = describe_environment(environment, "oha")
    labels = [label.split(":")[0] for label, _ in rows]
    labels = [label for i, label in enumerate(labels) if i == 0 or label != labels[i - 1]]
    assert labels[: len(FACTS) - 1] == [f.label for f in FACTS[:-1]]
    assert labels[-3:] == ["CPU placement", "CPU priority", "from_elsewhere"]
    shown = dict(rows)
    assert shown["Load driver"] == "oha 1.16.0"
    assert shown["App's Python"] == (
        "/app/.venv/bin/python (Python 3.12.1; gunicorn 23.0.0, flask 3.1.0)"
    )
    assert shown["CPU placement"] == "stack on CPUs 0, load driver on CPUs 1"
    assert shown["from_elsewhere"] == "a=1"
    assert shown["App version: candidate"] == (
        "a1b2c3d4e5 of 2026-11-26T10:00:00+00:00 with uncommitted changes"
    )
    assert shown["App version: baseline"] == "/old"


def test_older_environments_show_what_they_recorded() -> None:
    rows = describe_environment(
        {"granian": None, "open_files_limit": [1024, 4096], "cpu_plan": {"stack": None}}, "wrk"
    )
    assert rows == [
        ("Open files limit (soft, hard)", "1024, 4096"),
        ("granian", "unknown"),
        ("Load driver", "wrk"),  # the experiment names it when no version was recorded
        ("CPU placement", "not pinned"),  # no CPU priority row: it was not recorded then
    ]


def test_only_the_machine_facts_are_compared() -> None:
    here = collect_environment()
    assert machine_differences(here, {**here, "python": "2.7", "cpu_plan": PLAN}) == []
    machine = [f.key for f in FACTS if f.machine]
    assert machine == ["hostname", "cpu_model", "cpu_count", "kernel"]
    elsewhere = {**here, **{key: "other" for key in machine}}
    differences = machine_differences(here, elsewhere)
    assert [d.split()[0] for d in differences] == machine
    assert differences[0] == f"hostname {here['hostname']!r} vs 'other'"


def test_only_declared_facts_can_be_recorded() -> None:
    with pytest.raises(KeyError, match="'colour' is not a fact"):
        collect_environment({"colour": "blue"})


def test_the_setup_is_recorded_only_where_it_is_handed_in() -> None:
    # No global: what was set up for one experiment is not in the next one's environment.
    assert collect_environment({"database": "SQLite file"})["database"] == "SQLite file"
    assert "database" not in collect_environment()
