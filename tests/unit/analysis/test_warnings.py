"""Warning kinds: one enum, each kind with its hint, stored and shown as its name."""

import json

import pytest
from support import fake_load, fake_run

from servelab.analysis.checks import variant_warnings
from servelab.analysis.metrics import summaries
from servelab.analysis.warnings import REPLAY_SENDER_FIX, REPLAY_STACK_FIX, WarningKind
from servelab.results.records import ReplayFidelity

NAMES = (
    "unstable",
    "errors",
    "driver-saturated",
    "driver-bottleneck",
    "uneven-workers",
    "neighbours",
    "too-few-runs",
    "closed-loop",
    "machine-speed",
    "shared-cpus",
    "not-cpu-bound",
    "replay-not-kept",
)


@pytest.mark.parametrize("name", NAMES)
def test_a_kind_is_its_name_in_text_and_json_and_reads_back(name: str) -> None:
    kind = WarningKind(name)
    assert kind == name and f"{kind}" == name and str(kind) == name
    assert json.dumps({"kind": kind}) == json.dumps({"kind": name})
    assert kind.hint and "{" not in kind.hint.format(needed=3, how="its option", fix="a fix")


def test_every_kind_is_named_and_the_hint_takes_the_case_figures() -> None:
    assert {k.value for k in WarningKind} == set(NAMES)
    warning = WarningKind.TOO_FEW_RUNS.warn("needs 7 runs", "fast", "w", needed=7)
    assert warning.hint == "repeat with --repetitions 7"
    assert (warning.kind, warning.variant, warning.workload) == (
        WarningKind.TOO_FEW_RUNS, "fast", "w"
    )
    assert WarningKind.SHARED_CPUS.warn("shared").hint == WarningKind.SHARED_CPUS.hint


LATE = ReplayFidelity(
    speed=1.0, scheduled=1000, sent=1000, lag_p50_ms=0.1, lag_p99_ms=2200.0,
    lag_max_ms=3000.0, max_mix_error_points=0.0, ks_distance=0.02,
    problems=("the sender fell behind its schedule: send lag p99 2,200.0 ms",),
)


@pytest.mark.parametrize(("timeouts", "fix"), [
    (0, REPLAY_SENDER_FIX),  # every request answered: the sender was slow
    (310, REPLAY_STACK_FIX),  # 31 % timed out: the stack was
])
def test_a_replay_not_kept_names_the_sender_or_the_stack_as_the_cause(timeouts, fix) -> None:
    load = fake_load(requests=1000, codes={"200": 1000 - timeouts}, replay=LATE,
                     connection_errors={"timeout": timeouts} if timeouts else {})
    runs = [fake_run("unix", "replay", rep, load=load) for rep in (1, 2, 3)]
    metrics = summaries(runs)
    (warning,) = [w for w in variant_warnings(runs, metrics, 5.0, "unix", "replay")
                  if w.kind == "replay-not-kept"]
    assert warning.hint == fix
    assert ("31 % of its requests failed" in warning.message) == (fix == REPLAY_STACK_FIX)
