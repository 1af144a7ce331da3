"""somaxconn without root: the backlog fallback, and namespace 'off'."""

from __future__ import annotations

import pytest

from servelab.host import netns
from servelab.host.netns import NamespaceError, network_namespace, place_stack


def test_without_root_somaxconn_falls_back_to_the_backlog(monkeypatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "needs root" in (netns.unavailable_reason() or "")
    with place_stack(128, "auto") as placement:
        assert placement.namespace is None and placement.backlog_cap == 128
        assert "needs root" in placement.note
        assert "capping the app server's backlog" in placement.note
    with pytest.raises(NamespaceError, match="needs root") as caught, place_stack(128, "require"):
        pass
    assert "--netns off" in caught.value.fix
    with pytest.raises(NamespaceError), network_namespace(128):
        pass


def test_namespace_off_never_creates_one() -> None:
    with place_stack(64, "off") as placement:
        assert placement.namespace is None and placement.backlog_cap == 64
        assert "namespace = 'off'" in placement.note
    with place_stack(None, "auto") as placement:
        assert placement.namespace is None and placement.backlog_cap is None
        assert placement.note == ""
