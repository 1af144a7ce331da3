"""An experiment's analysis built as its runs arrive (a measuring session's).

hyperfine's scheduler exports after each benchmark without re-reading the past; so does
a session: what depends on one run alone — its profile parsed and scaled per request
(``profile.run_profile``: most of a profiled report's per-run work) — is computed once,
when the run is added, and kept as a frozen value. A workload's part of the analysis
(its variants' summaries, warnings and comparisons with the baseline: most of the rest)
is kept with the very runs it was worked out from, and used again only for exactly
those runs: a run of that workload added since makes another part, worked out afresh.
The runs of a block finish a workload at a time, so each report after them works out
only that workload's part. Across workloads (Holm's family, the experiment's warnings)
everything is recomputed by ``analyze``, the same function a stored result is analysed
with from scratch, whenever asked. Nothing is kept for a list still growing (DESIGN.md:
avoid statistics cached on a list that is still growing). Pure: the caller reads the
run's profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from servelab.analysis.analyze import (
    ExperimentAnalysis,
    WorkloadAnalysis,
    analyze,
    analyze_workload,
)
from servelab.analysis.profile import RunProfile, run_profile
from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.results.records import RunRecord

RunKey = tuple[str, str, int]  # (variant, workload, repetition)


class AnalysisSoFar:
    """The runs of one experiment so far, each one's own figures computed as it came."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self._runs: list[RunRecord] = []
        self._folded: dict[RunKey, str] = {}
        self._profiles: list[RunProfile] = []
        # The analysis of exactly the runs above, by min_effect_pct; emptied by ``add``.
        self._analysed: dict[float, ExperimentAnalysis] = {}
        # Each workload's latest part, by design, workload and settings: with the runs it
        # was worked out from (the records themselves, which this object keeps alive, so
        # their ids name them), to be used again only for exactly those runs.
        self._parts: dict[tuple[object, ...], tuple[tuple[int, ...], WorkloadAnalysis]] = {}

    def add(self, run: RunRecord, folded: str | None = None) -> None:
        """One more run, with its profile's folded stacks when it has one on disk."""
        self._analysed.clear()
        self._runs.append(run)
        if folded is not None:
            self._folded[(run.variant, run.workload, run.repetition)] = folded
            self._profiles.append(run_profile(run, folded))

    @property
    def runs(self) -> tuple[RunRecord, ...]:
        return tuple(self._runs)

    @property
    def folded(self) -> Mapping[RunKey, str]:
        """Each profiled run's folded stacks, as ``results.profiles.read_profiles`` gives."""
        return dict(self._folded)

    @property
    def profiles(self) -> tuple[RunProfile, ...]:
        """The profiled runs per request, in the order they came (``profile.run_profiles``)."""
        return tuple(self._profiles)

    def holds(self, runs: Sequence[RunRecord]) -> bool:
        """True when ``runs`` are exactly the runs added, in order (the same records)."""
        return len(runs) == len(self._runs) and all(
            mine is theirs for mine, theirs in zip(self._runs, runs, strict=True)
        )

    def analysis(self, *, min_effect_pct: float = 0.0) -> ExperimentAnalysis:
        """``analyze`` of every run so far (asked again before another run comes: the same
        answer, not worked out twice)."""
        found = self._analysed.get(min_effect_pct)
        if found is None:
            found = analyze(
                self.experiment, self._runs, min_effect_pct=min_effect_pct,
                by_workload=self._workload_part,
            )
            self._analysed[min_effect_pct] = found
        return found

    def _workload_part(
        self, experiment: Experiment, workload: Workload, runs: Sequence[RunRecord],
        **settings: float,
    ) -> WorkloadAnalysis:
        """``analyze_workload``, or its part kept from exactly these runs."""
        key = (experiment.side_by_side, workload.name, *sorted(settings.items()))
        ids = tuple(map(id, runs))
        kept = self._parts.get(key)
        if kept is not None and kept[0] == ids:
            return kept[1]
        worked_out = analyze_workload(experiment, workload, runs, **settings)
        self._parts[key] = (ids, worked_out)
        return worked_out
