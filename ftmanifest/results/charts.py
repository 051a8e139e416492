"""Inline SVG charts for the handoff report.

Layer: judging rooms - edge (rendering).  Pure functions from comparison rows to SVG
markup: no I/O, no scripts, no fonts or images fetched, a fixed ``viewBox`` and
coordinates rounded to one decimal so the same rows give the same bytes.  The SVG is
built as an element tree, never by pasting strings, so a category name such as
``<script>`` is serialised as text; every string is also passed through
``safe_text.escape`` so control and BiDi characters show.

``category_chart`` draws, per category, a baseline bar and a candidate bar,
the tolerance (``baseline - max_drop``) as a dashed line across the pair,
and, when the comparison has a paired-bootstrap interval of the difference
(``ci_low``/``ci_high``, candidate minus baseline), a whisker on the
candidate bar from ``baseline + ci_low`` to ``baseline + ci_high``: a
whisker that reaches below the dashed line is a pass not established.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from ftmanifest.safe_text import escape

WIDTH = 720
HEIGHT = 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 40, 84
_LABEL_CHARS = 16

COLOURS = {
    "baseline": "#8c96a0",
    "candidate": "#2f6fb3",
    "fail": "#c0392b",
    "tolerance": "#d35400",
    "ci": "#1b1b1b",
    "grid": "#d9dde1",
    "text": "#1b1b1b",
}


_LEGEND = (
    ("baseline", "baseline"),
    ("candidate", "candidate"),
    ("fail", "candidate below tolerance"),
    ("tolerance", "tolerance (baseline - max_drop)"),
)


def _num(value: object) -> float | None:
    """A finite number, or None for anything else (missing, text, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _short(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "\u2026"


def _scale_top(rows: Sequence[Mapping[str, Any]]) -> float:
    """1.0 for rates and scores (the usual case); else a round number above the largest."""
    peak = 0.0
    for row in rows:
        base = _num(row.get("baseline"))
        for key in ("baseline", "candidate"):
            peak = max(peak, _num(row.get(key)) or 0.0)
        high = _num(row.get("ci_high"))
        if base is not None and high is not None:
            peak = max(peak, base + high)
    if peak <= 1.0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(peak))
    return math.ceil(peak / magnitude) * magnitude


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()})
    if text is not None:
        el.text = text
    return el


def chartable(rows: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The rows that can be drawn: a category name and at least one number."""
    out: list[Mapping[str, Any]] = []
    for row in rows or ():
        if not isinstance(row, Mapping):
            continue
        if _num(row.get("baseline")) is None and _num(row.get("candidate")) is None:
            continue
        out.append(row)
    return out


def category_chart(rows: Sequence[Mapping[str, Any]] | None, *, title: str | None = None) -> str:
    """SVG markup of the per-category chart, or ``""`` when nothing can be drawn."""
    drawn = chartable(rows)
    if not drawn:
        return ""
    top = _scale_top(drawn)
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(drawn)
    bar_w = min(36.0, slot * 0.34)
    rotate = len(drawn) > 6

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - max(0.0, min(value, top)) / top)

    heading = title or "Per-category scores: baseline against candidate, with the tolerance"
    label = (
        f"{heading}. {len(drawn)} categories; grey bars baseline, blue bars candidate "
        "(red where below tolerance); dashed line at baseline minus max_drop."
    )
    svg = ET.Element(
        "svg",
        {
            "class": "chart",
            "viewBox": f"0 0 {WIDTH} {HEIGHT}",
            "width": "100%",
            "role": "img",
            "aria-label": label,
            "font-family": "system-ui, sans-serif",
            "font-size": "12",
        },
    )
    _sub(svg, "title", heading)
    _sub(svg, "desc", label)

    axis = _sub(svg, "g", class_="axis")
    for i in range(5):
        tick = top * i / 4
        ty = _fmt(y(tick))
        _sub(
            axis,
            "line",
            x1=str(_LEFT),
            x2=str(WIDTH - _RIGHT),
            y1=ty,
            y2=ty,
            stroke=COLOURS["grid"],
            stroke_width="1",
        )
        _sub(
            axis,
            "text",
            f"{tick:g}",
            x=str(_LEFT - 6),
            y=_fmt(y(tick) + 4),
            text_anchor="end",
            fill=COLOURS["text"],
        )

    for i, row in enumerate(drawn):
        name = escape(str(row.get("category", f"category {i + 1}")))
        base = _num(row.get("baseline"))
        cand = _num(row.get("candidate"))
        drop = _num(row.get("max_drop"))
        low, high = _num(row.get("ci_low")), _num(row.get("ci_high"))
        verdict = escape(str(row.get("verdict") or ""))
        below = base is not None and cand is not None and drop is not None and cand < base - drop
        failed = below or verdict.lower() in ("fail", "refused", "regressed")
        group = _sub(svg, "g", class_="category", data_category=name)
        _sub(
            group,
            "title",
            f"{name}: baseline {_value(base)}, candidate {_value(cand)}"
            + (f", max_drop {_value(drop)}" if drop is not None else "")
            + (f", verdict {verdict}" if verdict else ""),
        )
        centre = _LEFT + slot * (i + 0.5)
        for side, value, x0 in (
            ("baseline", base, centre - bar_w - 1),
            ("candidate", cand, centre + 1),
        ):
            if value is None:
                continue
            colour = COLOURS["fail" if side == "candidate" and failed else side]
            bar = _sub(
                group,
                "rect",
                class_=f"bar {side}",
                x=_fmt(x0),
                y=_fmt(y(value)),
                width=_fmt(bar_w),
                height=_fmt(y(0) - y(value)),
                fill=colour,
            )
            _sub(bar, "title", f"{name} {side}: {_value(value)}")
        if base is not None and drop is not None:
            ty = _fmt(y(base - drop))
            line = _sub(
                group,
                "line",
                class_="tolerance",
                x1=_fmt(centre - bar_w - 6),
                x2=_fmt(centre + bar_w + 6),
                y1=ty,
                y2=ty,
                stroke=COLOURS["tolerance"],
                stroke_width="2",
                stroke_dasharray="5 3",
            )
            _sub(line, "title", f"{name} tolerance: {_value(base - drop)}")
        if base is not None and cand is not None and low is not None and high is not None:
            cx = _fmt(centre + 1 + bar_w / 2)
            y_lo, y_hi = _fmt(y(base + low)), _fmt(y(base + high))
            ci = _sub(group, "g", class_="ci", stroke=COLOURS["ci"], stroke_width="1.5")
            _sub(ci, "title", f"{name} interval: {_value(base + low)} to {_value(base + high)}")
            _sub(ci, "line", x1=cx, x2=cx, y1=y_lo, y2=y_hi)
            for yy in (y_lo, y_hi):
                _sub(ci, "line", x1=_fmt(float(cx) - 5), x2=_fmt(float(cx) + 5), y1=yy, y2=yy)
        lx, ly = _fmt(centre), _fmt(y(0) + 16)
        text = _sub(
            group,
            "text",
            _short(name),
            x=lx,
            y=ly,
            fill=COLOURS["text"],
            text_anchor="end" if rotate else "middle",
        )
        if rotate:
            text.set("transform", f"rotate(-35 {lx} {ly})")

    legend = _sub(svg, "g", class_="legend")
    x0 = float(_LEFT)
    for key, words in _LEGEND:
        if key == "tolerance":
            _sub(legend, "line", x1=_fmt(x0), x2=_fmt(x0 + 14), y1="18", y2="18",
                 stroke=COLOURS[key], stroke_width="2", stroke_dasharray="5 3")  # fmt: skip
        else:
            _sub(legend, "rect", x=_fmt(x0), y="12", width="12", height="12", fill=COLOURS[key])
        _sub(legend, "text", words, x=_fmt(x0 + 18), y="22", fill=COLOURS["text"])
        x0 += 18 + 7 * len(words) + 24
    return ET.tostring(svg, encoding="unicode", short_empty_elements=True)
