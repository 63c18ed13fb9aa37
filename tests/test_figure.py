"""The SVG figures that the ``g`` key writes for pictures that are not graphs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from microgradnorm.drawing.figure import Figure, line_chart_svg
from microgradnorm.lessons.graph_file import draw_graph

SVG = "{http://www.w3.org/2000/svg}"


def _curves(fig):
    return [p for p in ET.fromstring(fig.svg()).iter(f"{SVG}polyline") if p.get("stroke-width") == "2.0"]


def test_data_corners_map_to_the_plot_box_corners_with_y_up():
    fig = Figure(width=200, height=100, xlim=(-1.0, 1.0), ylim=(0.0, 10.0), margin=(10, 20, 30, 40))
    assert fig.to_px(-1.0, 0.0) == (40, 70)  # left edge, bottom of the box
    assert fig.to_px(1.0, 10.0) == (180, 10)  # right edge (200 - 20), top of the box


def test_a_line_chart_is_valid_svg_with_one_curve_and_legend_entry_per_series():
    fig = line_chart_svg({"a & b": [3.0, 2.0, 1.0], "c": [1.0, 1.5, 2.0]}, title="loss <1>", ylabel="loss")
    curves = _curves(fig)
    assert len(curves) == 2
    words = [t.text for t in ET.fromstring(fig.svg()).iter(f"{SVG}text")]
    assert "a & b" in words and "c" in words and "loss <1>" in words
    first = [tuple(map(float, pt.split(","))) for pt in curves[0].get("points").split()]
    assert [y for _, y in first] == sorted(y for _, y in first)  # a falling series goes down the page


def test_log_scale_leaves_out_values_it_cannot_draw():
    fig = line_chart_svg({"x": [1.0, 0.0, 100.0]}, log_y=True)
    assert len(_curves(fig)[0].get("points").split()) == 2
    assert math.isclose(fig.ylim[1] - fig.ylim[0], 2.2)  # log10: 0 .. 2, padded by 5% each side


def test_no_series_is_a_clear_error():
    with pytest.raises(ValueError, match="series: expected at least one named curve, got none"):
        line_chart_svg({})


def test_the_g_key_writes_a_figure_as_svg_without_graphviz(tmp_path):
    fig = line_chart_svg({"x": [1.0, 2.0]})
    message = draw_graph(fig, tmp_path / "step01.svg")
    assert (tmp_path / "step01.svg").read_text() == fig.svg()
    assert "step01.svg" in message
