"""Experiments built from user input (TOML files, studies, grids, tune spaces): the
model's shapes checked (``servelab.config.building``), then the plug-ins' own rules
(``servelab.prepare.checks``), once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.config.experiment import Experiment, build_experiment
from servelab.prepare.checks import checked


def experiment_from_dict(
    data: dict[str, Any], *, source: str = "experiment", whole_variants: bool = False
) -> Experiment:
    """A raw experiment dict (as read from TOML) as an Experiment, its shapes checked
    (``config.experiment.build_experiment``: variants merged onto the baseline, the grid
    expanded, the slices chosen), then checked against the plug-ins it names; SpecError
    ('source: where: what') for the first problem."""
    experiment = build_experiment(data, source=source, whole_variants=whole_variants)
    return checked(experiment, source)


def load_experiment(path: str | Path) -> Experiment:
    """The experiment file at ``path``, checked whole before anything starts: its shapes
    (``Experiment.from_toml``), then what its servers, fronts and load driver say of its
    values (a knob a server lacks, a protocol no front speaks, what the driver can do).
    SpecError naming the file, the problem and the fix. The library's
    ``servelab.load_experiment``."""
    experiment = Experiment.from_toml(path)
    return checked(experiment, experiment.source)
