"""Replay workloads made ready: each log read once, its schedule built and written beside
the results, and the workload's load set to the replay model, sent by the replay driver
(``registry.REPLAY_DRIVER``), or by the experiment's own driver where it can replay
(``--driver locust``: its workers on this machine or on others share the log)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from servelab.config.base import MAX_REQUESTS_PER_RUN, MAX_RUN_S
from servelab.config.experiment import Experiment
from servelab.config.load import LoadSpec, ReplaySpec, RequestSpec, Workload
from servelab.errors import SpecError
from servelab.registry import REPLAY_DRIVER, capabilities
from servelab.traffic.formats import log_format
from servelab.traffic.reading import read_log
from servelab.traffic.schedule import (
    NO_BODY,
    BodyTemplate,
    ReplayFilter,
    Schedule,
    build_schedule,
)

SCHEDULES_DIR = "schedules"
REPLAY_WORKLOAD = "replay"  # the workload --replay puts in place of an experiment's
# Whole replays of each variant where a study would have added rounds until clear (a
# replay is never sliced): as many as `servelab check --replay` runs of each version.
WHOLE_REPLAYS = 3
# Beyond the schedule's own length: the last requests' answers (their timeout) and the
# sender's start.
END_MARGIN_S = 30.0
# Beyond any sender's reach: a speed asking a mean rate above this per CPU of the machine
# is refused before anything starts (a typo, 1e12 for 1.2). Several times what one CPU
# sends (docs/validation/replay.md), so that no replay the sender could attempt is refused.
SENDER_RATE_PER_CPU = 100_000


def has_replay(experiment: Experiment) -> bool:
    return any(w.replay is not None for w in experiment.workloads)


def with_replay_schedules(
    experiment: Experiment, results_dir: Path, say: Callable[[str], None] = lambda _: None
) -> Experiment:
    """``experiment`` with every replay workload's schedule built and its load set; the
    experiment unchanged when it replays nothing. SpecError for a log that cannot be read
    or replayed, and for an experiment that mixes replays with other workloads (one driver
    sends an experiment's load)."""
    if not has_replay(experiment):
        return experiment
    others = [w.name for w in experiment.workloads if w.replay is None]
    if others:
        raise SpecError(
            f"experiment {experiment.name} mixes replayed and other workloads "
            f"({', '.join(others)})",
            "put the replay workloads in an experiment of their own",
        )
    directory = results_dir / SCHEDULES_DIR
    workloads = []
    for workload in experiment.workloads:
        assert workload.replay is not None
        schedule, path = schedule_for(
            workload.replay, directory, workload.name, experiment.directory
        )
        say(replay_note(workload.name, workload.replay, schedule))
        workloads.append(replayed(workload, workload.replay, schedule, path))
    update: dict[str, object] = {"workloads": tuple(workloads)}
    if "replay" not in capabilities(experiment.driver):  # Locust can: its workers share it
        update.update(driver=REPLAY_DRIVER, driver_options={})
    if experiment.slices > 1 or experiment.stopping is not None or experiment.side_by_side:
        # A study's design (quick's slices in rotation until clear) does not apply: each
        # run sends the whole log, and the variants take turns.
        update.update(slices=1, stopping=None, side_by_side=False,
                      repetitions=max(experiment.repetitions, WHOLE_REPLAYS))
        say(f"replay: each run sends the whole log, so {experiment.name} measures no slices "
            f"and adds no rounds: {update['repetitions']} whole replays of each variant, "
            "in turns")
    return experiment.model_copy(update=update)


def schedule_for(
    replay: ReplaySpec, directory: Path, name: str, relative_to: Path = Path()
) -> tuple[Schedule, Path]:
    """The schedule of ``replay``'s log (its paths relative to ``relative_to``: the
    experiment file's directory), written under ``directory`` (named after what it was
    built from, so the same log and settings give the same file)."""
    paths = [relative_to / Path(p).expanduser() for p in replay.log]
    for path in paths:
        if path.is_dir():
            raise SpecError(f"the access log {path} is a directory",
                            "name the log file(s) in it (--replay DIR/access.log)")
        if not path.is_file():
            raise SpecError(f"the access log {path} does not exist", "check the path (--replay)")
    window = replay.window
    keep = ReplayFilter(
        start_s=window[0] if window else 0.0, end_s=window[1] if window else None,
        routes=replay.routes, methods=replay.methods, statuses=replay.statuses,
    )
    bodies = {
        pattern: BodyTemplate(spec.body, spec.content_type)
        for pattern, spec in replay.bodies.items()
    }
    reader = read_log(paths, log_format(replay.format, replay.fields or None))
    schedule = build_schedule(
        reader, keep, bodies, anonymise=replay.anonymise, seed=replay.seed,
        max_requests=MAX_REQUESTS_PER_RUN,
    )
    if not schedule.requests:
        left = f"; {sum(schedule.no_body.values()):,} need a body" if schedule.no_body else ""
        raise SpecError(
            f"nothing to replay from {', '.join(map(str, paths))}: {schedule.read:,} "
            f"requests read, {schedule.filtered_out:,} filtered out{left}",
            "widen the window or the filters, or give the routes' bodies",
        )
    mean = schedule.mean_rate(replay.speed)
    ceiling = SENDER_RATE_PER_CPU * (os.cpu_count() or 1)
    if mean > ceiling:
        raise SpecError(
            f"speed {replay.speed:g} asks for a mean of {mean:,.0f} req/s "
            f"({schedule.mean_rate():,.1f} req/s in the log), far more than servelab's "
            f"sender can send from this machine ({ceiling:,} req/s on all its "
            f"{os.cpu_count() or 1} CPUs at the very most)",
            f"give a speed of at most {ceiling / max(schedule.mean_rate(), 1e-9):,.0f} "
            "(--speed), or find the most the stack holds with servelab capacity --replay",
        )
    seconds = schedule.duration_s / replay.speed
    if seconds + replay.timeout_s + END_MARGIN_S > MAX_RUN_S:
        raise SpecError(
            f"the replay lasts {seconds:,.0f} s at speed {replay.speed:g}, more than a run "
            f"may ({MAX_RUN_S - replay.timeout_s - END_MARGIN_S:,.0f} s)",
            "replay a shorter window (window = [START, END] seconds) or a higher speed",
        )
    digest = hashlib.sha256(json.dumps(
        [replay.model_dump(mode="json"),
         [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in paths]],
        sort_keys=True,
    ).encode()).hexdigest()[:12]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{digest}.tsv"
    schedule.write(path)
    return schedule, path


def sample_request(schedule: Schedule) -> RequestSpec:
    """A request of the replay's commonest route, as it was logged: what the preflight
    sends before measuring (the app must answer it with 200)."""
    route = schedule.routes.most_common(1)[0][0]
    first = next(r for r in schedule.requests if r.route == route)
    fields: dict[str, object] = {"method": first.method, "path": first.target}
    if first.body != NO_BODY:
        body = schedule.bodies[first.body]
        fields.update(body=body.body, content_type=body.content_type)
    try:
        return RequestSpec.model_validate(fields)
    except ValidationError as exc:
        raise SpecError(
            f"the log's commonest request {first.method} {first.target} cannot be sent "
            f"({exc.errors()[0]['msg']})",
            "filter it out (--route, --replay-method)",
        ) from None


def replayed(workload: Workload, replay: ReplaySpec, schedule: Schedule, path: Path) -> Workload:
    seconds = schedule.duration_s / replay.speed
    return workload.model_copy(update={"request": sample_request(schedule), "load": LoadSpec(
        model="replay", schedule=str(path), speed=replay.speed,
        requests=len(schedule.requests), concurrency=replay.connections,
        timeout_s=replay.timeout_s, max_time_s=seconds + replay.timeout_s + END_MARGIN_S,
    )})


def replay_note(name: str, replay: ReplaySpec, schedule: Schedule) -> str:
    """What a replay workload will send, and what it leaves out of its log."""
    left = []
    if schedule.filtered_out:
        left.append(f"{schedule.filtered_out:,} filtered out")
    for route, count in sorted(schedule.no_body.items(), key=lambda kv: -kv[1]):
        left.append(f"{count:,} {route} (no body given)")
    spread = "; whole-second times spread within their second" if schedule.whole_seconds else ""
    return (
        f"replay {name}: {len(schedule.requests):,} requests over "
        f"{schedule.duration_s:,.1f} s at speed {replay.speed:g} (mean "
        f"{schedule.mean_rate(replay.speed):,.1f} req/s, peak second "
        f"{schedule.peak_rate(replay.speed):,.0f}){spread}"
        + (f"; left out: {', '.join(left)}" if left else "")
    )
