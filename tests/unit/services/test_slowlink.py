"""The slow database link: its spec, toxiproxy's API payloads, netem's command lines,
the choice between them, and the CLI's errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from servelab.config.database import DatabaseSpec
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict
from servelab.prepare.user_app import database_spec, describe_database
from servelab.services import slowlink
from servelab.services.slowlink import (
    SlowLink,
    choose_method,
    netem_addresses,
    netem_commands,
    netem_delay_args,
    proxy_payload,
    toxic_payloads,
    whole_ms_split,
)

# ---------------------------------------------------------------------- spec


def test_database_spec_defaults_and_bounds() -> None:
    db = DatabaseSpec(kind="postgresql", latency_ms=20, jitter_ms=5)
    assert (db.link, db.slowed) == ("auto", True)
    assert not DatabaseSpec(kind="postgresql").slowed
    assert DatabaseSpec(kind="postgresql", latency_ms=10_000, jitter_ms=10_000).slowed


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "sqlite", "latency_ms": 5}, "need kind = 'postgresql'"),
        ({"kind": "sqlite", "jitter_ms": 5}, "need kind = 'postgresql'"),
        ({"kind": "postgresql", "jitter_ms": 1}, "jitter_ms 1 exceeds latency_ms 0"),
        ({"kind": "postgresql", "latency_ms": 10, "jitter_ms": 11}, "exceeds latency_ms 10"),
        ({"kind": "postgresql", "latency_ms": -1}, "greater than or equal to 0"),
        ({"kind": "postgresql", "latency_ms": 10_001}, "less than or equal to 10000"),
        ({"kind": "postgresql", "link": "tc"}, "'auto', 'netem' or 'toxiproxy'"),
        ({"kind": "mysql"}, "'sqlite' or 'postgresql'"),
        ({"latency_ms": 5}, "Field required"),
        ({"kind": "postgresql", "latency": 5}, "Extra inputs are not permitted"),
    ],
)
def test_database_spec_refuses(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DatabaseSpec(**fields)


def test_an_experiment_file_carries_a_database_table() -> None:
    raw = {
        "name": "slow",
        "baseline": {"app": {"ref": "django"}},
        "workloads": [{"name": "w", "request": {"path": "/books/"}}],
        "database": {"kind": "postgresql", "latency_ms": 20, "jitter_ms": 5, "link": "toxiproxy"},
    }
    experiment = experiment_from_dict(raw)
    assert experiment.database == DatabaseSpec(
        kind="postgresql", latency_ms=20, jitter_ms=5, link="toxiproxy"
    )
    raw["database"] = {"kind": "sqlite", "latency_ms": 20}
    with pytest.raises(SpecError, match=r"database: latency_ms and jitter_ms need kind"):
        experiment_from_dict(raw)
    del raw["database"]
    assert experiment_from_dict(raw).database is None


def test_cli_options_set_or_override_the_database() -> None:
    file_db = DatabaseSpec(kind="postgresql", latency_ms=20, link="toxiproxy")
    assert database_spec(None, None, None, None) is None
    assert database_spec(file_db, None, None, None) is file_db
    assert database_spec(None, "postgresql", None, None) == DatabaseSpec(kind="postgresql")
    # --db-latency implies PostgreSQL and keeps the file's other settings.
    assert database_spec(None, None, 30, None) == DatabaseSpec(kind="postgresql", latency_ms=30)
    assert database_spec(file_db, None, 40, 4) == DatabaseSpec(
        kind="postgresql", latency_ms=40, jitter_ms=4, link="toxiproxy"
    )
    # --database sqlite replaces the file's slow PostgreSQL altogether.
    assert database_spec(file_db, "sqlite", None, None) == DatabaseSpec(
        kind="sqlite", link="toxiproxy"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sqlite", 20.0, None), "--db-latency slows the link to PostgreSQL, and --database"),
        (("sqlite", 20.0, 2.0), "--db-latency and --db-jitter slow the link"),
        ((None, 20.0, 30.0), "jitter_ms 30 exceeds latency_ms 20"),
        ((None, None, 3.0), "jitter_ms 3 exceeds latency_ms 0"),
        ((None, -5.0, None), "latency_ms: Input should be greater than or equal to 0"),
        ((None, 20_000.0, None), "less than or equal to 10000"),
    ],
)
def test_bad_database_options_are_one_line(args: tuple, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        database_spec(None, *args)
    assert "\n" not in caught.value.one_line() and caught.value.fix


def test_cli_db_latency_with_sqlite_is_a_one_line_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "study", "keepalive", "--app", "django",
         "--db-latency", "20", "--database", "sqlite"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "--db-latency slows the link to PostgreSQL" in lines[0]
    assert "fix: drop --database sqlite" in lines[0]
    assert "Traceback" not in done.stderr


def test_cli_db_latency_needs_the_app() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "study", "keepalive", "--db-latency", "20"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2 and "need --app" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------- toxiproxy


def test_the_round_trip_is_split_half_each_way_in_whole_milliseconds() -> None:
    assert whole_ms_split(30, 10) == ((15, 5), (15, 5))
    assert whole_ms_split(25, 5) == ((12, 2), (13, 3))
    assert whole_ms_split(1, 1) == ((0, 0), (1, 1))
    assert whole_ms_split(20.4, 0.4) == ((10, 0), (10, 0))
    for latency, jitter in ((30, 10), (25, 5), (7, 7), (1, 0), (9999, 3)):
        (up, up_j), (down, down_j) = whole_ms_split(latency, jitter)
        assert up + down == latency and up_j + down_j == jitter
        assert up_j <= up and down_j <= down  # no direction ever asks for a negative delay


def test_toxiproxy_payloads() -> None:
    assert proxy_payload("127.0.0.1", 5432) == {
        "name": "postgres",
        "listen": "127.0.0.1:0",
        "upstream": "127.0.0.1:5432",
        "enabled": True,
    }
    assert toxic_payloads(25, 5) == [
        {
            "name": "latency_upstream",
            "type": "latency",
            "stream": "upstream",
            "toxicity": 1.0,
            "attributes": {"latency": 12, "jitter": 2},
        },
        {
            "name": "latency_downstream",
            "type": "latency",
            "stream": "downstream",
            "toxicity": 1.0,
            "attributes": {"latency": 13, "jitter": 3},
        },
    ]
    # A direction whose share is 0 ms gets no toxic.
    assert [t["stream"] for t in toxic_payloads(1, 0)] == ["downstream"]


def test_slow_link_describes_itself() -> None:
    link = SlowLink("127.0.0.1", 4000, "toxiproxy", "2.12.0", 20, 5)
    assert link.describe() == "toxiproxy 2.12.0, +20 ms ± 5 ms latency per round trip"
    assert describe_database("15", link) == (
        "PostgreSQL 15 behind toxiproxy 2.12.0, +20 ms ± 5 ms latency per round trip"
    )
    netem = SlowLink("169.254.3.2", 4000, "netem", "(iproute2 6.1.0)", 30, 0)
    assert netem.describe() == "netem (iproute2 6.1.0), +30 ms latency per round trip"
    assert describe_database("15") == "PostgreSQL 15 on loopback, no added latency"


def test_netem_command_lines() -> None:
    commands = netem_commands("servelab-77-3", "sl77-3", "169.254.78.13", "169.254.78.14", 30, 10)
    assert commands == [
        ["ip", "link", "add", "sl77-3", "type", "veth", "peer", "name", "eth0",
         "netns", "servelab-77-3"],
        ["ip", "addr", "add", "169.254.78.13/30", "dev", "sl77-3"],
        ["ip", "link", "set", "sl77-3", "up"],
        ["ip", "-n", "servelab-77-3", "addr", "add", "169.254.78.14/30", "dev", "eth0"],
        ["ip", "-n", "servelab-77-3", "link", "set", "eth0", "up"],
        ["tc", "qdisc", "add", "dev", "sl77-3", "root", "netem", "delay", "15000us", "5000us"],
        ["tc", "-n", "servelab-77-3", "qdisc", "add", "dev", "eth0", "root",
         "netem", "delay", "15000us", "5000us"],
    ]
    assert netem_delay_args(0.25, 0) == ["netem", "delay", "250us"]


def test_netem_addresses_are_a_private_slash_30_per_process_and_link() -> None:
    host, far = netem_addresses(1234, 1)
    assert (host, far) == ("169.254.235.5", "169.254.235.6")
    assert netem_addresses(1234, 2) != (host, far)
    assert netem_addresses(1235, 1) != (host, far)
    assert all(".169." not in a for n in range(64) for a in netem_addresses(168, n))


@pytest.fixture
def netem(monkeypatch: pytest.MonkeyPatch):
    def set_reason(reason: str | None) -> None:
        monkeypatch.setattr(slowlink, "netem_probe", lambda: reason)

    return set_reason


def test_auto_takes_netem_where_the_kernel_has_it(netem) -> None:
    netem(None)
    assert choose_method("auto") == "netem"
    assert choose_method("netem") == "netem"
    assert choose_method("toxiproxy") == "toxiproxy"


def test_auto_falls_back_to_toxiproxy_and_netem_asked_for_is_refused(netem) -> None:
    netem("this kernel has no netem qdisc (tc: Specified qdisc kind is unknown.)")
    assert choose_method("auto") == "toxiproxy"
    assert choose_method("toxiproxy") == "toxiproxy"
    with pytest.raises(SpecError, match="cannot delay the database link with netem") as caught:
        choose_method("netem")
    assert "link = 'toxiproxy'" in caught.value.fix
    assert "\n" not in caught.value.one_line()


def test_netem_needs_the_server_behind_a_netem_link() -> None:
    with (
        pytest.raises(ValueError, match="not behind a netem link"),
        slowlink.slow_link("127.0.0.1", 5432, 10, 0, "netem"),
    ):
        pass
