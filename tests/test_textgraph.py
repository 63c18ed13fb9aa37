"""The compact text drawing of a small graph: values, formulas and gradients, within 60 columns."""

from __future__ import annotations

import io
import itertools
import math
import re

import pytest
from rich.console import Console

from microgradnorm.engine import Value
from microgradnorm.lessons.textgraph import MAX_LINES, WIDTH, text_graph
from microgradnorm.norms import STAGES, batch_norm, layer_norm, rms_norm
from tests.helpers import rendered as shown

X = [1.0, 2.0, 3.0, 4.5]
GAMMA = [1.0, 0.5, 2.0, -1.0]
BETA = [0.1, 0.2, 0.3, 0.4]
DY = [0.3, -0.2, 0.5, 1.0]
EPS = 1e-5


def line_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(f"{name} "))


def numbers(line: str) -> list[float]:
    """The numbers on a line that are not inside a node name (x[0]) or a constant's label (1/n)."""
    line = re.sub(r"\w+\[[\d,.]+\]", "", line).replace("1/n", "")
    return [float(t) for t in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?", line)]


@pytest.fixture
def ln():
    graph = layer_norm(X, gamma=GAMMA, beta=BETA, eps=EPS).graph
    graph.loss(DY).backward()
    return graph


def test_each_stage_shows_its_nodes_with_values_from_the_formulas(ln):
    text = shown(text_graph(ln, stages=("mean", "center", "var", "sqrt", "divide")))
    mean = sum(X) / len(X)
    var = sum((v - mean) ** 2 for v in X) / len(X)
    std = math.sqrt(var + EPS)
    expected = {"mean": mean, "var": var, "std": std, "rstd": 1 / std}
    expected |= {f"xshift[{k}]": v - mean for k, v in enumerate(X)}
    expected |= {f"xhat[{k}]": (v - mean) / std for k, v in enumerate(X)}
    for name, value in expected.items():
        assert numbers(line_of(text, name))[0] == pytest.approx(value, rel=1e-3), name
    assert "← sum(x[0..3])·1/n" in line_of(text, "mean")
    assert "← x[2] − mean" in line_of(text, "xshift[2]")
    assert "← sum(xshift[0..3]²)·1/n" in line_of(text, "var")
    assert "← sqrt(var + eps)" in line_of(text, "std")
    assert "← 1/std" in line_of(text, "rstd")
    assert "← xshift[1]·rstd" in line_of(text, "xhat[1]")
    headings = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert headings == ["mean", "center", "var", "sqrt", "divide"]


def test_gradients_are_the_ones_the_loss_gives(ln):
    # loss = sum(y * dy): dL/dy = dy, dL/dbeta = dy, dL/dgamma = dy * xhat (closed forms)
    text = shown(text_graph(ln, stages=("affine",)))
    mean = sum(X) / len(X)
    std = math.sqrt(sum((v - mean) ** 2 for v in X) / len(X) + EPS)
    for k, dy in enumerate(DY):
        assert numbers(line_of(text, f"y[{k}]"))[-1] == pytest.approx(dy)
        assert numbers(line_of(text, f"beta[{k}]"))[-1] == pytest.approx(dy)
        assert numbers(line_of(text, f"gamma[{k}]"))[-1] == pytest.approx(dy * (X[k] - mean) / std, rel=1e-3)
        assert f"← gamma[{k}]·xhat[{k}] + beta[{k}]" in line_of(text, f"y[{k}]")
    assert "←" not in line_of(text, "gamma[0]")  # a parameter is a leaf: computed from nothing


def test_without_grads_there_is_no_gradient_column(ln):
    text = shown(text_graph(ln, stages=("affine",), grads=False))
    assert "grad" not in text
    assert numbers(line_of(text, "beta[3]")) == [BETA[3]]


def test_a_list_of_values_is_drawn_by_labels_with_the_chain_rule_gradients():
    a, b, c = Value(2.0, label="a"), Value(-3.0, label="b"), Value(10.0, label="c")
    e = a * b
    e.label = "e"
    d = e + c
    d.label = "d"
    loss = e * d
    loss.label = "L"
    loss.backward()
    text = shown(text_graph(loss))
    ev, dv = 2.0 * -3.0, 2.0 * -3.0 + 10.0
    assert numbers(line_of(text, "e")) == [ev, dv + ev]  # dL/de = d + e (two paths)
    assert numbers(line_of(text, "d")) == [dv, ev]
    assert numbers(line_of(text, "a")) == [2.0, -3.0 * (dv + ev)]
    assert "← a·b" in line_of(text, "e") and "← e + c" in line_of(text, "d") and "← e·d" in line_of(text, "L")


def test_rmsnorm_and_batchnorm_columns_are_drawn_too():
    rms = shown(text_graph(rms_norm(X).graph))
    assert "← sum(x[0..3]²)·1/n" in line_of(rms, "ms") and "← sqrt(ms + eps)" in line_of(rms, "rms")
    bn = shown(text_graph(batch_norm([[1.0, 2.0], [3.0, 5.0], [2.0, 2.5]]).graph, stages=("mean", "center")))
    assert "← sum(x[0..2,1])·1/n" in line_of(bn, "mean[1]")  # a column: the row index runs
    assert numbers(line_of(bn, "mean[1]"))[0] == pytest.approx((2.0 + 5.0 + 2.5) / 3, rel=1e-3)
    assert "← x[1,0] − mean[0]" in line_of(bn, "xshift[1,0]")


@pytest.mark.parametrize("dim", [2, 3, 4])
def test_every_choice_of_stages_fits_60_columns_and_the_line_budget_or_says_why_not(dim):
    graph = layer_norm([float(k * k) for k in range(dim)], gamma=[1.5] * dim, beta=[0.25] * dim).graph
    graph.loss([0.5 - k for k in range(dim)]).backward()
    stages = ("input", *STAGES)  # LayerNorm's
    drawn = 0
    for r in range(1, len(stages) + 1):
        for chosen in itertools.combinations(stages, r):
            try:
                renderable = text_graph(graph, stages=chosen)
            except ValueError as exc:
                assert "choose fewer stages" in str(exc)
                continue
            drawn += 1
            lines = shown(renderable, width=200).splitlines()
            assert len(lines) <= MAX_LINES, chosen
            assert max(len(line) for line in lines) <= WIDTH, chosen
    assert drawn >= 2 ** len(stages) // 2  # most choices draw


def test_no_colour_is_needed_to_read_it(ln):
    buf = io.StringIO()
    console = Console(file=buf, width=60, force_terminal=True, color_system="truecolor", no_color=True, record=True)
    console.print(text_graph(ln, stages=("mean",)))
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", buf.getvalue())
    text = console.export_text()
    assert "mean" in text and "←" in text


def test_bad_arguments_say_what_was_expected(ln):
    with pytest.raises(ValueError, match="stages: 'center2' not in this graph; its stages: input, mean"):
        text_graph(ln, stages=("center2",))
    with pytest.raises(TypeError, match="graph: expected a NormGraph, a Value or a list of Values, got int"):
        text_graph(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got list"):
        text_graph([1.0, 2.0])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="width: expected at least 40 columns, got 20"):
        text_graph(ln, width=20)
    big = layer_norm([float(k) for k in range(8)]).graph
    with pytest.raises(ValueError, match=f"take more than {MAX_LINES} lines; choose fewer stages"):
        text_graph(big)


def test_a_string_is_one_stage():
    graph = layer_norm(X).graph
    assert shown(text_graph(graph, stages="mean")) == shown(text_graph(graph, stages=("mean",)))
