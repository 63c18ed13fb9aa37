"""A flat picture in the terminal, drawn with braille dots: circles, segments and labelled points.

Each character cell holds a 2 × 4 grid of dots (Unicode braille, U+2800 to
U+28FF), and a terminal cell is about twice as tall as it is wide, so the dots
are square: a circle comes out round. :class:`PlanePicture` maps data
coordinates (both axes on one scale, y up) onto those dots.

Meaning never rests on colour alone: every point and arrow tip carries a
letter, and the legend names each letter in words. With colour (and no
``NO_COLOR``) each layer also gets its own colour.

The words (title, legend) are the caller's, already in the reader's language;
widths are measured in terminal cells, so a Chinese legend (two cells a
character) still sits beside the picture when it fits, and wraps the Chinese
way below it when it does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.measure import Measurement
from rich.text import Text

from microgradnorm.drawing.charts import uses_colour
from microgradnorm.i18n.text import cjk_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = ["BrailleCanvas", "PlanePicture"]

_BRAILLE = 0x2800
# the bit of each dot within a cell, indexed [row][column], rows top to bottom
_DOT_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))


class BrailleCanvas:
    """A grid of ``cols`` × ``rows`` cells, that is 2·cols × 4·rows dots, y pointing down."""

    def __init__(self, cols: int, rows: int) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"cols, rows: expected at least 1 cell each way, got {cols} × {rows}")
        self.cols, self.rows = cols, rows
        self._bits = [[0] * cols for _ in range(rows)]
        self._styles: list[list[str | None]] = [[None] * cols for _ in range(rows)]
        self._labels: dict[tuple[int, int], tuple[str, str | None]] = {}

    @property
    def size(self) -> tuple[int, int]:
        """The canvas in dots: (width, height)."""
        return 2 * self.cols, 4 * self.rows

    def dot(self, x: float, y: float, style: str | None = None) -> None:
        """Set the dot nearest to (x, y), in dots from the top left; dots off the canvas are dropped."""
        col, row = round(x), round(y)
        if not (0 <= col < 2 * self.cols and 0 <= row < 4 * self.rows):
            return
        self._bits[row // 4][col // 2] |= _DOT_BITS[row % 4][col % 2]
        self._styles[row // 4][col // 2] = style

    def segment(self, start: tuple[float, float], end: tuple[float, float], style: str | None = None, gap: int = 0):
        """Dots along a straight line; ``gap`` > 0 leaves that many dots out after each one set (dotted)."""
        (x0, y0), (x1, y1) = start, end
        steps = max(math.ceil(max(abs(x1 - x0), abs(y1 - y0))), 1)
        for k in range(steps + 1):
            if gap and k % (gap + 1):
                continue
            self.dot(x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps, style)

    def label(self, x: float, y: float, char: str, style: str | None = None) -> None:
        """Put ``char`` in the cell holding dot (x, y), in place of its dots.

        A cell that already holds a label keeps it; the new one goes to the nearest free
        neighbour (right, left, above, below), so two points that share a cell both show.
        """
        col, row = round(x) // 2, round(y) // 4
        for dc, dr in ((0, 0), (1, 0), (-1, 0), (0, -1), (0, 1), (1, -1), (-1, 1), (1, 1), (-1, -1)):
            c, r = col + dc, row + dr
            if 0 <= c < self.cols and 0 <= r < self.rows and (r, c) not in self._labels:
                self._labels[r, c] = (char, style)
                return

    def lines(self, colour: bool) -> list[Text]:
        """The canvas as one Text per row of cells (styles only when ``colour``)."""
        out = []
        for r in range(self.rows):
            line = Text()
            for c in range(self.cols):
                if (r, c) in self._labels:
                    char, style = self._labels[r, c]
                    line.append(char, style=style if colour else "bold")
                else:
                    bits = self._bits[r][c]
                    line.append(chr(_BRAILLE + bits) if bits else " ", style=self._styles[r][c] if colour else None)
            out.append(line)
        return out


@dataclass
class PlanePicture:
    """Points, segments and circles in a plane, on one scale for both axes, and a legend.

    ``extent`` is the largest |coordinate| shown: the picture spans [-extent, extent]
    both ways. Items are drawn in the order they were added, labels last.
    """

    extent: float
    cols: int = 28
    rows: int = 14
    title: str = ""
    legend: list[tuple[str, str, str | None]] = field(default_factory=list)  # (letter, words, colour)
    _items: list[tuple[str, tuple, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (self.extent > 0 and math.isfinite(self.extent)):
            raise ValueError(f"extent: expected a positive finite number, got {self.extent!r}")

    def circle(self, radius: float, style: str | None = None) -> None:
        self._items.append(("circle", (radius,), style))

    def segment(self, start: Sequence[float], end: Sequence[float], style: str | None = None, dotted: bool = False):
        self._items.append(("segment", (tuple(start), tuple(end), dotted), style))

    def point(self, at: Sequence[float], letter: str, words: str, style: str | None = None) -> None:
        """A labelled point; ``words`` goes into the legend beside ``letter``."""
        self._items.append(("point", (tuple(at), letter), style))
        self.legend.append((letter, words, style))

    def note(self, letter: str, words: str, style: str | None = None) -> None:
        """A legend line for something drawn without a point of its own (a circle, a dotted line)."""
        self.legend.append((letter, words, style))

    def _to_dots(self, canvas: BrailleCanvas, p: tuple[float, float]) -> tuple[float, float]:
        w, h = canvas.size
        scale = (min(w, h) / 2 - 1) / self.extent
        return (w - 1) / 2 + p[0] * scale, (h - 1) / 2 - p[1] * scale

    def canvas(self) -> BrailleCanvas:
        """Everything drawn onto a fresh canvas."""
        canvas = BrailleCanvas(self.cols, self.rows)
        labels = []
        for kind, args, style in self._items:
            if kind == "circle":
                n = 8 * (self.cols + self.rows)
                ring = [
                    (args[0] * math.cos(2 * math.pi * k / n), args[0] * math.sin(2 * math.pi * k / n)) for k in range(n)
                ]
                for p in ring:
                    canvas.dot(*self._to_dots(canvas, p), style)
            elif kind == "segment":
                start, end, dotted = args
                canvas.segment(self._to_dots(canvas, start), self._to_dots(canvas, end), style, gap=2 if dotted else 0)
            else:
                labels.append((self._to_dots(canvas, args[0]), args[1], style))
        for (x, y), letter, style in labels:
            canvas.label(x, y, letter, style)
        return canvas

    def _legend_lines(self, colour: bool) -> list[Text]:
        lines = []
        for letter, words, style in self.legend:
            line = Text()
            line.append(letter, style=(style or "bold") if colour else "bold")
            line.append(f"  {words}")
            lines.append(line)
        return lines

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(self.cols, options.max_width), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        colour = uses_colour(console)
        picture = _trimmed(self.canvas().lines(colour))
        legend = self._legend_lines(colour)
        if self.title:
            yield cjk_text(self.title, style="bold")
        widest = max((line.cell_len for line in legend), default=0)
        if self.cols + 2 + widest <= options.max_width:  # the legend beside the picture
            for k in range(max(len(picture), len(legend))):
                row = picture[k] if k < len(picture) else Text(" " * self.cols)
                yield Text.assemble(row, "  ", legend[k] if k < len(legend) else "")
        else:
            yield from picture
            yield from (cjk_text(line) for line in legend)


def _trimmed(rows: list[Text]) -> list[Text]:
    """The rows without the blank ones above and below everything drawn (they would only take screen lines)."""
    drawn = [k for k, row in enumerate(rows) if row.plain.strip()]
    return rows[drawn[0] : drawn[-1] + 1] if drawn else rows[:1]
