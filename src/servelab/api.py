"""The library's front door: run an experiment with ``RunOptions`` (what the CLI calls).

    from servelab.api import run
    from servelab.config.run import RunOptions
    from servelab.prepare.building import load_experiment_file

    run(load_experiment_file(Path("exp.toml")), RunOptions(results_dir=Path("out")))
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rich.console import Console

from servelab.apps.interpreter import app_pythons, with_app_pythons
from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions
from servelab.errors import SpecError
from servelab.host.cpus import CpuPlan, make_cpu_plan
from servelab.host.environment import recorded
from servelab.host.extras import require_extra
from servelab.measuring.limits import check_fits_machine
from servelab.prepare.checks import checked
from servelab.prepare.run import apply_run_options
from servelab.report.base import ReportInput
from servelab.report.exports import check_writable
from servelab.results.store import ResultStore
from servelab.studies import Study, StudyOptions


def cpu_plan_of(options: RunOptions) -> CpuPlan:
    """Where the stack and the load driver run, as ``options`` ask (checked)."""
    return make_cpu_plan(
        options.stack_cpus, options.driver_cpus, pin=options.pin, quota=options.stack_cpu_quota,
        priority=options.cpu_priority,
    )


def in_turns_because(
    experiment: Experiment, options: RunOptions, cpu_plan: CpuPlan | None = None
) -> str | None:
    """Why ``experiment``, side by side, is measured in turns on this machine
    (``cpu_plan``, default: as ``options`` ask): its stacks cannot get CPUs of their own,
    and sharing them adds a cost to every request that shrinks the differences of cheap
    requests (``measuring.fits_side_by_side``). None where it may be measured as it says
    (or ``--side-by-side``/``--in-turns`` decided)."""
    from servelab.measuring import fits_side_by_side

    if options.side_by_side is not None or not experiment.side_by_side:
        return None
    plan = cpu_plan or cpu_plan_of(options)
    if fits_side_by_side(experiment, plan):
        return None
    return (
        f"measuring in turns: the stack CPUs ({plan.stack or 'all'}) cannot give each of "
        f"the {len(experiment.stacks)} stacks CPUs of its own, and sharing them side by "
        "side would understate the differences of cheap requests (--side-by-side to share "
        "them anyway)"
    )


def build_study(
    study: Study,
    study_options: StudyOptions,
    options: RunOptions,
    cpu_plan: CpuPlan | None = None,
) -> tuple[Experiment, RunOptions]:
    """``study``'s experiment for this machine: side by side only where each of its
    stacks gets CPUs of its own (``in_turns_because``), else in turns; the options then
    carry a note saying why, for the session to print."""
    if options.side_by_side is not None:
        return study.build(replace(study_options, side_by_side=options.side_by_side)), options
    experiment = study.build(study_options)
    note = in_turns_because(experiment, options, cpu_plan)
    if note is None:
        return experiment, options
    in_turns = study.build(replace(study_options, side_by_side=False))
    return in_turns, replace(options, notes=(*options.notes, note))


def run(
    experiment: Experiment,
    options: RunOptions = RunOptions(),  # noqa: B008 (frozen: one shared default is safe)
    *,
    console: Console | None = None,
    out: Console | None = None,
    measure: Callable[..., Any] | None = None,
) -> ResultStore:
    """Measure ``experiment`` as ``options`` say, writing results after every run; with
    the user's app, request or a database, prepared (and checked) first. Returns the
    stored result. ``measure`` replaces the measuring step (``run_experiment``'s
    signature): ``servelab tune`` races the variants with it."""
    from servelab.apps.user import DJANGO_REFS, database_spec, prepared
    from servelab.session import ExperimentSession

    console = console or Console(stderr=True, soft_wrap=True)
    out = out or Console()

    def say(note: str) -> None:
        console.print(f"servelab: {note}", highlight=False)

    # Checked against its plug-ins before anything starts, however it was built (a file,
    # a study, or a caller's own Experiment).
    experiment = apply_run_options(checked(experiment, f"experiment {experiment.name}"), options)
    check_writable(dict(options.result_files))  # before anything is measured
    # Each app's interpreter settled (the app's own venv, or servelab's) before its import.
    experiment, app, notes = with_app_pythons(experiment, options.app)
    for note in notes:
        say(note)
    if not options.allow_beyond_machine:  # refused before anything starts or is stored
        check_fits_machine(experiment)
    db = database_spec(
        experiment.database, options.database, options.db_latency_ms, options.db_jitter_ms
    )
    cpu_plan = cpu_plan_of(options)
    request = options.request
    uses_django = (app is not None and app.ref in DJANGO_REFS) or any(
        s.app.ref in DJANGO_REFS for s in experiment.stacks
    )
    needs_preparing = (
        app is not None or db is not None or (request is not None and request.given)
        or uses_django
    )
    if uses_django:
        require_extra("django", "the Django reference app")
    if options.resume and uses_django:
        raise SpecError(
            "--resume cannot continue an experiment on the Django app: its database is "
            "made anew, on a new port, for every servelab run",
            "run it again without --resume",
        )

    def run_session(ready: Experiment) -> ResultStore:
        # The experiment as it will be measured (the user's app fitted in), checked
        # against its plug-ins once more: no path reaches the session unchecked.
        ready = checked(ready, f"experiment {ready.name}")
        with recorded("app_python", app_pythons(ready)):  # checked: servers installed there
            return ExperimentSession(
                ready, cpu_plan, options.results_dir, console=console, out=out,
                resume=options.resume, force=options.allow_other_machine,
                result_files=dict(options.result_files), listen_host=options.listen,
                detail=options.detail, notes=options.notes, profile=options.profile,
                **({"measure": measure} if measure is not None else {}),
            ).run()

    if not needs_preparing:
        return run_session(experiment)
    with prepared(
        experiment,
        app,
        request,
        replace_workloads=options.replace_workloads,
        database=db,
        startup_timeout_s=options.startup_timeout_s,
        say=say,
        database_cpus=cpu_plan.driver,  # the stack's CPUs stay the stack's
    ) as ready:
        return run_session(ready)


def measure(
    experiment: Experiment,
    options: RunOptions = RunOptions(),  # noqa: B008 (frozen: one shared default is safe)
    *,
    console: Console | None = None,
) -> ReportInput:
    """Measure ``experiment`` and return the stored result, analysed: the experiment,
    its environment, every run (frozen records) and each variant's comparisons with the
    baseline (``.analysis.variants[i].comparisons``). Progress goes to ``console``
    (default: stderr); nothing is printed to stdout.

        import servelab
        result = servelab.measure(servelab.Experiment.from_toml("exp.toml"))
        for variant in result.analysis.variants:
            print(variant.variant, variant.comparisons["rps"].verdict)
    """
    store = run(experiment, options, console=console, out=Console(file=io.StringIO()))
    return ReportInput.from_store(store)
