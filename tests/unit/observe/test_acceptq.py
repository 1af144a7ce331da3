"""The listen queue, read from ss's output."""

from __future__ import annotations

from pathlib import Path

from servelab.observe.acceptq import parse_ss


def test_parse_ss_finds_the_listening_socket() -> None:
    unix = "u_str LISTEN 3      7      /tmp/x.sock 1580765 * 0\nu_str LISTEN 0 5 /other 1 * 0\n"
    assert parse_ss(unix, Path("/tmp/x.sock")) == (3, 7)
    assert parse_ss(unix, Path("/tmp/none.sock")) is None
    tcp = "LISTEN 129    128    127.0.0.1:5555 0.0.0.0:*\n"
    assert parse_ss(tcp, ("127.0.0.1", 5555)) == (129, 128)
    assert parse_ss(tcp, ("127.0.0.1", 555)) is None
