"""Norms built from scalar nodes: structure, forward values, edge cases and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from microgradnorm import DomainError, Value, batch_norm, formulas, layer_norm, rms_norm, topological_order
from microgradnorm import tolerances as tol
from microgradnorm.registry import NORMS
from tests.helpers import refuses
from tests.strategies import matrices, vectors

STAGES = {name: spec.stages for name, spec in NORMS.items()}
NODE_NAMES = {name: spec.node_names for name, spec in NORMS.items()}


def values(nested) -> np.ndarray:
    return np.array(
        [values(v) for v in nested] if isinstance(nested[0], list) else [v.data for v in nested], dtype=np.float64
    )


# ---- structure ------------------------------------------------------------------


def test_layer_norm_has_the_six_stages_and_every_node_is_tagged():
    y = layer_norm([1.0, 2.0, 4.0], gamma=[1.0, 2.0, 3.0], beta=[0.5, 0.0, -1.0])
    nodes = topological_order(y.graph.roots())
    stages = {v.stage for v in nodes}
    assert set(STAGES["layernorm"]) <= stages
    assert stages <= set(STAGES["layernorm"]) | {"input"}
    assert all(v.stage for v in nodes)
    g = y.graph
    assert [len(g[name]) for name in NODE_NAMES["layernorm"]] == [3, 1, 3, 1, 1, 1, 3, 3, 3, 3]
    assert g["mean"][0].stage == "mean" and g["xshift"][0].stage == "center"
    assert g["var"][0].stage == "var" and g["std"][0].stage == "sqrt"
    assert g["rstd"][0].stage == "divide" and g["xhat"][0].stage == "divide"
    assert g["y"][0].stage == "affine"


def test_the_mean_of_d_values_is_one_sum_node_with_d_children():
    d = 768
    y = layer_norm([float(i) for i in range(d)])
    mean = y.graph["mean"][0]
    total = mean.children[0]
    assert total.op == "sum" and len(total.children) == d


@pytest.mark.parametrize(
    ("build", "shape", "groups"),
    [
        (layer_norm, (5,), 1),
        (layer_norm, (3, 4), 3),
        (rms_norm, (3, 4), 3),
        (batch_norm, (4, 3), 3),
        (batch_norm, (2, 3, 2, 2), 3),
    ],
)
def test_outputs_keep_the_nesting_of_the_input_and_there_is_one_statistic_per_group(build, shape, groups):
    x = np.random.default_rng(0).normal(size=shape)
    y = build(x.tolist())
    assert values(y).shape == shape
    stat = "ms" if build is rms_norm else "mean"
    assert len(y.graph[stat]) == groups


def test_named_nodes_have_readable_indexed_names():
    y = layer_norm([[1.0, 2.0, 3.0], [0.0, 5.0, 1.0]], gamma=[1.0, 1.0, 2.0])
    g = y.graph
    assert g.name_of(g["xhat"][4]) == "xhat[1,1]"
    assert g.name_of(g["mean"][1]) == "mean[1]"
    assert g.name_of(g["gamma"][2]) == "gamma[2]"
    assert g.name_of(Value(1.0)) is None
    with pytest.raises(KeyError, match="no node named 'foo'"):
        g["foo"]


# ---- forward values against NumPy ---------------------------------------------------


@given(vectors(), vectors(min_dim=1, max_dim=1))
def test_layer_norm_forward_matches_the_numpy_formula(x, e):
    eps = float(abs(e[0]) % 1.0)
    d = x.shape[0]
    gamma = np.linspace(0.5, 1.5, d)
    beta = np.linspace(-1.0, 1.0, d)
    y = layer_norm(x.tolist(), gamma.tolist(), beta.tolist(), eps=eps)
    m = formulas.moments(x, (0,), eps)
    want = formulas.affine(m.xhat, gamma, beta)
    assert tol.close(values(y), want, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)


@given(matrices(min_rows=2, axis=0))
def test_batch_norm_forward_matches_the_numpy_formula(x):
    y = batch_norm(x.tolist(), eps=1e-3)
    want = formulas.moments(x, (0,), 1e-3).xhat
    assert tol.close(values(y), want, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)


@given(matrices())
def test_rms_norm_forward_matches_the_numpy_formula(x):
    gamma = np.linspace(0.5, 2.0, x.shape[1])
    y = rms_norm(x.tolist(), gamma.tolist(), eps=1e-4)
    want = gamma * formulas.rms_moments(x, (1,), 1e-4).xhat
    assert tol.close(values(y), want, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)


def test_batch_norm_nchw_normalizes_each_channel_over_n_h_w():
    x = np.random.default_rng(1).normal(2.0, 3.0, size=(2, 3, 2, 2))
    out = values(batch_norm(x.tolist(), eps=0.0))
    assert np.allclose(out.mean(axis=(0, 2, 3)), 0.0, atol=1e-12)
    assert np.allclose(out.var(axis=(0, 2, 3)), 1.0, atol=1e-12)


def test_batch_norm_is_layer_norm_of_the_transpose_forward_and_backward():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5, 3))
    dy = rng.normal(size=(5, 3))
    bn = batch_norm(x.tolist(), eps=1e-3)
    ln = layer_norm(x.T.tolist(), eps=1e-3)
    assert tol.close(values(bn), values(ln).T, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)
    bn.graph.loss(dy.tolist()).backward()
    ln.graph.loss(dy.T.tolist()).backward()
    dx_bn = np.array([v.grad for v in bn.graph["x"]]).reshape(5, 3)
    dx_ln = np.array([v.grad for v in ln.graph["x"]]).reshape(3, 5)
    assert tol.close(dx_bn, dx_ln.T, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


# ---- the two variance forms ----------------------------------------------------------


def test_naive_variance_cancels_catastrophically_where_two_pass_does_not():
    x = [4.0 + 1e9, 7.0 + 1e9, 13.0 + 1e9, 16.0 + 1e9]
    true_var = 22.5  # the spread of [4, 7, 13, 16], unaffected by the shift
    two_pass = layer_norm(x, eps=0.0).graph["var"][0].data
    assert two_pass == true_var
    leaves = [Value(v) for v in x]
    mean = Value.mean(leaves)
    naive = Value.mean([v**2 for v in leaves]) - mean**2
    assert abs(naive.data - true_var) > 100.0  # the float64 squares near 1e18 are 128 apart
    xs = np.array(x)
    assert naive.data == float(np.mean(xs**2) - np.mean(xs) ** 2)
    with pytest.raises(DomainError, match="cancellation"):
        layer_norm(x, eps=1e-5, variance="naive")


def test_naive_and_two_pass_graphs_give_the_same_output_on_tame_input():
    x = [0.3, -1.2, 2.5, 0.9]
    a = values(layer_norm(x, variance="naive"))
    b = values(layer_norm(x))
    assert tol.close(a, b, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


# ---- edge cases -------------------------------------------------------------------------


def test_a_constant_input_with_eps_zero_explains_the_division_by_zero():
    with pytest.raises(DomainError, match=r"std of .* is 0 .* use eps > 0"):
        layer_norm([2.0, 2.0, 2.0], eps=0.0)
    with pytest.raises(DomainError, match="root mean square"):
        rms_norm([0.0, 0.0], eps=0.0)


def test_the_naive_variance_tells_a_constant_group_from_cancellation():
    # both come out as var + eps <= 0; only a group whose values are all equal has a true std of 0
    with pytest.raises(DomainError, match=r"std of column 1 is 0 \(all its values are equal\)"):
        batch_norm([[1.0, 2.0], [3.0, 2.0]], eps=0.0, variance="naive")
    with pytest.raises(DomainError, match=r"column 0 came out as .* through cancellation"):
        batch_norm([[1e9 + 4.0, 1.0], [1e9 + 7.0, 2.0]], eps=0.0, variance="naive")


def test_the_registry_builds_the_graph_of_each_norm_with_its_named_nodes_in_order():
    x, gamma, beta = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], [1.0, 2.0, -0.5], [0.1, 0.0, -0.2]
    for kind, make in (("layernorm", layer_norm), ("batchnorm", batch_norm)):
        graph = NORMS[kind].build_graph(x, gamma, beta, 1e-3)
        assert list(graph.nodes) == list(NODE_NAMES[kind])
        assert np.array_equal(values(graph.out), values(make(x, gamma, beta, 1e-3)))
    graph = NORMS["rmsnorm"].build_graph(x, gamma)
    assert list(graph.nodes) == list(NODE_NAMES["rmsnorm"])
    assert np.array_equal(values(graph.out), values(rms_norm(x, gamma)))


def test_d_equal_one_gives_beta_and_a_zero_input_gradient():
    y = layer_norm([3.7], gamma=[2.0], beta=[0.25], eps=1e-5)
    assert y[0].data == 0.25
    y.graph.loss([1.5]).backward()
    assert y.graph["x"][0].grad == 0.0
    assert y.graph["beta"][0].grad == 1.5
    with pytest.raises(DomainError):
        layer_norm([3.7], eps=0.0)


def test_eps_zero_is_allowed_when_the_input_varies():
    y = layer_norm([1.0, 3.0], eps=0.0)
    assert [v.data for v in y] == [-1.0, 1.0]


def test_values_passed_in_receive_gradients_and_keep_their_labels():
    xs = [Value(v, label=f"x{i}") for i, v in enumerate([1.0, 2.0, 4.0])]
    y = layer_norm(xs, gamma=[1.0, -1.0, 2.0])
    y.graph.loss([0.3, -0.1, 0.8]).backward()
    assert [v.label for v in xs] == ["x0", "x1", "x2"]
    assert any(v.grad != 0.0 for v in xs)
    assert sum(v.grad for v in xs) == pytest.approx(0.0, abs=1e-12)


def test_numpy_arrays_are_accepted_as_input():
    y = layer_norm(np.array([[1.0, 2.0], [3.0, 5.0]]), gamma=np.array([1.0, 2.0]))
    assert values(y).shape == (2, 2)


def test_a_layer_norm_of_d_100000_backpropagates():
    d = 100_000
    x = np.random.default_rng(3).normal(size=d)
    y = layer_norm(x.tolist())
    dy = np.random.default_rng(4).normal(size=d)
    loss = y.graph.loss(dy.tolist())
    loss.backward()
    # sum(dx) is 0 exactly; what is left is rounding in d terms of size rstd·|dy|·(1 + |xhat|)
    xhat = (x - x.mean()) / math.sqrt(x.var() + 1e-5)
    term = float(np.max(np.abs(dy) * (1 + np.abs(xhat)))) / math.sqrt(x.var() + 1e-5)
    assert abs(sum(v.grad for v in y.graph["x"])) <= tol.cancellation_atol(term, count=d)


# ---- bad input ---------------------------------------------------------------------------

BAD_INPUTS = [
    (lambda: layer_norm([]), ValueError, ["x", "non-empty"]),
    (lambda: layer_norm([[1.0, 2.0], [3.0]]), ValueError, ["ragged", "x[1]", "1 entries", "x[0]", "2"]),
    (lambda: layer_norm([[1.0, 2.0], 3.0]), ValueError, ["ragged", "x[1]"]),
    (lambda: layer_norm([1.0, "a"]), TypeError, ["x[1]", "str"]),
    (lambda: layer_norm([1.0, None]), TypeError, ["x[1]", "NoneType"]),
    (lambda: layer_norm([1.0, 2j]), TypeError, ["x[1]", "complex"]),
    (lambda: layer_norm("abc"), TypeError, ["x", "str"]),
    (lambda: layer_norm(3.0), ValueError, ["x", "sequence"]),
    (lambda: layer_norm([[[1.0]]]), ValueError, ["layer_norm", "1-D", "2-D", "3-D", "[1, 1, 1]"]),
    (lambda: batch_norm([1.0, 2.0]), ValueError, ["batch_norm", "[N][D]", "1-D"]),
    (lambda: layer_norm([1.0, 2.0], gamma=[1.0]), ValueError, ["gamma", "2 values", "[1]"]),
    (lambda: layer_norm([1.0, 2.0], beta=[1.0, 2.0, 3.0]), ValueError, ["beta", "2 values", "[3]"]),
    (lambda: batch_norm([[[[1.0]]], [[[2.0]]]], gamma=[1.0, 2.0]), ValueError, ["gamma", "channel"]),
    (lambda: layer_norm([1.0, 2.0], eps=-1e-5), ValueError, ["eps", ">= 0", "-1e-05"]),
    (lambda: layer_norm([1.0, 2.0], eps=math.nan), ValueError, ["eps", "nan"]),
    (lambda: layer_norm([1.0, 2.0], eps="0.1"), TypeError, ["eps", "str"]),
    (lambda: layer_norm([1.0, 2.0], variance="welford"), ValueError, ["variance", "two_pass", "welford"]),
    (lambda: layer_norm([1.0, 2.0]).graph.loss([1.0]), ValueError, ["dy", "[2]", "[1]"]),
]


@pytest.mark.parametrize(("make", "kind", "words"), BAD_INPUTS)
def test_bad_input_names_the_argument_the_expected_and_the_given(make, kind, words):
    refuses(make, kind, words)


def test_every_registry_entry_builds_its_named_nodes():
    for spec in NORMS.values():
        shape = spec.default_shape(3, 2)
        x = np.random.default_rng(5).normal(size=shape)
        p = spec.param_size(shape)
        graph = spec.build_graph(x.tolist(), [1.0] * p, [0.0] * p, 1e-5)
        for name in spec.node_names:
            assert name in graph, (spec.name, name)
        assert set(spec.stages) <= {v.stage for v in topological_order(graph.roots())}


def test_a_norm_error_carries_its_fields_and_is_said_in_the_learners_language():
    from microgradnorm.errors import FieldError
    from microgradnorm.i18n import use_language
    from microgradnorm.i18n.errors import localize

    with pytest.raises(FieldError) as info:
        batch_norm([[1.0, 2.0], [3.0, 2.0]], eps=0.0)
    error = info.value
    assert isinstance(error, DomainError) and error.argument == "batch_norm"
    assert localize(error) == str(error)  # English by default
    with use_language("zh-CN"):
        chinese = localize(error)
    assert "第 1 列" in chinese and "标准差" in chinese and "column" not in chinese
