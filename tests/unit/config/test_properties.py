"""Property-based (hypothesis): whatever an experiment file or a CLI value holds, loading it
either succeeds or raises servelab's own error (one line for the user), never anything
else."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servelab.cli.options import parse_int_list
from servelab.config.experiment import Experiment
from servelab.config.run import parse_duration
from servelab.errors import ServelabError
from servelab.export.layout import check_listen
from servelab.prepare.building import experiment_from_dict, load_experiment

# Names an experiment file uses, so generated tables reach the validators, not only the
# "unknown key" check.
KEYS = [
    "name", "baseline", "variants", "grid", "workloads", "repetitions", "driver", "order",
    "order_seed", "slices", "side_by_side", "warmup", "stopping", "database", "slo", "app",
    "server", "proxy", "network", "request", "load", "kind", "workers", "threads",
    "worker_class", "backlog", "timeout_s", "max_requests", "max_requests_jitter",
    "transport", "protocol", "upstream_keepalive", "mpm", "somaxconn", "path", "method",
    "expect_status", "mix", "model", "concurrency", "requests", "duration_s", "rate",
    "precision_pct", "budget_s", "latency_ms", "jitter_ms", "ref", "server.workers",
]
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
    | st.sampled_from(["gunicorn", "uvicorn", "uwsgi", "nginx", "apache", "none", "unix",
                       "tcp", "oha", "wrk", "ab", "open", "closed", "bursts", "/", "GET"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
EXPERIMENTS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8)
# SERVELAB_EXAMPLES=5000 searches deeper than the suite's default.
EXAMPLES = int(os.environ.get("SERVELAB_EXAMPLES", "300"))
QUICK = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@QUICK
@given(EXPERIMENTS)
def test_any_experiment_table_loads_or_is_refused_by_servelab(data: dict) -> None:
    try:
        assert isinstance(experiment_from_dict(data), Experiment)
    except ServelabError as exc:
        assert "\n" not in exc.one_line()


@settings(
    max_examples=EXAMPLES // 2, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_experiment_file_loads_or_is_refused_by_servelab(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "experiment.toml"
    path.write_bytes(raw)
    try:
        load_experiment(path)
    except ServelabError as exc:
        assert "\n" not in exc.one_line()


@QUICK
@given(st.text(max_size=30))
def test_cli_values_parse_or_are_refused_by_servelab(text: str) -> None:
    for parse in (
        lambda t: parse_int_list(t, "workers"), parse_duration, check_listen,
    ):
        try:
            parse(text)
        except ServelabError as exc:
            assert "\n" not in exc.one_line()


@QUICK
@given(st.lists(st.integers(1, 80), min_size=1, max_size=70))
def test_value_lists_keep_their_values(values: list[int]) -> None:
    text = ",".join(map(str, values))
    try:
        assert parse_int_list(text, "workers") == tuple(values)
    except ServelabError:
        assert len(values) > 64  # refused only for too many values


def test_generated_toml_round_trips_through_the_loader(tmp_path: Path) -> None:
    """A sanity anchor for the file property: a valid file does load."""
    path = tmp_path / "ok.toml"
    path.write_text('[baseline]\n[[workloads]]\nname = "w"\nload = { duration_s = 2 }\n')
    assert tomllib.loads(path.read_text())["workloads"][0]["name"] == "w"
    assert load_experiment(path).workloads[0].name == "w"
