"""The tune run: the race of a space's candidates, then the recommendation, the
capacity of the finalists and why the winner is ahead (the package's doc says how)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from servelab.analysis.so_far import AnalysisSoFar
from servelab.config.experiment import Experiment, build_experiment
from servelab.config.load import RequestSpec
from servelab.config.run import LOOPBACK, RunOptions, UserApp
from servelab.host.cpus import CpuPlan
from servelab.measuring import RunnerEvents, run_experiment
from servelab.measuring.runner import RunSink
from servelab.measuring.stopping import NextRound
from servelab.plugins.driver import LoadDriver
from servelab.registry import DEFAULT_FRONT
from servelab.results.records import RunRecord
from servelab.tune.capacity import CapacityChoice, choice_markdown, search_finalists
from servelab.tune.objective import Objective
from servelab.tune.race import (
    RaceSettings,
    RaceState,
    first_screen,
    foreseen_seconds_per_start,
    race_state,
)
from servelab.tune.recommendation import Recommendation, finalists, recommend
from servelab.tune.report import (
    TUNE_CHART,
    race_chart,
    ranking_markdown,
    tune_document,
    write_tune_files,
)
from servelab.tune.space import Candidate, SubGrid, expand_space
from servelab.tune.why import (
    PROFILED_STARTS,
    TUNE_FLAME,
    TuneWhy,
    not_profiled,
    split_runs,
    tune_why,
    why_document,
    why_markdown,
)

WORKLOAD = "tune"
# A round's measuring per candidate when the user does not say: a warm-up of 1 s, then
# 2 s in slices of 1 s, interleaved with the other candidates.
DEFAULT_DURATION_S = 2.0
DEFAULT_WARMUP_S = 1.0


@dataclass(frozen=True)
class TuneSpec:
    """What to tune: the app, its request, the space, the objective and the race."""

    space: tuple[SubGrid, ...]
    objective: Objective = field(default_factory=Objective)
    settings: RaceSettings = field(default_factory=RaceSettings)
    app: dict[str, Any] = field(default_factory=lambda: {"ref": "fastapi"})
    request: RequestSpec = field(default_factory=RequestSpec)
    front: dict[str, Any] = field(default_factory=lambda: {"kind": DEFAULT_FRONT})
    concurrency: int = 50
    duration_s: float = DEFAULT_DURATION_S
    warmup_s: float = DEFAULT_WARMUP_S
    name: str = "tune"
    budget_s: float | None = None  # wall time of the measuring; None: until the race is over

    def candidates(self) -> list[Candidate]:
        baseline = {"app": dict(self.app), "proxy": dict(self.front)}
        return expand_space(baseline, self.space)

    def experiment(self) -> Experiment:
        """Every candidate as one experiment (the first is its nominal baseline); each
        candidate's stack is whole, nothing of the first one's server merged into it."""
        candidates = self.candidates()
        load: dict[str, Any] = {"concurrency": self.concurrency, "duration_s": self.duration_s}
        if self.objective.open_model:
            load.update(model="open", rate=self.objective.rate)
        data = {
            "name": self.name,
            "baseline": dict(candidates[0].stack),
            "variants": [dict(c.stack) for c in candidates[1:]],
            "workloads": [
                {"name": WORKLOAD, "request": self.request.model_dump(), "load": load}
            ],
            # The progress bar's first round; each later one adds the candidates still in.
            "repetitions": 1,
            "warmup": {"max_rounds": 1, "duration_s": self.warmup_s},
        }
        # Its shapes checked here; its plug-ins' rules once, by api.prepare (told under
        # "the tune space", as here).
        built = build_experiment(data, source="the tune space", whole_variants=True)
        return built.told_as("the tune space")


@dataclass
class TuneProgress:
    """The race as it goes: the store it writes into, its runs, why it stopped."""

    spec: TuneSpec
    names: tuple[str, ...]
    say: Callable[[str], None] = lambda note: None
    store: Any = None  # servelab.results.store.ResultStore, once measuring began
    runs: list[RunRecord] = field(default_factory=list)
    stopped: str | None = None  # a reason the race itself does not know (the budget)
    workload: str = WORKLOAD  # the measured experiment's (set by ``measure``)
    clock: Callable[[], float] = time.monotonic
    # The pace so far, for what more rounds would cost: measuring time per start, and in all.
    seconds_per_start: float | None = None
    spent_s: float | None = None
    detail: bool = True  # a line per dropped candidate (-v); else one line a round
    # --profile: the finalists profiled once the race is over (servelab.tune.why); why
    # they were not, when asked and they could not be.
    profile: bool = False
    profile_note: str | None = None

    def race_runs(self) -> list[RunRecord]:
        """The race's runs: one workload, whatever its name (the user's request replaces
        tune's own), without the finalists' profiled starts."""
        return split_runs([r for r in self.runs if r.workload == self.workload])[0]

    def state(self) -> RaceState:
        return race_state(self.race_runs(), self.names, self.spec.objective, self.spec.settings)

    def finalists(self, state: RaceState, recommendation: Recommendation) -> tuple[str, ...]:
        return finalists(state, recommendation, self.race_runs(), self.spec.objective)

    def why(self, state: RaceState, recommendation: Recommendation) -> TuneWhy | None:
        """The Why part from the profiled starts on disk; None when not asked for."""
        own = [r for r in self.runs if r.workload == self.workload]
        profiled = split_runs(own)[1]
        if not profiled:
            return not_profiled(self.profile_note) if self.profile_note else None
        from servelab.results.profiles import read_profiles

        measured = {r.variant for r in profiled}
        names = [n for n in self.finalists(state, recommendation) if n in measured]
        path = Path(self.store.path) if self.store is not None else None
        return tune_why(profiled, read_profiles(path, profiled), names,
                        recommended=bool(names) and names[0] == recommendation.candidate)

    def write(self, *, chart: bool = True) -> tuple[RaceState, Recommendation]:
        """tune.json, tune.md (and with ``chart``, tune.png if matplotlib is installed)
        from the runs so far."""
        state = self.state()
        recommendation = recommend(
            state, self.spec.objective, self.spec.settings,
            seconds_per_start=self.seconds_per_start, spent_s=self.spent_s,
        )
        if self.store is not None:
            out_dir = Path(self.store.path)
            why = self.why(state, recommendation)
            document = tune_document(
                state, recommendation, self.spec.objective, self.spec.settings,
                candidates=self.names, stopped=self.stopped,
            )
            if why is not None:
                document["why"] = why_document(why)
            if why is not None and why.flame_svg is not None:
                (out_dir / TUNE_FLAME).write_text(why.flame_svg)
            write_tune_files(out_dir, document, self.markdown(state, recommendation, why=why))
            png = chart and race_chart(
                self.race_runs(), state, self.spec.objective, recommendation.candidate
            )
            if png:
                (out_dir / TUNE_CHART).write_bytes(png)
        return state, recommendation

    def markdown(
        self, state: RaceState, recommendation: Recommendation, *, dropped: bool = True,
        why: TuneWhy | None = None,
    ) -> str:
        text = ranking_markdown(
            state, recommendation, self.spec.objective, candidates=len(self.names),
            stopped=self.stopped, dropped=dropped,
        )
        return text + "\n".join(why_markdown(why)) + "\n" if why is not None else text

    def measure(
        self,
        experiment: Experiment,
        store: RunSink,
        cpu_plan: CpuPlan,
        *,
        events: RunnerEvents | None = None,
        previous: Sequence[RunRecord] = (),
        driver: LoadDriver | None = None,
        listen_host: str = LOOPBACK,
        measure_round: Callable[..., list[RunRecord]] = run_experiment,
        profiler: str | None = None,
        so_far: AnalysisSoFar | None = None,
    ) -> list[RunRecord]:
        """ExperimentSession's measuring step: rounds of the candidates still in; then,
        with ``profiler`` (py-spy's path: --profile), the finalists' profiled starts.
        ``so_far`` (the session's analysis) is not asked: each round of the race is an
        experiment of its own, with its own rule."""
        self.store = store
        self.workload = experiment.workloads[0].name
        self.runs = list(previous)
        events = events or RunnerEvents()
        if self.profile and profiler is None:  # the session said what is missing
            self.profile_note = "py-spy could not profile here (see the line above, or " \
                "servelab doctor); the race is unaffected"

        def measure_stacks(stacks: Experiment, **more: Any) -> list[RunRecord]:
            """``stacks`` measured after every run so far (``more``: profiler, rounds)."""
            return measure_round(
                stacks, store, cpu_plan, events=events, previous=tuple(self.runs),
                driver=driver, listen_host=listen_host, **more,
            )

        fresh = self._race(experiment, events, measure_stacks)
        if profiler is not None:
            fresh += self._profile_finalists(experiment, events, measure_stacks, profiler)
        return fresh

    def _race(
        self,
        experiment: Experiment,
        events: RunnerEvents,
        measure_stacks: Callable[..., list[RunRecord]],
    ) -> list[RunRecord]:
        """Rounds of the candidates still in, until the race is over or the budget would
        be overrun."""
        stacks = {s.name: s for s in experiment.stacks}
        began, starts_measured = self.clock(), 0
        fresh: list[RunRecord] = []
        if split_runs(self.runs)[1]:  # resumed while its finalists were being profiled
            state, _ = self.write(chart=False)
            if not state.over:
                self.stopped = "the race had ended before its finalists were profiled"
            return fresh
        while True:
            state, _ = self.write(chart=False)
            if state.over:
                return fresh
            alive = list(state.alive)
            number = state.rounds + 1
            spent = self.clock() - began
            if starts_measured:
                expected = spent / starts_measured * len(alive)
                budget = self.spec.budget_s
                if budget is not None and spent + expected > budget:
                    self.stopped = (
                        f"the budget of {budget:g} s would be overrun by round {number} "
                        f"(about {expected:.0f} s for {len(alive)} candidates)"
                    )
                    self.write(chart=False)
                    return fresh
            if number > 1:
                events.on_round(
                    NextRound((self.workload,), experiment.slices, 0.0, stacks=len(alive),
                              note=f"round {number}: {len(alive)} candidates still in"),
                    None,
                )
            self.say(f"round {number}: {len(alive)} of {len(self.names)} candidates")
            round_experiment = experiment.with_stacks([stacks[n] for n in alive]).model_copy(
                update={"repetitions": number}
            )
            measured = measure_stacks(round_experiment)
            if not measured:  # a round that measures nothing would repeat forever
                raise RuntimeError(f"round {number} of the tune measured nothing")
            starts_measured += len(measured)
            self.spent_s = self.clock() - began
            self.seconds_per_start = self.spent_s / starts_measured
            self.runs.extend(measured)
            fresh.extend(measured)
            out = [d for d in self.state().dropped if d.after_round == number]
            if self.detail:
                for dropped in out:
                    self.say(f"  dropped {dropped.candidate}: {dropped.reason}")
            elif out:  # one line a round; each candidate and why: tune.md, or -v
                halved = sum("successive halving" in d.reason for d in out)
                self.say(
                    f"  dropped {len(out)} after round {number}"
                    + (f" ({halved} by successive halving)" if halved else "")
                    + f": {', '.join(d.candidate for d in out[:3])}"
                    + (f" and {len(out) - 3} more" if len(out) > 3 else "")
                )

    def _profile_finalists(
        self,
        experiment: Experiment,
        events: RunnerEvents,
        measure_stacks: Callable[..., list[RunRecord]],
        profiler: str,
    ) -> list[RunRecord]:
        """The race is over: ``PROFILED_STARTS`` fresh starts of each finalist, each
        measured window followed by a py-spy window (the race's ranking is not changed)."""
        state, recommendation = self.write(chart=False)
        names = self.finalists(state, recommendation)
        if len(names) < 2:
            self.profile_note = "the race left no runner-up to explain the result against"
            self.write(chart=False)
            return []
        race, profiled = split_runs([r for r in self.runs if r.workload == self.workload])
        first = min((r.repetition for r in profiled),
                    default=max((r.repetition for r in race), default=0) + 1)
        rounds = list(range(first, first + PROFILED_STARTS))
        stacks = {s.name: s for s in experiment.stacks}
        note = (f"profiling the {len(names)} finalists ({', '.join(names)}): "
                f"{PROFILED_STARTS} fresh starts each, py-spy after each measured window")
        self.say(note)
        events.on_round(
            NextRound((self.workload,), experiment.slices, 0.0,
                      stacks=len(names) * PROFILED_STARTS, note="profiling the finalists"),
            None,
        )
        profile_experiment = experiment.with_stacks([stacks[n] for n in names]).model_copy(
            update={"repetitions": rounds[-1]}
        )
        measured = measure_stacks(profile_experiment, profiler=profiler, rounds=rounds)
        self.runs.extend(measured)
        self.write(chart=False)
        return measured


@dataclass(frozen=True)
class TuneOutcome:
    state: RaceState
    recommendation: Recommendation
    markdown: str
    label: str  # the result's label ("#12")
    path: Path  # tune.md
    summary: str = ""  # the ranking without the dropped candidates (the terminal's default)
    flame: Path | None = None  # --profile: the differential flame graph beside tune.md
    # --objective max-capacity: the finalists' capacities at the SLO, and the choice.
    capacity: CapacityChoice | None = None


def run_tune(
    spec: TuneSpec,
    options: RunOptions,
    user_app: UserApp | None = None,
    *,
    console: Console | None = None,
    quiet: Console | None = None,
    say: Callable[[str], None] = lambda note: None,
) -> TuneOutcome:
    """Race ``spec``'s candidates as ``options`` (RunOptions, without a budget: the race
    keeps its own) say, with ``user_app`` (UserApp: the user's app and request; None: the
    spec's own). Ctrl-C keeps what was measured and writes the ranking so far."""
    from servelab import api
    from servelab.tune.report import TUNE_MARKDOWN

    experiment = spec.experiment()
    # A budget the first round alone would overrun races fewer candidates, said; one
    # that fits no race is refused before anything starts.
    screen = first_screen(
        [s.name for s in experiment.stacks],
        foreseen_seconds_per_start(spec.warmup_s, spec.duration_s),
        spec.budget_s,
    )
    if screen.note is not None:
        say(screen.note)
        kept = set(screen.candidates)
        experiment = experiment.with_stacks([s for s in experiment.stacks if s.name in kept])
    progress = TuneProgress(spec, screen.candidates, say=say,
                            detail=options.detail, profile=options.profile)
    try:
        store = api.run(experiment, options, user_app or UserApp(), console=console,
                        out=quiet, measure=progress.measure)
    except BaseException:
        if progress.store is not None and progress.runs:
            try:  # no chart: drawing is not what an interrupted tune should wait for
                progress.write(chart=False)
            except Exception as exc:  # the interruption, not this, is what the user sees
                say(f"could not write the ranking so far: {exc}")
            else:
                say(f"stopped; the ranking so far: {Path(progress.store.path) / TUNE_MARKDOWN}")
        raise
    progress.runs = store.runs()
    state, recommendation = progress.write()
    why = progress.why(state, recommendation)
    flame = Path(store.path) / TUNE_FLAME
    markdown = progress.markdown(state, recommendation, why=why)
    summary = progress.markdown(state, recommendation, dropped=False, why=why)
    capacity = None
    names = progress.finalists(state, recommendation)
    if spec.objective.kind == "max-capacity" and spec.objective.slo and names:
        say(f"the race is over; searching the capacity of its {len(names)} finalists at "
            f"{spec.objective.slo}: {', '.join(names)}")
        capacity = search_finalists(
            experiment, names, spec.objective.slo, options, user_app or UserApp(),
            console=console or Console(stderr=True), out=quiet or Console(),
            tune_dir=Path(store.path),
        )
        said = choice_markdown(capacity)
        markdown, summary = f"{markdown}\n{said}", f"{summary}\n{said}"
    return TuneOutcome(
        state, recommendation, markdown, store.label, Path(store.path) / TUNE_MARKDOWN,
        summary, flame if why is not None and why.flame_svg is not None else None, capacity,
    )
