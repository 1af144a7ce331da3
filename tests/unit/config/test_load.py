"""Loads: every run bounded; knob errors for recycling and somaxconn."""

from __future__ import annotations

import pytest

from servelab.errors import SpecError
from servelab.host.netns import check_somaxconn
from servelab.prepare.building import experiment_from_dict


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ({"model": "open", "rate": 0, "requests": 10}, "greater than 0"),
        ({"model": "open", "rate": -1, "requests": 10}, "greater than 0"),
        ({"model": "open", "rate": 10, "duration_s": -1}, "greater than 0"),
        ({"model": "open", "rate": 1e9, "duration_s": 500}, "more than 10,000,000"),
        ({"model": "open", "rate": 1, "requests": 10_000}, "take 10,000 s to send"),
        ({"requests": 10, "max_time_s": 7200}, "less than or equal to 3600"),
        ({"model": "bursts", "requests": 10}, "needs burst_size and burst_gap_s"),
        ({"burst_size": 5, "requests": 10}, "belong to model = 'bursts'"),
        (
            {"model": "bursts", "burst_size": 1, "burst_gap_s": 10, "requests": 100},
            "take 1,000 s",
        ),
    ],
)
def test_unbounded_or_negative_loads_are_refused(load: dict, message: str) -> None:
    data = {
        "name": "x",
        "baseline": {},
        "workloads": [{"name": "w", "load": load}],
    }
    with pytest.raises(SpecError) as caught:
        experiment_from_dict(data)
    assert message in caught.value.one_line()


def test_knob_errors_for_recycling_and_somaxconn() -> None:
    base = {"name": "x", "workloads": [{"name": "w"}]}
    with pytest.raises(SpecError, match="max_requests_jitter needs max_requests"):
        experiment_from_dict({**base, "baseline": {"server": {"max_requests_jitter": 5}}})
    with pytest.raises(SpecError, match=r"network\.somaxconn"):
        experiment_from_dict({**base, "baseline": {"network": {"somaxconn": 0}}})
    with pytest.raises(SpecError, match="out of range"):
        check_somaxconn(70_000)
    assert check_somaxconn(128) == 128


# Requests by HTTP's rules (RFC 9110 tokens and field values, RFC 3986 paths): a line break
# in a header or path would split the request; refused when the spec is read.
@pytest.mark.parametrize(
    ("request_table", "message"),
    [
        ({"headers": {"X": "a\r\nY: b"}}, "header 'X' has the control character '\\r'"),
        ({"headers": {"X": "a\nb"}}, "control character '\\n'"),
        ({"headers": {"X": "a\x00"}}, "control character '\\x00'"),
        ({"headers": {"X": "a\x7f"}}, "control character '\\x7f'"),
        ({"headers": {"X Token": "a"}}, "header name 'X Token' is not an HTTP token"),
        ({"headers": {"X:Y": "a"}}, "is not an HTTP token"),
        ({"headers": {"": "a"}}, "header name '' is not an HTTP token"),
        ({"headers": {"Caf\u00e9": "a"}}, "is not an HTTP token"),
        ({"content_type": "text/plain\r\nX: y"}, "header 'Content-Type' has the control"),
        ({"path": "/a b"}, "has ' ', which a request line cannot carry"),
        ({"path": "/a\r\nHost: x"}, "has '\\r'"),
        ({"path": "/caf\u00e9"}, "percent-encode it"),
        ({"path": "/a#frag"}, "has '#'"),
        ({"path": "/100%"}, "has '%'"),
        ({"path": "relative"}, "must start with '/'"),
        ({"mix": [{"path": "/ok"}, {"path": "/not ok"}]}, "path '/not ok' has ' '"),
        ({"method": "GET\r\n"}, "method: Input should be"),
        ({"method": "BREW"}, "method: Input should be"),
    ],
)
def test_a_request_breaking_http_rules_is_refused(request_table: dict, message: str) -> None:
    data = {
        "name": "x",
        "baseline": {},
        "workloads": [{"name": "w", "request": request_table, "load": {"requests": 10}}],
    }
    with pytest.raises(SpecError) as caught:
        experiment_from_dict(data)
    assert message in caught.value.one_line()
    assert "\n" not in caught.value.one_line().replace("\\n", "")  # one line


@pytest.mark.parametrize(
    "request_table",
    [
        {"headers": {"Authorization": "Bearer a.b-c~d", "X-Tab": "a\tb", "X-Utf8": "caf\u00e9",
                     "!#$%&'*+-.^_`|~": "tchars"}},
        {"path": "/api/items?page=2&q=a%20b;c=(d):e@f,g!h*i'j$k+l=m~n.o_p-q"},
        {"method": "DELETE", "path": "/"},
    ],
)
def test_a_request_within_http_rules_is_taken(request_table: dict) -> None:
    data = {
        "name": "x",
        "baseline": {},
        "workloads": [{"name": "w", "request": request_table, "load": {"requests": 10}}],
    }
    experiment_from_dict(data)
