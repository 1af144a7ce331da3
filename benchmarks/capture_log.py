"""Capture a real access log: nginx's own (combined format), written by servelab's Django
stack while Locust's built-in Django scenario browses it, for replay tests and figures.

    .venv/bin/python benchmarks/capture_log.py --seconds 60 --users 30 \
        --out tests/fixtures/logs/django-locust.log.gz

The stack (gunicorn, 2 sync workers, behind nginx with servelab's access_log knob, on
SQLite) runs on CPU 0 and Locust on CPU 1; the log is copied out before the stack stops,
and gzipped when --out ends in .gz. Prints the log's description (servelab traffic).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path

from servelab import api
from servelab.config.load import LoadSpec, RequestSpec
from servelab.config.run import RunOptions
from servelab.launch import launch_stack
from servelab.observe.attribution import ACCESS_LOG_NAME
from servelab.plugins.driver import get_driver, run_load
from servelab.prepare.building import experiment_from_dict

EXPERIMENT = {
    "name": "capture",
    "baseline": {
        "name": "django", "app": {"ref": "django"},
        "server": {"kind": "gunicorn", "worker_class": "sync", "workers": 2},
        "proxy": {"kind": "nginx", "transport": "unix", "access_log": True},
    },
    "workloads": [{"name": "browse", "request": {"path": "/health/"},
                   "load": {"concurrency": 10, "duration_s": 5}}],
    "driver": "locust", "driver_options": {"locustfile": "django"},
    "repetitions": 1,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    experiment = experiment_from_dict(EXPERIMENT, source="capture_log")
    with tempfile.TemporaryDirectory(prefix="servelab-capture-") as tmp:
        options = RunOptions(results_dir=Path(tmp) / "results", stack_cpus="0",
                             driver_cpus="1")
        prepared = api.prepare(experiment, options)
        with api.started(prepared, print) as ready:
            spec = ready.experiment.baseline
            driver = get_driver("locust", ready.experiment.driver_options)
            request = RequestSpec(path="/health/")
            with launch_stack(spec, probe=request, cpus="0") as stack:
                load = LoadSpec(concurrency=args.users, duration_s=args.seconds,
                                max_time_s=args.seconds + 60)
                measured = run_load(driver, stack.url(request.path), request, load,
                                    Path(tmp) / "load", cpus="1")
                log = stack.workdir / ACCESS_LOG_NAME
                args.out.parent.mkdir(parents=True, exist_ok=True)
                if args.out.suffix == ".gz":
                    with (log.open("rb") as src, args.out.open("wb") as raw,
                          gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as dst):
                        shutil.copyfileobj(src, dst)
                else:
                    shutil.copyfile(log, args.out)
    print(f"captured {args.out}: Locust sent {measured.requests_total:,} requests "
          f"({measured.rps:,.1f} req/s, {measured.errors} errors); describe it with "
          f"`servelab traffic {args.out}`")


if __name__ == "__main__":
    main()
