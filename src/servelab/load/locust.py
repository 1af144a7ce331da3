"""Locust: the user's own scenario (a locustfile), or servelab's built-in ones, as load.

Locust is an optional dependency (``pip install 'servelab[locust]'``); the driver runs
the ``locust`` program installed beside servelab's Python.

What servelab runs, for one run against ``http://HOST:PORT``::

    locust -f SCENARIO,servelab_hooks.py --headless --host http://HOST:PORT
           -u USERS -r SPAWN_RATE --json --only-summary --exit-code-on-error 0
           --servelab-run-time SECONDS --servelab-report [USER CLASSES]
           [--processes N --master-bind-host 127.0.0.1 --master-bind-port P --master-port P]
           [--master --expect-workers N --expect-workers-max-wait S --master-bind-host ADDR]

- SCENARIO: the user's ``--locustfile``, unchanged (servelab only passes ``--host``),
  or a built-in one (``locustfiles/``): ``servelab_request.py`` sends the workload's
  request (the seed app's endpoints, ``--app`` with ``--path``, a weighted mix such as
  the Django app's pages), ``servelab_django.py`` (``--locustfile django``) browses the
  Django reference app. Built-ins use ``FastHttpUser`` (``FastRequestUser``) unless
  ``--locust-user RequestUser`` (``HttpUser``). Which User classes ran, and their HTTP
  client, is recorded with every run (``driver_details``).
- ``servelab_hooks.py`` (see there) stops the run after a duration that may be a
  fraction of a second, paces the users for the open model, and prints one line after
  Locust's own ``--json`` statistics: failures by request and message, the User
  classes, the workers, Locust's CPU warnings.
- closed model: ``-u concurrency`` users, each sending its next request as soon as the
  previous one is answered (``wait_time`` 0 in the built-ins; the user's own otherwise),
  all spawned within 0.1 s. Open model, built-in request scenario: each of the users
  sends on a schedule of its own, one request every ``users / rate`` seconds, and
  keeps to it when late; latency is counted from each request's intended send time
  (as oha does; ``--servelab-schedule-rate``), and the hooks report what each machine
  sent and at what rate (``send_rate``, ``delivered``: what ``servelab capacity``
  checks). A locustfile's users (and the Django scenario's) are paced with Locust's
  ``constant_throughput(rate / users)`` instead: each starts a task run every ``users
  / rate`` seconds and *waits for the answer first* when it is late, so a slow stack
  gets fewer requests than asked (not a true open model: latency is measured from the
  actual send, as Locust does). Either way, give enough users that each has slack.
- runs are bounded by a duration only (Locust has no request count); whole runs and
  slices alike. A replayed log: the built-in scenario's ``ReplayUser`` for the schedule's
  length, its requests dealt to the worker processes (``locustfiles/replay_user.py``).
- ``--locust-processes N``: Locust's ``--processes N`` (a master and N worker
  processes on this machine, the master's port on loopback). ``--expect-workers N``:
  a master that waits up to ``--expect-workers-timeout`` for N workers started on
  other machines, bound to the ``--listen`` address. Every run is a master of its own
  that quits its workers at its end: ``servelab locust-worker``
  (``servelab.load.locust_worker``) starts them again for the next run (a plain
  ``locust --worker --master-host ADDR -f THE_SAME_FILE`` serves one run). Each run
  records its workers by machine; workers lost during a run make it an error, not a
  short run (``check_workers_stayed``); a master that waits in vain names the machines
  missing since the last run (``workers_missing``).

Its settings (``LocustOptions``) and built-in scenarios: ``locust_options.py``; reading
Locust's output: ``locust_output.py``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from servelab.config.base import Model
from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import LoadDriverError, MissingToolError, SpecError
from servelab.host.doctor import Check
from servelab.host.procs import free_port
from servelab.load.locust_options import (
    DEFAULT_SCENARIO,
    DEFAULT_USERS,
    SCENARIOS,
    LocustOptions,
    replay_arguments,
    request_json,
    scenario_path,
)
from servelab.load.locust_output import (
    ERROR_KINDS,
    HOOKS,
    check_scenario_ran,
    cpu_bound_machines,
    expand,
    failure_key,
    import_error,
    marked_machines,
    merged_histogram,
    named_rows,
    run_window,
    split_output,
    waiting_machines,
    workers_text,
)
from servelab.load.replay_figures import (
    LATENCIES_FILE,
    replay_latencies_ms,
    replay_measurements,
)
from servelab.plugins.driver import LoadDriver, program_output
from servelab.results.records import (
    CPU_BOUND_MACHINES_DETAIL,
    PER_RUN_DETAIL,
    LoadMachine,
    LoadMeasurement,
    percentile,
)

PROGRAM = "locust"
INSTALL_FIX = "pip install 'servelab[locust]' into servelab's environment (needed only for " \
    "--driver locust)"
STARTED_MARKER = '{"servelab_started"'
CPU_WARNING = "CPU usage above"
GAVE_UP = "Gave up waiting for workers"
SPAWN_S = 0.1  # every user is started within this long


class LocustDriver(LoadDriver):
    name = "locust"
    capabilities = frozenset({"open_model", "request_mix", "latencies", "replay"})
    options_model: ClassVar[type[Model]] = LocustOptions

    def __init__(
        self, program: str | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        self._program = program
        # Worker machine -> processes, as the last run that had workers on other machines
        # saw them (to name the machines missing when a later run waits in vain).
        self.machines_seen: dict[str, int] = {}
        try:
            self.options = LocustOptions.model_validate(dict(options or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SpecError(
                f"invalid Locust option {where}: {first['msg']}",
                "see `servelab study --help` (--locustfile, --locust-processes, "
                "--expect-workers)",
            ) from None

    @classmethod
    def with_options(cls, options: Mapping[str, Any]) -> LocustDriver:
        return cls(options=options)

    # -- the program ------------------------------------------------------------------
    def executable(self) -> str:
        if self._program is not None:
            return self._program
        beside = Path(sys.executable).parent / PROGRAM
        if beside.is_file():
            return str(beside)
        found = shutil.which(PROGRAM)
        if found is None:
            raise MissingToolError(
                f"{PROGRAM} is not installed (no {beside}, none on PATH)", INSTALL_FIX
            )
        return found

    def doctor_checks(self) -> list[Check]:
        try:
            return [Check(PROGRAM, "ok", self.version())]
        except (MissingToolError, LoadDriverError):
            return [Check(PROGRAM, "warn", "not found", INSTALL_FIX)]

    def version(self) -> str:
        text = program_output([self.executable(), "--version"], "locust --version", PROGRAM)
        match = re.search(r"locust (\S+)", text)
        return match.group(1) if match else "unknown"

    # -- what it can do -----------------------------------------------------------------
    def unsupported(self, request: RequestSpec, load: LoadSpec) -> str | None:
        if load.model == "replay":
            return None if self.scheduled else "a replay is sent by the built-in scenario " \
                "(its ReplayUser), not a locustfile's own"
        if load.duration_s is None:
            return "Locust runs for a duration and cannot stop after a request count; set " \
                "duration_s (-d)"
        if load.model == "bursts":
            return "Locust has no bursts model"
        if load.slow_ms is not None:
            return "Locust keeps no per-request latencies to count slow requests"
        own_file = not self.options.scenario
        if own_file and not load.keepalive:
            return "a locustfile's users manage their own connections; keepalive off " \
                "applies to the built-in scenarios only"
        return None

    def startup_allowance_s(self) -> float:
        """Seconds beyond the load's duration a run may take: start-up, and the wait for
        workers on other machines."""
        extra = self.options.workers_timeout_s if self.options.expect_workers else 0.0
        return 30.0 + extra

    def prepare(self, side_by_side: bool = False) -> None:
        """Before anything starts: the locustfile imports and has the User classes asked
        for (SpecError with its own message otherwise); remote workers serve one master at
        a time, so they cannot drive stacks side by side."""
        if self.options.expect_workers and side_by_side:
            raise SpecError(
                "workers on other machines serve one Locust master at a time; side-by-side "
                "measuring runs one master per stack at once",
                "measure in turns (--in-turns), or use --locust-processes on this machine",
            )
        found = self.user_classes()
        wanted = self.options.users or DEFAULT_USERS.get(self.options.scenario, ())
        missing = [u for u in wanted if u not in found]
        if missing:
            raise SpecError(
                f"{self.locustfile_label()} has no User class {missing[0]!r} "
                f"(it has: {', '.join(found)})",
                "pass --locust-user with one of those names",
            )

    @property
    def scheduled(self) -> bool:
        """Whether the open model sends on a schedule, each request's latency counted from
        its intended send time: the built-in request scenario's Users do (not a
        locustfile's own, nor the Django scenario's)."""
        return self.options.scenario == DEFAULT_SCENARIO

    def send_rate(self, workdir: Path) -> float:
        """The rate the last run's scheduled requests went out at (its processes' rates
        added up); 0 when it sent on no schedule. What ``servelab capacity`` checks the
        target rate against, as with oha's per-request send times."""
        sent = self._report(workdir).get("sent") or {}
        return float(sent.get("rate", 0.0))

    def sent(self, workdir: Path) -> int | None:
        """Requests the last run sent on its schedule (None: no schedule)."""
        sent = self._report(workdir).get("sent")
        return int(sent["requests"]) if sent else None

    def delivered(self, workdir: Path) -> dict[str, float]:
        """Machine -> the rate its workers sent at, in the last run (workers on other
        machines, or --locust-processes: this machine's name); empty without workers."""
        return {
            str(m["machine"]): float(m["send_rate"])
            for m in self._report(workdir).get("worker_machines") or []
            if "send_rate" in m
        }

    def _report(self, workdir: Path) -> dict[str, Any]:
        """The hooks' line of the last run's output, as ``run_load`` saved it."""
        with contextlib.suppress(OSError, ValueError, KeyError):
            return split_output((workdir / f"{self.name}.out").read_text())[1]
        return {}

    def locustfile_label(self) -> str:
        scenario = self.options.scenario
        return f"built-in scenario {scenario!r}" if scenario else f"locustfile {self._file()}"

    def _file(self) -> str:
        scenario = self.options.scenario
        if scenario:
            return str(scenario_path(SCENARIOS[scenario]))
        assert self.options.locustfile is not None
        return self.options.locustfile

    def user_classes(self) -> list[str]:
        """The User classes Locust finds in the scenario (``locust -f FILE --list``)."""
        path = self._file()
        if not self.options.scenario and not Path(path).is_file():
            raise SpecError(f"locustfile {path} does not exist", "pass --locustfile FILE")
        text = program_output([self.executable(), "-f", path, "--list"], "locust --list", PROGRAM)
        if "Traceback" in text:
            raise SpecError(
                f"cannot use locustfile {path}: {import_error(text, path)}",
                "fix the locustfile (run `locust -f FILE --list` to see the whole traceback)",
            )
        _, _, listed = text.partition("Available Users:")
        # Each class on its own indented line; Locust's log lines (stderr) are not.
        names = [line.strip() for line in listed.splitlines() if line.startswith("    ")]
        if not names:
            raise SpecError(
                f"locustfile {path} defines no User class",
                "define a subclass of locust's HttpUser or FastHttpUser with @task methods",
            )
        return names

    # -- the command line ---------------------------------------------------------------
    def command(
        self, url: str, request: RequestSpec, load: LoadSpec, body_path: Path | None, workdir: Path
    ) -> list[str]:
        replay = load.model == "replay"
        if load.duration_s is None and not replay:
            raise LoadDriverError("Locust needs a duration", "set duration_s in the load (-d)")
        opts = self.options
        host = url.removesuffix(request.path) if request.path != "/" else url.rstrip("/")
        # A replay's share goes to every worker process: each needs a User at least.
        users = max(load.concurrency, opts.expect_workers, opts.processes) if replay \
            else load.concurrency
        argv = [
            self.executable(),
            "-f", f"{self._file()},{scenario_path(HOOKS)}",
            "--headless",
            "--host", host,
            "-u", str(users),
            "-r", f"{users / SPAWN_S:g}",
            "--json",
            "--only-summary",
            "--exit-code-on-error", "0",
            "--loglevel", "WARNING",
            "--stop-timeout", f"{min(load.timeout_s, 10.0):g}",
            # A replay: its run time, its schedule (ReplayUser instead of the scenario's).
            *(replay_arguments(load, workdir) if replay
              else ["--servelab-run-time", f"{load.duration_s:g}"]),
            "--servelab-report",
        ]  # fmt: skip
        if load.model == "open":  # the built-in scenario keeps a schedule (see above)
            pacing = "--servelab-schedule-rate" if self.scheduled else "--servelab-user-rate"
            argv += [pacing, f"{float(load.rate or 0) / users:g}"]
        if opts.scenario == DEFAULT_SCENARIO:
            argv += ["--servelab-request", request_json(request, load)]
        if opts.expect_workers:
            argv += [
                "--master", "--expect-workers", str(opts.expect_workers),
                "--expect-workers-max-wait", f"{opts.workers_timeout_s:g}",
                "--master-bind-host", opts.master_bind,
                "--master-bind-port", str(opts.master_port),
            ]  # fmt: skip
        elif opts.processes > 1:
            port = str(free_port())  # several masters (side by side) must not share one
            argv += [
                "--processes", str(opts.processes),
                "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
                "--master-port", port,
            ]  # fmt: skip
        users_run = opts.users or DEFAULT_USERS.get(opts.scenario, ())
        argv += ["ReplayUser"] if replay else list(users_run)
        return argv

    # -- reading its output ---------------------------------------------------------------
    def parse(self, stdout: str, stderr: str, load: LoadSpec) -> LoadMeasurement:
        entries, report = split_output(stdout)
        if self.options.expect_workers:
            self.check_workers_stayed(report)
        total = report["total"]
        failures = report["errors"]
        check_scenario_ran(report, entries, self.locustfile_label())
        requests = sum(int(e["num_requests"]) for e in entries)
        failed = sum(int(e["num_failures"]) for e in entries)
        status_counts: dict[str, int] = {"2xx/3xx": requests - failed} if requests > failed else {}
        errors: dict[str, int] = {}
        for failure in failures:
            where, key = failure_key(str(failure["error"]))
            counts = status_counts if where == "status" else errors
            counts[key] = counts.get(key, 0) + int(failure["occurrences"])
        duration = run_window(total, entries)
        times = merged_histogram(entries)
        ordered = expand(times)
        return LoadMeasurement(
            driver=self.name,
            requests_total=requests,
            duration_s=duration,
            rps=requests / duration if duration > 0 else 0.0,
            latency_mean_ms=sum(float(e["total_response_time"]) for e in entries) / requests
            if requests else 0.0,
            latency_p50_ms=percentile(ordered, 50),
            latency_p90_ms=percentile(ordered, 90),
            latency_p99_ms=percentile(ordered, 99),
            latency_max_ms=max((float(e["max_response_time"]) for e in entries), default=0.0),
            status_counts=status_counts,
            connection_errors=errors,
            bytes_received=sum(int(e["total_content_length"]) for e in entries),
            driver_processes=self.options.processes + 1 if self.options.processes > 1 else 1,
            driver_overloaded=bool(
                report["cpu_warning"] or report["worker_cpu_warning"] or CPU_WARNING in stderr
                or cpu_bound_machines(report)
            ),
            driver_details=self.details(report),
            by_name=named_rows(entries, failures, duration),
            machines=tuple(
                LoadMachine(
                    machine=str(m["machine"]), processes=int(m["processes"]),
                    requests=int(m["requests"]), cpu_max_pct=float(m["cpu_max"]),
                    cpu_warning=bool(m.get("cpu_warning")), send_rate=m.get("send_rate"),
                )
                for m in report.get("worker_machines") or []
            ) if self.options.expect_workers else (),
        )

    def details(self, report: Mapping[str, Any]) -> dict[str, str]:
        """What the run was, in words: scenario, User classes and their client, workers."""
        classes = ", ".join(f"{name} ({client})" for name, client in report["user_classes"].items())
        details = {
            "scenario": self.locustfile_label(),
            "user classes": classes,
            "scale with": "--locust-processes N, or workers on more machines",
        }
        if self.options.processes > 1:
            details["processes"] = f"{self.options.processes} workers + master"
        if self.options.expect_workers:
            machines = report.get("worker_machines") or []
            details["workers"] = workers_text(
                report["workers"], {m["machine"]: int(m["processes"]) for m in machines}
            )
            if machines:
                self.machines_seen = {m["machine"]: int(m["processes"]) for m in machines}
            if report.get("waited_s") is not None:
                details[f"{PER_RUN_DETAIL}waited for the workers"] = f"{report['waited_s']:.2f} s"
            if report.get("workers_ready_s") is not None:
                details[f"{PER_RUN_DETAIL}workers ready after"] = (
                    f"{report['workers_ready_s']:.2f} s"
                )
            busy = cpu_bound_machines(report)
            if busy:
                details[CPU_BOUND_MACHINES_DETAIL] = ", ".join(
                    f"{m['machine']} ({m['cpu_max']:.0f} % of a core)" for m in busy
                )
        return details

    @property
    def watches(self) -> bool:
        return bool(self.options.expect_workers)

    def watch(self, stderr: str) -> str | None:
        """The workers on other machines a run's load starts with, as its master said
        (``servelab_started``): "2 on other machines (load-b: 2 processes)"."""
        machines = marked_machines(stderr, STARTED_MARKER)
        if machines is None:
            return None
        return workers_text(sum(machines.values()), machines)

    def check_workers_stayed(self, report: Mapping[str, Any]) -> None:
        """LoadDriverError when workers on other machines quit or went missing before the
        run's end (its figures would count a part of the run only)."""
        lost = report.get("workers_lost") or []
        if not lost and report.get("finished", True):
            return
        where = ", ".join(sorted(set(lost))) or "every machine"
        raise LoadDriverError(
            f"Locust workers left during the run ({len(lost) or 'all'} of "
            f"{report.get('workers', '?')} worker processes; {where}): the run is not kept",
            "restart `servelab locust-worker` there, then rerun with --resume (the runs "
            "measured so far are kept)",
        )

    def explain_failure(self, status: int, stdout: str, stderr: str) -> Exception | None:
        """A clear error for the ways a Locust run fails on bad input."""
        if GAVE_UP in stderr:
            return self.workers_missing(stderr)
        if "Traceback" in stderr and "load_locustfile" in stderr:
            return SpecError(
                f"cannot use {self.locustfile_label()}: {import_error(stderr, self._file())}",
                "fix the locustfile",
            )
        return None

    def workers_missing(self, stderr: str) -> SpecError:
        """The master gave up waiting: how many connected, from which machines, and
        which machines of the last run are missing."""
        opts = self.options
        connected = waiting_machines(stderr)
        if connected:
            listed = ", ".join(f"{m}: {n}" for m, n in connected.items())
            seen = f"; {sum(connected.values())} connected ({listed})"
        elif connected is not None:
            seen = "; none connected"
        else:
            counts = re.findall(r"(\d+) of (\d+) connected", stderr)
            seen = f"; {counts[-1][0]} of {counts[-1][1]} connected" if counts else ""
        connected = connected or {}
        missing = {
            m: n - connected.get(m, 0)
            for m, n in self.machines_seen.items()
            if n > connected.get(m, 0)
        }
        if missing:
            seen += "; missing since the last run: " + ", ".join(
                f"{m} ({n} process{'es' if n > 1 else ''})" for m, n in missing.items()
            )
        return SpecError(
            f"Locust's master waited {opts.workers_timeout_s:g} s for {opts.expect_workers} "
            f"worker(s){seen}",
            f"start them on the other machines: servelab locust-worker --master-host "
            f"{opts.master_bind} --master-port {opts.master_port} --locustfile "
            "THE_SAME_LOCUSTFILE (or locust --worker ... -f THE_SAME_LOCUSTFILE), then rerun "
            "with --resume to keep the runs measured; or raise --expect-workers-timeout",
        )

    def extra_measurements(self, workdir: Path, load: LoadSpec) -> dict[str, Any]:
        """A replay's figures come from its requests, as the master wrote them down."""
        return replay_measurements(workdir, load, ERROR_KINDS) if load.model == "replay" else {}

    def latencies_ms(self, workdir: Path) -> list[float]:
        """Every request's response time of the last run, at the resolution Locust keeps
        (its histograms), from the output ``run_load`` saved in ``workdir``; a replay's,
        each from its intended time, as measured."""
        if (workdir / LATENCIES_FILE).is_file():
            return replay_latencies_ms(workdir)
        with contextlib.suppress(OSError, ValueError, KeyError):
            entries, _ = split_output((workdir / f"{self.name}.out").read_text())
            return expand(merged_histogram(entries))
        return []
