"""``servelab export``: the measured stack as files that boot on a real machine.

``choose`` picks the variant (by name, or the measured best), ``layout`` says where the
stack lives on the target machine, ``deploy`` renders the front's config (nginx.conf,
Apache's httpd.conf: ``Front.deploy``), the app server's part (its config and command
line: ``AppServer.deploy``), systemd units, sysctl snippet and a README that justifies
each choice with the numbers, and ``validate`` checks them with the real tools (nginx -t
or apache2 -t, and the server's own check, e.g. gunicorn --check-config) and boots them
with their paths moved into a temporary directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.export.choose import BEST, Choice, choose_variant
from servelab.export.deploy import DeploySet, render_deploy_set
from servelab.export.layout import DeployLayout, app_places, check_listen, check_name
from servelab.plugins.server import AppServer, get_server
from servelab.report.base import ReportInput
from servelab.results.outdir import staged_output

__all__ = ["BEST", "DeployLayout", "ExportOutcome", "export_result"]


@dataclass(frozen=True)
class ExportOutcome:
    choice: Choice
    deploy: DeploySet
    paths: tuple[Path, ...]
    checks: tuple[str, ...]  # what the real tools accepted ("nginx -t accepts nginx.conf")


def export_result(
    report: ReportInput,
    variant: str,
    out_dir: Path,
    *,
    source: str,
    name: str = "webapp",
    listen: str = "80",
    force: bool = False,
    check: bool = True,
    recommended: tuple[str, str] | None = None,
) -> ExportOutcome:
    """Choose ``variant`` (or "best"), render its deployable set, check it with the front's
    and the server's own checks and a boot, and only then write it into ``out_dir``."""
    from servelab.export.validate import check_export

    choice = choose_variant(report, variant, source=source, recommended=recommended)
    layout = DeployLayout(check_name(name), check_listen(listen), **app_places(choice.stack))
    deploy = render_deploy_set(report, choice, layout, source=source)
    with staged_output(out_dir, force=force) as staging:
        for file_name, text in deploy.files.items():
            (staging / file_name).write_text(text)
        server: AppServer = get_server(deploy.stack.server.kind)
        probe = report.experiment.workloads[0].request
        if probe.mix:  # the first path of a request mix
            probe = probe.model_copy(update={"path": probe.mix[0].path, "mix": ()})
        checks = tuple(check_export(staging, deploy.layout, server, probe)) if check else ()
    return ExportOutcome(
        choice, deploy, tuple(out_dir / file_name for file_name in deploy.files), checks
    )
