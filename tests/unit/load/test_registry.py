"""The load drivers' registry: names, capabilities, and what needs which."""

import pytest

from servelab.config.load import LoadSpec, RequestSpec, WeightedPath
from servelab.errors import SpecError
from servelab.plugins.driver import CAPABILITIES, get_driver, needed_capabilities
from servelab.registry import DEFAULT_DRIVER, DRIVER_NAMES, capabilities


@pytest.mark.parametrize("name", DRIVER_NAMES)
def test_every_registered_driver_is_what_its_line_says(name: str) -> None:
    driver = get_driver(name)
    assert driver.name == name
    assert driver.capabilities <= set(CAPABILITIES)
    assert [check.name for check in driver.doctor_checks()] == [name]


def test_the_default_driver_can_measure_in_slices_and_at_a_rate() -> None:
    assert {"latencies", "open_model"} <= capabilities(DEFAULT_DRIVER)


@pytest.mark.parametrize(
    ("request_", "load", "needs"),
    [
        (RequestSpec(), LoadSpec(duration_s=5), set()),
        (RequestSpec(), LoadSpec(requests=100), {"request_count"}),
        (RequestSpec(), LoadSpec(model="open", rate=10, duration_s=5), {"open_model"}),
        (RequestSpec(mix=(WeightedPath(path="/a"),)), LoadSpec(duration_s=5), {"request_mix"}),
    ],
)
def test_needed_capabilities(request_: RequestSpec, load: LoadSpec, needs: set[str]) -> None:
    assert needed_capabilities(request_, load) == needs


@pytest.mark.parametrize("name", DRIVER_NAMES)
def test_a_driver_lacking_a_needed_capability_has_a_reason_for_it(name: str) -> None:
    """Whatever a driver lacks, a load needing it is refused with a reason (its own
    ``unsupported`` message, or the missing capability named)."""
    from servelab.plugins.driver import run_load

    driver = get_driver(name)
    loads = {
        "request_count": (RequestSpec(), LoadSpec(requests=100)),
        "open_model": (RequestSpec(), LoadSpec(model="open", rate=10, duration_s=5)),
        "request_mix": (RequestSpec(mix=(WeightedPath(path="/a"),)), LoadSpec(duration_s=5)),
    }
    for capability, (request_, load) in loads.items():
        if capability in driver.capabilities:
            continue
        with pytest.raises(SpecError, match=f"load driver {name} cannot do this"):
            run_load(driver, "http://127.0.0.1:9/", request_, load, workdir=None)  # type: ignore[arg-type]


def test_an_unknown_driver_names_the_choices() -> None:
    with pytest.raises(SpecError, match="unknown load driver 'nope'") as caught:
        get_driver("nope")
    assert all(name in caught.value.fix for name in DRIVER_NAMES)
