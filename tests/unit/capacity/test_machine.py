"""A capacity start waits while the machine runs slow (capacity.machine), probed through
a list of speeds instead of a CPU loop."""

from __future__ import annotations

from servelab.capacity.machine import MAX_WAIT_S, MIN_USUAL, PROBE_EVERY_S, MachineSpeed


def _machine(speeds: list[float], max_wait_s: float = MAX_WAIT_S):
    slept: list[float] = []
    readings = iter(speeds)
    return MachineSpeed(lambda: next(readings), slept.append, max_wait_s), slept


def test_no_usual_speed_no_wait_for_the_first_starts() -> None:
    machine, slept = _machine([100.0, 40.0, 100.0])
    assert [machine.before_start().waited_s for _ in range(MIN_USUAL)] == [0.0] * MIN_USUAL
    assert slept == [] and machine.usual() == 100.0


def test_a_dip_is_waited_out_and_the_start_is_not_slow() -> None:
    machine, slept = _machine([100.0, 98.0, 102.0, 55.0, 54.0, 97.0])
    for _ in range(MIN_USUAL):
        machine.before_start()
    began = machine.before_start()
    assert slept == [PROBE_EVERY_S, PROBE_EVERY_S]
    assert (began.speed, began.waited_s, began.usual, began.slow) == (97.0, 10.0, 100.0, False)
    assert 55.0 not in machine.speeds  # a reading waited out is not a start's speed


def test_a_dip_longer_than_the_wait_is_measured_and_said_slow() -> None:
    machine, slept = _machine([100.0] * MIN_USUAL + [50.0] * 20)
    for _ in range(MIN_USUAL):
        machine.before_start()
    began = machine.before_start()
    assert began.waited_s == MAX_WAIT_S == sum(slept) and began.slow
    assert began.speed == 50.0


def test_a_lasting_change_of_speed_becomes_the_usual_one() -> None:
    machine, _ = _machine([100.0] * MIN_USUAL + [60.0] * 100, max_wait_s=PROBE_EVERY_S)
    waits = [machine.before_start().waited_s for _ in range(MIN_USUAL + 12)]
    assert waits[MIN_USUAL] == PROBE_EVERY_S  # first slow start waits
    assert waits[-1] == 0.0 and machine.usual() == 60.0  # later ones no longer


def test_not_probed_never_waits() -> None:
    machine, slept = _machine([None] * 5)  # type: ignore[list-item]
    assert all(machine.before_start().speed is None for _ in range(5)) and slept == []


def test_a_wait_is_bounded_by_what_the_budget_leaves_for_it() -> None:
    """A search's budget bounds each start's wait below --machine-wait: it waits in whole
    probes that fit within the limit, and a start with no room left does not wait."""
    machine, slept = _machine([100.0] * MIN_USUAL + [50.0] * 40)
    for _ in range(MIN_USUAL):
        machine.before_start()
    limit = 2.5 * PROBE_EVERY_S
    began = machine.before_start(limit)
    assert began.waited_s == sum(slept) == 2 * PROBE_EVERY_S <= limit < MAX_WAIT_S
    assert began.slow
    slept.clear()
    assert machine.before_start(0.0).waited_s == 0.0 and slept == []
    assert machine.before_start(10 * MAX_WAIT_S).waited_s == MAX_WAIT_S  # --machine-wait's
