"""Side by side on a machine with CPUs enough: each live stack takes a slot of the plan
(its own stack CPUs, its driver's), freed when it stops, and each window says where it
ran. The real HostExecutor, with launch_stack and the load driver replaced."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

from support import fake_load

from servelab.config.load import LoadSpec
from servelab.host.cpus import default_cpu_plan, plan_side_by_side
from servelab.measuring import host as host_module
from servelab.measuring.host import Groups, HostExecutor
from servelab.results.records import ProcessUsage


class Nothing:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def usage(self):
        return ()

    def result_fields(self):
        return {}


def test_each_live_stack_gets_its_slot_and_its_driver_cpus(monkeypatch, tmp_path):
    launched, driven = [], []

    @contextlib.contextmanager
    def launch_stack(spec, *, probe, cpus, quota, listen_host):
        launched.append((spec, cpus))
        yield SimpleNamespace(processes={}, spec=spec, url=lambda path: f"http://x{path}",
                              placement=SimpleNamespace(driver_prefix=lambda: []))

    def run_load(driver, url, request, load, workdir, *, cpus, prefix, on_note):
        driven.append(cpus)
        return fake_load()

    monkeypatch.setattr(host_module, "launch_stack", launch_stack)
    monkeypatch.setattr(host_module, "run_load", run_load)
    monkeypatch.setattr(host_module, "ProcessSampler", Nothing)
    monkeypatch.setattr(host_module, "RunObserver", Nothing)
    plan = default_cpu_plan(frozenset(range(16)))  # stack CPUs 0-11, driver 12-15
    side = plan_side_by_side(plan, stacks=3, stack_size=2)
    driver = SimpleNamespace(keep_latencies=False)
    executor = HostExecutor(driver, plan, Groups(None, None), side=side)
    workload = SimpleNamespace(request=SimpleNamespace(path="/"))
    with contextlib.ExitStack() as alive:
        stacks = [alive.enter_context(executor.launch(name, None)) for name in "abc"]
        assert [cpus for _, cpus in launched] == ["0,1", "2,3", "4,5"]
        windows = [executor._drive(s, workload, None, tmp_path) for s in stacks]
        assert driven == ["12", "13", "14"]
        assert [(w.stack_cpus, w.driver_cpus) for w in windows] == [
            ("0,1", "12"), ("2,3", "13"), ("4,5", "14")
        ]
    assert executor.slots == {}  # freed: the next round's stacks take them again
    with executor.launch("d", None):
        assert launched[-1] == ("d", "0,1")


def test_on_two_cpus_every_stack_shares_the_plan(monkeypatch):
    launched = []

    @contextlib.contextmanager
    def launch_stack(spec, *, probe, cpus, quota, listen_host):
        launched.append(cpus)
        yield SimpleNamespace()

    monkeypatch.setattr(host_module, "launch_stack", launch_stack)
    plan = default_cpu_plan(frozenset({0, 1}))
    side = plan_side_by_side(plan, stacks=3, stack_size=2)
    executor = HostExecutor(SimpleNamespace(), plan, Groups(None, None), side=side)
    assert executor.side is None
    with executor.launch("a", None), executor.launch("b", None):
        assert launched == ["0", "0"]


def test_profile_windows_come_after_the_measured_ones(monkeypatch, tmp_path):
    """--profile: py-spy never samples a measured window; each stack is driven again with
    the same load while it samples, after every stack's measured window (side by side:
    after all of them), and its profile goes with the measured window."""
    from servelab.observe.profile import WindowProfile

    said = []
    app_cpu_s = [0.01]

    class Watched(Nothing):
        name = "sampler"

        def __init__(self, *args, **kwargs) -> None:
            self.args = args

        def __enter__(self):
            said.append(f"{self.name} on")
            return self

        def __exit__(self, *exc) -> None:
            said.append(f"{self.name} off")

        def usage(self):  # the app's CPU in the window (py-spy's 3 samples: 0.03 s)
            return (ProcessUsage(role="app", pid=10, name="python", cpu_s=app_cpu_s[0],
                                 peak_rss_bytes=1),)

    class Meter(Nothing):
        def share(self, _cpu_s):
            return 0.0

    class Profiler(Watched):
        name = "py-spy"

        def profile(self):
            return WindowProfile({"app workers;f (a.py:1)": 3}, masters=())

    def run_load(driver, url, request, load, workdir, *, cpus, prefix, on_note):
        said.append(f"load {url} {load.duration_s} x{load.concurrency}")
        return fake_load(requests=500)

    monkeypatch.setattr(host_module, "run_load", run_load)
    monkeypatch.setattr(host_module, "ProcessSampler", Watched)
    monkeypatch.setattr(host_module, "RunObserver", Nothing)
    monkeypatch.setattr(host_module, "NeighbourMeter", Meter)
    monkeypatch.setattr(host_module, "StackProfiler", Profiler)
    driver = SimpleNamespace(keep_latencies=False)
    executor = HostExecutor(driver, default_cpu_plan(frozenset({0, 1})), Groups(None, None),
                            profiler="py-spy")
    workload = SimpleNamespace(request=SimpleNamespace(path="/"))
    load = LoadSpec(concurrency=10, duration_s=1.0)

    def stack(name, workers=1):
        server = SimpleNamespace(workers=workers, threads=1, blocking_threads=None)
        return SimpleNamespace(processes={"app": SimpleNamespace(pid=10), "nginx":
                                          SimpleNamespace(pid=9)},
                               url=lambda path: name, spec=SimpleNamespace(server=server),
                               placement=SimpleNamespace(driver_prefix=lambda: []))

    window = executor.measure(stack("a"), workload, load, tmp_path)
    assert said == ["sampler on", "load a 1.0 x10", "sampler off", "py-spy on",
                    "load a 1.0 x10", "py-spy off"]
    assert window.profile is not None and window.profile.samples == 3
    assert window.profile.masters == (9, 10)  # every server's first process
    assert window.profile.concurrency is None  # one worker: not crowded
    said.clear()
    windows = executor.measure_together([stack("a"), stack("b")], workload, load, tmp_path)
    measured, profiling = said[:6], said[6:]
    assert sorted(measured) == sorted(["sampler on", "load a 1.0 x10", "sampler off",
                                       "sampler on", "load b 1.0 x10", "sampler off"])
    assert sorted(profiling) == sorted(["py-spy on", "load a 1.0 x10", "py-spy off",
                                        "py-spy on", "load b 1.0 x10", "py-spy off"])
    assert all(w.profile is not None for w in windows)
    said.clear()
    # Four workers on the stack's one CPU (CPU 0 of two), py-spy's samples 3 s per CPU
    # second: sampled again at one connection, with that window's CPU and requests.
    crowded = executor.measure(stack("a", workers=4), workload, load, tmp_path)
    assert said[3:] == ["py-spy on", "load a 1.0 x10", "py-spy off", "sampler on",
                        "py-spy on", "load a 1.0 x1", "py-spy off", "sampler off"]
    assert crowded.profile is not None and crowded.profile.concurrency == 1
    assert crowded.profile.requests == 500
    said.clear()
    app_cpu_s[0] = 0.025  # 1.2 s per CPU second: crowded, but its samples barely waited
    barely = executor.measure(stack("a", workers=4), workload, load, tmp_path)
    assert barely.profile is not None and barely.profile.concurrency is None
    assert said[3:] == ["py-spy on", "load a 1.0 x10", "py-spy off"]
    said.clear()
    executor.profiler = None
    assert executor.measure(stack("a"), workload, load, tmp_path).profile is None
    assert said == ["sampler on", "load a 1.0 x10", "sampler off"]
