"""Flame graphs as inline SVG, and speedscope's JSON, from CPU per request by stack.

A flame graph's widths are CPU µs per request (``analysis.profile.mean_stacks``); the
root's children are the parts of the stack (``app workers``, ``nginx``...). A
differential graph (variant against baseline) is as wide as the larger of the two at
every frame and coloured by the change: red where the variant's CPU per request grew,
blue where it shrank, grey where it stayed within 2 % of the frame. Drawn here: the
flame-graph libraries on PyPI draw cProfile's output or need a web app
(docs/dependencies.md). Every label is escaped; each frame's title is its tooltip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape

Stack = tuple[str, ...]
WIDTH = 1000.0
ROW = 17
FONT = 11
CHAR_W = 6.2  # an 11 px monospace character, to clip labels to their frames
MIN_W = 0.3  # frames narrower than this many pixels are left out


@dataclass
class _Node:
    name: str
    value: float = 0.0  # the width: variant's, or max(variant, baseline)
    mine: float = 0.0
    base: float = 0.0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(mine: Mapping[Stack, float], base: Mapping[Stack, float] | None) -> _Node:
    root = _Node("all")
    for stacks, side in ((mine, "mine"), (base or {}, "base")):
        for stack, value in stacks.items():
            node = root
            setattr(node, side, getattr(node, side) + value)
            for frame in stack:
                node = node.children.setdefault(frame, _Node(frame))
                setattr(node, side, getattr(node, side) + value)

    def size(node: _Node) -> float:
        for child in node.children.values():
            size(child)
        own = node.mine if base is None else max(node.mine, node.base)
        node.value = max(own, sum(c.value for c in node.children.values()))
        return node.value

    size(root)
    return root


def _colour(node: _Node, differential: bool) -> str:
    if not differential:  # warm tones, varied by name so neighbours differ
        shade = sum(map(ord, node.name)) % 60
        return f"rgb({205 + shade // 3},{90 + shade},{40 + shade // 2})"
    change = node.mine - node.base
    scale = max(node.mine, node.base)
    if scale <= 0 or abs(change) < 0.02 * scale:
        return "rgb(210,210,210)"
    strength = min(1.0, abs(change) / scale)
    fade = round(220 - 170 * strength)
    return f"rgb(230,{fade},{fade})" if change > 0 else f"rgb({fade},{fade},230)"


def flame_svg(
    mine: Mapping[Stack, float],
    baseline: Mapping[Stack, float] | None = None,
    *,
    title: str,
    unit: str = "µs/request",
) -> str:
    """An SVG flame graph of ``mine``; with ``baseline``, the differential one."""
    root = _tree(mine, baseline)
    differential = baseline is not None
    rects: list[str] = []
    scale = WIDTH / root.value if root.value > 0 else 0.0

    def deepest(node: _Node, depth: int) -> int:
        shown = [c for c in node.children.values() if c.value * scale >= MIN_W]
        return max((deepest(c, depth + 1) for c in shown), default=depth)

    depth_max = deepest(root, 0)
    top = 24
    height = top + (depth_max + 1) * ROW + 4

    def draw(node: _Node, x: float, depth: int) -> None:
        width = node.value * scale
        if width < MIN_W:
            return
        y = top + (depth_max - depth) * ROW  # the root at the bottom, as flame graphs are
        tip = f"{node.name}: {node.mine:.1f} {unit}"
        if differential:
            tip += f" (baseline {node.base:.1f}, {node.mine - node.base:+.1f})"
        chars = int((width - 4) / CHAR_W)
        label = node.name if len(node.name) <= chars else node.name[: max(chars - 1, 0)] + "…"
        rects.append(
            f'<g class="frame"><title>{escape(tip)}</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{width:.2f}" height="{ROW - 1}" '
            f'fill="{_colour(node, differential)}" rx="2"/>'
            + (f'<text x="{x + 3:.2f}" y="{y + ROW - 5}">{escape(label)}</text>'
               if chars >= 3 else "")
            + "</g>"
        )
        offset = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            draw(child, offset, depth + 1)
            offset += child.value * scale

    draw(root, 0.0, 0)
    body = "".join(rects)
    legend = " (red: grew, blue: shrank against the baseline)" if differential else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="flame" viewBox="0 0 {WIDTH:.0f} '
        f'{height}" width="100%" font-family="monospace" font-size="{FONT}">'
        f'<text x="0" y="14" font-size="13">{escape(title)}: {root.mine:.1f} {unit}'
        f"{escape(legend)}</text>{body}</svg>"
    )


def speedscope_json(profiles: Mapping[str, Mapping[Stack, float]], *, name: str) -> str:
    """speedscope's file format: one sampled profile per variant, weights in µs/request."""
    frames: dict[str, int] = {}

    def index(frame: str) -> int:
        return frames.setdefault(frame, len(frames))

    documents = []
    for title, stacks in profiles.items():
        ordered = sorted(stacks.items())
        samples = [[index(frame) for frame in stack] for stack, _ in ordered]
        weights = [round(value, 3) for _, value in ordered]
        documents.append({
            "type": "sampled", "name": title, "unit": "none",
            "startValue": 0, "endValue": round(sum(weights), 3),
            "samples": samples, "weights": weights,
        })
    return json.dumps({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": "servelab",
        "shared": {"frames": [{"name": frame} for frame in frames]},
        "profiles": documents,
    })
