"""``servelab traffic`` in-process: describing a combined log written here, its files,
making a synthetic log, and the mistakes told in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

# 2024-05-06 12:00:00 UTC is 14:00:00 +0200: 20 requests a second for 30 s, a burst of 60
# more in second 10, one line a second late and one unreadable line among 662.
ZONE = "+0200"


def combined(second: int, target: str, method: str = "GET", status: int = 200) -> str:
    return (f'192.0.2.{second % 250} - - [06/May/2024:14:00:{second:02d} {ZONE}] '
            f'"{method} {target} HTTP/1.1" {status} 512 "-" "Mozilla/5.0"')


def write_log(path: Path) -> Path:
    lines = []
    for second in range(30):
        for i in range(20):
            lines.append(combined(second, f"/items/{i}?page=2" if i % 2 else "/health"))
        if second == 10:
            lines += [combined(10, "/orders/550e8400-e29b-41d4-a716-446655440000", "POST", 201)
                      for _ in range(60)]
        if second == 20:
            lines += [combined(19, "/items/7"), "\x16\x03\x01 not a request"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_log_described(tmp_path: Path) -> None:
    log = write_log(tmp_path / "access.log")
    done = run_cli("traffic", str(log), "--top", "2")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for said in (
        "lines 662: 661 read, 1 unreadable, 1 reordered, 0 too late",
        "first unreadable " + str(log) + " line 482: '\\x16\\x03\\x01 not a request'",
        "2024-05-06 12:00:00 UTC to 2024-05-06 12:00:29 UTC (30 s)",
        "requests 661",
        "mean rate 22.03 req/s, 1,322.0 req/min",
        "peak second 80 req/s at 2024-05-06 12:00:10 UTC",
        # no "× the mean" for a minute: the log is shorter than two
        "peak minute 661 req/min at 2024-05-06 12:00 UTC rate over time",
        "0 to 80 req/s, counted per second",
        "GET 601 (90.9 %), POST 60 (9.1 %)",
        "200 601 (90.9 %), 201 60 (9.1 %)",
        "/items/{id}", "/health", "and 1 more route: 60 requests (9.1 %)",
    ):
        assert said in text, said
    assert "/orders/{uuid}" not in text  # past --top


def test_its_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    log = write_log(tmp_path / "access.log")
    done = run_cli("traffic", str(log), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["traffic.html", "traffic.json", "traffic.md", "traffic.png", "traffic.svg"]
    data = json.loads((tmp_path / "out" / "traffic.json").read_text())
    assert data["requests"] == 661 and data["reading"]["unreadable"] == 1
    assert [r["route"] for r in data["routes"]] == ["/items/{id}", "/health", "/orders/{uuid}"]
    assert (tmp_path / "out" / "traffic.md").read_text().startswith("# Traffic: access.log")
    assert "wrote traffic.json, traffic.md" in done.stderr


def test_a_synthetic_log_made_and_described(tmp_path: Path) -> None:
    made = tmp_path / "made.log"
    args = ["traffic", "--make-log", str(made), "--app", "fastapi", "--duration", "2m",
            "--rate", "10", "--seed", "3", "--start", "2024-05-06T08:00:00+02:00"]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    lines = made.read_text().splitlines()
    assert f"wrote {len(lines):,} lines to {made}" in done.stderr
    assert all(" +0200] " in line for line in lines)
    assert "2024-05-06 06:00:00 UTC to 2024-05-06 06:01:59 UTC (2 min)" in done.stdout
    assert "/async/items/" in done.stdout
    again = tmp_path / "again.log"
    assert run_cli(*[str(again) if a == str(made) else a for a in args]).returncode == 0
    assert again.read_text() == made.read_text()  # the same seed, the same log


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "give the access logs to describe (LOG...), or --make-log FILE to make one "
             "(fix: see `servelab traffic --help`)"),
        (["LOG", "--make-log", "x.log"], "give LOG files to describe, or --make-log to make "
                                         "one, not both"),
        (["--rate", "5"], "--rate only shape a synthetic log (fix: add --make-log FILE"),
        (["LOG", "--app", "django", "--no-bursts"], "--app, --no-bursts only shape"),
        (["nope.log"], "cannot read the access log nope.log"),
        (["LOG", "--log-format", "json"], "json"),
        (["LOG", "--log-field", "time"], "--log-field 'time' is not NAME=KEY"),
        (["--make-log", "x.log", "--duration", "soon"], "invalid duration 'soon'"),
        (["--make-log", "x.log", "--rate", "0"], "--rate must be positive"),
        (["--make-log", "x.log", "--start", "yesterday"], "--start 'yesterday' is not a date"),
        (["--make-log", "x.log", "--app", "rails"], "Invalid value for '--app'"),
        (["--make-log", "x.log", "--log-format", "json"], "a made log is in the combined"),
        (["--make-log", "LOG"], "exists (fix: give a new file name, or remove that file"),
        (["LOG", "--top", "0"], "Invalid value for '--top'"),
    ],
)
def test_mistakes_are_one_line(args: list[str], said: str, tmp_path: Path) -> None:
    log = write_log(tmp_path / "access.log")
    done = run_cli("traffic", *[str(log) if a == "LOG" else a for a in args], cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("servelab: error: ") and said in line, line
    assert not (tmp_path / "x.log").exists()
