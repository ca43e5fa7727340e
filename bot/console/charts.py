"""Charts as SVG drawn on the server: no script, no library, nothing fetched elsewhere.

Why by hand: a bar chart is a few rectangles; the page stays plain HTML that works with
JavaScript off, and the Content-Security-Policy can forbid inline styles (geometry is in
SVG attributes, colours come from classes in console.css). Every label is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape


@dataclass(frozen=True)
class Bar:
    label: str  # under the bar (may be empty to skip one)
    values: tuple[int, ...]  # stacked bottom-up, one per series
    tip: str  # the bar's tooltip (<title>)


@dataclass(frozen=True)
class Segment:
    key: str  # CSS class suffix: seg-system, seg-history, ...
    label: str
    tokens: int


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def bar_chart(
    bars: Sequence[Bar],
    series: Sequence[str],
    *,
    title: str,
    width: int = 720,
    height: int = 160,
) -> Markup:
    """Stacked vertical bars, one per entry; `series` are CSS class suffixes."""
    top = max((sum(bar.values) for bar in bars), default=0)
    scale_top = max(top, 1)
    plot_h = height - 24
    step = width / max(len(bars), 1)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" preserveAspectRatio="none">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="0" y1="{plot_h}" x2="{width}" y2="{plot_h}"/>',
        f'<text class="scale" x="2" y="10">{top}</text>',
    ]
    for index, bar in enumerate(bars):
        x = index * step + step * 0.1
        bottom = float(plot_h)
        parts.append(f'<g class="bar"><title>{escape(bar.tip)}</title>')
        for name, value in zip(series, bar.values, strict=True):
            if value <= 0:
                continue
            h = value / scale_top * (plot_h - 12)
            bottom -= h
            parts.append(
                f'<rect class="s-{escape(name)}" x="{_num(x)}" y="{_num(bottom)}" '
                f'width="{_num(step * 0.8)}" height="{_num(h)}"/>'
            )
        parts.append("</g>")
        if bar.label:
            parts.append(
                f'<text class="label" x="{_num(x + step * 0.4)}" y="{height - 8}" '
                f'text-anchor="middle">{escape(bar.label)}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def stacked_bar(
    segments: Sequence[Segment], *, title: str, width: int = 720, css: str = "picture"
) -> Markup:
    """One horizontal bar split into segments proportional to their tokens."""
    total = sum(max(0, s.tokens) for s in segments) or 1
    height = 36
    x = 0.0
    parts = [
        f'<svg class="{escape(css)}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" preserveAspectRatio="none">',
        f"<title>{escape(title)}</title>",
    ]
    for seg in segments:
        if seg.tokens <= 0:
            continue
        w = seg.tokens / total * width
        parts.append(
            f'<rect class="seg seg-{escape(seg.key)}" data-tokens="{seg.tokens}" '
            f'x="{_num(x)}" y="0" width="{_num(w)}" height="{height}">'
            f"<title>{escape(seg.label)}: {seg.tokens} tokens</title></rect>"
        )
        x += w
    parts.append("</svg>")
    return Markup("".join(parts))
