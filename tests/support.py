"""Helpers shared by the integration tests (importable as ``support``: tests/ is on
sys.path because tests/conftest.py lives there)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from servelab.launch import launched_by as owned_by  # noqa: F401 (tests import it)


def with_default_sigint() -> None:
    """Popen ``preexec_fn``: the child starts with SIGINT at its default, so Python turns a
    test's Ctrl-C into KeyboardInterrupt even when the test run itself was started with
    SIGINT ignored (a background job of a non-interactive shell, nohup ... &)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ctrl_c(proc: subprocess.Popen, timeout_s: float = 30.0) -> int:
    """Ctrl-C to ``proc``'s process group (as a terminal sends it), then its exit status;
    killed if it hangs, and TimeoutExpired raised (a hang is a finding)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


# -- a fake executor: the runner scheduled without real servers (hyperfine's MockExecutor) --


class FakeDriver:
    """Stands in for a load driver: every load is possible."""

    name = "fake"
    keep_latencies = False
    switchable = False  # a test that switches sets it (and keep_latencies)

    def unsupported(self, request, load):
        return None


class FakeStack:
    def __init__(self, variant: str, start: int) -> None:
        self.variant = variant
        self.start = start  # the n-th stack started by the executor


class FakeExecutor:
    """Launches nothing; every measured window answers ``level(variant, start, tick,
    workload)`` requests/s, where ``start`` numbers the stacks started and ``tick`` counts
    the windows measured so far (the machine's clock).

    Records what the runner asked for, so tests can check the schedule: ``log`` holds
    ("launch", variant), ("stop", variant), ("warm", variant, workload) and
    ("measure", variant, workload) in order.
    """

    def __init__(
        self, level=None, *, seconds_per_window: float = 1.0, clock=None, busy=None
    ) -> None:
        from servelab.host.cpus import CpuPlan

        self.driver = FakeDriver()
        self.cpu_plan = CpuPlan("0", "1")
        self.favoured = False
        self.level = level or (lambda variant, start, tick, workload: 1000.0)
        # Share of its CPU a stack keeps busy (1: CPU-bound; less: it waits on something).
        self.busy = busy or (lambda variant, workload: 1.0)
        self.seconds_per_window = seconds_per_window
        self.clock = clock
        self.log: list[tuple] = []
        self.starts = 0
        self.ticks = 0
        self.stopped_blocks = 0
        self.stretches: list[list[list[int]]] = []  # each measure_switched's turns

    def machine_speed(self):
        return None

    def launch(self, spec, probe):
        import contextlib

        @contextlib.contextmanager
        def running():
            self.starts += 1
            self.log.append(("launch", spec.name))
            try:
                yield FakeStack(spec.name, self.starts)
            finally:
                self.log.append(("stop", spec.name))

        return running()

    def scratch(self):
        import contextlib
        import tempfile

        @contextlib.contextmanager
        def scratch():
            with tempfile.TemporaryDirectory(prefix="servelab-test-") as path:
                yield Path(path)

        return scratch()

    def stopped(self) -> None:
        self.stopped_blocks += 1

    def _load(self, rps: float, duration: float):
        requests = max(1, round(rps * duration))
        return fake_load(
            rps=requests / duration, duration_s=duration, requests=requests, driver="fake",
            mean_ms=1000.0 / rps, p99_ms=2000.0 / rps, latency_p90_ms=1000.0 / rps,
            latency_max_ms=3000.0 / rps, bytes_received=requests * 10,
        )

    def send(self, stack, workload, load, scratch):
        self.log.append(("warm", stack.variant, workload.name))
        return self._load(self.level(stack.variant, stack.start, self.ticks, workload.name), 0.1)

    def measure(self, stack, workload, load, scratch):
        window = self._window(stack, workload, load)
        self._tick()
        return window

    def _tick(self) -> None:
        self.ticks += 1
        if self.clock is not None:
            self.clock.advance(self.seconds_per_window)

    def _window(self, stack, workload, load):
        from servelab.measuring.executor import Window
        from servelab.results.records import ProcessUsage

        self.log.append(("measure", stack.variant, workload.name))
        rps = self.level(stack.variant, stack.start, self.ticks, workload.name)
        duration = load.duration_s or 1.0
        return Window(
            started="2026-11-23T00:00:00+0000",
            load=self._load(rps, duration),
            # A busy stack: requests per CPU second = requests per second.
            usage=(
                ProcessUsage(
                    role="app", pid=stack.start, name="fake",
                    cpu_s=duration * self.busy(stack.variant, workload.name), peak_rss_bytes=1,
                ),
            ),
            observed={
                "log_events": {},
                "log_examples": {},
                "namespace": None,
                "somaxconn": None,
                "listen_backlog": None,
                "listen_queue": None,
                "notes": (),
            },
            neighbour_share=None,
        )


    def measure_together(self, stacks, workload, load, scratch):
        windows = [self._window(stack, workload, load) for stack in stacks]
        self._tick()  # at the same moment: one tick for all
        return windows

    def measure_switched(self, stacks, workload, load, passes, scratch, on_pass=None):
        """Each pass's turns as the runner ordered them; one window per stack per pass
        (its first turn's moment), logged as ("switched", variant, workload)."""
        found = [[] for _ in stacks]
        for pass_index, turns in enumerate(passes):
            if on_pass is not None:
                on_pass(pass_index)
            for index in dict.fromkeys(turns):  # each stack once, in its first turn's order
                window = self._window(stacks[index], workload, load)
                self.log[-1] = ("switched", stacks[index].variant, workload.name)
                found[index].append(window)
                self._tick()
        self.stretches.append([list(turns) for turns in passes])
        return found

    @property
    def turns(self) -> list[list[int]]:
        """The last measure_switched's turns (the passes, after any warm-up stretch)."""
        return self.stretches[-1]


class FakeClock:
    """A clock the fake executor moves: each measured window takes its seconds."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class ListSink:
    """A results store that keeps runs in a list."""

    def __init__(self) -> None:
        self.runs: list = []

    def add(self, run) -> None:
        self.runs.append(run)


def fake_load(
    *,
    rps: float = 1000.0,
    duration_s: float | None = None,
    requests: int | None = None,
    mean_ms: float = 10.0,
    p99_ms: float | None = None,
    codes: dict[str, int] | None = None,
    driver: str = "oha",
    **extra,
):
    """A LoadMeasurement with consistent figures: ``requests`` (or the sum of ``codes``)
    served at ``rps``; latencies from ``mean_ms`` (p99 twice it unless given)."""
    from servelab.results.records import LoadMeasurement

    if codes is None:
        codes = {"200": requests if requests is not None else max(1, round(rps))}
    total = requests if requests is not None else sum(codes.values())
    p99 = p99_ms if p99_ms is not None else 2 * mean_ms
    fields = dict(
        driver=driver,
        requests_total=total,
        duration_s=duration_s if duration_s is not None else total / rps,
        rps=rps,
        latency_mean_ms=mean_ms,
        latency_p50_ms=mean_ms,
        latency_p90_ms=max(mean_ms, (mean_ms + p99) / 2),
        latency_p99_ms=p99,
        latency_max_ms=max(p99, 1.5 * p99),
        status_counts=codes,
        connection_errors={},
        bytes_received=20 * total,
    )
    return LoadMeasurement(**{**fields, **extra})


def fake_run(
    variant: str = "v",
    workload: str = "w",
    repetition: int = 1,
    *,
    experiment: str = "x",
    load=None,
    processes: tuple = (),
    **extra,
):
    """One RunRecord as a test needs it (``load`` from ``fake_load`` by default); the
    one factory the unit tests share."""
    from servelab.results.records import RunRecord

    return RunRecord(
        **{
            "experiment": experiment,
            "variant": variant,
            "workload": workload,
            "repetition": repetition,
            "started_at": "2026-11-22T00:00:00+0000",
            "load": load if load is not None else fake_load(),
            "processes": processes,
            "stack_cpus": None,
            "driver_cpus": None,
            "warmup_requests": 0,
            **extra,
        }
    )


def seed_run(
    variant: str, repetition: int, rps: float, mean_ms: float, errors: int = 0
):
    """One run of the port-vs-socket seed: 5000 requests at ``rps``, ``errors`` of them
    502, the app using 2.5 CPU s and 50 MiB."""
    from servelab.results.records import ProcessUsage

    codes = {"200": 5000 - errors, **({"502": errors} if errors else {})}
    load = fake_load(
        rps=rps, requests=5000, mean_ms=mean_ms, p99_ms=mean_ms * 2, codes=codes,
        latency_p90_ms=mean_ms * 1.2, latency_max_ms=mean_ms * 3, bytes_received=100_000,
    )
    app = ProcessUsage(role="app", pid=1, name="gunicorn", cpu_s=2.5, peak_rss_bytes=50 * 2**20)
    return fake_run(
        variant, "sync-small", repetition, experiment="port-vs-socket", load=load,
        processes=(app,), stack_cpus="0", driver_cpus="1", warmup_requests=200,
    )


def _port_vs_socket():
    from servelab.prepare.building import experiment_from_dict

    return experiment_from_dict(
        {
            "name": "port-vs-socket",
            "baseline": {"name": "tcp"},
            "variants": [{"name": "unix", "proxy": {"transport": "unix"}}],
            "workloads": [{"name": "sync-small", "load": {"requests": 100}}],
            "repetitions": 3,
        }
    )


PORT_VS_SOCKET = _port_vs_socket()
# The seed's own figures (nginx_port_socket.md, sync small): port then socket.
PORT_VS_SOCKET_RUNS = [
    seed_run("tcp", 1, 1375.63, 72.694),
    seed_run("tcp", 2, 1349.77, 74.087),
    seed_run("tcp", 3, 1305.75, 76.584),
    seed_run("unix", 1, 1321.34, 75.681),
    seed_run("unix", 2, 1357.39, 73.671),
    seed_run("unix", 3, 1367.66, 73.118, errors=2),
]


# A WSGI app whose every request hashes ROUNDS times: CPU work of a known size, for the
# tests that make a repository of its versions (format: rounds, note).
HASHING_APP = """
import hashlib

ROUNDS = {rounds}  # {note}


def app(environ, start_response):
    digest = b"servelab"
    for _ in range(ROUNDS):
        digest = hashlib.sha256(digest).digest()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [digest.hex().encode()]
"""


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` with a committer of its own; its output, stripped."""
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    """``servelab ARGS`` in-process (click's CliRunner), as the shell would see it:
    ``returncode``, ``stdout``, ``stderr``. ``env`` overrides variables; ``cwd`` is
    where it runs."""
    import os
    from types import SimpleNamespace

    from click.testing import CliRunner

    from servelab.cli import cli

    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    finally:
        os.chdir(before)
    return SimpleNamespace(
        returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr
    )


def markdown_lines(sections) -> list[str]:
    """``sections`` as the markdown report writes them, line by line."""
    from servelab.report.markdown import section_lines

    return [line for section in sections for line in section_lines(section)]


def memory_lines(experiment, runs) -> list[str]:
    """The "Memory per worker" section of ``runs`` as markdown lines (none when absent)."""
    from servelab.report.memory import memory_table
    from servelab.report.sections import MemorySection

    table = memory_table(experiment, runs)
    return markdown_lines([MemorySection(table)]) if table else []


def report_with_stack(report, variant: str, *, server=None, proxy=None):
    """``report`` (a ReportInput) with ``variant``'s stack given other ``server`` and
    ``proxy`` knobs (dicts), its runs kept: what ``servelab export`` reads, for a stack that
    was not measured."""
    import dataclasses

    from servelab.config.stack import StackSpec

    experiment = report.experiment
    stacks = []
    for stack in experiment.stacks:
        if stack.name == variant:
            data = stack.model_dump()
            data["server"].update(server or {})
            data["proxy"].update(proxy or {})
            stack = StackSpec.model_validate(data)
        stacks.append(stack)
    return dataclasses.replace(report, experiment=experiment.model_copy(
        update={"baseline": stacks[0], "variants": tuple(stacks[1:])}
    ))


# -- simulated studies: the real measuring rule on stacks with a known truth --


def quick_shaped(budget_s: float = 160.0, side_by_side: bool = True):
    """An experiment shaped like ``servelab study quick``: a baseline and two variants
    side by side (6 s runs, 1 s warm-up) or in turns (2 s runs, 0.5 s warm-up), four
    workloads, ±5 % precision, ``budget_s`` of measuring."""
    from servelab.prepare.building import experiment_from_dict

    return experiment_from_dict(
        {
            "name": "simulated",
            "repetitions": 2,
            "baseline": {"name": "base"},
            "variants": [
                {"name": "unix", "proxy": {"transport": "unix"}},
                {"name": "keepalive", "proxy": {"transport": "unix", "upstream_keepalive": 8}},
            ],
            "workloads": [
                {
                    "name": f"w{i}",
                    "request": {"path": "/"},
                    "load": {"duration_s": 6.0 if side_by_side else 2.0},
                }
                for i in range(4)
            ],
            "warmup": {"max_rounds": 1, "duration_s": 1.0 if side_by_side else 0.5},
            "side_by_side": side_by_side,
            "stopping": {"precision_pct": 5.0, "budget_s": budget_s},
        },
        source="simulation",
    )


def lognormal_level(rng, effects, *, sd_start: float, sd_slice: float, drift: float):
    """A FakeExecutor's requests/s: 1000 x exp(effect of the variant + the start's own
    level (sd_start) + the machine's moment, one per window tick (drift) + the slice's
    noise (sd_slice))."""
    import math

    starts: dict[int, float] = {}
    moments: dict[int, float] = {}

    def level(variant, start, tick, workload):
        starts.setdefault(start, rng.gauss(0, sd_start))
        moments.setdefault(tick, rng.gauss(0, drift))
        shift = effects.get(variant, 0.0)
        return 1000 * math.exp(shift + starts[start] + moments[tick] + rng.gauss(0, sd_slice))

    return level


def simulated_check(
    level,
    *,
    thresholds=("rps < -5%", "errors > 0"),
    budget_s: float = 180.0,
    side_by_side: bool = True,
    seconds_per_window: float = 1.0,
    busy=None,
):
    """`servelab check`'s own experiment and stopping rule on fake versions (``level``:
    a FakeExecutor's requests/s, ``busy`` its CPU share; the candidate is named
    servelab.check.CANDIDATE).
    Returns (judgements, starts of each version, the rule's last outlook, seconds)."""
    from servelab.check import CheckSpec, check_experiment, judge_runs, parse_thresholds
    from servelab.config.stack import AppSpec
    from servelab.measuring import Runner, RunnerEvents

    experiment = check_experiment(
        CheckSpec(app=AppSpec(ref="fastapi"), thresholds=thresholds), None,
        side_by_side=side_by_side,
    )
    stopping = experiment.stopping.model_copy(update={"budget_s": budget_s})
    experiment = experiment.model_copy(update={"stopping": stopping})
    clock = FakeClock()
    outlooks = []
    events = RunnerEvents(on_round=lambda plan, outlook: outlooks.append(outlook))
    executor = FakeExecutor(level, clock=clock, seconds_per_window=seconds_per_window,
                            busy=busy)
    runs = Runner(experiment, ListSink(), executor, events, clock=clock).run()
    judgements, starts_each, _ = judge_runs(experiment, runs, parse_thresholds(thresholds))
    return judgements, starts_each, outlooks[-1], clock.now


def simulated_study(
    rng,
    effects,
    *,
    sd_start: float,
    sd_slice: float,
    drift: float,
    budget_s: float = 160.0,
    side_by_side: bool = True,
):
    """One quick-shaped study measured by the real Runner, stopping rule and analysis on
    fake stacks: requests/s = 1000 x exp(effect of the variant + the start's own level
    (sd_start) + the machine's moment (drift) + the slice's noise (sd_slice)). Side by
    side the stacks of a pass share one moment; in turns each slice has its own. Returns
    (variant, comparison of the answer's metric) at the moment measuring stopped."""
    from servelab.analysis.analyze import analyze
    from servelab.analysis.metrics import answer_metric
    from servelab.measuring import Runner

    level = lognormal_level(rng, effects, sd_start=sd_start, sd_slice=sd_slice, drift=drift)
    experiment = quick_shaped(budget_s, side_by_side)
    clock = FakeClock()
    # In turns a 1 s slice with its share of launches and warm-ups (4 rounds in 160 s, as
    # measured by `servelab study quick` on 2 CPUs).
    window_s = 3.0 if side_by_side else 1.3
    executor = FakeExecutor(level, clock=clock, seconds_per_window=window_s)
    runs = Runner(experiment, ListSink(), executor, clock=clock).run()
    key = answer_metric(experiment).key
    return [
        (v.variant, v.comparisons[key])
        for v in analyze(experiment, runs).variants
        if not v.is_baseline
    ]


# -- two "machines": network namespaces joined by a veth pair --------------------------


def ip(*args: str) -> str:
    import subprocess

    return subprocess.run(
        ["ip", *args], check=True, capture_output=True, text=True, timeout=15
    ).stdout


def unused_subnet() -> int | None:
    """N such that 10.213.N.0/30 is on no interface and in no route of this machine."""
    taken = ip("-o", "addr") + ip("route") + ip("-o", "-4", "route", "show", "table", "all")
    return next((n for n in range(7, 250) if f"10.213.{n}." not in taken), None)


def namespace_pids(name: str) -> list[int]:
    import subprocess

    done = subprocess.run(
        ["ip", "netns", "pids", name], capture_output=True, text=True, timeout=15
    )
    return [int(p) for p in done.stdout.split()]


@contextlib.contextmanager
def two_machines(prefix: str) -> Iterator[tuple[str, str, str, str]]:
    """(first namespace, its address, second namespace, its address), joined by a veth
    pair on an unused 10.213.N.0/30; both namespaces (and the pair) deleted on the way
    out, any process left in them killed first. Raises LookupError with no free N."""
    import os
    import subprocess

    n = unused_subnet()
    if n is None:
        raise LookupError("no free 10.213.N.0/30 for a veth pair")
    pid = os.getpid()
    a, b = f"{prefix}-{pid}-a", f"{prefix}-{pid}-b"
    addr_a, addr_b = f"10.213.{n}.1", f"10.213.{n}.2"
    if_a, if_b = f"{prefix[:3]}{pid}a", f"{prefix[:3]}{pid}b"
    made = []
    try:
        for name in (a, b):
            ip("netns", "add", name)
            made.append(name)
            ip("-n", name, "link", "set", "lo", "up")
        ip("link", "add", if_a, "netns", a, "type", "veth", "peer", "name", if_b, "netns", b)
        ip("-n", a, "addr", "add", f"{addr_a}/30", "dev", if_a)
        ip("-n", b, "addr", "add", f"{addr_b}/30", "dev", if_b)
        ip("-n", a, "link", "set", if_a, "up")
        ip("-n", b, "link", "set", if_b, "up")
        yield a, addr_a, b, addr_b
    finally:
        for name in made:
            for left in namespace_pids(name):  # nothing should be left; never leak it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(left, signal.SIGKILL)
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=15)


# The planted function of each kind: the seed app's environment variable that plants it,
# its name in a profile, and the gunicorn workers of its stack. "compute" spins in
# user space; "syscalls" spends about half of its CPU in system calls; "crowded" is the
# compute spin in a stack of 4 busy workers (and nginx) on this machine's 2 CPUs, where
# py-spy counts a worker waiting for a CPU as running.
PLANTED_KINDS: dict[str, tuple[str, str, int]] = {
    "compute": ("SERVELAB_EXTRA_WORK_US", "extra_work (servelab/apps/seed_fastapi.py)", 1),
    "syscalls": (
        "SERVELAB_EXTRA_SYSCALLS_US", "extra_syscalls (servelab/apps/seed_fastapi.py)", 1
    ),
    "crowded": ("SERVELAB_EXTRA_WORK_US", "extra_work (servelab/apps/seed_fastapi.py)", 4),
}


def planted_spin_toml(
    name: str, planted_us: int, repetitions: int, duration_s: float, kind: str = "compute",
    also: tuple[str, ...] = (),
) -> str:
    """An experiment file: the seed app's async-small behind nginx (TCP, gunicorn with
    the kind's workers, wrk, runs in one piece) against the same stack whose planted
    function of ``kind`` (``PLANTED_KINDS``; by default ``extra_work()``) spins
    ``planted_us`` of thread CPU per request (variant "spin"); ``also``: more kinds of the
    same workers, a variant each, named by its kind."""
    variable, _, workers = PLANTED_KINDS[kind]
    more = "".join(
        f"""[[variants]]
name = "{other}"
app = {{ ref = "fastapi", env = {{ {PLANTED_KINDS[other][0]} = "{planted_us}" }} }}
"""
        for other in also if PLANTED_KINDS[other][2] == workers
    )
    return f"""
name = "{name}"
repetitions = {repetitions}
slices = 1
driver = "wrk"
[warmup]
requests = 200
concurrency = 10
max_rounds = 1
[baseline]
name = "base"
app = {{ ref = "fastapi" }}
server = {{ kind = "gunicorn", worker_class = "uvicorn", workers = {workers} }}
proxy = {{ kind = "nginx", transport = "tcp" }}
[[variants]]
name = "spin"
app = {{ ref = "fastapi", env = {{ {variable} = "{planted_us}" }} }}
{more}[[workloads]]
name = "async-small"
request = {{ method = "POST", path = "/async/items/", body = '{{"name": "n", "price": 1}}' }}
load = {{ concurrency = 10, duration_s = {duration_s:g} }}
"""


def write_wheel(wheelhouse: Path, name: str, version: str, module_source: str) -> Path:
    """A pure-Python wheel of one module (``name``.py holding ``module_source``), as pip
    installs it: METADATA, WHEEL and a RECORD with each file's hash."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": module_source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: servelab-tests\n"
                         "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    wheel = wheelhouse / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def yaml_blocks(markdown: str) -> list:
    """The ```yaml blocks of a markdown page, parsed."""
    import yaml

    blocks, inside, lines = [], False, []
    for line in markdown.splitlines():
        if line.startswith("```yaml"):
            inside, lines = True, []
        elif line.startswith("```") and inside:
            inside = False
            blocks.append(yaml.safe_load("\n".join(lines)))
        elif inside:
            lines.append(line)
    return blocks


def servelab_lines(commands: list[str], variables: dict[str, str]) -> list[list[str]]:
    """The `servelab ...` commands among CI script lines, ``$NAME`` filled in, split as a
    shell would."""
    import shlex

    found = []
    for command in commands:
        text = command.strip()
        for name, value in variables.items():
            text = text.replace(f"${name}", value)
        if text.startswith("servelab "):
            found.append(shlex.split(text))
    return found


def left_namespaces() -> set[str]:
    """servelab's network namespaces that this process made, or whose maker is gone (a
    leak): another test's, running beside this one (make test runs three at a time), do
    not count."""
    import os

    import psutil

    from servelab.host.netns import servelab_namespaces

    found = set()
    for name in servelab_namespaces():
        maker = int(name.split("-")[1])
        if maker == os.getpid() or not psutil.pid_exists(maker):
            found.add(name)
    return found


def start_logged(argv: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``argv`` started in a session of its own (Ctrl-C reaches it by ``ctrl_c``, SIGINT
    as a terminal would send it), its output in ``log``."""
    return subprocess.Popen(
        argv, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=cwd, env=env,
        start_new_session=True, preexec_fn=with_default_sigint,
    )  # fmt: skip


def _locust_across_namespaces() -> list:
    """Skips for a test that runs Locust workers in a network namespace of its own: only
    where Locust is installed beside this Python and namespaces can be made."""
    import sys

    import pytest

    from servelab.host.netns import unavailable_reason

    why = unavailable_reason()
    return [
        pytest.mark.skipif(
            not (Path(sys.executable).parent / "locust").is_file(), reason="locust not installed"
        ),
        pytest.mark.skipif(why is not None, reason=f"no network namespaces: {why}"),
    ]


LOCUST_ACROSS_NAMESPACES = _locust_across_namespaces()


def sleepy_capacity_bound(sleep_s: float, slo_s: float, trial_s: float) -> float:
    """The highest rate at which one sync worker that sleeps ``sleep_s`` a request keeps
    its p99 under ``slo_s`` in a ``trial_s`` trial sent at evenly spaced times (the stacks
    of the capacity tests): up to 1 / sleep_s no queue forms; past it the queue grows all
    trial, and p99 (the trial's last requests) passes the SLO once their wait does, at
    (rate x sleep_s - 1) x trial_s = slo_s - sleep_s. Short trials hold a little more
    than 1 / sleep_s."""
    return (1 + (slo_s - sleep_s) / trial_s) / sleep_s


def github_outputs(text: str) -> dict[str, str]:
    """A $GITHUB_OUTPUT (or $GITHUB_ENV) file read as the runner reads it: ``name=value``
    lines, and ``name<<DELIMITER`` ... ``DELIMITER`` for a value of several lines."""
    found: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value = []
            for inner in lines:
                if inner == delimiter:
                    break
                value.append(inner)
            else:
                raise ValueError(f"no closing {delimiter!r} for {name!r}")
            found[name] = "\n".join(value)
        elif line:
            name, value_text = line.split("=", 1)
            found[name] = value_text
    return found


# The environment of a program installed outside the checkout, without PYTHONPATH: one
# naming a checkout's src (a worktree's test run) would make pip find servelab already
# there (its egg-info) and the venv's servelab import the checkout.
CLEAN_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
