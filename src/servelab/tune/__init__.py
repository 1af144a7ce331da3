"""``servelab tune``: the best configuration of a space for the user's app, raced.

The space's candidates form one experiment (stored, resumable and exported like
any other); instead of measuring every candidate the same number of times, the
race (``servelab.tune.race``) measures round after round only the candidates not
yet significantly worse than the leader, until one is left, the rest tie within
``tie_pct``, the rounds run out or the next round would overrun the budget.
After every round tune.json and tune.md in the result's directory hold the
ranking so far. With ``--profile`` the race's finalists are then profiled and tune.md
ends with why the recommended one is ahead (``servelab.tune.why``).

The run itself is ``servelab.tune.run`` (``run_tune(TuneSpec)``), imported from here
on first use: the command line reads ``servelab.tune.objective`` for its choices
without loading the race, the measuring and the reports.
"""

from __future__ import annotations

from typing import Any

_FROM_RUN = ("TuneSpec", "TuneProgress", "TuneOutcome", "run_tune")


def __getattr__(name: str) -> Any:
    if name in _FROM_RUN:
        from servelab.tune import run

        return getattr(run, name)
    raise AttributeError(f"module 'servelab.tune' has no attribute {name!r}")
