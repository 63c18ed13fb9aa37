"""Norms built from scalar nodes: structure, forward values, every gradient against PyTorch (float64), the
invariants of LayerNorm on the graph itself (Hypothesis), edge cases and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import DomainError, Value, batch_norm, formulas, layer_norm, rms_norm, topological_order
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.errors import InputError, InputTypeError
from microgradnorm.norms import group_norm
from microgradnorm.registry import NORMS, get_norm
from tests import tolerances as test_tol
from tests.helpers import assert_results_close, problem, refuses, scalar_results, torch_results, values
from tests.strategies import eps_values, matrices, positive_scales, shifts, upstream, vectors
from tests.tolerances import rstd_of, xhat_atol

NODE_NAMES = {name: spec.node_names for name, spec in NORMS.items()}


# ---- structure ------------------------------------------------------------------


def test_layer_norm_has_one_node_per_entry_and_per_statistic_each_in_its_stage():
    """(That every node of every norm is tagged with one of its stages: the registry's test below.)"""
    g = layer_norm([1.0, 2.0, 4.0], gamma=[1.0, 2.0, 3.0], beta=[0.5, 0.0, -1.0]).graph
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
    ("norm", "shape", "groups", "statistics"),
    [
        ("layernorm", (5,), 1, 1),
        ("layernorm", (3, 4), 1, 3),
        ("rmsnorm", (3, 4), 1, 3),
        ("batchnorm", (4, 3), 1, 3),
        ("batchnorm", (2, 3, 2, 2), 1, 3),
        ("groupnorm", (2, 4), 2, 4),  # one per example and group
        ("groupnorm", (2, 6, 3), 3, 6),
        ("groupnorm", (1, 4, 2, 2), 2, 2),
        ("groupnorm", (3, 4, 2), 1, 3),
        ("groupnorm", (2, 4, 3), 4, 8),
    ],
)
def test_outputs_keep_the_nesting_of_the_input_and_there_is_one_statistic_per_group(norm, shape, groups, statistics):
    spec = get_norm(norm, groups)
    graph = spec.build_graph(np.random.default_rng(0).normal(size=shape).tolist())
    assert values(graph.out).shape == shape
    assert len(graph[spec.node_names[1]]) == statistics  # the mean, or RMSNorm's mean square


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


DRAWN = {"layernorm": vectors(), "batchnorm": matrices(min_rows=2, axis=0), "rmsnorm": matrices()}


@pytest.mark.parametrize("norm", list(DRAWN))
@given(data=st.data(), eps=st.floats(0.0, 1.0), affine=st.booleans())
def test_forward_matches_the_numpy_formula(norm, data, eps, affine):
    spec = get_norm(norm)
    x = data.draw(DRAWN[norm])
    d = spec.param_size(x.shape)
    gamma = np.linspace(0.5, 1.5, d) if affine else None
    beta = np.linspace(-1.0, 1.0, d) if affine and spec.has_beta else None
    y = spec.build_graph(x.tolist(), *(None if a is None else a.tolist() for a in (gamma, beta)), eps)
    moments = formulas.moments if spec.centered else formulas.rms_moments
    want = formulas.affine(moments(x, spec.axes(x.shape), eps).xhat, gamma, beta)
    assert tol.close(values(y.out), want, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)


def test_batch_norm_nchw_normalizes_each_channel_over_n_h_w():
    x = np.random.default_rng(1).normal(2.0, 3.0, size=(2, 3, 2, 2))
    out = values(batch_norm(x.tolist(), eps=0.0))
    rstd = 1.0 / x.std(axis=(0, 2, 3))
    term = 1.0 + np.abs(x).max() * rstd.max()  # an xhat, and the rounding its centering carries
    per_channel = out.size // 3
    assert np.allclose(out.mean(axis=(0, 2, 3)), 0.0, rtol=0.0, atol=tol.cancellation_atol(term, per_channel))
    assert np.allclose(out.var(axis=(0, 2, 3)), 1.0, rtol=0.0, atol=tol.cancellation_atol(term**2, per_channel))


TORCH_CASES = [  # (norm, shape, GroupNorm's num_groups: a few, one as LayerNorm, one per channel as InstanceNorm)
    ("layernorm", (6,), 1), ("layernorm", (3, 5), 1), ("rmsnorm", (3, 5), 1), ("batchnorm", (6, 3), 1),
    ("batchnorm", (2, 3, 2, 2), 1), ("groupnorm", (2, 4), 2), ("groupnorm", (2, 6, 3), 3),
    ("groupnorm", (1, 4, 2, 2), 2), ("groupnorm", (3, 4, 2), 1), ("groupnorm", (2, 4, 3), 4),
]  # fmt: skip


@pytest.mark.parametrize(("norm", "shape", "groups"), TORCH_CASES)
@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_scalar_graph_matches_pytorch(norm, shape, groups, eps):
    """y and every gradient against torch.nn.functional in float64."""
    pytest.importorskip("torch")
    spec = get_norm(norm, groups)
    x, gamma, beta, dy = problem(spec, shape, seed=sum(shape) + groups)
    want = torch_results(norm, x, gamma, beta, dy, eps, groups)
    assert_results_close(scalar_results(spec, x, gamma, beta, dy, eps), want, *test_tol.TORCH_F64)


# ---- the invariants of LayerNorm, on the scalar graph and on the closed forms, each on its own ------------


def input_grad(y, dy) -> np.ndarray:
    y.graph.loss(dy.tolist()).backward()
    return np.array([v.grad for v in y.graph["x"]])


NORMALIZED = {  # a vector normalized (no gamma, no beta): LayerNorm by the scalar graph and the closed forms; RMSNorm
    "layer_norm": lambda x, eps: values(layer_norm(x.tolist(), eps=eps)),
    "moments": lambda x, eps: formulas.moments(x, (0,), eps).xhat,
    "rms_norm": lambda x, eps: values(rms_norm(x.tolist(), eps=eps)),
}
INPUT_GRAD = {  # LayerNorm's dL/dx of a vector for gamma (or None) and dy, from the graph and the closed forms
    "layer_norm": lambda x, gamma, eps, dy: input_grad(layer_norm(x.tolist(), gamma, eps=eps), dy),
    "closed_form": lambda x, gamma, eps, dy: formulas.normalization_node_grads(x, gamma, None, eps, dy, (0,), 0)["x"],
}


@pytest.mark.parametrize("how", ["layer_norm", "moments"])
@given(vectors(), shifts, eps_values)
def test_layer_norm_ignores_a_constant_shift(how, x, c, eps):
    assert np.allclose(NORMALIZED[how](x, eps), NORMALIZED[how](x + c, eps), rtol=0.0, atol=xhat_atol(x + c, eps))


@pytest.mark.parametrize("how", list(NORMALIZED))
@given(vectors(), positive_scales)
def test_a_norm_ignores_a_positive_scale_at_eps_zero(how, x, c):
    assert np.allclose(NORMALIZED[how](x, 0.0), NORMALIZED[how](c * x, 0.0), rtol=0.0, atol=xhat_atol(x, 0.0))


@pytest.mark.parametrize("how", list(INPUT_GRAD))
@given(vectors(), eps_values, st.booleans(), st.data())
def test_the_input_gradient_sums_to_zero(how, x, eps, with_gamma, data):
    dy = data.draw(upstream(x.shape))
    gamma = np.linspace(0.5, 1.5, x.shape[0]) if with_gamma else None
    dx = INPUT_GRAD[how](x, gamma, eps, dy)
    assert abs(dx.sum()) <= tol.norm_dx_atol(x, gamma, dy, rstd_of(x, eps)) * x.size


@pytest.mark.parametrize("how", list(INPUT_GRAD))
@given(vectors(), st.data())
def test_the_input_gradient_is_orthogonal_to_xhat_at_eps_zero(how, x, data):
    dy = data.draw(upstream(x.shape))
    xhat = formulas.moments(x, (0,), 0.0).xhat
    dx = INPUT_GRAD[how](x, None, 0.0, dy)
    # each dx_i is off by up to dx_atol, and the dot product rounds its d terms dx_i * xhat_i
    dx_atol = tol.norm_dx_atol(x, None, dy, rstd_of(x, 0.0))
    bound = dx_atol * np.abs(xhat).sum() + tol.cancellation_atol(np.abs(dx).max() * np.abs(xhat).max(), x.size)
    assert abs(dx @ xhat) <= bound


@given(vectors())
def test_loss_sum_y_gives_a_zero_input_gradient_when_gamma_is_one(x):
    y = layer_norm(x.tolist(), eps=1e-5)
    dx = input_grad(y, np.ones(x.shape))
    assert np.allclose(dx, 0.0, rtol=0.0, atol=tol.norm_dx_atol(x, None, np.ones(x.shape), rstd_of(x, 1e-5)))


@given(matrices(min_rows=2, axis=0), st.data())
def test_batch_norm_of_x_is_layer_norm_of_x_transposed(x, data):
    dy = data.draw(upstream(x.shape))
    bn = batch_norm(x.tolist(), eps=1e-4)
    ln = layer_norm(x.T.tolist(), eps=1e-4)
    assert tol.close(values(bn), values(ln).T, tol.VECTORIZED_F64_RTOL, xhat_atol(x, 1e-4))
    dx_bn, dx_ln = input_grad(bn, dy).reshape(x.shape), input_grad(ln, dy.T).reshape(x.T.shape).T
    assert tol.close(dx_bn, dx_ln, tol.VECTORIZED_F64_RTOL, tol.norm_dx_atol(x, None, dy, rstd_of(x, 1e-4, axis=0)))


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
    with pytest.raises(DomainError, match=r"std of .* is 0 .* use eps > 0"):  # a group of one value (D = 1)
        layer_norm([3.7], eps=0.0)
    with pytest.raises(DomainError, match="root mean square"):
        rms_norm([0.0, 0.0], eps=0.0)


def test_the_naive_variance_tells_a_constant_group_from_cancellation():
    # both come out as var + eps <= 0; only a group whose values are all equal has a true std of 0
    with pytest.raises(DomainError, match=r"std of column 1 is 0 \(all its values are equal\)"):
        batch_norm([[1.0, 2.0], [3.0, 2.0]], eps=0.0, variance="naive")
    with pytest.raises(DomainError, match=r"column 0 came out as .* through cancellation"):
        batch_norm([[1e9 + 4.0, 1.0], [1e9 + 7.0, 2.0]], eps=0.0, variance="naive")


BUILDERS = {  # the public builders (GroupNorm with the registry's default of one group)
    "layernorm": layer_norm,
    "batchnorm": batch_norm,
    "rmsnorm": rms_norm,
    "groupnorm": lambda x, gamma, beta, eps: group_norm(x, 1, gamma, beta, eps),
}


@pytest.mark.parametrize("kind", list(NORMS))
def test_the_registry_builds_the_graph_of_each_norm_with_its_named_nodes_in_order(kind):
    """Every named node, in the registry's order, each stage tagged, and the graph of the public builder."""
    x, gamma, beta = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], [1.0, 2.0, -0.5], [0.1, 0.0, -0.2]
    spec = NORMS[kind]
    graph = spec.build_graph(x, gamma, beta, 1e-3) if spec.has_beta else spec.build_graph(x, gamma)
    assert list(graph.nodes) == list(NODE_NAMES[kind])
    stages = {v.stage for v in topological_order(graph.roots())}
    assert set(spec.stages) <= stages <= set(spec.stages) | {"input"}  # each of its stages; every node tagged
    direct = BUILDERS[kind](x, gamma, beta, 1e-3) if spec.has_beta else BUILDERS[kind](x, gamma)
    assert np.array_equal(values(graph.out), values(direct))


def test_eps_zero_is_allowed_when_the_input_varies():
    y = layer_norm([1.0, 3.0], eps=0.0)
    assert [v.data for v in y] == [-1.0, 1.0]


def test_values_passed_in_receive_gradients_and_keep_their_labels():
    xs = [Value(v, label=f"x{i}") for i, v in enumerate([1.0, 2.0, 4.0])]
    y = layer_norm(xs, gamma=[1.0, -1.0, 2.0])
    y.graph.loss([0.3, -0.1, 0.8]).backward()
    assert [v.label for v in xs] == ["x0", "x1", "x2"]
    assert any(v.grad != 0.0 for v in xs)
    x, rstd = np.array([1.0, 2.0, 4.0]), rstd_of(np.array([1.0, 2.0, 4.0]), 1e-5)
    atol = tol.norm_dx_atol(x, [1.0, -1.0, 2.0], np.array([0.3, -0.1, 0.8]), rstd) * len(xs)
    assert abs(sum(v.grad for v in xs)) <= atol


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

BAD_INPUTS = [  # (a bad eps: tests/test_inputs.py, the same words for every function that takes one)
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
    (lambda: layer_norm([1.0, 2.0], variance="welford"), ValueError, ["variance", "two_pass", "welford"]),
    (lambda: layer_norm([1.0, 2.0]).graph.loss([1.0]), ValueError, ["dy", "[2]", "[1]"]),
    (lambda: group_norm([[1.0, 2.0, 3.0]], 2), InputError, ["num_groups", "divisor", "3", "2"]),
    (lambda: group_norm([[1.0, 2.0]], 0), InputTypeError, ["num_groups", ">= 1", "0"]),
    (lambda: group_norm([[1.0, 2.0]], True), InputTypeError, ["num_groups", "True"]),
    (lambda: group_norm([1.0, 2.0], 1), InputError, ["group_norm", "2-D", "1-D"]),
    (lambda: group_norm([[1.0, 2.0]], 1, gamma=[1.0]), InputError, ["gamma", "2 values", "channel"]),
    (lambda: V.group_norm_forward(np.ones((2, 3, 2)), 2), ValueError, ["num_groups", "divisor", "3"]),
    (lambda: V.group_norm_forward(np.ones((2, 4)), 0), TypeError, ["num_groups", "0"]),
    (lambda: V.group_norm_forward(np.ones(4), 1), ValueError, ["x", "group_norm", "(4,)"]),
]


@pytest.mark.parametrize(("make", "kind", "words"), BAD_INPUTS)
def test_bad_input_names_the_argument_the_expected_and_the_given(make, kind, words):
    refuses(make, kind, words)


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
