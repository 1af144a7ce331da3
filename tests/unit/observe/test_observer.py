"""What the observer counts beside the load: nginx's access log by client address."""

from __future__ import annotations

from pathlib import Path

from servelab.measuring.slices import merge_observed
from servelab.observe.observer import clients_in


def test_the_windows_requests_by_client_address(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    line = ' - - [28/Nov/2026:22:00:00 +0000] "GET / HTTP/1.1" 200 3 "-" "oha/1.16.0"\n'
    log.write_text("127.0.0.1" + line)  # a readiness probe, before the window
    offset = log.stat().st_size
    with log.open("a") as more:
        more.write(("10.213.7.2" + line) * 5 + "10.213.7.1" + line + "10.213.7.2" + line)
    assert clients_in(log, offset) == {"10.213.7.1": 1, "10.213.7.2": 6}
    assert clients_in(tmp_path / "missing.log", 0) == {}


def test_slices_add_their_counts() -> None:
    part = {"log_events": {}, "log_examples": {}, "listen_queue": None, "notes": (),
            "front_requests_by_client": {"a": 2}}
    other = {**part, "front_requests_by_client": {"a": 1, "b": 4}}
    merged = merge_observed([part, other], [1.0, 1.0])
    assert merged["front_requests_by_client"] == {"a": 3, "b": 4}
    without = {k: v for k, v in part.items() if k != "front_requests_by_client"}
    assert "front_requests_by_client" not in merge_observed([without, without], [1.0, 1.0])
