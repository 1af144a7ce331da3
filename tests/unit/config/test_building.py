"""Building experiments: variants merged onto the baseline, grids, TOML files, bad knobs."""

from pathlib import Path

import pytest

from servelab.config.building import expand_grid
from servelab.config.load import LoadSpec
from servelab.errors import SpecError
from servelab.prepare.building import experiment_from_dict, load_experiment

MINIMAL = {
    "name": "t",
    "baseline": {"server": {"workers": 2}},
    "workloads": [{"name": "w", "load": {"requests": 10}}],
}


def test_variants_are_overrides_merged_onto_the_baseline():
    exp = experiment_from_dict(
        {**MINIMAL, "variants": [{"name": "unix", "proxy": {"transport": "unix"}}]}
    )
    assert [s.name for s in exp.stacks] == ["baseline", "unix"]
    unix = exp.variants[0]
    assert unix.proxy.transport == "unix"
    assert unix.server.workers == 2  # inherited from the baseline
    assert exp.baseline.proxy.transport == "tcp"


def test_grid_adds_one_named_variant_per_combination():
    exp = experiment_from_dict(
        {**MINIMAL, "grid": {"server.workers": [1, 3], "proxy.gzip": [True, False]}}
    )
    names = [s.name for s in exp.variants]
    assert names == ["workers=1,gzip=true", "workers=1,gzip=false",
                     "workers=3,gzip=true", "workers=3,gzip=false"]
    assert exp.variants[2].server.workers == 3
    assert exp.variants[3].proxy.gzip is False


def test_expand_grid_rejects_empty_value_list():
    with pytest.raises(SpecError, match="non-empty list"):
        expand_grid({}, {"server.workers": []})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"server": {"workers": 0}},
            "baseline.server.workers: Input should be greater than or equal to 1",
        ),
        ({"server": {"wokers": 2}}, "baseline.server.wokers: unknown key"),
        ({"proxy": {"kind": "none", "transport": "unix"}}, "needs a proxy in front"),
        ({"server": {"kind": "uvicorn", "threads": 4}}, "uvicorn has no threads"),
    ],
)
def test_bad_knobs_are_one_line_errors_naming_the_key(override, message):
    with pytest.raises(SpecError) as info:
        experiment_from_dict({**MINIMAL, "baseline": override})
    assert message in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_loads_must_be_bounded_and_consistent():
    with pytest.raises(ValueError, match="bounded"):
        LoadSpec()
    with pytest.raises(ValueError, match="needs 'rate'"):
        LoadSpec(model="open", requests=10)
    with pytest.raises(ValueError, match="greater than 0"):
        LoadSpec(model="open", rate=-5, requests=10)
    with pytest.raises(ValueError, match="belongs to the open model"):
        LoadSpec(rate=5, requests=10)


def test_duplicate_variant_names_are_refused():
    with pytest.raises(SpecError, match="repeated: baseline"):
        experiment_from_dict({**MINIMAL, "variants": [{"name": "baseline"}]})


def test_toml_file_round_trip(tmp_path: Path):
    path = tmp_path / "exp.toml"
    path.write_text(
        """
repetitions = 2
driver = "ab"

[baseline]
server = { kind = "gunicorn", workers = 1 }
proxy = { transport = "tcp" }

[[variants]]
name = "unix"
proxy = { transport = "unix", upstream_keepalive = 8 }

[[workloads]]
name = "small"
request = { method = "POST", path = "/sync/items/", body = '{"name": "x", "price": 1}' }
load = { concurrency = 10, requests = 100 }
"""
    )
    exp = load_experiment(path)
    assert exp.name == "exp"
    assert exp.repetitions == 2 and exp.driver == "ab"
    assert exp.variants[0].proxy.upstream_keepalive == 8
    assert exp.workloads[0].request.body == '{"name": "x", "price": 1}'


def test_toml_errors_are_spec_errors(tmp_path: Path):
    with pytest.raises(SpecError, match="does not exist"):
        load_experiment(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("repetitions = = 3")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_experiment(bad)
