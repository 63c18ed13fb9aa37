"""Diagrams: the DOT structure of a d = 3 LayerNorm, the views, determinism, real rendering, notebooks.

The expected structure is derived by hand from the LayerNorm formula (written
out in the comments), not copied from the output. The rendering tests need the
Graphviz ``dot`` program: they skip without it, unless MICROGRADNORM_REQUIRE_DOT=1
(set by .ci/run), in which case they fail.
"""

from __future__ import annotations

import html
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import microgradnorm as mgn
from microgradnorm import formulas, output, viz
from microgradnorm import tolerances as tol
from microgradnorm.engine import Value
from microgradnorm.trace import trace_backward
from microgradnorm.viz.names import _ranges, display_names, expression, formula, split_index
from tests import tolerances as test_tol
from tests.helpers import graph_problem, graph_results, refuses

# ---- a small DOT reader for the format viz writes ------------------------------------


@dataclass
class Dot:
    nodes: dict[str, str] = field(default_factory=dict)  # id -> attribute text
    cluster_of: dict[str, str | None] = field(default_factory=dict)
    clusters: list[str] = field(default_factory=list)
    cluster_labels: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (tail, head, attributes)
    names: dict[str, str] = field(default_factory=dict)  # value-node name -> id
    # layout hints, not edges of the graph: each stage's title is put above these nodes ...
    above: dict[str, list[str]] = field(default_factory=dict)  # cluster -> node ids
    # ... and these nodes share a rank, in this order
    chains: list[list[str]] = field(default_factory=list)

    def name(self, node_id: str) -> str | None:
        m = re.search(r"<b>(.*?)</b>", self.nodes[node_id])
        return html.unescape(m.group(1)) if m else None

    def op_of(self, name: str) -> str:
        """The op node that computes the value node called ``name``."""
        return "op" + self.names[name][1:]

    def edge_attrs(self, tail: str, head: str) -> list[str]:
        return [a for t, h, a in self.edges if t == tail and h == head]


def parse(dot: str) -> Dot:
    out = Dot()
    cluster = None
    for line in dot.splitlines():
        s = line.strip()
        if m := re.match(r"subgraph (cluster_\w+) \{$", s):
            cluster = m.group(1)
            out.clusters.append(cluster)
        elif s == "}":
            cluster = None
        elif cluster and (m := re.match(r"t_\w+ \[shape=plain, label=(<.*>)\];$", s)):
            out.cluster_labels[cluster] = m.group(1)
        elif cluster and (m := re.match(r"t_\w+ -> \{(.*)\} \[style=invis\];$", s)):
            out.above[cluster] = m.group(1).split()
        elif m := re.match(r"\{rank=same; (.*) \[style=invis\]\}$", s):
            out.chains.append(m.group(1).split(" -> "))
        elif m := re.match(r"(\w+) -> (\w+)(?: \[(.*)\])?;$", s):
            out.edges.append((m.group(1), m.group(2), m.group(3) or ""))
        elif m := re.match(r"(v\d+|op\d+|s_\w+|legend) \[(.*)\];$", s):
            out.nodes[m.group(1)] = m.group(2)
            out.cluster_of[m.group(1)] = cluster
    for node_id in out.nodes:
        if node_id.startswith("v"):
            name = out.name(node_id)
            if name is not None:
                out.names.setdefault(name, node_id)
    return out


# ---- golden structure of a d = 3 LayerNorm -----------------------------------------------

# Value nodes of LayerNorm(x[3]) with gamma and beta, counted from the formula:
#   per feature (x3): x, xshift = x - mean, xshift², xhat = xshift * rstd,
#                     gamma, γ·xhat, beta, y = γ·xhat + beta        -> 8 * 3 = 24
#   per row:          sum(x), 1/n, mean = sum * 1/n, sum(xshift²), 1/n,
#                     var = sum * 1/n, eps, var + eps, std = sqrt, rstd = std**-1  -> 10
VALUES_D3 = 24 + 10
# Op nodes: every value that is not a leaf (x, gamma, beta, the two 1/n, eps are leaves).
OPS_D3 = VALUES_D3 - (3 + 3 + 3 + 2 + 1)
# Edges: child -> op for every input of every op, plus op -> value.
#   sum(x): 3, mean: 2, xshift: 3*2, xshift²: 3*1, sum(xshift²): 3, var: 2, var+eps: 2,
#   sqrt: 1, **-1: 1, xhat: 3*2, γ·xhat: 3*2, y: 3*2
EDGES_D3 = (3 + 2 + 6 + 3 + 3 + 2 + 2 + 1 + 1 + 6 + 6 + 6) + OPS_D3

LAYERNORM_CLUSTERS = ["input", "mean", "center", "var", "sqrt", "divide", "affine"]


def test_layernorm_d3_has_the_hand_counted_nodes_and_edges():
    graph, _ = graph_problem(backward=False)
    d = parse(viz.to_dot(graph))
    values = [k for k in d.nodes if k.startswith("v")]
    ops = [k for k in d.nodes if k.startswith("op")]
    assert len(values) == VALUES_D3 == 34
    assert len(ops) == OPS_D3 == 22
    assert len(d.edges) == EDGES_D3 == 63
    assert viz.graph_size(graph) == VALUES_D3 + OPS_D3


def test_layernorm_d3_stages_are_titled_clusters_in_order():
    graph, _ = graph_problem(backward=False)
    d = parse(viz.to_dot(graph))
    assert d.clusters == [f"cluster_{s}" for s in LAYERNORM_CLUSTERS]
    assert "mean = Σ x / n" in d.cluster_labels["cluster_mean"]
    assert "xshift = x − mean" in d.cluster_labels["cluster_center"]
    assert "std = √(var + eps)" in d.cluster_labels["cluster_sqrt"]
    home = {
        "input": ["x[0]", "x[1]", "x[2]"],
        "mean": ["mean"],
        "center": ["xshift[0]", "xshift[1]", "xshift[2]"],
        "var": ["var"],
        "sqrt": ["std", "eps", "var+eps"],
        "divide": ["rstd", "xhat[0]", "xhat[1]", "xhat[2]"],
        "affine": ["y[0]", "y[2]", "gamma[1]", "beta[2]"],
    }
    for stage, names in home.items():
        for name in names:
            assert d.cluster_of[d.names[name]] == f"cluster_{stage}", name
    # an op node sits in the cluster of the value it computes
    for name in ("mean", "xshift[1]", "var", "var+eps", "std", "rstd", "xhat[2]", "y[0]"):
        assert d.cluster_of[d.op_of(name)] == d.cluster_of[d.names[name]], name


def test_layernorm_d3_edges_follow_the_formula():
    graph, _ = graph_problem(backward=False)
    d = parse(viz.to_dot(graph))
    pairs = Counter((t, h) for t, h, _ in d.edges)
    n = d.names

    def inputs(name: str) -> list[str]:
        op = d.op_of(name)
        assert pairs[(op, n[name])] == 1  # the op feeds exactly its own value
        return sorted(d.name(t) or t for t, h, _ in d.edges if h == op)

    for k in range(3):
        assert inputs(f"xshift[{k}]") == sorted([f"x[{k}]", "mean"])
        assert inputs(f"xhat[{k}]") == sorted([f"xshift[{k}]", "rstd"])
        assert inputs(f"y[{k}]") == sorted([f"γ·xhat[{k}]", f"beta[{k}]"])
    assert inputs("std") == ["var+eps"]
    assert inputs("rstd") == ["std"]
    assert inputs("var+eps") == sorted(["var", "eps"])
    into_mean = {d.name(t): t for t, h, _ in d.edges if h == d.op_of("mean")}
    assert sorted(into_mean) == ["1/n", "Σx"]  # mean = sum(x) * (1/n)
    into_sum = sorted(d.name(t) for t, h, _ in d.edges if h == "op" + into_mean["Σx"][1:])
    assert into_sum == ["x[0]", "x[1]", "x[2]"]  # one n-ary sum node, not a chain of additions


def test_value_nodes_are_numbered_by_topological_position_and_show_data_and_grad():
    graph, _ = graph_problem()
    dot = viz.to_dot(graph)
    d = parse(dot)
    order = mgn.topological_order(graph.roots())
    assert sorted(int(k[1:]) for k in d.nodes if k.startswith("v")) == list(range(len(order)))
    for k, node in enumerate(order):
        label = d.nodes[f"v{k}"]
        assert f"data {node.data:.4g}" in label
        assert f"grad {node.grad:.4g}" in label


def test_grad_is_shown_only_after_backward_unless_asked():
    fresh, _ = graph_problem(backward=False)
    assert "grad " not in viz.to_dot(fresh)
    assert "grad 0" in viz.to_dot(fresh, grad=True)
    done, _ = graph_problem()
    assert "grad " not in viz.to_dot(done, grad=False)


DOT_SCRIPT = """
import sys
import microgradnorm as mgn
from microgradnorm import viz
from microgradnorm.check import random_problem
from microgradnorm.registry import get_norm
junk = [mgn.Value(float(i)) * 2 for i in range(int(sys.argv[1]))]  # shifts every global id
spec = get_norm("layernorm")
x, gamma, beta, dy = random_problem(spec, (2, 3), 0)
graph = spec.build_graph(x, gamma, beta, 1e-5)
graph.loss(dy.tolist()).backward()
sys.stdout.write(viz.to_dot(graph, paths=True, edge_labels=True))
"""


def test_dot_is_byte_identical_across_processes():
    outs = [
        subprocess.run([sys.executable, "-c", DOT_SCRIPT, n], capture_output=True, check=True).stdout
        for n in ("0", "57")
    ]
    assert outs[0] == outs[1]
    assert outs[0].startswith(b"// microgradnorm")


def test_every_way_of_passing_a_norm_draws_the_same_graph():
    y = mgn.layer_norm([1.0, 2.0, 4.0], [1.5, -0.5, 2.0], [0.1, 0.2, 0.3])
    assert viz.to_dot(y) == viz.to_dot(y.graph)
    plain = parse(viz.to_dot(list(y)))  # no NormGraph: names fall back to the node labels
    assert len(plain.nodes) == len(parse(viz.to_dot(y)).nodes)
    assert "cluster_divide" in plain.clusters


def test_a_plain_value_graph_draws_without_stages():
    a, b = mgn.Value(2.0, label="a"), mgn.Value(-3.0, label="b")
    c = a * b + a
    c.label = "c"
    c.backward()
    d = parse(viz.to_dot(c, edge_labels=True))
    assert d.clusters == []
    assert sorted(k for k in d.nodes if k.startswith("v")) == ["v0", "v1", "v2", "v3"]
    # d(a*b)/da = b = -3 and d(a*b)/db = a = 2, written on the edges into the "*" op
    mul = d.op_of("c")  # c = (a*b) + a; the product is the other child
    prod = next(t for t, h, _ in d.edges if h == mul and t != d.names["a"])
    assert d.edge_attrs(d.names["a"], "op" + prod[1:]) == ['label="-3"']
    assert d.edge_attrs(d.names["b"], "op" + prod[1:]) == ['label="2"']
    assert "grad -2" in d.nodes[d.names["a"]]  # dc/da = b + 1


def test_edge_labels_are_the_local_derivatives():
    graph, _ = graph_problem(backward=False)
    d = parse(viz.to_dot(graph, edge_labels=True))
    rstd = graph["rstd"][0]
    for k in range(3):
        xshift = graph["xshift"][k]
        # xhat = xshift * rstd: d xhat / d rstd = xshift, d xhat / d xshift = rstd
        assert d.edge_attrs(d.names["rstd"], d.op_of(f"xhat[{k}]")) == [f'label="{xshift.data:.4g}"']
        assert d.edge_attrs(d.names[f"xshift[{k}]"], d.op_of(f"xhat[{k}]")) == [f'label="{rstd.data:.4g}"']
        # xshift = x - mean: the mean's edge carries -1
        assert d.edge_attrs(d.names["mean"], d.op_of(f"xshift[{k}]")) == ['label="-1"']


def test_top_down_graphs_stack_each_nodes_numbers():
    graph, _ = graph_problem()
    across = parse(viz.to_dot(graph)).nodes
    down = parse(viz.to_dot(graph, rankdir="TB")).nodes
    xhat = parse(viz.to_dot(graph)).names["xhat[1]"]
    assert across[xhat].count("<tr>") == 1  # name | data | grad in one row
    assert down[xhat].count("<tr>") == 3  # name, data and grad one above the other
    assert "rankdir=TB" in viz.to_dot(graph, rankdir="TB")


@pytest.mark.parametrize(
    "obj,options,kind,words",
    [
        ("not a graph", {}, TypeError, ["to_dot"]),
        ([], {}, ValueError, ["at least one Value"]),
        (mgn.Value(1.0) * 2, {"paths": True}, ValueError, ["paths"]),
        (None, {"rankdir": "diagonal"}, ValueError, ["rankdir"]),
        (None, {"paths": True, "path_input": 3}, viz.OptionError, ["path_input", "[0, 2]", "got 3"]),
        (None, {"highlight": "nope"}, viz.OptionError, ["highlight", "'nope'"]),
        (None, {"highlight": "rstd", "highlight_mode": "sideways"}, viz.OptionError, ["highlight_mode", "'sideways'"]),
    ],
)
def test_bad_inputs_are_named_and_a_bad_option_apart_from_its_message(obj, options, kind, words):
    """``None`` stands for a d = 3 LayerNorm; an OptionError names the keyword at fault (``option``) apart from
    what was expected and given (``message``), so that a command can name its own flag instead."""
    graph = graph_problem(backward=False)[0] if obj is None else obj
    error = refuses(lambda: viz.to_dot(graph, **options), kind, words)
    if kind is viz.OptionError:
        assert error.option == words[0] and error.message.endswith(words[-1])


# ---- names and formulas, as every view writes them ------------------------------------------


def test_a_formula_writes_unnamed_inputs_out_and_brackets_a_sum_inside_a_product_or_power():
    a, b, c = Value(1.0, label="a"), Value(2.0, label="b"), Value(3.0, label="c")
    names = {id(v): v.label for v in (a, b, c)}
    s = a + b
    assert formula(s * c, names) == "(a + b)·c"
    assert formula(c - s, names) == "c − (a + b)"
    assert formula(s**2, names) == "(a + b)²" and formula(s**-1, names) == "1/(a + b)"
    assert formula(Value.sum([a, b, c]) * c, names) == "sum(a, b, c)·c"
    assert formula(s * c, {**names, id(s): "s"}) == "s·c"  # a named input is written by its name
    assert formula(a, names) == "" and expression(s * c, "p", ["s", "c"]) == "p = s·c"
    assert expression(a**2, "a²", ["a"]) == "a²"  # a name that already says how: not "a² = a²"


def test_no_node_of_a_naive_batchnorm_is_written_as_itself():
    """The naive variance's mean² of each column is named mean[k]², which is its whole formula."""
    graph = mgn.batch_norm([[1.0, 2.0], [3.0, 5.0], [0.0, 1.0]], variance="naive").graph
    order = viz.drawing(graph).order
    names = display_names(order, graph)
    position = {id(node): k for k, node in enumerate(order)}
    lines = [expression(n, names[k], [names[position[id(c)]] for c in n.children]) for k, n in enumerate(order)]
    assert "mean[0]²" in lines and "mean[1]²" in lines


def test_plain_names_tell_apart_nodes_that_share_a_label_and_name_unnamed_ones_after_their_op_with_a_count():
    a1, a2 = Value(1.0, label="a"), Value(2.0, label="a")
    three = Value(3.0)
    prod = a1 * a2
    order = [a1, a2, three, prod, prod * three]
    assert display_names(order, None) == ["a#1", "a#2", "leaf_1", "mul_1", "mul_2"]
    a, b = mgn.Value(2.0, label="a"), mgn.Value(-3.0)
    d = viz.drawing((a * b + a) * (a * b))  # as a drawing names them
    names = [d.display_name(k) for k in range(len(d.order))]
    assert names.count("a") == 1 and "leaf_1" in names  # the labelled leaf keeps its label; b had none
    assert sorted(n for n in names if n.startswith("mul_")) == ["mul_1", "mul_2", "mul_3"]
    assert sum(n.startswith("add_") for n in names) == 1
    assert len(set(names)) == len(names)  # every node told apart


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["x[0]", "x[1]", "x[2]"], "x[0..2]"),
        (["x[0]²", "x[1]²", "x[2]²"], "x[0..2]²"),
        (["x[0,2]", "x[1,2]", "x[2,2]"], "x[0..2,2]"),
        (["x[0]", "x[2]", "x[3]"], "x[0], x[2], x[3]"),  # not one apart: listed
        (["x[0]", "y[1]", "x[2]"], "x[0], y[1], x[2]"),  # different names: listed
        (["a", "b"], "a, b"),
        (["a", "b", "c", "d", "e", "f"], "a, b, …, f"),
    ],
)
def test_runs_of_inputs_are_shortened_to_ranges(args, expected):
    assert _ranges(args) == expected


# ---- the gradient paths -----------------------------------------------------------------

DIRECT, MEAN, VAR = (viz.PATH_COLOURS[k] for k in ("direct", "mean", "var"))


def colours(attrs: list[str]) -> set[str]:
    found = set()
    for a in attrs:
        m = re.search(r'color="([^"]*)"', a)
        if m:
            found.update(m.group(1).split(":"))
    return found & {DIRECT, MEAN, VAR}


def test_the_three_paths_into_x1_are_coloured_along_the_right_edges():
    graph, _ = graph_problem(backward=False)
    d = parse(viz.to_dot(graph, paths=True, path_input=1))
    n = d.names
    # direct and via the variance both leave x[1] through xshift[1]
    assert colours(d.edge_attrs(n["x[1]"], d.op_of("xshift[1]"))) == {DIRECT, VAR}
    assert colours(d.edge_attrs(n["x[0]"], d.op_of("xshift[0]"))) == set()  # another input's edge
    for k in range(3):
        # via the mean: mean -> every xshift_j -> xhat_j
        assert colours(d.edge_attrs(n["mean"], d.op_of(f"xshift[{k}]"))) == {MEAN}
        # via the variance: rstd -> every xhat_j
        assert colours(d.edge_attrs(n["rstd"], d.op_of(f"xhat[{k}]"))) == {VAR}
    assert colours(d.edge_attrs(n["xshift[1]"], d.op_of("xhat[1]"))) == {DIRECT, MEAN}
    assert colours(d.edge_attrs(n["xshift[0]"], d.op_of("xhat[0]"))) == {MEAN}
    assert colours(d.edge_attrs(n["var+eps"], d.op_of("std"))) == {VAR}
    # the mean's route into the variance (xshift_j, j != i, -> xshift²) carries 0 and is not coloured
    squares_of_x0 = [h for t, h, _ in d.edges if t == n["xshift[0]"] and h != d.op_of("xhat[0]")]
    assert len(squares_of_x0) == 1 and colours(d.edge_attrs(n["xshift[0]"], squares_of_x0[0])) == set()
    # nothing is coloured after xhat: dL/dxhat is where the three paths meet
    coloured_into_y = [a for t, h, a in d.edges if d.cluster_of.get(h) == "cluster_affine" and colours([a])]
    assert coloured_into_y == []


def legend_amounts(dot: str) -> dict[str, float]:
    legend = parse(dot).nodes["legend"]
    rows = re.findall(r"<b>([^<]+)</b></font></td>.*?<td align=\"right\">([^<]*)</td>", legend)
    amounts = {title: float(value) for title, value in rows if value}
    total = re.search(r"<b>sum</b>.*?\.grad = ([^<]+)</td><td align=\"right\"><b>([^<]+)</b>", legend)
    if total:
        amounts["autograd"] = float(total.group(1))
        amounts["sum"] = float(total.group(2))
    return amounts


@pytest.mark.parametrize("shape,i", [((3,), 0), ((4,), 2), ((2, 5), 7)])
def test_layernorm_legend_numbers_match_the_closed_form_paths(shape, i):
    graph, (x, gamma, _, dy) = graph_problem(shape=shape)
    amounts = legend_amounts(viz.to_dot(graph, paths=True, path_input=i))
    # the three terms, from NumPy alone: one row of x, n = D
    row, j = divmod(i, shape[-1])
    xr = np.atleast_2d(x)[row]
    n = xr.size
    xshift = xr - xr.mean()
    std = np.sqrt((xshift**2).mean() + 1e-5)
    dxhat = gamma * np.atleast_2d(dy)[row]
    direct = dxhat[j] / std
    via_mean = -(dxhat.sum() / std) / n
    via_var = -0.5 * std**-3 * (dxhat * xshift).sum() * 2 * xshift[j] / n
    want = {"direct": direct, "via the mean": via_mean, "via the variance": via_var}
    for title, value in want.items():
        assert amounts[title] == pytest.approx(value, rel=tol.DISPLAY_RTOL, abs=test_tol.DISPLAY_ATOL), title
    assert amounts["sum"] == pytest.approx(direct + via_mean + via_var, rel=tol.DISPLAY_RTOL, abs=test_tol.DISPLAY_ATOL)
    assert amounts["autograd"] == pytest.approx(graph["x"][i].grad, rel=tol.DISPLAY_RTOL, abs=test_tol.DISPLAY_ATOL)


def test_rmsnorm_has_two_paths_and_says_so():
    graph, _ = graph_problem("rmsnorm", (4,))
    dot = viz.to_dot(graph, paths=True, path_input=1)
    assert "via the mean square" in dot and "via the mean<" not in dot
    assert "two paths" in dot
    amounts = legend_amounts(dot)
    assert set(amounts) == {"direct", "via the mean square", "sum", "autograd"}
    assert amounts["sum"] == pytest.approx(graph["x"][1].grad, rel=tol.DISPLAY_RTOL, abs=test_tol.DISPLAY_ATOL)
    d = parse(dot)
    assert colours(d.edge_attrs(d.names["x[1]"], d.op_of("xhat[1]"))) == {DIRECT}
    assert colours(d.edge_attrs(d.names["rrms"], d.op_of("xhat[3]"))) == {VAR}


@pytest.mark.parametrize(
    "norm,shape,axes", [("layernorm", (2, 5), (-1,)), ("batchnorm", (4, 3), (0,)), ("rmsnorm", (2, 4), (-1,))]
)
def test_the_path_tagger_splits_every_dx_into_the_closed_form_paths(norm, shape, axes):
    # the edges the drawings branch at, handed to the backward trace: each x_i's gradient, traced
    # contribution by contribution, ends split into exactly the NumPy terms of its paths, which add up to the
    # closed form of dx and to autograd's
    graph, (x, gamma, _, dy) = graph_problem(norm, shape, backward=False)
    trace = trace_backward(graph.loss(dy.tolist()), viz.path_tagger(graph))
    dxhat = formulas.dxhat(dy, gamma)
    if norm == "rmsnorm":
        r = formulas.rms_moments(x, axes, 1e-5)
        keys, refs = ("direct", "var"), formulas.rms_dx_paths(dxhat, x, r.rms, r.rrms, axes)
        dx = formulas.rms_dx(dxhat, r.xhat, r.rrms, axes)
    else:
        m = formulas.moments(x, axes, 1e-5)
        keys, refs = ("direct", "mean", "var"), formulas.dx_paths(dxhat, m.xshift, m.std, m.rstd, axes)
        dx = formulas.dx_simplified(dxhat, m.xhat, m.rstd, axes)
    for total in (dx, graph_results(graph_problem(norm, shape)[0], shape)[1]):
        assert tol.close(sum(refs), total, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    parts = [trace.parts_of(v) for v in graph["x"]]
    assert all(set(p) == set(keys) for p in parts)
    for key, ref in zip(keys, refs):
        got = np.array([p[key] for p in parts]).reshape(shape)
        assert tol.close(got, ref, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL), key


def test_paths_without_backward_draw_no_numbers():
    graph, _ = graph_problem(backward=False)
    dot = viz.to_dot(graph, paths=True)
    assert "via the variance" in dot
    assert legend_amounts(dot) == {}


def test_batchnorm_paths_stay_in_the_column_of_x_i():
    graph, _ = graph_problem("batchnorm", (4, 3))
    d = parse(viz.to_dot(graph, paths=True, path_input="x[2,1]"))
    n = d.names
    assert colours(d.edge_attrs(n["mean[1]"], d.op_of("xshift[0,1]"))) == {MEAN}
    assert colours(d.edge_attrs(n["mean[0]"], d.op_of("xshift[0,0]"))) == set()
    assert "gradient paths into x[2,1]" in d.nodes["legend"]


# ---- collapsed view and highlighting -------------------------------------------------------


# the data flow of each norm's formula, stage to stage
STAGE_FLOW = {
    "layernorm": "input→mean input→center mean→center center→var var→sqrt sqrt→divide center→divide divide→affine",
    "rmsnorm": "input→meansq meansq→sqrt sqrt→divide input→divide divide→scale",
}


@pytest.mark.parametrize("norm,shape", [("layernorm", (3,)), ("layernorm", (2, 200)), ("rmsnorm", (5,))])
def test_collapsed_view_is_one_box_per_stage_whatever_d(norm, shape):
    graph, _ = graph_problem(norm, shape)
    d = parse(viz.to_dot(graph, collapse=True))
    flow = {tuple(edge.split("→")) for edge in STAGE_FLOW[norm].split()}
    assert {(t[2:], h[2:]) for t, h, _ in d.edges} == flow
    assert set(d.nodes) == {f"s_{stage}" for edge in flow for stage in edge}


def test_a_collapsed_box_counts_the_entries_of_each_name_and_the_loss_box_sums_dy_up_in_one_row():
    big, _ = graph_problem(shape=(2, 200))
    d = parse(viz.to_dot(big, collapse=True))
    assert "xshift</b> (2×200)" in d.nodes["s_center"]
    assert "mean</b> (2)" in d.nodes["s_mean"]  # a count, never "mean [2]", which reads as check's mean[2]
    assert "gamma</b> (200)" in d.nodes["s_affine"]
    assert not re.search(r"</b> \[", viz.to_dot(big, collapse=True))
    graph, (_, _, _, dy) = graph_problem(shape=(16,), backward=False)
    box = parse(viz.to_dot(graph.loss(dy.tolist()), graph=graph, collapse=True)).nodes["s_loss"]
    assert box.count("<tr>") == 2  # the title and one row for dy, not 16
    assert "dy</b> (16)" in box and f"{viz.num(dy[0])}, {viz.num(dy[1])}, {viz.num(dy[2])}, …" in box


def test_collapsed_paths_colour_stage_edges():
    graph, _ = graph_problem(shape=(4,))
    d = parse(viz.to_dot(graph, collapse=True, paths=True))
    assert colours(d.edge_attrs("s_input", "s_mean")) == {MEAN}
    assert colours(d.edge_attrs("s_input", "s_center")) == {DIRECT, VAR}
    assert colours(d.edge_attrs("s_center", "s_var")) == {VAR}
    assert colours(d.edge_attrs("s_divide", "s_affine")) == set()


def faded(attrs: str) -> bool:
    return viz.FADED_TEXT in attrs


@pytest.mark.parametrize("mode", ["ancestors", "descendants"])
def test_highlight_keeps_the_related_nodes_dark(mode):
    graph, _ = graph_problem()
    d = parse(viz.to_dot(graph, highlight="rstd", highlight_mode=mode))
    upstream = ["x[0]", "mean", "xshift[2]", "var", "std", "eps"]  # rstd is computed from these
    downstream = ["xhat[0]", "xhat[2]", "y[1]"]  # and these from rstd
    assert not faded(d.nodes[d.names["rstd"]])
    assert viz.HIGHLIGHT in d.nodes[d.names["rstd"]]
    for name in upstream:
        assert faded(d.nodes[d.names[name]]) == (mode == "descendants"), name
    for name in downstream:
        assert faded(d.nodes[d.names[name]]) == (mode == "ancestors"), name
    assert faded(d.nodes[d.names["beta[0]"]])  # neither
    by_value = viz.to_dot(graph, highlight=graph["xhat"][1], highlight_mode=mode)  # a Value, as by its name
    assert by_value == viz.to_dot(graph, highlight="xhat[1]", highlight_mode=mode)


# ---- rendering -----------------------------------------------------------------------------


SVG = "{http://www.w3.org/2000/svg}"


def test_render_svg_has_the_stage_clusters_and_the_path_legend(tmp_path, needs_dot):
    graph, _ = graph_problem()
    path = output.render(graph, tmp_path / "ln.svg", paths=True)
    assert path == tmp_path / "ln.svg"
    root = ET.parse(path).getroot()  # parses as XML
    assert root.tag == f"{SVG}svg"
    cluster_titles = [g.find(f"{SVG}title").text for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"]
    assert cluster_titles == [f"cluster_{s}" for s in LAYERNORM_CLUSTERS]
    text = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for phrase in ("gradient paths into x[0]", "direct", "via the mean", "via the variance", "xhat[2]", "rstd"):
        assert phrase in text


def test_render_png_and_pdf(tmp_path, needs_dot):
    graph, _ = graph_problem("batchnorm", (2, 2))
    png = output.render(graph, tmp_path / "bn.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    assert width > 100 and height > 50
    assert output.render(graph, tmp_path / "bn.pdf", collapse=True).read_bytes()[:5] == b"%PDF-"


def test_without_dot_render_writes_dot_but_a_drawing_raises_and_keeps_the_old_file(tmp_path, empty_path):
    graph, _ = graph_problem()
    path = output.render(graph, tmp_path / "ln.dot", grad=True)  # DOT source needs no Graphviz
    assert path.read_text(encoding="utf-8") == viz.to_dot(graph, grad=True)
    target = tmp_path / "ln.svg"
    target.write_text("the previous drawing")
    with pytest.raises(viz.GraphvizNotFoundError, match=r"apt-get install graphviz.*brew.*conda"):
        output.render(graph, target)
    assert target.read_text() == "the previous drawing"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_written_files_get_ordinary_permissions(tmp_path):
    graph, _ = graph_problem(backward=False)
    umask = os.umask(0o022)
    try:
        fresh = output.render(graph, tmp_path / "fresh.dot")
        kept = tmp_path / "kept.dot"
        kept.write_text("old")
        kept.chmod(0o640)
        output.render(graph, kept)
    finally:
        os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o644  # as open() would make it, not mkstemp's 0600
    assert kept.stat().st_mode & 0o777 == 0o640  # a replaced file keeps its mode
    assert kept.read_text(encoding="utf-8") == viz.to_dot(graph)


ENDINGS = r"output: expected a file name ending in \.svg, \.png, \.pdf, \.dot"


@pytest.mark.parametrize(
    ("name", "match"),
    [("ln.jpg", ENDINGS), ("ln", ENDINGS), ("ln.svgz", ENDINGS), ("missing/ln.dot", "does not exist")],
)
def test_render_rejects_an_unknown_extension_or_a_missing_directory(tmp_path, name, match):
    graph, _ = graph_problem(backward=False)
    with pytest.raises(viz.OptionError, match=match) as e:
        output.render(graph, tmp_path / name)
    assert e.value.option == "output" and not (tmp_path / name).exists()


def test_dot_fallback_never_overwrites_a_foreign_file(tmp_path):
    (tmp_path / "ln.dot").write_text("my own notes")
    assert output.dot_fallback_path(tmp_path / "ln.svg") == tmp_path / "ln.1.dot"
    (tmp_path / "ln.1.dot").write_text(viz.DOT_HEADER + "\ndigraph {}\n")  # one we wrote: reused
    assert output.dot_fallback_path(tmp_path / "ln.svg") == tmp_path / "ln.1.dot"


def test_large_graphs_bound_the_layout_effort():
    small, _ = graph_problem(shape=(3,), backward=False)
    big, _ = graph_problem(shape=(200,), backward=False)
    assert viz.graph_size(big) > viz.LARGE_GRAPH
    assert "nslimit" not in viz.to_dot(small)
    assert "nslimit=1" in viz.to_dot(big)


# ---- notebooks -----------------------------------------------------------------------------


def test_notebook_display_is_the_page_or_an_svg_when_html_is_not_wanted(needs_dot):
    y = mgn.layer_norm([1.0, 2.0, 4.0])
    for obj in (y, y.graph, y[0]):
        assert set(obj._repr_mimebundle_()) == {"text/html", "text/plain"}
        bundle = obj._repr_mimebundle_(exclude=["text/html"])
        assert set(bundle) == {"image/svg+xml", "text/plain"}
        ET.fromstring(bundle["image/svg+xml"].encode("utf-8"))
    assert set(y._repr_mimebundle_(include=["text/plain"])) == {"text/plain"}


def test_notebook_display_falls_back_to_text_without_dot(empty_path):
    y = mgn.layer_norm([1.0, 2.0, 4.0])
    bundle = y.graph._repr_mimebundle_()
    assert list(bundle) == ["text/plain"]
    assert bundle["text/plain"].startswith("NormGraph(layernorm")
    assert "install Graphviz" in bundle["text/plain"]
    assert y._repr_html_() is None  # nor the step-through page
    assert mgn.Value(1.5)._repr_mimebundle_() == {"text/plain": repr(mgn.Value(1.5))}  # a leaf: text, dot or not


# ---- one way to draw, for the command and the lessons ------------------------------------


def test_draw_without_dot_writes_the_dot_source_and_returns_the_typed_error(tmp_path, empty_path):
    graph, _ = graph_problem()
    drawn = output.draw(graph, tmp_path / "ln.svg", grad=True)
    assert drawn.path == tmp_path / "ln.dot" and not (tmp_path / "ln.svg").exists()
    assert isinstance(drawn.error, viz.GraphvizNotFoundError) and isinstance(drawn.error, viz.DrawingError)
    assert drawn.path.read_text(encoding="utf-8") == viz.to_dot(graph, grad=True)


def test_draw_when_dot_fails_keeps_the_dot_source(tmp_path, monkeypatch):
    def failing(dot, fmt):
        raise viz.RenderError(f"dot -T{fmt} failed: syntax error in line 1")

    monkeypatch.setattr(viz, "pipe", failing)
    graph, _ = graph_problem(backward=False)
    drawn = output.draw(graph, tmp_path / "ln.png")
    assert isinstance(drawn.error, viz.RenderError) and "syntax error" in str(drawn.error)
    assert drawn.path == tmp_path / "ln.dot" and drawn.path.read_text(encoding="utf-8") == viz.to_dot(graph)


# ---- a d = 4 graph for a slide: every node named, indices in order, titles clear of edges ---------


def index_of(name: str) -> tuple[int, ...]:
    return tuple(int(i) for i in split_index(name)[1].strip("[]").split(","))


@pytest.mark.parametrize("norm,shape", [("layernorm", (4,)), ("layernorm", (2, 3)), ("batchnorm", (3, 2))])
def test_every_value_node_has_a_name_of_its_own(norm, shape):
    graph, (*_, dy) = graph_problem(norm, shape)
    loss = graph.loss(dy.tolist())
    d = parse(viz.to_dot(loss, graph=graph))
    names = [d.name(k) for k in d.nodes if k.startswith("v")]
    # the constants 1/n appear once in each of two stages (mean and var); every other name once
    assert Counter(names) - Counter({"1/n": 2}) == Counter(set(names) - {"1/n"})
    assert None not in names
    rows = len(graph.groups)
    for k in range(len(graph["x"])):
        idx = graph.index_label("x", k)[1:]
        for name in (f"xshift²{idx}", f"γ·xhat{idx}", f"dy{idx}"):
            assert name in names
    # one sum per normalization group and stage, named after its terms, numbered when there are several
    sums = ["Σx", "Σxshift²"] if rows == 1 else [f"{s}[{r}]" for s in ("Σx", "Σxshift²") for r in range(rows)]
    assert set(sums) <= set(names) and "sum" not in names


@pytest.mark.parametrize("rankdir", ["TB", "LR"])
def test_nodes_that_share_a_name_are_kept_in_index_order(rankdir):
    graph, _ = graph_problem(shape=(2, 3))
    d = parse(viz.to_dot(graph, rankdir=rankdir))
    chained = {split_index(d.name(chain[0]))[0]: chain for chain in d.chains if chain[0].startswith("v")}
    expected = {"x", "xshift", "xshift²", "xhat", "γ·xhat", "y", "gamma", "beta", "Σx", "mean", "var", "var+eps"}
    assert expected <= set(chained)
    for base, chain in chained.items():
        keys = [index_of(d.name(v)) for v in chain]
        # dot puts the tail of a same-rank edge left of its head; left to right it is put below it
        assert keys == sorted(keys, reverse=rankdir == "LR"), base
    assert "remincross=false" in viz.to_dot(graph)


def test_each_stage_title_sits_above_the_nodes_that_start_the_stage():
    graph, _ = graph_problem(shape=(4,))
    d = parse(viz.to_dot(graph))
    assert set(d.above) == {f"cluster_{s}" for s in LAYERNORM_CLUSTERS}
    assert sorted(d.name(v) for v in d.above["cluster_input"]) == ["x[0]", "x[1]", "x[2]", "x[3]"]
    # center: the four subtractions take their inputs from other stages
    assert d.above["cluster_center"] == [d.op_of(f"xshift[{k}]") for k in range(4)]


def plain_layout(dot_source: str) -> tuple[dict[str, tuple[float, float, float, float]], list[list[tuple]]]:
    """Node boxes (x, y, w, h) and visible edge splines from ``dot -Tplain``, in dot's own inches."""
    out = subprocess.run(["dot", "-Tplain"], input=dot_source, capture_output=True, text=True, check=True).stdout
    boxes, splines = {}, []
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "node":
            boxes[parts[1]] = tuple(map(float, parts[2:6]))
        elif parts[0] == "edge" and "invis" not in parts:
            n = int(parts[3])
            splines.append([(float(parts[4 + 2 * i]), float(parts[5 + 2 * i])) for i in range(n)])
    return boxes, splines


def bezier(points: list[tuple[float, float]], steps: int = 40):
    for i in range(0, len(points) - 3, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points[i : i + 4]
        for j in range(steps + 1):
            t = j / steps
            u = 1 - t
            yield (
                u**3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x3,
                u**3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t**3 * y3,
            )


@pytest.mark.parametrize("rankdir", ["TB", "LR"])
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_a_drawn_graph_has_indices_in_order_and_edges_clear_of_the_stage_titles(needs_dot, rankdir, shape):
    graph, _ = graph_problem(shape=shape)
    dot = viz.to_dot(graph, rankdir=rankdir)
    d = parse(dot)
    boxes, splines = plain_layout(dot)
    for base in ("x", "xshift", "xhat", "γ·xhat", "y", "gamma"):
        named = sorted((index_of(n), v) for n, v in d.names.items() if n.startswith(base + "[") and v in boxes)
        # left to right in a top-down graph; top to bottom (y decreasing in dot's coordinates) across
        where = [boxes[v][0] if rankdir == "TB" else -boxes[v][1] for _, v in named]
        assert where == sorted(where), base
    titles = {k: b for k, b in boxes.items() if k.startswith("t_")}
    assert len(titles) == len(LAYERNORM_CLUSTERS)
    for spline in splines:
        for x, y in bezier(spline):
            for name, (cx, cy, w, h) in titles.items():
                assert not (abs(x - cx) < w / 2 and abs(y - cy) < h / 2), f"an edge crosses the title {name}"


def test_a_chinese_drawing_has_chinese_titles_legend_routes_and_words():
    from microgradnorm.i18n import use_language

    graph, _ = graph_problem()
    with use_language("zh-CN"):
        dot = viz.to_dot(graph, grad=True, paths=True)
        collapsed = viz.to_dot(graph, grad=True, collapse=True)
    english = viz.to_dot(graph, grad=True, paths=True)
    for text in ("gradient paths into", "via the mean", "every xshift_j", "autograd accumulated", " of x ("):
        assert text in english and text not in dot, text
    assert "data " in english and "data " not in dot
    assert '">grad ' in viz.to_dot(graph, grad=True, collapse=True) and '">grad ' not in collapsed
    assert "均值" in dot and "方差" in collapsed  # the stage titles


def test_a_png_or_pdf_stays_english_where_graphviz_has_no_chinese_font(monkeypatch):
    from microgradnorm.i18n import current_language, use_language

    for has_font, want in ((False, "en"), (True, "zh-CN")):
        monkeypatch.setattr(output, "_has_chinese_font", lambda has_font=has_font: has_font)
        with use_language("zh-CN"):
            for fmt in ("png", "pdf"):
                with output.drawing_language(fmt):
                    assert current_language() == want
            for fmt in ("svg", "dot", "html"):  # a browser or the reader draws these letters
                with output.drawing_language(fmt):
                    assert current_language() == "zh-CN"


# ---- the numbers a drawing shows ---------------------------------------------------------------------------

# 4 significant digits: the shown number is within half a unit of the 4th digit, 5e-4 of the value
SHOWN_RTOL = 5e-4


# (away from the ends of float64, where the shown number would round past the largest float or into subnormals)
@given(st.floats(min_value=-1e300, max_value=1e300, allow_subnormal=False))
def test_a_drawn_number_has_four_significant_digits_and_no_negative_zero(v):
    shown = viz.num(v)
    assert shown != "-0"
    assert abs(float(shown) - v) <= SHOWN_RTOL * abs(v)
    digits = shown.split("e")[0].lstrip("-").replace(".", "").lstrip("0")
    assert len(digits) <= 4


def test_nan_and_infinity_are_spelled_out_in_a_drawing():
    assert [viz.num(v) for v in (float("nan"), float("inf"), float("-inf"), -0.0)] == ["nan", "inf", "-inf", "0"]


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "groupnorm"])
def test_the_sums_of_a_group_of_one_value_have_names_of_their_own(norm):
    """Over one value, Σx and Σxshift² are still their group's sums, not two nodes both called sum[0,0]."""
    x = [[1.0, 2.0], [2.0, 5.0]]
    graph = (
        mgn.group_norm(x, 2, eps=1e-3).graph
        if norm == "groupnorm"
        else mgn.get_norm(norm).build_graph([[1.0], [2.0]], None, None, 1e-3)
    )
    order = viz.drawing(graph).order
    names = Counter(name for node, name in zip(order, display_names(order, graph)) if node.children)
    assert [name for name, count in names.items() if count > 1] == []
    assert any(name.startswith("Σ") for name in names)
