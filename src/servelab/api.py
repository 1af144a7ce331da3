"""The library's front door: run an experiment with ``RunOptions`` (what the CLI calls).

    from servelab.api import run
    from servelab.config.building import load_experiment_file
    from servelab.config.run import RunOptions

    run(load_experiment_file(Path("exp.toml")), RunOptions(results_dir=Path("out")))
"""

from __future__ import annotations

from rich.console import Console

from servelab.config.experiment import Experiment
from servelab.config.run import RunOptions
from servelab.errors import SpecError
from servelab.host.cpus import make_cpu_plan
from servelab.host.limits import check_fits_machine


def run(
    experiment: Experiment,
    options: RunOptions = RunOptions(),  # noqa: B008 (frozen: one shared default is safe)
    *,
    console: Console | None = None,
    out: Console | None = None,
) -> None:
    """Measure ``experiment`` as ``options`` say, writing results after every run; with
    the user's app, request or a database, prepared (and checked) first."""
    from servelab.apps.user import DJANGO_REFS, database_spec, prepared
    from servelab.session import ExperimentSession

    console = console or Console(stderr=True, soft_wrap=True)
    out = out or Console()
    experiment = options.apply(experiment)
    if not options.allow_beyond_machine:  # refused before anything starts or is stored
        check_fits_machine(experiment)
    db = database_spec(
        experiment.database, options.database, options.db_latency_ms, options.db_jitter_ms
    )
    cpu_plan = make_cpu_plan(
        options.stack_cpus, options.driver_cpus, pin=options.pin, quota=options.stack_cpu_quota,
        priority=options.cpu_priority,
    )
    app, request = options.app, options.request
    uses_django = (app is not None and app.ref in DJANGO_REFS) or any(
        s.app.ref in DJANGO_REFS for s in experiment.stacks
    )
    needs_preparing = (
        app is not None or db is not None or (request is not None and request.given)
        or uses_django
    )
    if options.resume and uses_django:
        raise SpecError(
            "--resume cannot continue an experiment on the Django app: its database is "
            "made anew, on a new port, for every servelab run",
            "run it again without --resume",
        )

    def session(ready: Experiment) -> ExperimentSession:
        return ExperimentSession(
            ready, cpu_plan, options.results_dir, console=console, out=out,
            resume=options.resume, force=options.allow_other_machine,
            listen_host=options.listen,
        )

    if not needs_preparing:
        session(experiment).run()
        return
    with prepared(
        experiment,
        app,
        request,
        replace_workloads=options.replace_workloads,
        database=db,
        startup_timeout_s=options.startup_timeout_s,
        say=lambda note: console.print(f"servelab: {note}", highlight=False),
        database_cpus=cpu_plan.driver,  # the stack's CPUs stay the stack's
    ) as ready:
        session(ready).run()
