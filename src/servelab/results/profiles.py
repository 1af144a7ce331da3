"""Profiles beside the results: one folded-stacks file per run (``--profile``).

``<experiment dir>/profiles/<variant>/<workload>/start-<repetition>.folded``, written
(atomically) before the run's record, which names it (``RunRecord.profile``); the lines
are ``frame;frame;... samples`` as flamegraph.pl, speedscope and inferno read them, the
first frame naming the part of the stack (``app master``, ``app workers``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from servelab.results.records import RunRecord

PROFILES_DIR = "profiles"
RunKey = tuple[str, str, int]  # (variant, workload, repetition)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "-"


def profile_file(variant: str, workload: str, repetition: int) -> str:
    """The run's profile, relative to its experiment directory."""
    return f"{PROFILES_DIR}/{_slug(variant)}/{_slug(workload)}/start-{repetition}.folded"


def folded_text(stacks: Mapping[str, float]) -> str:
    """Folded stacks as text, largest first (integer counts stay integers)."""
    lines = []
    for stack, value in sorted(stacks.items(), key=lambda item: (-item[1], item[0])):
        number = f"{value:d}" if isinstance(value, int) else f"{value:.3f}"
        lines.append(f"{stack} {number}")
    return "".join(f"{line}\n" for line in lines)


def write_profile(experiment_dir: Path, relative: str, stacks: Mapping[str, int]) -> None:
    path = experiment_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(folded_text(stacks))
    os.replace(tmp, path)


def read_profiles(experiment_dir: Path | None, runs: Sequence[RunRecord]) -> dict[RunKey, str]:
    """The folded text of every run that has a profile still on disk."""
    found: dict[RunKey, str] = {}
    if experiment_dir is None:
        return found
    for run in runs:
        if run.profile is None:
            continue
        try:
            text = (experiment_dir / run.profile.file).read_text(errors="replace")
        except OSError:
            continue  # a copied directory without its profiles: the rest still reads
        found[(run.variant, run.workload, run.repetition)] = text
    return found
