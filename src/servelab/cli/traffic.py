"""``servelab traffic``: what an access log's traffic looks like (servelab.traffic), and
synthetic logs for the built-in apps (--make-log)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from servelab.cli.options import console, out
from servelab.errors import SpecError
from servelab.traffic.synthetic import APPS, DAILY, DEFAULT_START


def parse_fields(given: tuple[str, ...]) -> dict[str, str] | None:
    """--log-field NAME=KEY (repeatable) as {NAME: KEY}; None when none is given."""
    fields = {}
    for item in given:
        name, sep, key = item.partition("=")
        if not sep or not name.strip() or not key.strip():
            raise SpecError(f"--log-field {item!r} is not NAME=KEY",
                            "e.g. --log-field time=ts --log-field path=request.uri")
        fields[name.strip()] = key.strip()
    return fields or None


def parse_start(text: str | None) -> datetime:
    if text is None:
        return DEFAULT_START
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise SpecError(f"--start {text!r} is not a date and time",
                        "write it ISO-style, e.g. 2024-05-06T08:00:00+02:00") from None


@click.command()
@click.argument("logs", nargs=-1, type=click.Path(path_type=Path), metavar="[LOG]...")
@click.option("--log-format", default="auto", show_default=True,
              help="How the lines are written: auto (combined, common or JSON lines), "
              "combined, common, json (one object a line), your server's format string "
              "(nginx's log_format '$remote_addr [$time_local] \"$request\" ...' or "
              "Apache's LogFormat '%h %t \"%r\" %>s ...'), or its name in the server's "
              "configuration: /etc/nginx/nginx.conf:main.")
@click.option("--log-field", "log_fields", multiple=True, metavar="NAME=KEY",
              help="For json lines: the key holding one of servelab's fields (time, method, "
              "path, status), e.g. time=ts or path=request.uri; repeatable.")
@click.option("--route-template", "route_templates", multiple=True, metavar="PATTERN",
              help="Name a route the heuristics miss: paths matching PATTERN count as one "
              "route of that name ({name}: one segment, *: anything), e.g. "
              "/users/{name}/profile; repeatable, the first that matches names it.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True,
              help="Routes shown (the most requested).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Also write traffic.json, traffic.md, the rate chart (traffic.svg, "
              "traffic.png) and traffic.html (self-contained) into this directory.")
@click.option("--make-log", type=click.Path(path_type=Path),
              help="Make a synthetic access log here for a built-in app (a daily curve, "
              "bursts, a Zipf mix of routes and ids), then describe it; the options below "
              "shape it.")
@click.option("--app", type=click.Choice(sorted(APPS)),
              help="With --make-log: the built-in app whose routes it requests "
              "[default: django].")
@click.option("--duration", help="With --make-log: the log's span, e.g. 10m, 2h, 90s "
              "[default: 10m].")
@click.option("--rate", type=float, help="With --make-log: mean requests/s over the log "
              "[default: 50].")
@click.option("--seed", type=int, help="With --make-log: the same seed, the same log "
              "[default: 0].")
@click.option("--start", help="With --make-log: the first line's time, ISO-style; its "
              "offset is the log's time zone [default: 2024-05-06T00:00:00+00:00].")
@click.option("--daily", type=click.Choice(DAILY),
              help="With --make-log: the day/night curve compressed into the duration, "
              "following --start's clock, or off [default: compressed].")
@click.option("--no-bursts", is_flag=True,
              help="With --make-log: no bursts (short spikes of 3-5 times the rate).")
def traffic(
    logs: tuple[Path, ...], log_format: str, log_fields: tuple[str, ...],
    route_templates: tuple[str, ...], top: int,
    out_dir: Path | None, make_log: Path | None, app: str | None, duration: str | None,
    rate: float | None, seed: int | None, start: str | None, daily: str | None,
    no_bursts: bool,
) -> None:
    """What the traffic in access logs LOG... looks like: its time span, requests, mean
    and peak rate per second and per minute, the rate over time, and the mix of routes
    (ids collapsed), methods and status codes. With --make-log FILE: make a synthetic log
    for a built-in app first, and describe it."""
    from servelab.config.run import parse_duration
    from servelab.report.traffic import terminal, write_files
    from servelab.results.outdir import check_writable_path
    from servelab.traffic.describe import describe
    from servelab.traffic.formats import log_format as parser_of
    from servelab.traffic.reading import read_log
    from servelab.traffic.routes import route_template
    from servelab.traffic.synthetic import write_synthetic_log

    if out_dir is not None:
        check_writable_path(out_dir, "--out", directory=True)  # before anything is read
    if make_log is None:
        shaping = {"--app": app, "--duration": duration, "--rate": rate, "--seed": seed,
                   "--start": start, "--daily": daily, "--no-bursts": no_bursts or None}
        stray = [flag for flag, value in shaping.items() if value is not None]
        if stray:
            raise SpecError(f"{', '.join(stray)} only shape a synthetic log",
                            "add --make-log FILE, or drop them")
        if not logs:
            raise click.UsageError("give the access logs to describe (LOG...), or "
                                   "--make-log FILE to make one")
    else:
        check_writable_path(make_log, "--make-log")
        if logs:
            raise SpecError("give LOG files to describe, or --make-log to make one, not both",
                            "describe the made log afterwards: servelab traffic FILE")
        if log_format != "auto" or log_fields:
            raise SpecError("a made log is in the combined format: --log-format and "
                            "--log-field are for logs of your own", "drop them")
        if make_log.exists():  # never over a real log
            raise SpecError(f"--make-log {make_log} exists",
                            "give a new file name, or remove that file first")
        made = write_synthetic_log(
            make_log, app or "django", parse_duration(duration or "10m"),
            50.0 if rate is None else rate, seed=seed or 0, start=parse_start(start),
            bursts=not no_bursts, daily=daily or "compressed",
        )
        console.print(f"servelab: wrote {made:,} lines to {make_log}", highlight=False)
        logs = (make_log,)
    templates = [route_template(text) for text in route_templates]
    parser = parser_of(log_format, parse_fields(log_fields))
    stream = read_log(list(logs), parser)
    summary = describe(stream, templates=templates)
    reading = stream.counts
    out.print(terminal(summary, reading, top))
    if out_dir is not None:
        names = ", ".join(path.name for path in logs[:3]) + (", ..." if len(logs) > 3 else "")
        written = write_files(out_dir, summary, reading, top, f"Traffic: {names}")
        console.print(f"servelab: wrote {', '.join(p.name for p in written)} to {out_dir}",
                      highlight=False)
