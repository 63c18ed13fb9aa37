"""Terminal charts: what they draw must follow from the numbers, at 60 columns, with and without colour."""

from __future__ import annotations

import math
import re
from io import StringIO

import numpy as np
import pytest
from rich.console import Console

from microgradnorm.drawing.charts import bar_chart, heat_map, line_chart, uses_colour
from microgradnorm.i18n import ngettext

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def render(renderable, width: int = 60, colour: bool = False, system: str = "truecolor") -> str:
    kw = {"force_terminal": True, "color_system": system} if colour else {}
    console = Console(file=StringIO(), width=width, **kw)
    console.print(renderable)
    return console.file.getvalue()


def plain(text: str) -> list[str]:
    return ANSI.sub("", text).splitlines()


def fits(text: str, width: int) -> bool:
    return all(len(line) <= width for line in plain(text))


# ---- heat map ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "matrix,scale,rows",
    [
        # 1/3 of the largest magnitude is 3 ninths, -2/3 is -6 ninths, 0.01 rounds to zero
        ([[1.0, -1.0, 0.0], [1 / 3, -2 / 3, 0.01]], None, ["+9 -9 ·", "+3 -6 ·"]),
        ([[1.0, -0.5]], 2.0, ["+4 -2"]),  # scale fixes full strength: 1/2 -> 4.5 rounds to 4 (half to even), 1/4 -> 2
        ([[1.0, math.nan]], None, ["+9 ??"]),  # a nan cell is marked, not hidden
        (np.ones((1, 10)), None, [" ".join(["+9"] * 10)]),  # up to ten columns: one row of indices
    ],
)
def test_heat_map_without_colour_prints_signed_ninths(matrix, scale, rows):
    header, *cells = plain(render(heat_map(matrix, scale=scale, legend=False)))
    assert header.split() == [str(j) for j in range(len(rows[0].split()))]
    assert [row.split() for row in cells] == [[str(i), *row.split()] for i, row in enumerate(rows)]


@pytest.mark.parametrize("colour", [False, True])
def test_heat_map_labels_every_column_with_its_own_index_beyond_ten(colour):
    n = 12
    lines = plain(render(heat_map(np.ones((2, n)), legend=False), colour=colour))
    tens, units = lines[0], lines[1]
    assert len(tens) == len(units)
    cells = len(lines[2]) - len("0 ")  # row label and its space, then the cells
    width = cells // n
    # read the index over each cell's last character: tens digit (blank below 10) and units digit
    labels = [
        int(
            (tens[len(units) - cells + (j + 1) * width - 1].strip() or "0")
            + units[len(units) - cells + (j + 1) * width - 1]
        )
        for j in range(n)
    ]
    assert labels == list(range(n))


def test_heat_map_with_colour_uses_blocks_not_digits():
    out = render(heat_map([[1.0, -1.0], [0.0, 0.5]], legend=False), colour=True)
    assert "\x1b[" in out  # styled
    rows = plain(out)[1:]
    assert all("+" not in r and "-" not in r for r in rows)
    assert all(r.count("█") == 4 for r in rows)  # 2 cells of 2 characters
    # the strongest positive and negative cells get different colours
    codes = set(re.findall(r"\x1b\[38;2;(\d+;\d+;\d+)m", out))
    assert len(codes) >= 3


def test_heat_map_on_16_colours_prints_digits_coloured_by_sign():
    out = render(heat_map([[2.0, -2.0, 0.0]], legend=False), colour=True, system="standard")
    assert plain(out)[1].split() == ["0", "+9", "-9", "·"]
    assert "\x1b[31m +9" in out and "\x1b[34m -9" in out


def test_heat_map_no_color_falls_back_even_on_a_colour_terminal(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    console = Console(file=StringIO(), width=60, force_terminal=True, color_system="truecolor")
    assert not uses_colour(console)
    console.print(heat_map([[2.0, -2.0]], legend=False))
    assert plain(console.file.getvalue())[1].split() == ["0", "+9", "-9"]


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("d", [4, 12, 24, 40])
def test_heat_map_fits_60_columns(d, colour):
    m = np.random.default_rng(d).normal(size=(d, d))
    out = render(heat_map(m, title="J"), width=60, colour=colour)
    assert fits(out, 60)
    assert len(plain(out)) >= d + 2  # title, header, d rows (and the legend)


def test_heat_map_rejects_ragged_input():
    with pytest.raises(ValueError, match="matrix"):
        heat_map([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match="scale"):
        heat_map([[1.0]], scale=0.0)


# ---- bar chart --------------------------------------------------------------------


def bar_length(line: str) -> float:
    """Length of the first bar on a line, in characters (eighth blocks count 1/8 each)."""
    eighths = " ▏▎▍▌▋▊▉█"
    return sum(eighths.index(ch) / 8 for ch in line if ch in eighths[1:])


def test_bar_chart_linear_lengths_are_proportional():
    out = render(bar_chart(["a", "b", "c"], [1.0, 2.0, 4.0]), width=60)
    lines = plain(out)
    la, lb, lc = (bar_length(line) for line in lines[1:4])
    assert lc == pytest.approx(2 * lb, abs=0.25)
    assert lb == pytest.approx(2 * la, abs=0.25)
    assert "4" in lines[3].split()[-1]  # the value is printed at the end of the bar


def test_bar_chart_log_scale_spaces_decades_evenly():
    lines = plain(render(bar_chart(["a", "b", "c", "d"], [1.0, 10.0, 100.0, 1000.0], log=True), width=60))
    lengths = [bar_length(line) for line in lines[1:5]]
    steps = np.diff(lengths)
    assert np.all(steps > 0)
    assert np.ptp(steps) <= 0.25  # each decade adds the same length
    assert "log scale" in lines[-1]


def test_bar_chart_two_series_share_one_scale():
    chart = bar_chart(["l0", "l1"], {"pre": [1.0, 1.0], "post": [2.0, 0.5]})
    lines = plain(render(chart, width=100))
    assert "pre" in lines[0] and "post" in lines[0]
    row0 = lines[1]
    half = row0.index("1") + 1  # end of the first series' number
    first, second = bar_length(row0[:half]), bar_length(row0[half:])
    assert second == pytest.approx(2 * first, abs=0.25)


@pytest.mark.parametrize("width", [60, 100])
@pytest.mark.parametrize("colour", [False, True])
def test_bar_chart_fits(width, colour):
    labels = [f"layer {i}" for i in range(48)]
    rng = np.random.default_rng(0)
    chart = bar_chart(labels, {"pre-LN": rng.uniform(0, 5, 48), "post-LN": 10.0 ** rng.uniform(-6, 1, 48)}, log=True)
    out = render(chart, width=width, colour=colour)
    assert fits(out, width)
    assert len(plain(out)) == 48 + 2


def test_bar_chart_rejects_bad_values():
    with pytest.raises(ValueError, match=r"series\['x'\].*>= 0"):
        bar_chart(["a"], {"x": [-1.0]})
    with pytest.raises(ValueError, match="one per label"):
        bar_chart(["a", "b"], {"x": [1.0]})


# ---- line chart -------------------------------------------------------------------


def test_line_chart_decreasing_curve_runs_top_left_to_bottom_right():
    out = render(line_chart({"loss": np.linspace(1.0, 0.0, 50)}, height=6), width=60)
    lines = plain(out)
    rows = [line.split("│", 1)[1] for line in lines[:6]]
    assert rows[0].index("*") == 0
    assert rows[-1].rstrip().endswith("*")
    # every column of the plot holds exactly one point of the single curve
    width = len(rows[0])
    assert sum(r.ljust(width).count("*") for r in rows) == 50


def test_line_chart_series_have_their_own_markers_and_legend():
    out = render(line_chart({"LN": [3.0, 2.0, 1.0], "BN": [3.0, 2.9, 2.8]}), width=60)
    text = "\n".join(plain(out))
    assert "* LN: 3 → 1" in text
    assert "o BN: 3 → 2.8" in text
    assert "#" in text  # both start at 3: the overlap is marked


def _columns(lines: list[str], marker: str, height: int) -> list[int]:
    """The plot columns (0-based, right of the axis) where ``marker`` is drawn."""
    rows = [line.split("│", 1)[1] for line in lines[:height]]
    return sorted({k for row in rows for k, char in enumerate(row) if char == marker})


def test_line_chart_places_points_by_their_x_so_a_shorter_run_ends_early():
    """Issue 27, item 6: batch 32 trains 48 steps, batch 2 trains 768; the short curve must end near
    step 47 of the shared axis, not stretch over all 768 steps."""
    long, short = list(np.linspace(2.0, 1.0, 768)), list(np.linspace(2.0, 0.5, 48))
    lines = plain(render(line_chart({"batch 2": long, "batch 32": short}, height=8), width=60))
    plot_w = len(lines[0].split("│", 1)[1])
    shown = _columns(lines, "o", 8) + _columns(lines, "#", 8)
    assert max(shown) <= round(47 / 767 * (plot_w - 1)) + 1, (max(shown), plot_w)
    assert max(_columns(lines, "*", 8)) == plot_w - 1  # the long run reaches the end of the axis
    axis = lines[9].split()
    assert axis[0] == "0" and axis[-1] == "767"


def test_line_chart_x_values_space_points_by_their_value():
    """Points at x = 0, 1 and 32: the third sits at the right end, the second next to the first."""
    lines = plain(render(line_chart({"v": [3.0, 2.0, 1.0]}, x_values=[0, 1, 32], height=3), width=40))
    plot_w = len(lines[0].split("│", 1)[1])
    assert _columns(lines, "*", 3) == [0, round(1 / 32 * (plot_w - 1)), plot_w - 1]


@pytest.mark.parametrize("x_values", [[0, 1], [0, 2, 1]])
def test_line_chart_refuses_x_values_that_do_not_fit_the_values(x_values):
    with pytest.raises(ValueError, match=r"^x_values: expected"):
        line_chart({"v": [3.0, 2.0, 1.0]}, x_values=x_values)


def test_line_chart_reports_nonfinite_values():
    text = "\n".join(plain(render(line_chart({"loss": [1.0, math.nan, math.inf, 0.5]}), width=60)))
    shown = ngettext("({n} non-finite value not drawn)", "({n} non-finite values not drawn)", 2).format(n=2)
    assert shown in text


def test_line_chart_log_scale_labels_are_values():
    lines = plain(render(line_chart({"loss": [100.0, 10.0, 1.0, 0.01]}, log=True, height=5), width=60))
    assert lines[0].split("│")[0].strip() == "100"
    assert lines[4].split("│")[0].strip() == "0.01"


@pytest.mark.parametrize("width", [60, 100])
def test_line_chart_fits(width):
    out = render(line_chart({"a": np.exp(-np.arange(500) / 50), "b": np.ones(500)}, log=True), width=width)
    assert fits(out, width)


def test_heat_map_legend_on_its_own_names_the_shared_scale():
    from microgradnorm.drawing.charts import HeatMapLegend

    assert plain(render(HeatMapLegend(0.5))) == ["cells: sign, |value| in ninths of 0.5 (+9 = +0.5); · ≈ 0"]
    assert "██" in plain(render(HeatMapLegend(0.5), colour=True))[0]
    with pytest.raises(ValueError, match="scale"):
        HeatMapLegend(0.0)
