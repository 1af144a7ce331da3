"""The library's front door: run an experiment with ``RunOptions`` (how to run it) and
``UserApp`` (the user's own app, request and database), as the CLI does. One chain, as
hyperfine's main: ``prepare`` rewrites the experiment once, in one place (the run's
options, the apps' interpreters, the user's app and request, the database), asks the
plug-ins once at the end and returns a frozen ``Prepared`` (the final experiment and what
the session needs, its environment facts included); ``started`` sets up what lives as
long as the session (the Django app's database) and checks the app answers; the session
measures.

    from servelab.api import load_experiment, run
    from servelab.config.run import RunOptions, UserApp

    run(load_experiment("exp.toml"), RunOptions(results_dir=Path("out")),
        UserApp(app=AppSpec(ref="myapp.main:app")))

``load_experiment`` (``servelab.load_experiment``) reads an experiment file and checks it
whole at load, the plug-ins' rules included; ``Experiment.from_toml`` checks its shapes
only, and ``prepare`` checks the rest of whatever it is given, once, before anything
starts.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rich.console import Console

from servelab.config.database import DatabaseSpec
from servelab.config.experiment import Experiment
from servelab.config.load import Workload
from servelab.config.run import RunOptions, UserApp, UserRequest
from servelab.config.stack import AppSpec, StackSpec
from servelab.errors import SpecError
from servelab.host.cpus import CpuPlan, make_cpu_plan
from servelab.measuring import Measure
from servelab.measuring.limits import check_fits_machine
from servelab.prepare.building import load_experiment as load_experiment  # the front door
from servelab.prepare.checks import Stage, blame_earlier, checked_stages
from servelab.prepare.run import run_option_stages
from servelab.report.base import ReportInput
from servelab.report.exports import check_writable
from servelab.results.store import ResultStore
from servelab.studies import Study, StudyOptions

if TYPE_CHECKING:
    from servelab.capacity.plan import CapacityPlan, VariantCapacity


@dataclass(frozen=True)
class Prepared:
    """An experiment ready to measure, and what its session needs besides."""

    experiment: Experiment  # final: options applied, the user's app fitted, checked
    options: RunOptions  # how to run it
    cpu_plan: CpuPlan  # where the stacks and the load driver run (checked, as done here)
    app: AppSpec | None = None  # the user's app, its interpreter settled
    user: UserApp = field(default_factory=UserApp)  # its request, database, start-up wait
    database: DatabaseSpec | None = None  # the Django app's, started by ``started``
    # Environment facts of what was set up around the stacks (prepare.environment.FACTS):
    # the apps' interpreters, then the database; recorded with the machine's.
    setup: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uses_django(self) -> bool:
        from servelab.prepare.user_app import DJANGO_REFS

        return any(s.app.ref in DJANGO_REFS for s in self.experiment.stacks)

    @property
    def needs_starting(self) -> bool:
        """Something to start or check before measuring: a database, or an app (the
        user's, or the Django app) whose answer is checked first."""
        return (
            self.app is not None or self.database is not None or self.user.request_given
            or self.uses_django
        )


def cpu_plan_of(options: RunOptions) -> CpuPlan:
    """Where the stack and the load driver run, as ``options`` ask (checked)."""
    return make_cpu_plan(
        options.stack_cpus, options.driver_cpus, pin=options.pin, quota=options.stack_cpu_quota,
        priority=options.cpu_priority,
    )


def settled_priority(plan: CpuPlan) -> CpuPlan:
    """``plan`` as this machine can honour it: no CPU priority where cgroups cannot give
    it (not root), so the stored environment says what was done."""
    from servelab.host.cgroups import quota_unavailable_reason

    if plan.cpu_priority and quota_unavailable_reason() is not None:
        return replace(plan, cpu_priority=False)
    return plan


def prepare(
    experiment: Experiment,
    how_to_run: RunOptions,
    user_app: UserApp = UserApp(),  # noqa: B008 (frozen: one shared default is safe)
    *,
    say: Callable[[str], None] = lambda note: None,
    fit: Callable[[Experiment], Experiment] | None = None,
) -> Prepared:
    """``experiment`` as it will be measured: ``how_to_run``'s order, slicing, stopping
    and driver options applied, each app's interpreter settled (before its import), the
    user's app, request and database fitted in; checked against its plug-ins once, at the
    end (a problem is told as the step that brought it); refused when this machine cannot
    hold it (unless ``allow_beyond_machine``) or a result file cannot be written. Notes
    (the interpreters found, how the servers were fitted to the app) go to ``say``.
    ``fit``: a caller's own fitting of the stacks to their apps, where the user's app is
    fitted (``servelab check``: each version's server to its app). Starts nothing:
    ``started`` does."""
    from servelab.apps.interpreter import with_app_pythons
    from servelab.host.extras import require_extra
    from servelab.launch.app_python import app_pythons
    from servelab.prepare.replay import REPLAY_WORKLOAD, with_replay_schedules
    from servelab.prepare.user_app import DJANGO_REFS, database_spec, with_user_app

    stages = run_option_stages(experiment, how_to_run)
    try:
        check_writable(dict(how_to_run.result_files))  # before anything is measured
        # Each app's interpreter settled (the app's own venv, or servelab's).
        settled, app, notes = with_app_pythons(stages[-1].experiment, user_app.app)
        for note in notes:
            say(note)
        if not how_to_run.allow_beyond_machine:  # before anything starts or is stored
            check_fits_machine(settled)
        database = database_spec(
            settled.database, user_app.database, user_app.db_latency_ms, user_app.db_jitter_ms
        )
        cpu_plan = cpu_plan_of(how_to_run)
        uses_django = (app is not None and app.ref in DJANGO_REFS) or any(
            s.app.ref in DJANGO_REFS for s in settled.stacks
        )
        if uses_django:
            require_extra("django", "the Django reference app")
        if how_to_run.resume and uses_django:
            raise SpecError(
                "--resume cannot continue an experiment on the Django app: its database is "
                "made anew, on a new port, for every servelab run",
                "run it again without --resume",
            )
        final = settled
        if app is not None or user_app.request_given:
            final, notes = with_user_app(
                settled, app, user_app.request or UserRequest(),
                replace_workloads=user_app.replace_workloads,
            )
            for note in notes:
                say(note)
        if user_app.replay is not None:  # the user's log in place of the workloads
            final = final.model_copy(
                update={"workloads": (Workload(name=REPLAY_WORKLOAD, replay=user_app.replay),)}
            )
        final = with_replay_schedules(final, how_to_run.results_dir, say)
        if fit is not None:
            final = fit(final)
    except SpecError:
        blame_earlier(stages)  # a problem the options' steps brought is told first
        raise
    stages.append(Stage(final, f"experiment {final.name}"))
    final = checked_stages(stages)
    return Prepared(
        final, how_to_run, settled_priority(cpu_plan), app, user_app, database,
        # checked: each variant's server is installed in its app's interpreter
        setup={"app_python": app_pythons(final)},
    )


@contextmanager
def started(prepared: Prepared, say: Callable[[str], None]) -> Iterator[Prepared]:
    """``prepared`` with what lives as long as its session: the Django app's database
    (the experiment's, else SQLite), pointed at and recorded in ``setup``; the app's
    answer checked first (the preflight). The janitor runs for the whole block, so a
    database outlives no killed servelab."""
    if not prepared.needs_starting:
        yield prepared
        return
    from servelab.host.procs import JANITOR
    from servelab.prepare.user_app import app_database, preflight

    timeout_s = prepared.user.startup_timeout_s
    with JANITOR.running():
        database = prepared.database or prepared.experiment.database
        if database is None and prepared.uses_django:
            database = DatabaseSpec(kind="sqlite")
        if database is None:
            preflight(prepared.experiment, timeout_s=timeout_s)
            yield prepared
            return
        with app_database(
            prepared.experiment, database, say,
            cpus=prepared.cpu_plan.driver,  # the stack's CPUs stay the stack's
        ) as (with_db, described):
            preflight(with_db, timeout_s=timeout_s)
            yield replace(
                prepared, experiment=with_db, database=database,
                setup={**prepared.setup, "database": described},
            )


def in_turns_because(
    experiment: Experiment, options: RunOptions, cpu_plan: CpuPlan | None = None
) -> str | None:
    """Why ``experiment``, side by side, is measured in turns on this machine
    (``cpu_plan``, default: as ``options`` ask): its stacks cannot get CPUs of their own,
    and sharing them adds a cost to every request that shrinks the differences of cheap
    requests (``measuring.fits_side_by_side``). None where it may be measured as it says
    (or ``--side-by-side``/``--in-turns`` decided)."""
    if options.side_by_side is not None or not experiment.side_by_side:
        return None
    return sharing_note(experiment.stacks, cpu_plan or cpu_plan_of(options))


def sharing_note(stacks: Sequence[StackSpec], plan: CpuPlan) -> str | None:
    """Why ``stacks``, which would go side by side, are measured in turns on ``plan``'s
    CPUs (``in_turns_because``); None where each gets CPUs of its own."""
    from servelab.measuring import fits_side_by_side

    if fits_side_by_side(stacks, plan):
        return None
    return (
        f"measuring in turns: the stack CPUs ({plan.stack or 'all'}) cannot give each of "
        f"the {len(stacks)} stacks CPUs of its own, and sharing them side by "
        "side would understate the differences of cheap requests (--side-by-side to share "
        "them anyway)"
    )


def build_study(
    study: Study,
    study_options: StudyOptions,
    options: RunOptions,
    cpu_plan: CpuPlan | None = None,
) -> tuple[Experiment, RunOptions]:
    """``study``'s experiment for this machine, built once: side by side only where each
    of its stacks gets CPUs of its own (``in_turns_because``, asked by the study of its
    stacks before it builds: ``StudyOptions.fits_side_by_side``), else in turns; the
    options then carry a note saying why, for the session to print."""
    if options.side_by_side is not None:
        return study.build(replace(study_options, side_by_side=options.side_by_side)), options
    plan = cpu_plan or cpu_plan_of(options)
    notes: list[str] = []

    def fits(stacks: Sequence[StackSpec]) -> bool:
        note = sharing_note(stacks, plan)
        notes.extend([note] if note else [])
        return note is None

    experiment = study.build(replace(study_options, fits_side_by_side=fits))
    return experiment, replace(options, notes=(*options.notes, *notes)) if notes else options


def run(
    experiment: Experiment,
    options: RunOptions = RunOptions(),  # noqa: B008 (frozen: one shared default is safe)
    user_app: UserApp = UserApp(),  # noqa: B008
    *,
    console: Console | None = None,
    out: Console | None = None,
    measure: Measure | None = None,
) -> ResultStore:
    """Measure ``experiment`` as ``options`` say, with ``user_app`` (the user's app,
    request or database) fitted in, writing results after every run; prepared and checked
    once before anything starts (``prepare``). Returns the stored result.
    ``measure`` replaces the measuring step (``run_experiment``'s signature): ``servelab
    tune`` races the variants with it."""
    console = console or Console(stderr=True, soft_wrap=True)
    # Checked against its plug-ins before anything starts, however it was built (a file,
    # a study, or a caller's own Experiment).
    ready = prepare(experiment, options, user_app, say=saying(console))
    return run_prepared(ready, console=console, out=out, measure=measure)


def saying(console: Console, *, once: bool = False) -> Callable[[str], None]:
    """The notes of preparing and starting, as servelab's lines on ``console``; ``once``:
    a note already said is not said again (bisect prepares the same check every step)."""
    said: set[str] = set()

    def say(note: str) -> None:
        if once:
            if note in said:
                return
            said.add(note)
        console.print(f"servelab: {note}", highlight=False)

    return say


def run_prepared(
    ready: Prepared,
    *,
    console: Console | None = None,
    out: Console | None = None,
    measure: Measure | None = None,
) -> ResultStore:
    """Measure what ``prepare`` made ready (``run`` after its preparation): what lives
    as long as the session started (``started``), then the session."""
    from servelab.session import ExperimentSession

    console = console or Console(stderr=True, soft_wrap=True)
    out = out or Console()
    options = ready.options
    with started(ready, saying(console)) as running:
        return ExperimentSession(
            running.experiment, running.cpu_plan, options.results_dir, console=console,
            out=out, resume=options.resume, extend_id=options.extend_id,
            force=options.allow_other_machine,
            result_files=dict(options.result_files), listen_host=options.listen,
            detail=options.detail, notes=options.notes, profile=options.profile,
            setup=running.setup,
            **({"measure": measure} if measure is not None else {}),
        ).run()


def measure(
    experiment: Experiment,
    options: RunOptions = RunOptions(),  # noqa: B008 (frozen: one shared default is safe)
    user_app: UserApp = UserApp(),  # noqa: B008
    *,
    console: Console | None = None,
) -> ReportInput:
    """Measure ``experiment`` and return the stored result, analysed: the experiment,
    its environment, every run (frozen records) and each variant's comparisons with the
    baseline (``.analysis.variants[i].comparisons``). Progress goes to ``console``
    (default: stderr); nothing is printed to stdout.

        import servelab
        result = servelab.measure(servelab.load_experiment("exp.toml"))
        for variant in result.analysis.variants:
            print(variant.variant, variant.comparisons["rps"].verdict)
    """
    store = run(experiment, options, user_app, console=console, out=Console(file=io.StringIO()))
    return ReportInput.from_store(store)


def capacity(
    experiment: Experiment,
    plan: CapacityPlan,
    options: RunOptions = RunOptions(),  # noqa: B008 (frozen: one shared default is safe)
    user_app: UserApp = UserApp(),  # noqa: B008
    *,
    console: Console | None = None,
    out: Console | None = None,
    **measuring: Any,
) -> list[VariantCapacity]:
    """Each of ``experiment``'s stacks searched for the largest arrival rate that keeps
    ``plan.slo``, with an interval (servelab.capacity); the first workload's request is
    sent. Trials are written as they end, the answers after each variant, in a new
    directory under ``options.results_dir``. Returns one VariantCapacity per stack."""
    from servelab.capacity.run import capacity_driver, measure_capacities

    console = console or Console(stderr=True, soft_wrap=True)
    out = out or Console()
    plan.check()  # before anything starts
    ready = prepare(experiment, options, user_app, say=saying(console))
    capacity_driver(ready.experiment)  # one that can send the trials, or one line
    with started(ready, saying(console)) as running:
        return measure_capacities(
            running.experiment, running.cpu_plan, options, plan, console=console, out=out,
            setup=running.setup, **measuring,
        )
