"""Render the deployable set of files for one measured stack, into the places its
``DeployLayout`` (``servelab.export.layout``) names.

The front's config (nginx.conf, Apache's httpd.conf) and the app server's come from
the very templates and command lines servelab measured with, each rendered by its own
module (``Front.deploy``, ``AppServer.deploy``), so what is exported is what was
measured, with three kinds of changes, each listed in the README:

- places: real paths (/etc, /run, /var/lib), a real listen address, the
  workers' user, a socket readable only by the front and the app (a dedicated
  group and umask 007, seed nginx_port_socket.md);
- consistency fixes: the app must time out before the front gives up on it,
  and the app must keep idle connections open longer than the front keeps them
  in its pool, else the front reuses a connection the app is closing
  (502 "upstream prematurely closed");
- production values where measuring used short ones (graceful timeout).
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jinja2

from servelab.analysis.analyze import VariantAnalysis
from servelab.analysis.comparisons import compare_variants
from servelab.analysis.metrics import answer_metric
from servelab.analysis.stats import p_text
from servelab.apps import BUILTIN_APPS, resolve_app
from servelab.config.stack import StackSpec
from servelab.errors import SpecError
from servelab.export.choose import Choice
from servelab.export.layout import DeployLayout, check_name
from servelab.plugins.front import Front, FrontDeploy, FrontTarget, get_front
from servelab.plugins.server import DeployTarget, ServerDeploy, get_server
from servelab.prepare.checks import describe_stack
from servelab.registry import FRONTS, SERVERS
from servelab.report.base import (
    ReportInput,
    describe_workload,
    environment_rows,
    stack_knobs,
    summary_rows,
)

APP_PORT = 8000  # the app's loopback port when the front reaches it over TCP
SOCKET_UMASK = 0o007
GRACEFUL_TIMEOUT_S = 30
MIN_SOMAXCONN = 4096  # Linux's default since 5.4: never lower it

README = "README.md"


@dataclass(frozen=True)
class Adjustment:
    """A measured value the export changed, and why."""

    setting: str
    measured: str
    exported: str
    why: str


def consistent_stack(stack: StackSpec) -> tuple[StackSpec, list[Adjustment]]:
    """``stack`` with its timeouts made consistent for production, and what changed."""
    server, proxy = stack.server, stack.proxy
    front: Front = get_front(proxy.kind)
    adjustments: list[Adjustment] = []
    if get_server(server.kind).ends_slow_requests and server.timeout_s >= proxy.timeout_s:
        new = server.timeout_s + 5
        adjustments.append(
            Adjustment(
                f"{front.title} {front.timeout_setting}",
                f"{proxy.timeout_s} s",
                f"{new} s",
                f"{server.kind}'s timeout is {server.timeout_s} s: the app must give up (and log "
                f"it) before {front.title} answers 504 for a request the app is still working on",
            )
        )
        proxy = proxy.model_copy(update={"timeout_s": new})
    if proxy.upstream_keepalive > 0 and proxy.upstream_keepalive_timeout_s >= server.keepalive_s:
        if server.keepalive_s >= 2:
            idle = server.keepalive_s - 1
        else:
            idle = 1
            adjustments.append(
                Adjustment(
                    "app keepalive timeout",
                    f"{server.keepalive_s} s",
                    "2 s",
                    f"{front.title}'s idle upstream timeout cannot be shorter than 1 s, and "
                    "the app's must be longer than it",
                )
            )
            server = server.model_copy(update={"keepalive_s": 2})
        adjustments.append(
            Adjustment(
                f"{front.title} {front.pool_idle_setting}",
                f"{proxy.upstream_keepalive_timeout_s} s",
                f"{idle} s",
                f"the app closes idle connections after {server.keepalive_s} s; {front.title} "
                "must drop them from its pool first, or it may send a request on a connection "
                "the app is closing (502, 'upstream prematurely closed connection')",
            )
        )
        proxy = proxy.model_copy(update={"upstream_keepalive_timeout_s": idle})
    return stack.model_copy(update={"server": server, "proxy": proxy}), adjustments


@dataclass(frozen=True)
class Evidence:
    """The chosen stack against one that differs from it in a single knob."""

    knob: str
    ours: str
    theirs: str
    other: str  # the other variant's name
    lines: tuple[str, ...]  # one per workload: rps of both and the verdict


def knob_evidence(report: ReportInput, chosen: StackSpec) -> list[Evidence]:
    """For every variant that differs from ``chosen`` in exactly one knob, what it measured."""
    ours = stack_knobs(chosen, with_app=True)
    evidence = []
    for other in report.experiment.stacks:
        if other.name == chosen.name:
            continue
        theirs = stack_knobs(other, with_app=True)
        differing = [k for k in ours if ours.get(k) != theirs.get(k)]
        if len(differing) != 1:
            continue
        knob = differing[0]
        lines = []
        for workload in report.experiment.workloads:
            mine = _runs(report, chosen.name, workload.name)
            them = _runs(report, other.name, workload.name)
            if mine is None or them is None:
                continue
            # The same test, on the same runs, as the reports' verdicts.
            everyone = [r for r in report.runs if r.workload == workload.name]
            metric = answer_metric(report.experiment)
            comparison = compare_variants(everyone, other.name, chosen.name, metric)
            pct = comparison.difference_pct
            lines.append(
                f"{workload.name}: {comparison.variant_mean:,.1f} vs "
                f"{comparison.baseline_mean:,.1f} {metric.name}"
                + (f" ({pct:+.1f} %)" if pct is not None else "")
                + f", {comparison.verdict}"
                + (
                    f" ({comparison.test}, p {p_text(comparison.p_value)})"
                    if comparison.p_value is not None
                    else ""
                )
                + (f"; {them.total_errors} failed requests there" if them.total_errors else "")
            )
        if lines:
            evidence.append(
                Evidence(knob, str(ours[knob]), str(theirs[knob]), other.name, tuple(lines))
            )
    return evidence


def _runs(report: ReportInput, variant: str, workload: str) -> VariantAnalysis | None:
    return next(
        (
            v
            for v in report.analysis.variants
            if v.variant == variant and v.workload == workload
        ),
        None,
    )


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("servelab.export", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # config files and markdown, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["shell"] = lambda value: shlex.quote(str(value))
    env.filters["systemd_env"] = lambda item: shlex.quote(f"{item[0]}={item[1]}")
    return env


def _app_target(stack: StackSpec) -> str:
    """The app as the server loaded it when measured: a factory called (``module:f()``)."""
    ref = stack.app.ref.strip()
    if ref in BUILTIN_APPS:
        return BUILTIN_APPS[ref]
    return resolve_app(stack.app).gunicorn_target


@dataclass(frozen=True)
class DeploySet:
    """The exported files (name -> text), and what the README says about them."""

    files: dict[str, str]
    choice: Choice
    stack: StackSpec  # as exported (after the consistency fixes)
    adjustments: tuple[Adjustment, ...]
    layout: DeployLayout
    notes: tuple[str, ...] = field(default_factory=tuple)


def somaxconn_for(backlog: int) -> int:
    return max(backlog, MIN_SOMAXCONN)


def render_deploy_set(
    report: ReportInput, choice: Choice, layout: DeployLayout, *, source: str
) -> DeploySet:
    measured = choice.stack
    check_exportable(measured)
    stack, adjustments = consistent_stack(measured)
    check_name(layout.name)
    layout = dataclasses.replace(layout, front=stack.proxy.kind)
    hosted = get_server(stack.server.kind).inside_front is not None  # no unit of its own
    unix = stack.proxy.transport == "unix" and not hosted
    server = _server_deploy(stack, layout, unix, source)
    front = _front_deploy(stack, layout, unix, server, source)
    files = {**front.files, **server.files}
    context = {
        "layout": layout,
        "stack": stack,
        "server": server,
        "front": front,
        "front_title": get_front(stack.proxy.kind).title,
        "hosted": hosted,
        "ends_slow": get_server(stack.server.kind).ends_slow_requests,
        "measured": measured,
        "unix": unix,
        "origin": source,
        "exec_start": shlex.join(server.exec_start),
        "app_env": sorted(stack.app.env.items()),
        "graceful_timeout_s": GRACEFUL_TIMEOUT_S,
        "somaxconn": somaxconn_for(stack.server.backlog),
        "measured_somaxconn": report.environment.get("somaxconn") or "unknown",
        "min_somaxconn": MIN_SOMAXCONN,
    }
    templates = _templates()
    if not hosted:
        files[layout.app_unit] = templates.get_template("app.service.j2").render(**context)
    files[layout.front_unit] = templates.get_template("front.service.j2").render(**context)
    files[layout.sysctl_file] = templates.get_template("sysctl.conf.j2").render(**context)
    deploy = DeploySet(
        files, choice, stack, tuple(adjustments), layout, server.notes + front.notes
    )
    files[README] = render_readme(report, deploy, context, source=source)
    return deploy


def check_exportable(measured: StackSpec) -> None:
    """SpecError unless servelab can export ``measured`` (a front and a server whose
    modules can deploy themselves)."""
    if not get_front(measured.proxy.kind).exportable:
        able = " or ".join(FRONTS.where(lambda front: front.exportable))
        raise SpecError(
            f"variant {measured.name!r} was measured with proxy kind {measured.proxy.kind!r}; "
            f"servelab exports stacks with {able} in front",
            f"choose a variant measured behind {able} (--variant NAME)",
        )
    if not get_server(measured.server.kind).exportable:
        able = " and ".join(SERVERS.where(lambda server: server.exportable))
        raise SpecError(
            f"variant {measured.name!r} runs {measured.server.kind}; servelab exports "
            f"{able} deployments only",
            f"choose a variant that runs {able.replace(' and ', ' or ')} (--variant NAME)",
        )


def _front_deploy(
    stack: StackSpec, layout: DeployLayout, unix: bool, server: ServerDeploy, source: str
) -> FrontDeploy:
    """The front's part: its config and its unit's lines (from its module)."""
    upstream = None
    if server.hosted is None:
        upstream = layout.socket if unix else ("127.0.0.1", APP_PORT)
    target = FrontTarget(
        name=layout.name,
        listen=layout.listen,
        conf_dir=layout.conf_dir,
        run_dir=layout.front_run_dir,
        state_dir=layout.front_state_dir,
        user=layout.front_user,
        upstream=upstream,
        hosted=server.hosted,
        source=source,
    )
    deploy = get_front(stack.proxy.kind).deploy(stack, target)
    assert deploy is not None, "check_exportable lets only exportable fronts through"
    return deploy


def _server_deploy(
    stack: StackSpec, layout: DeployLayout, unix: bool, source: str
) -> ServerDeploy:
    """The app server's part: its config files, command line and notes (from its module)."""
    front: Front = get_front(stack.proxy.kind)
    target = DeployTarget(
        app=_app_target(stack),
        name=layout.name,
        socket=layout.socket if unix else None,
        port=None if unix else APP_PORT,
        venv=layout.venv,
        conf_dir=layout.conf_dir,
        app_dir=layout.app_dir,
        graceful_timeout_s=GRACEFUL_TIMEOUT_S,
        socket_umask=SOCKET_UMASK if unix else None,
        socket_group=layout.socket_group if unix else None,
        source=source,
        front=front.title,
        front_timeout=f"`{front.timeout_setting}`",
    )
    deploy = get_server(stack.server.kind).deploy(stack, target)
    assert deploy is not None, "check_exportable lets only exportable servers through"
    return deploy


def render_readme(
    report: ReportInput, deploy: DeploySet, context: dict[str, Any], *, source: str
) -> str:
    chosen = deploy.choice.stack.name
    workloads = []
    for workload in report.experiment.workloads:
        rows = summary_rows(report, workload.name)
        ours = next((r for r in rows if r.variant == chosen), None)
        base = next((r for r in rows if r.is_baseline), None)
        if ours is not None:
            workloads.append(
                {
                    "name": workload.name,
                    "description": describe_workload(report, workload.name),
                    "ours": ours,
                    "baseline": base,
                }
            )
    return _templates().get_template("README.md.j2").render(
        **context,
        source=source,
        stack_line=describe_stack(context["stack"]),
        choice=deploy.choice,
        baseline_name=report.experiment.baseline.name,
        tests=" / ".join(
            sorted({c.test for v in report.analysis.variants for c in v.comparisons.values()})
        )
        or "Welch's t-test",
        workloads=workloads,
        warnings=[
            w for w in report.analysis.all_warnings if w.variant in (None, chosen)
        ],
        cpus=report.environment.get("cpu_count") or "an unknown number of",
        placement=dict(environment_rows(report)).get("CPU placement", ""),
        conf_app_port=APP_PORT,
        evidence=knob_evidence(report, deploy.choice.stack),
        adjustments=deploy.adjustments,
        notes=deploy.notes,
        environment=environment_rows(report),
        runs=len(report.runs),
        repetitions=report.experiment.repetitions,
        files=deploy.files,
    )
