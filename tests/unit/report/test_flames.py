"""Flame graphs drawn by servelab: widths, colours of the differential graph, escaping,
and speedscope's JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from servelab.report.flames import flame_svg, speedscope_json

SVG = "{http://www.w3.org/2000/svg}"


def _frames(svg: str) -> dict[str, tuple[float, str]]:
    """frame label (its tooltip's name) -> (width, fill)."""
    root = ET.fromstring(svg)
    found = {}
    for group in root.iter(f"{SVG}g"):
        tip = group.find(f"{SVG}title").text
        rect = group.find(f"{SVG}rect")
        found[tip.split(":")[0]] = (float(rect.get("width")), rect.get("fill"))
    return found


def test_widths_are_cpu_per_request() -> None:
    frames = _frames(flame_svg(
        {("app", "a"): 75.0, ("app", "b"): 25.0, ("nginx", "(not profiled)"): 100.0},
        title="v",
    ))
    assert frames["all"][0] == 1000.0
    assert frames["app"][0] == 500.0 and frames["a"][0] == 375.0 and frames["b"][0] == 125.0


def test_differential_red_grew_blue_shrank_and_escapes_labels() -> None:
    svg = flame_svg(
        {("app", "grew <x>"): 80.0, ("app", "same"): 50.0},
        {("app", "grew <x>"): 20.0, ("app", "same"): 50.0, ("app", "gone"): 30.0},
        title="v vs b & c",
    )
    frames = _frames(svg)  # parses: the labels and the title are escaped
    red = frames["grew <x>"][1]
    blue = frames["gone"][1]
    r, g, b = (int(x) for x in red[4:-1].split(","))
    assert r > g and r > b
    r, g, b = (int(x) for x in blue[4:-1].split(","))
    assert b > r and b > g
    assert frames["same"][1] == "rgb(210,210,210)"
    assert frames["gone"][0] > 0  # shrunk to nothing, still drawn as wide as it was


def test_speedscope_holds_each_variant() -> None:
    document = json.loads(speedscope_json(
        {"base": {("app", "a"): 2.0}, "spin": {("app", "a"): 2.0, ("app", "s"): 3.0}},
        name="x",
    ))
    names = [f["name"] for f in document["shared"]["frames"]]
    assert names == ["app", "a", "s"]
    spin = document["profiles"][1]
    assert spin["type"] == "sampled" and spin["weights"] == [2.0, 3.0]
    assert [[names[i] for i in sample] for sample in spin["samples"]] == [["app", "a"],
                                                                          ["app", "s"]]
