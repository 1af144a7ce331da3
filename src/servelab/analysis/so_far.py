"""An experiment's analysis built as its runs arrive (a measuring session's).

hyperfine's scheduler exports after each benchmark without re-reading the past; so does
a session: what depends on one run alone — its profile parsed and scaled per request
(``profile.run_profile``: most of a profiled report's per-run work) — is computed once,
when the run is added, and kept as a frozen value. Everything across runs (summaries,
intervals, Holm, verdicts, warnings, explanations) is recomputed from the runs and the
kept values whenever asked, with ``analyze``, the same function a stored result is
analysed with from scratch: nothing computed across runs is kept while runs are still
being added (DESIGN.md: avoid statistics cached on a list that is still growing), but
for the last answer, which ``add`` forgets. Pure: the caller reads the run's profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from servelab.analysis.analyze import ExperimentAnalysis, analyze
from servelab.analysis.profile import RunProfile, run_profile
from servelab.config.experiment import Experiment
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
            found = analyze(self.experiment, self._runs, min_effect_pct=min_effect_pct)
            self._analysed[min_effect_pct] = found
        return found
