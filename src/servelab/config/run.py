"""How to run an experiment (``RunOptions``) and the user's own app, request and database
(``UserApp``, its request options ``UserRequest``): two values, built once (by the command
line or a Python caller) and handed to ``servelab.api.run``, which applies both to the
experiment in one step (``servelab.api.prepare``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.config.database import Database
from servelab.config.load import ReplaySpec, header_problem, path_problem
from servelab.config.stack import AppSpec
from servelab.errors import SpecError

DEFAULT_RESULTS_DIR = Path("servelab-results")
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class RunOptions:
    """How to run an experiment (cf. uvicorn's Config): where results go, CPUs, order and
    stopping overrides, the terminal. What is measured (the user's app, request and
    database) is ``UserApp``."""

    results_dir: Path = DEFAULT_RESULTS_DIR  # servelab.db and one directory per experiment
    # CPUs: taskset lists for the stack and the driver, pinning, a quota, cgroup priority.
    stack_cpus: str | None = None
    driver_cpus: str | None = None
    pin: bool = True
    stack_cpu_quota: float | None = None
    cpu_priority: bool = True
    # Continue the unfinished experiment of the same name; allow_other_machine: even when
    # it was begun on another machine.
    resume: bool = False
    allow_other_machine: bool = False
    # Measure this experiment (its id in results_dir) further, finished or not, its runs
    # kept: `servelab bisect` measures a step that stayed unknown more this way.
    extend_id: int | None = None
    # Run even what this machine cannot hold (servelab.measuring.limits: memory, open files,
    # threads, workers per CPU).
    allow_beyond_machine: bool = False
    # Overrides of the experiment's own order, slicing and stopping (None: keep its own).
    order: str | None = None
    order_seed: int | None = None
    slices: int | None = None
    side_by_side: bool | None = None
    switching: bool | None = None  # --switch: switched passes in turns (Experiment.switching)
    precision_pct: float | None = None
    budget_s: float | None = None
    min_effect_pct: float | None = None
    # Result files rewritten after every run: format ("json", "markdown", "csv") -> path
    # (servelab.report.exports; --export-json ...).
    result_files: tuple[tuple[str, Path], ...] = ()
    # The load driver's own options (--locustfile...), merged into the experiment's.
    driver_options: dict[str, Any] = field(default_factory=dict)
    # The address the stacks' fronts listen on (remote load workers must reach it).
    listen: str = LOOPBACK
    # The terminal: every run's line and the whole report (-v), or a progress bar, then
    # the compact summary and the answer (report.terminal).
    detail: bool = False
    # Said on the console before measuring (how a study was fitted to this machine).
    notes: tuple[str, ...] = ()
    # Sample the stacks' Python processes with py-spy after every measured window: where the
    # CPU went, per variant (servelab.observe.profile, servelab.analysis.profile).
    profile: bool = False
    # nginx logs every request's client address; each run counts them (--access-log).
    access_log: bool = False


@dataclass(frozen=True)
class UserRequest:
    """The request options given on the command line; None keeps the default."""

    method: str | None = None
    path: str | None = None
    headers: tuple[str, ...] = ()  # "Name: value" as typed
    body_file: Path | None = None
    expect_status: int | None = None

    @property
    def given(self) -> bool:
        return any(
            v not in (None, ())
            for v in (self.method, self.path, self.headers, self.body_file, self.expect_status)
        )

    def overrides(self) -> dict[str, Any]:
        """The RequestSpec fields these options set (validated later by the spec)."""
        fields: dict[str, Any] = {}
        if self.method is not None:
            fields["method"] = self.method.upper()
        if self.path is not None:
            problem = path_problem(self.path)
            if problem:
                raise SpecError(f"invalid --path: {problem}", "e.g. --path '/api/items?page=2'")
            fields["path"] = self.path
            fields["mix"] = ()  # one path given replaces a file's request mix
        if self.expect_status is not None:
            fields["expect_status"] = self.expect_status
        headers: dict[str, str] = {}
        for text in self.headers:
            name, sep, value = text.partition(":")
            if not sep or not name.strip():
                raise SpecError(
                    f"invalid --header {text!r}", "write it as 'Name: value', e.g. 'X-Token: abc'"
                )
            problem = header_problem(name.strip(), value.strip())
            if problem:
                raise SpecError(
                    f"invalid --header {text!r}: {problem}",
                    "give one header per --header, 'Name: value' on one line",
                )
            if name.strip().lower() == "content-type":
                fields["content_type"] = value.strip()
            else:
                headers[name.strip()] = value.strip()
        if headers:
            fields["headers"] = headers
        if self.body_file is not None:
            try:
                fields["body"] = self.body_file.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise SpecError(
                    f"cannot read --body-file {self.body_file}: {why}",
                    "give a readable UTF-8 text file",
                ) from None
        return fields


@dataclass(frozen=True)
class UserApp:
    """The user's own app, request and database (--app, --path..., --database): what is
    measured in place of the experiment's own. The default changes nothing."""

    app: AppSpec | None = None  # None: the experiment's own
    request: UserRequest | None = None  # None: each workload's own
    replace_workloads: bool = False  # a study: the user's request replaces its workloads
    database: Database | None = None  # the Django app's database
    db_latency_ms: float | None = None
    db_jitter_ms: float | None = None
    startup_timeout_s: float = 30.0  # the start-up check's wait for the app's answer
    # An access log replayed in place of the workloads (--replay); None: the workloads.
    replay: ReplaySpec | None = None

    @property
    def database_given(self) -> bool:
        """--database, --db-latency or --db-jitter was given."""
        return any(v is not None for v in (self.database, self.db_latency_ms, self.db_jitter_ms))

    @property
    def request_given(self) -> bool:
        return self.request is not None and self.request.given


def parse_duration(text: str) -> float:
    """'3m' -> 180.0; '90s', '1h', '1m30s' and plain seconds ('200') too."""
    cleaned = text.strip().lower()
    number = r"(\d+(?:\.\d+)?)"
    parts = re.fullmatch(rf"(?:{number}h)?(?:{number}m)?(?:{number}s?)?", cleaned, re.ASCII)
    if not cleaned or parts is None or not any(parts.groups()):
        raise SpecError(
            f"invalid duration {text!r}", "write e.g. '3m', '90s', '1h' or '1m30s'"
        )
    hours, minutes, seconds = (float(x) if x else 0.0 for x in parts.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise SpecError(f"the duration {text!r} is zero", "give a positive time, e.g. '3m'")
    return total
