"""Pictures in the terminal: a heat map of a matrix, bar charts, line charts.

Pure renderables: each class takes numbers and returns lines when rich asks it
to render, so it never prints and never looks at a global console. The layout is
decided at render time from what rich passes in:

* ``options.max_width``: the charts fit 60 columns (the narrowest terminal the
  lessons are rendered at) and use more room when there is more;
* colour: when the console has no colour (``NO_COLOR`` is set, ``no_color=True``,
  or the output is not a terminal), a chart never relies on colour alone. The
  heat map prints a signed digit per cell (``+9`` is the largest positive value,
  ``-3`` about a third of the largest negative, ``·`` about zero), the line chart
  gives every series its own marker character, and the bar charts are labelled
  columns with numbers at the end of each bar.

Nothing here knows about norms; the lessons' demos compute the numbers and pass
them in, titles and series names already in the reader's language. The charts'
own words (legends, scale notes, the default x-axis label) are translated here
(:mod:`microgradnorm.i18n`), and every width is measured in terminal cells, so a
Chinese label (two cells a character) still lines up; titles wrap the Chinese way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text

from microgradnorm.i18n import _, ngettext, pgettext
from microgradnorm.i18n.text import cjk_text
from microgradnorm.numfmt import plain

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = [
    "BarChart",
    "HeatMap",
    "HeatMapLegend",
    "LineChart",
    "bar_chart",
    "heat_map",
    "line_chart",
    "uses_colour",
]

# RdBu-like diverging scale: blue for negative, red for positive, light grey at 0.
_NEGATIVE = (33, 102, 172)
_NEUTRAL = (235, 235, 235)
_POSITIVE = (178, 24, 43)
# Colours and marker characters of the series of a bar or line chart, in order.
_SERIES_COLOURS = ("cyan", "magenta", "yellow", "green", "blue", "red")
_SERIES_MARKERS = ("*", "o", "+", "x", "%", "&")
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def uses_colour(console: Console) -> bool:
    """True when colour reaches the reader: a colour terminal and no NO_COLOR."""
    return console.color_system is not None and not console.no_color


def _shades(console: Console) -> bool:
    """True when the terminal can show a smooth colour ramp (256 colours or more).

    With the 16 basic colours a ramp collapses to two or three colours, so the
    heat map prints its signed digits instead (coloured by sign).
    """
    return uses_colour(console) and console.color_system in ("256", "truecolor")


def _matrix(values: Sequence[Sequence[float]] | object, name: str) -> list[list[float]]:
    """A list of equal-length rows of floats, from nested sequences or a 2-D array."""
    if hasattr(values, "tolist"):
        values = values.tolist()  # type: ignore[union-attr]
    if not isinstance(values, Sequence) or not values or not all(isinstance(r, Sequence) for r in values):
        raise ValueError(f"{name}: expected a non-empty 2-D matrix (a sequence of rows), got {values!r:.80}")
    rows = [[float(v) for v in r] for r in values]
    width = len(rows[0])
    if width == 0 or any(len(r) != width for r in rows):
        raise ValueError(f"{name}: expected rows of one non-zero length, got lengths {[len(r) for r in rows]}")
    return rows


def _floats(values: Sequence[float] | object, name: str) -> list[float]:
    if hasattr(values, "tolist"):
        values = values.tolist()  # type: ignore[union-attr]
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) == 0:
        raise ValueError(f"{name}: expected a non-empty sequence of numbers, got {values!r:.80}")
    return [float(v) for v in values]


# ---- heat map ---------------------------------------------------------------------


def _blend(t: float) -> str:
    """The colour of a cell whose value is ``t`` times the largest magnitude (t in [-1, 1])."""
    end = _POSITIVE if t >= 0 else _NEGATIVE
    a = min(abs(t), 1.0) ** 0.8  # a slight lift, so small entries stay visible
    r, g, b = (round(n + (e - n) * a) for n, e in zip(_NEUTRAL, end))
    return f"#{r:02x}{g:02x}{b:02x}"


def _level(t: float) -> str:
    """The no-colour cell: a sign and a digit 1-9 for |t|, or a dot when |t| rounds to 0."""
    if math.isnan(t):
        return "??"
    k = round(min(abs(t), 1.0) * 9)
    if k == 0:
        return " ·"
    return ("+" if t > 0 else "-") + str(k)


class HeatMap:
    """A matrix drawn cell by cell on a symmetric scale around zero.

    With 256 colours or more every cell is a coloured block (red positive, blue
    negative, grey near zero); otherwise it is a signed digit: ``+9`` is the
    largest magnitude on the scale, ``-4`` is a negative entry of about 4/9 of it
    (coloured red or blue by sign on a 16-colour terminal).
    ``scale`` fixes the magnitude drawn as full strength (default: the largest
    absolute entry), so two heat maps can share one scale.
    """

    def __init__(
        self,
        matrix: Sequence[Sequence[float]] | object,
        *,
        title: str | None = None,
        scale: float | None = None,
        legend: bool = True,
    ) -> None:
        self.rows = _matrix(matrix, "matrix")
        finite = [abs(v) for r in self.rows for v in r if math.isfinite(v)]
        largest = max(finite, default=0.0)
        if scale is not None and not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale: expected a positive finite number, got {scale!r}")
        self.scale = float(scale) if scale is not None else (largest if largest > 0 else 1.0)
        self.title = title
        self.legend = legend

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0])

    def _label_width(self) -> int:
        return len(str(self.shape[0] - 1))

    def _cell_width(self, colour: bool, max_width: int) -> int:
        """2 characters a cell (3 without colour, for ``+9`` and a gap), narrower if it must."""
        cols = self.shape[1]
        room = max_width - self._label_width() - 1
        for w in (3, 2) if not colour else (2, 1):
            if cols * w <= room:
                return w
        return 2 if not colour else 1

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        colour = _shades(console)
        w = self._label_width() + 1 + self.shape[1] * self._cell_width(colour, options.max_width)
        legend = 44 if self.legend else 0
        width = max(w, cell_len(self.title or ""), min(legend, options.max_width))
        return Measurement(min(w, options.max_width), min(width, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        colour = _shades(console)
        signs = uses_colour(console) and not colour  # 16 colours: digits, red or blue by sign
        cw = self._cell_width(colour, options.max_width)
        lw = self._label_width()
        if self.title:
            yield cjk_text(self.title, style="bold")
        yield from self._column_indices(cw, lw)
        for i, row in enumerate(self.rows):
            line = Text()  # the base style of a Text covers everything appended, so style by part
            line.append(str(i).rjust(lw) + " ", style="dim")
            for v in row:
                t = v / self.scale
                if colour:
                    cell = "█" * cw if math.isfinite(v) else "?" * cw
                    line.append(cell, style=Style(color=_blend(t)) if math.isfinite(v) else "bold")
                else:
                    style = ("red" if t > 0 else "blue") if signs and math.isfinite(t) and round(abs(t) * 9) else None
                    line.append(_level(t).rjust(cw) if cw >= 2 else _level(t)[-1], style=style)
            yield line
        if self.legend:
            yield from self._legend(colour)

    def _column_indices(self, cw: int, lw: int) -> RenderResult:
        """Each column's index over its cell: units digits, and above them the tens where there are any."""
        n_cols = self.shape[1]
        pad = " " * (lw + 1)
        if n_cols > 10:
            tens = "".join((str(j // 10 % 10) if j >= 10 else "").rjust(cw) for j in range(n_cols))
            yield Text(pad + tens, style="dim")
        yield Text(pad + "".join(str(j % 10).rjust(cw) for j in range(n_cols)), style="dim")

    def _legend(self, colour: bool) -> RenderResult:
        s = self.scale
        if colour:
            bar = Text(f"-{plain(s, 3)} ")
            for k in range(-5, 6):
                bar.append("██", style=Style(color=_blend(k / 5)))
            bar.append(f" +{plain(s, 3)}")
            yield bar
        else:
            # Translators: the legend of a heat map drawn without colour; {scale} is a number such as 0.362
            legend = _("cells: sign, |value| in ninths of {scale} (+9 = +{scale}); · ≈ 0").format(scale=plain(s, 3))
            yield cjk_text(legend, style="dim")


class HeatMapLegend:
    """The legend of heat maps drawn with ``legend=False`` on one shared ``scale``, shown once below them."""

    def __init__(self, scale: float) -> None:
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale: expected a positive finite number, got {scale!r}")
        self.scale = float(scale)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from HeatMap([[0.0]], scale=self.scale)._legend(_shades(console))


heat_map = HeatMap  # the function-style name, beside bar_chart and line_chart (which also accept one list)


# ---- bar chart --------------------------------------------------------------------


class BarChart:
    """Horizontal bars, one row per label and one column per series, on one shared scale.

    Values must be >= 0 (norms, sizes, times). ``log=True`` draws bar lengths on a
    log scale, for values that span orders of magnitude (gradient norms through a
    deep stack); the printed numbers are always the values themselves.
    """

    def __init__(
        self,
        labels: Sequence[str],
        series: Mapping[str, Sequence[float]],
        *,
        log: bool = False,
        title: str | None = None,
        digits: int = 3,
    ) -> None:
        if not series:
            raise ValueError("series: expected at least one named series of values, got none")
        self.labels = [str(label) for label in labels]
        self.series = {str(k): _floats(v, f"series[{k!r}]") for k, v in series.items()}
        for name, values in self.series.items():
            if len(values) != len(self.labels):
                raise ValueError(
                    f"series[{name!r}]: expected {len(self.labels)} values (one per label), got {len(values)}"
                )
            bad = [v for v in values if v < 0]
            if bad:
                raise ValueError(f"series[{name!r}]: expected values >= 0, got {bad[0]!r}")
        self.log = log
        self.title = title
        self.digits = digits

    def _position(self, v: float, lo: float, hi: float) -> float:
        """Where v falls on the shared scale, in [0, 1]."""
        if not math.isfinite(v) or hi <= 0:
            return 0.0
        if not self.log:
            return v / hi
        if v <= 0:
            return 0.0
        if hi <= lo:
            return 1.0
        # the smallest positive value still gets a sliver: the log axis starts a bit below it
        floor = math.log10(lo) - 0.05 * max(math.log10(hi) - math.log10(lo), 1.0)
        return (math.log10(v) - floor) / (math.log10(hi) - floor)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(30, options.max_width), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        colour = uses_colour(console)
        names = list(self.series)
        k = len(names)
        finite = [v for vs in self.series.values() for v in vs if math.isfinite(v)]
        hi = max(finite, default=0.0)
        lo = min((v for v in finite if v > 0), default=0.0)
        label_w = max((cell_len(s) for s in self.labels), default=0)  # cells: a Chinese label is double-width
        nums = {n: [plain(v, self.digits) for v in vs] for n, vs in self.series.items()}
        num_w = max(len(s) for vs in nums.values() for s in vs)
        gap = 2
        col_w = max((options.max_width - label_w - 1 - gap * (k - 1)) // k, 1)
        show_numbers = col_w - num_w - 1 >= 4
        bar_w = col_w - (num_w + 1 if show_numbers else 0)
        if self.title:
            yield cjk_text(self.title, style="bold")
        header = Text(" " * (label_w + 1))
        for c, name in enumerate(names):
            cell = Text(name)
            cell.truncate(col_w, pad=True)  # cut or padded to col_w cells (a Chinese name is double-width)
            header.append(cell.plain, style=Style(color=_SERIES_COLOURS[c % 6], bold=True) if colour else "bold")
            if c < k - 1:
                header.append(" " * gap)
        yield header
        for r, label in enumerate(self.labels):
            line = Text()
            line.append(" " * (label_w - cell_len(label)) + label + " ", style="dim")
            for c, name in enumerate(names):
                v = self.series[name][r]
                eighths = round(self._position(v, lo, hi) * bar_w * 8)
                if v > 0 and math.isfinite(v):
                    eighths = max(eighths, 1)
                bar = "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")
                style = Style(color=_SERIES_COLOURS[c % 6]) if colour else None
                line.append(bar, style=style)
                line.append(" " * (bar_w - len(bar)))
                if show_numbers:
                    line.append(" " + nums[name][r].rjust(num_w))
                if c < k - 1:
                    line.append(" " * gap)
            yield line
        if hi > 0:
            longest = plain(hi, self.digits)
            if self.log:
                note = _("log scale, longest bar = {value}").format(value=longest)
            else:
                note = _("linear scale, longest bar = {value}").format(value=longest)
            yield cjk_text(note, style="dim")


def bar_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]] | Sequence[float],
    *,
    log: bool = False,
    title: str | None = None,
    digits: int = 3,
) -> BarChart:
    """A :class:`BarChart`; ``series`` is one list of values or a mapping name -> values."""
    if not isinstance(series, Mapping):
        series = {"": series}
    return BarChart(labels, series, log=log, title=title, digits=digits)


# ---- line chart -------------------------------------------------------------------


class LineChart:
    """One or more curves on a shared grid of characters, e.g. loss against step.

    Each series has its own marker (``*``, ``o``, ``+``, ...) and, with colour, its
    own colour; where two series fall on the same cell a ``#`` is drawn. Non-finite
    values (a diverged loss) are left out of the plot and reported in the legend.
    """

    def __init__(
        self,
        series: Mapping[str, Sequence[float]],
        *,
        height: int = 8,
        log: bool = False,
        title: str | None = None,
        x_label: str | None = None,
        x_values: Sequence[float] | None = None,
    ) -> None:
        if not series:
            raise ValueError("series: expected at least one named series of values, got none")
        if not isinstance(height, int) or height < 2:
            raise ValueError(f"height: expected an integer >= 2, got {height!r}")
        self.series = {str(k): _floats(v, f"series[{k!r}]") for k, v in series.items()}
        self.height = height
        self.log = log
        self.title = title
        self.x_label = x_label  # None: "step", in the reader's language when drawn
        longest = max(len(v) for v in self.series.values())
        self.x_values = _floats(x_values, "x_values") if x_values is not None else [float(i) for i in range(longest)]
        if len(self.x_values) < longest:
            raise ValueError(f"x_values: expected one x per value ({longest}), got {len(self.x_values)}")
        if any(b < a for a, b in zip(self.x_values, self.x_values[1:])):
            raise ValueError("x_values: expected values that never decrease, got a decrease")

    def _y(self, v: float) -> float:
        if self.log:
            return math.log10(v) if v > 0 else math.nan
        return v

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(30, options.max_width), options.max_width)

    def _range(self) -> tuple[float, float]:
        """The lowest and highest plotted y (log10 of the values on a log scale), never equal."""
        finite = [self._y(v) for vs in self.series.values() for v in vs if math.isfinite(self._y(v))]
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        return (lo - 0.5, hi + 0.5) if hi == lo else (lo, hi)

    def _grid(self, plot_w: int, lo: float, hi: float) -> list[list[int]]:
        """Which series marks each cell: its index, -1 for an empty cell, -2 where series overlap.

        A value's column comes from its x (``x_values[i]`` for the i-th value of every series), so a
        series with fewer values ends where its x ends instead of stretching across the plot. Where
        several values fall in one column, the one whose x is nearest the column's own x is drawn.
        """
        grid: list[list[int]] = [[-1] * plot_w for _ in range(self.height)]
        x0, x1 = self.x_values[0], self.x_values[-1]
        span = (x1 - x0) or 1.0
        for s, values in enumerate(self.series.values()):
            shown: dict[int, tuple[float, float]] = {}  # column -> (distance of its x from the column's, y)
            for x, v in zip(self.x_values, values):
                col = round((x - x0) / span * (plot_w - 1))
                distance = abs(x - (x0 + col * span / (plot_w - 1)))
                if col not in shown or distance < shown[col][0]:
                    shown[col] = (distance, self._y(v))
            for col, (_distance, y) in shown.items():
                if not math.isfinite(y):
                    continue
                row = round((hi - y) / (hi - lo) * (self.height - 1))
                grid[row][col] = s if grid[row][col] in (-1, s) else -2
        return grid

    def _marker(self, cell: int, colour: bool) -> tuple[str, Style | str | None]:
        if cell == -1:
            return " ", None
        if cell == -2:
            return "#", "bold" if colour else None
        return _SERIES_MARKERS[cell % 6], Style(color=_SERIES_COLOURS[cell % 6], bold=True) if colour else None

    def _legend(self, colour: bool) -> RenderResult:
        for s, (name, vals) in enumerate(self.series.items()):
            line = Text("  ")
            line.append(*self._marker(s, colour))
            # Translators: a chart's legend: a series' name, its first and last value
            ends = pgettext("chart legend", "{name}: {first} → {last}")
            line.append(" " + ends.format(name=name, first=plain(vals[0], 3), last=plain(vals[-1], 3)))
            bad = sum(1 for v in vals if not math.isfinite(v))
            if bad:
                skipped = ngettext("({n} non-finite value not drawn)", "({n} non-finite values not drawn)", bad)
                line.append(" " + skipped.format(n=bad))
            yield cjk_text(line)
        notes = ([_("log scale")] if self.log else []) + ([_("# where curves overlap")] if len(self.series) > 1 else [])
        if notes:
            # Translators: between the notes under a line chart ("log scale; # where curves overlap")
            yield cjk_text("  " + pgettext("chart notes separator", "; ").join(notes), style="dim")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        colour = uses_colour(console)
        lo, hi = self._range()
        unlog = (lambda t: 10.0**t) if self.log else (lambda t: t)
        top, bottom = plain(unlog(hi), 3), plain(unlog(lo), 3)
        axis_w = max(len(top), len(bottom))
        plot_w = max(options.max_width - axis_w - 2, 8)
        grid = self._grid(plot_w, lo, hi)
        if self.title:
            yield cjk_text(self.title, style="bold")
        for r, cells in enumerate(grid):
            label = top if r == 0 else bottom if r == self.height - 1 else ""
            line = Text(label.rjust(axis_w) + " │", style="dim")
            for cell in cells:
                line.append(*self._marker(cell, colour))
            yield line
        yield Text(" " * axis_w + " └" + "─" * plot_w, style="dim")
        first, last = plain(self.x_values[0], 3), plain(self.x_values[-1], 3)
        x_label = self.x_label if self.x_label is not None else pgettext("chart x axis", "step")
        mid = f" {x_label} "
        pad = max(plot_w - len(first) - len(last) - cell_len(mid), 0)
        yield Text(" " * (axis_w + 2) + first + " " * (pad // 2) + mid + " " * (pad - pad // 2) + last, style="dim")
        yield from self._legend(colour)


def line_chart(
    series: Mapping[str, Sequence[float]] | Sequence[float],
    *,
    height: int = 8,
    log: bool = False,
    title: str | None = None,
    x_label: str | None = None,
    x_values: Sequence[float] | None = None,
) -> LineChart:
    """A :class:`LineChart`; ``series`` is one list of values or a mapping name -> values."""
    if not isinstance(series, Mapping):
        series = {pgettext("chart series", "value"): series}
    return LineChart(series, height=height, log=log, title=title, x_label=x_label, x_values=x_values)
