"""Warning kinds: one enum, each kind with its hint, stored and shown as its name."""

import json

import pytest

from servelab.analysis.warnings import WarningKind

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
    assert kind.hint and "{" not in kind.hint.format(needed=3, how="its option")


def test_every_kind_is_named_and_the_hint_takes_the_case_figures() -> None:
    assert {k.value for k in WarningKind} == set(NAMES)
    warning = WarningKind.TOO_FEW_RUNS.warn("needs 7 runs", "fast", "w", needed=7)
    assert warning.hint == "repeat with --repetitions 7"
    assert (warning.kind, warning.variant, warning.workload) == (
        WarningKind.TOO_FEW_RUNS, "fast", "w"
    )
    assert WarningKind.SHARED_CPUS.warn("shared").hint == WarningKind.SHARED_CPUS.hint
