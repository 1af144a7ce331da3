"""The fronts' registry: every line names a Front of that kind, with sound declarations."""

import pytest

from servelab.config.stack import ProxySpec
from servelab.plugins.front import Front, get_front
from servelab.registry import DEFAULT_FRONT, FRONT_KINDS, PROCESS_FRONTS


@pytest.mark.parametrize("kind", FRONT_KINDS)
def test_every_registered_front_is_what_its_line_says(kind: str) -> None:
    front = get_front(kind)
    assert isinstance(front, Front) and front.kind == kind
    assert set(front.own_knobs) <= set(ProxySpec.model_fields)
    assert "http" in front.protocols
    assert (kind in PROCESS_FRONTS) == (front.role is not None)
    if front.role is not None:
        assert front.role == kind, "a front's log source is its role (attribution)"


def test_no_two_fronts_own_the_same_knob() -> None:
    owned = [knob for kind in FRONT_KINDS for knob in get_front(kind).own_knobs]
    assert len(owned) == len(set(owned))


def test_the_default_front_is_registered() -> None:
    assert DEFAULT_FRONT in PROCESS_FRONTS
    assert ProxySpec().kind == DEFAULT_FRONT
