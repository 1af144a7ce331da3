"""Paths grouped into routes: ids collapsed, words and versions kept, the query dropped."""

from __future__ import annotations

import pytest

from servelab.traffic.routes import route_of, segment_id

CASES = [
    # numbers
    ("/items/123", "/items/{id}"),
    ("/items/123/", "/items/{id}/"),
    ("/authors/7/books/42", "/authors/{id}/books/{id}"),
    ("/archive/2024/05/", "/archive/{id}/{id}/"),
    ("/0", "/{id}"),
    # UUIDs, either case
    ("/api/v2/users/550e8400-e29b-41d4-a716-446655440000/",
     "/api/v2/users/{uuid}/"),
    ("/orders/550E8400-E29B-41D4-A716-446655440000", "/orders/{uuid}"),
    # long hex: hashes, object ids
    ("/commits/3f786850e387550fdab836ed7e6dc881de23001b", "/commits/{token}"),
    ("/objects/507f1f77bcf86cd799439011", "/objects/{token}"),
    ("/files/0123456789abcdef", "/files/{token}"),  # 16 hex digits
    ("/files/0123456789abcde", "/files/0123456789abcde"),  # 15: a name
    # base64 and other long mixed tokens
    ("/reset/Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", "/reset/{token}"),
    ("/s/aB3dE6gH9jK2mN5pQ8sT1v", "/s/{token}"),
    ("/confirm/xY7_kL2-pQ9zR4sT6uV8wA==", "/confirm/{token}"),
    ("/blog/how-to-serve-python-apps-2024", "/blog/{token}"),  # a slug with a number
    # words, versions and short codes stay
    ("/", "/"),
    ("/health", "/health"),
    ("/health/", "/health/"),
    ("/api/v2/users", "/api/v2/users"),
    ("/api/v10/status", "/api/v10/status"),
    ("/en-gb/about", "/en-gb/about"),
    ("/static/deadbeef.css", "/static/deadbeef.css"),
    ("/sync/big_json_response/", "/sync/big_json_response/"),
    ("/a-very-long-article-title-without-numbers", "/a-very-long-article-title-without-numbers"),
    ("/item42", "/item42"),
    ("/2.0/docs", "/2.0/docs"),
    # file extensions kept after an id
    ("/photos/123.jpg", "/photos/{id}.jpg"),
    ("/export/550e8400-e29b-41d4-a716-446655440000.json", "/export/{uuid}.json"),
    ("/static/app.3f9a8b7c6d5e4f3a.js", "/static/{asset}.js"),  # a build fingerprint
    ("/static/jquery-ui-1.13.2.custom.min.js", "/static/jquery-ui-1.13.2.custom.min.js"),
    # the query string and fragment are not part of a route
    ("/books/?min=1000&max=3000", "/books/"),
    ("/search?q=123", "/search"),
    ("/items/9?page=2#top", "/items/{id}"),
    # odd request lines
    ("", "/"),
    ("*", "*"),
    ("http://example.com/items/12?x=1", "/items/{id}"),
    ("https://example.com", "/"),
    ("//double//slash/5", "//double//slash/{id}"),
]


@pytest.mark.parametrize(("path", "route"), CASES)
def test_route_of(path: str, route: str) -> None:
    assert route_of(path) == route


def test_route_of_is_idempotent() -> None:
    for path, route in CASES:
        assert route_of(route) == route, path


@pytest.mark.parametrize(
    ("segment", "placeholder"),
    [("1", "{id}"), ("v2", None), ("users", None), ("abcdefabcdefabcd", "{token}"),
     ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", None), ("", None)],
)
def test_segment_id(segment: str, placeholder: str | None) -> None:
    assert segment_id(segment) == placeholder
