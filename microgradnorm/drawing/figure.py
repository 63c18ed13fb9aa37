"""Small SVG figures for what is not a computation graph: curves, geometry, axes of a tensor.

A lesson demo (or the lab) returns a :class:`Figure` as its ``DemoOutput.graph``;
the lesson runner's ``g`` key then writes ``figure.svg()`` to a file, as it writes a
graph's SVG. The terminal picture is drawn separately (``drawing/charts.py``), from
the same numbers.

The figure keeps data coordinates: :meth:`Figure.to_px` maps them into the plot
box, y pointing up. Everything is plain SVG 1.1 text, with no script, no external
font and no network reference, so a file opens anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = ["PALETTE", "Figure", "line_chart_svg"]

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")


@dataclass
class Figure:
    """An SVG canvas ``width`` × ``height`` px whose plot box shows data x in ``xlim`` and y in ``ylim``."""

    width: int = 640
    height: int = 400
    xlim: tuple[float, float] = (0.0, 1.0)
    ylim: tuple[float, float] = (0.0, 1.0)
    margin: tuple[int, int, int, int] = (40, 20, 50, 60)  # top, right, bottom, left
    title: str = ""
    _items: list[str] = field(default_factory=list)

    def to_px(self, x: float, y: float) -> tuple[float, float]:
        """Data coordinates to pixels inside the plot box (y up)."""
        top, right, bottom, left = self.margin
        (x0, x1), (y0, y1) = self.xlim, self.ylim
        px = left + (x - x0) / ((x1 - x0) or 1.0) * (self.width - left - right)
        py = self.height - bottom - (y - y0) / ((y1 - y0) or 1.0) * (self.height - top - bottom)
        return round(px, 2), round(py, 2)

    def polyline(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        colour: str = PALETTE[0],
        dash: str = "",
        width: float = 2.0,
        closed: bool = False,
    ) -> None:
        """A line through the finite points (x, y) in data coordinates; a polygon outline when ``closed``."""
        points = " ".join(
            f"{px},{py}"
            for px, py in (self.to_px(x, y) for x, y in zip(xs, ys))
            if math.isfinite(px) and math.isfinite(py)
        )
        tag = "polygon" if closed else "polyline"
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self._items.append(f'<{tag} points="{points}" fill="none" stroke="{colour}" stroke-width="{width}"{dashed}/>')

    def arrow(
        self, start: tuple[float, float], end: tuple[float, float], colour: str = PALETTE[1], label: str = ""
    ) -> None:
        """An arrow from ``start`` to ``end`` (data coordinates) with an optional label at its head."""
        (x0, y0), (x1, y1) = self.to_px(*start), self.to_px(*end)
        angle = math.atan2(y1 - y0, x1 - x0)
        head = [(x1 - 10 * math.cos(angle + s), y1 - 10 * math.sin(angle + s)) for s in (0.4, -0.4)]
        self._items.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="{colour}" stroke-width="2"/>')
        tip = " ".join(f"{x:.2f},{y:.2f}" for x, y in [(x1, y1), *head])
        self._items.append(f'<polygon points="{tip}" fill="{colour}"/>')
        if label:
            self.text(end, label, colour=colour, dx=6, dy=-6)

    def dot(self, at: tuple[float, float], colour: str = PALETTE[0], radius: float = 4.0, label: str = "") -> None:
        """A filled point with an optional label beside it."""
        x, y = self.to_px(*at)
        self._items.append(f'<circle cx="{x}" cy="{y}" r="{radius}" fill="{colour}"/>')
        if label:
            self.text(at, label, colour=colour, dx=6, dy=-6)

    def text(
        self,
        at: tuple[float, float],
        words: str,
        colour: str = "#222",
        dx: float = 0,
        dy: float = 0,
        anchor: str = "start",
        size: int = 14,
    ) -> None:
        """Text at a data point, shifted by (dx, dy) pixels."""
        x, y = self.to_px(*at)
        self._items.append(
            f'<text x="{x + dx:.2f}" y="{y + dy:.2f}" fill="{colour}" font-size="{size}" '
            f'text-anchor="{anchor}">{escape(words)}</text>'
        )

    def axes(self, xlabel: str = "", ylabel: str = "", ticks: int = 5, log_y: bool = False) -> None:
        """The plot box's x and y axes with ``ticks`` labelled ticks each (y labels as 10^v when ``log_y``)."""
        (x0, x1), (y0, y1) = self.xlim, self.ylim
        self.polyline([x0, x1], [y0, y0], colour="#444", width=1)
        self.polyline([x0, x0], [y0, y1], colour="#444", width=1)
        for k in range(ticks + 1):
            xv, yv = x0 + (x1 - x0) * k / ticks, y0 + (y1 - y0) * k / ticks
            self.text((xv, y0), f"{xv:.3g}", dy=18, anchor="middle", size=12)
            self.text((x0, yv), f"1e{yv:.2g}" if log_y else f"{yv:.3g}", dx=-6, dy=4, anchor="end", size=12)
        self._items.append(
            f'<text x="{self.width / 2}" y="{self.height - 12}" font-size="14" '
            f'text-anchor="middle">{escape(xlabel)}</text>'
        )
        self._items.append(
            f'<text x="16" y="{self.height / 2}" font-size="14" text-anchor="middle" '
            f'transform="rotate(-90 16 {self.height / 2})">{escape(ylabel)}</text>'
        )

    def legend(self, entries: Sequence[tuple[str, str, str]]) -> None:
        """A legend in the lower right corner: one (name, colour, dash) per line."""
        for k, (name, colour, dash) in enumerate(entries):
            y = self.height - self.margin[2] - 20 * (len(entries) - k) + 10
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            self._items.append(
                f'<line x1="{self.width - 190}" y1="{y - 5}" x2="{self.width - 160}" y2="{y - 5}" '
                f'stroke="{colour}" stroke-width="2"{dashed}/>'
            )
            self._items.append(f'<text x="{self.width - 154}" y="{y}" font-size="13">{escape(name)}</text>')

    def svg(self) -> str:
        """The whole figure as one SVG document."""
        title = ""
        if self.title:
            title = (
                f'<text x="{self.width / 2}" y="24" font-size="16" font-weight="bold" '
                f'text-anchor="middle">{escape(self.title)}</text>'
            )
        body = "\n".join(self._items)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="sans-serif">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n{title}\n{body}\n</svg>\n'
        )


def line_chart_svg(
    series: Mapping[str, Sequence[float]],
    *,
    title: str = "",
    xlabel: str = "step",
    ylabel: str = "",
    log_y: bool = False,
    xs: Sequence[float] | None = None,
) -> Figure:
    """Curves on shared axes, one colour and one dash pattern per series, with a legend.

    ``xs`` are the x values of every series (default 0, 1, 2, ...). With ``log_y`` the
    curves are drawn as log10 of the values (non-positive values are left out).
    """
    if not series:
        raise ValueError("series: expected at least one named curve, got none")
    curves = {
        name: [math.log10(v) if log_y and v > 0 else (math.nan if log_y else float(v)) for v in values]
        for name, values in series.items()
    }
    length = max(len(v) for v in curves.values())
    xs = list(xs) if xs is not None else list(range(length))
    finite = [v for values in curves.values() for v in values if math.isfinite(v)] or [0.0, 1.0]
    low, high = min(finite), max(finite)
    pad = (high - low) * 0.05 or 1.0
    fig = Figure(xlim=(min(xs), max(xs) if len(xs) > 1 else min(xs) + 1), ylim=(low - pad, high + pad), title=title)
    fig.axes(xlabel=xlabel, ylabel=ylabel, log_y=log_y)
    styles = [(name, PALETTE[k % len(PALETTE)], _DASHES[k % len(_DASHES)]) for k, name in enumerate(curves)]
    for (_, colour, dash), values in zip(styles, curves.values()):
        fig.polyline(xs[: len(values)], values, colour=colour, dash=dash)
    fig.legend(styles)
    return fig
