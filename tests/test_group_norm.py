"""GroupNorm (Wu & He, 2018), added through the registry: the scalar graph, the closed forms, the
vectorized paths and the textbook file, against PyTorch (float64), finite differences and its two
special cases (G = 1 is LayerNorm over (C, H, W); G = C is InstanceNorm).

Also: every norm's tuned backends against the textbook NumPy file, and the textbook file against
PyTorch, so that the textbook a learner reads is checked by an independent oracle.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.check import check_norm, random_problem
from microgradnorm.errors import InputError, InputTypeError
from microgradnorm.norms import group_norm, layer_norm
from microgradnorm.registry import NORMS, get_norm
from microgradnorm.vectorized import public_pass
from tests import tolerances as test_tol
from tests.helpers import refuses

torch = pytest.importorskip("torch")

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
BACKENDS = ("numpy", "fused", "reference") if HAVE_NUMBA else ("numpy", "reference")
F64 = (test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL)


def values(nested) -> np.ndarray:
    return np.array(
        [values(v) for v in nested] if isinstance(nested[0], list) else [v.data for v in nested], dtype=np.float64
    )


def assert_close(a, b, rtol, atol, what=""):
    assert a is not None and b is not None, what
    abs_err, rel_err = tol.normwise_error(a, b)
    assert np.shape(a) == np.shape(b), f"{what}: shapes {np.shape(a)} vs {np.shape(b)}"
    assert tol.close(a, b, rtol, atol), f"{what}: max abs error {abs_err:.3g}, normwise relative {rel_err:.3g}"


def torch_group_norm(x, groups, gamma, beta, eps, dy):
    """y, dx, dgamma, dbeta from torch.nn.functional.group_norm in float64."""
    xt, gt, bt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, gamma, beta))
    y = torch.nn.functional.group_norm(xt, groups, gt, bt, eps)
    y.backward(torch.tensor(dy, dtype=torch.float64))
    return y.detach().numpy(), xt.grad.numpy(), gt.grad.numpy(), bt.grad.numpy()


CASES = [((2, 4), 2), ((2, 6, 3), 3), ((1, 4, 2, 2), 2), ((3, 4, 2), 1), ((2, 4, 3), 4)]


# ---- the scalar graph ----------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "groups"), CASES)
def test_the_scalar_graph_matches_torch_group_norm(shape, groups):
    x, gamma, beta, dy = random_problem(get_norm("groupnorm", groups), shape, seed=sum(shape) + groups)
    y = group_norm(x.tolist(), groups, gamma.tolist(), beta.tolist(), 1e-5)
    y.graph.loss(dy.tolist()).backward()
    ty, tdx, tdgamma, tdbeta = torch_group_norm(x, groups, gamma, beta, 1e-5, dy)
    assert_close(values(y), ty, *F64, "y")
    assert_close(np.array([v.grad for v in y.graph["x"]]).reshape(shape), tdx, *F64, "dx")
    assert_close([v.grad for v in y.graph["gamma"]], tdgamma, *F64, "dgamma")
    assert_close([v.grad for v in y.graph["beta"]], tdbeta, *F64, "dbeta")
    n = shape[0]
    assert len(y.graph["mean"]) == n * groups  # one statistic per example and group


@pytest.mark.parametrize(("shape", "groups"), CASES)
def test_every_node_passes_the_three_way_check(shape, groups):
    spec = get_norm("groupnorm", groups)
    x, gamma, beta, dy = random_problem(spec, shape, seed=3)
    report = check_norm(spec, x, gamma, beta, 1e-5, dy, fd_max_entries=None)
    failing = [(n.name, n.closed_form_abs, n.fd_abs) for n in report.nodes if not (n.closed_form_ok and n.fd_ok)]
    assert failing == []
    assert [n.name for n in report.nodes] == list(spec.node_names)


def test_one_group_is_layer_norm_over_channels_and_positions():
    x, _gamma, _beta, dy = random_problem(get_norm("groupnorm", 1), (3, 2, 2), seed=4)
    gn = group_norm(x.tolist(), 1, eps=1e-5)
    ln = layer_norm(x.reshape(3, 4).tolist(), eps=1e-5)
    gn.graph.loss(dy.tolist()).backward()
    ln.graph.loss(dy.reshape(3, 4).tolist()).backward()
    assert_close(values(gn).reshape(3, 4), values(ln), *F64, "y")
    assert_close([v.grad for v in gn.graph["x"]], [v.grad for v in ln.graph["x"]], *F64, "dx")


def test_one_channel_per_group_is_instance_norm():
    x, gamma, beta, dy = random_problem(get_norm("groupnorm", 3), (2, 3, 4), seed=6)
    y = group_norm(x.tolist(), 3, gamma.tolist(), beta.tolist(), 1e-5)
    y.graph.loss(dy.tolist()).backward()
    xt, gt, bt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    yt = torch.nn.functional.instance_norm(xt, weight=gt, bias=bt, eps=1e-5)
    yt.backward(torch.tensor(dy))
    assert_close(values(y), yt.detach().numpy(), *F64, "y")
    assert_close(np.array([v.grad for v in y.graph["x"]]).reshape(x.shape), xt.grad.numpy(), *F64, "dx")


BAD = [
    (lambda: group_norm([[1.0, 2.0, 3.0]], 2), InputError, ["num_groups", "divisor", "3", "2"]),
    (lambda: group_norm([[1.0, 2.0]], 0), InputTypeError, ["num_groups", ">= 1", "0"]),
    (lambda: group_norm([[1.0, 2.0]], True), InputTypeError, ["num_groups", "True"]),
    (lambda: group_norm([1.0, 2.0], 1), InputError, ["group_norm", "2-D", "1-D"]),
    (lambda: group_norm([[1.0, 2.0]], 1, gamma=[1.0]), InputError, ["gamma", "2 values", "channel"]),
    (lambda: V.group_norm_forward(np.ones((2, 3, 2)), 2), ValueError, ["num_groups", "divisor", "3"]),
    (lambda: V.group_norm_forward(np.ones((2, 4)), 0), TypeError, ["num_groups", "0"]),
    (lambda: V.group_norm_forward(np.ones(4), 1), ValueError, ["x", "group_norm", "(4,)"]),
]


@pytest.mark.parametrize(("make", "kind", "words"), BAD)
def test_bad_input_names_the_argument_the_expected_and_the_given(make, kind, words):
    refuses(make, kind, words)


def test_a_constant_group_at_eps_zero_names_the_group():
    with pytest.raises(ValueError, match=r"group_norm: the std of group 1 is 0"):
        group_norm([[1.0, 2.0, 5.0, 5.0]], 2, eps=0.0)


# ---- the vectorized paths ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize(("shape", "groups"), [*CASES, ((4, 8, 3, 3), 4), ((2, 6, 2, 2, 2), 2)])
def test_vectorized_group_norm_matches_torch(shape, groups, backend, recompute):
    x, gamma, beta, dy = random_problem(get_norm("groupnorm", groups), shape, seed=len(shape))
    y, cache = V.group_norm_forward(x, groups, gamma, beta, 1e-5, backend=backend, recompute=recompute)
    dx, dgamma, dbeta = V.group_norm_backward(dy, cache)
    expected = torch_group_norm(x, groups, gamma, beta, 1e-5, dy)
    for name, a, b in zip(("y", "dx", "dgamma", "dbeta"), (y, dx, dgamma, dbeta), expected):
        assert_close(a, b, *F64, f"{name} {backend} recompute={recompute}")
    assert cache.mean.shape == cache.rstd.shape == (shape[0], groups, 1)  # N,G,1


@pytest.mark.parametrize("backend", BACKENDS)
def test_vectorized_group_norm_in_float32_matches_torch_in_float32(backend):
    x, gamma, beta, dy = (a.astype(np.float32) for a in random_problem(get_norm("groupnorm", 4), (4, 8, 5, 5), 1))
    y, cache = V.group_norm_forward(x, 4, gamma, beta, backend=backend)
    dx, dgamma, dbeta = V.group_norm_backward(dy, cache)
    xt, gt, bt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    yt = torch.nn.functional.group_norm(xt, 4, gt, bt, 1e-5)
    yt.backward(torch.tensor(dy))
    assert y.dtype == dx.dtype == dgamma.dtype == np.float32
    for name, a, t in (
        ("y", y, yt.detach()),
        ("dx", dx, xt.grad),
        ("dgamma", dgamma, gt.grad),
        ("dbeta", dbeta, bt.grad),
    ):
        assert_close(a, t.numpy(), tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, name)


def test_without_gamma_and_beta_the_parameter_gradients_are_none():
    x = np.random.default_rng(0).normal(size=(2, 4, 3))
    y, cache = V.group_norm_forward(x, 2)
    _dx, dgamma, dbeta = V.group_norm_backward(np.ones_like(x), cache)
    assert dgamma is None and dbeta is None
    assert_close(y.reshape(2, 2, 6).mean(-1), np.zeros((2, 2)), 0.0, tol.cancellation_atol(np.abs(y).max(), 6), "mean")


# ---- every norm: the tuned backends against the textbook file, the textbook against PyTorch ---------


def _problem(name: str, shape: tuple[int, ...], seed: int):
    spec = get_norm(name, 2)
    x, gamma, beta, dy = random_problem(spec, shape, seed)
    return spec, x, gamma, beta, dy


def _textbook(spec, x, gamma, beta, dy, eps):
    forward, backward = spec.numpy().textbook_forward, spec.numpy().textbook_backward
    args = (x, spec.num_groups, gamma, beta, eps) if spec.grouped else (x, gamma, beta, eps)
    y, cache = forward(*args)
    return (y, *backward(dy, cache))


SHAPES = {"layernorm": (3, 4, 6), "batchnorm": (5, 4, 2, 3), "rmsnorm": (4, 7), "groupnorm": (3, 4, 2, 3)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(NORMS))
def test_the_tuned_backends_agree_with_the_textbook_file(name, backend):
    spec, x, gamma, beta, dy = _problem(name, SHAPES[name], seed=11)
    expected = _textbook(spec, x, gamma, beta, dy, 1e-5)
    for recompute in (False, True):
        y, cache = public_pass(spec)[0](x, gamma, beta, 1e-5, backend=backend, recompute=recompute)
        got = (y, *public_pass(spec)[1](dy, cache))
        for what, a, b in zip(("y", "dx", "dgamma", "dbeta"), got, expected):
            if b is None:
                assert a is None, what  # RMSNorm's dbeta
            else:
                assert_close(a, b, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL, f"{what} {backend}")


@pytest.mark.parametrize("name", list(NORMS))
def test_the_textbook_file_agrees_with_pytorch(name):
    spec, x, gamma, beta, dy = _problem(name, SHAPES[name], seed=12)
    y, dx, dgamma, dbeta = _textbook(spec, x, gamma, beta, dy, 1e-5)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(gamma, requires_grad=True)
    bt = None if beta is None else torch.tensor(beta, requires_grad=True)
    yt = spec.torch_functional(torch.nn.functional, xt, gt, bt, 1e-5)
    yt.backward(torch.tensor(dy))
    assert_close(y, yt.detach().numpy(), *F64, "y")
    assert_close(dx, xt.grad.numpy(), *F64, "dx")
    assert_close(dgamma, gt.grad.numpy(), *F64, "dgamma")
    assert (dbeta is None) == (bt is None)
    if bt is not None:
        assert_close(dbeta, bt.grad.numpy(), *F64, "dbeta")


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 3),
    per_group=st.integers(1, 3),
    groups=st.integers(1, 3),
    spatial=st.lists(st.integers(1, 3), max_size=2),
    seed=st.integers(0, 2**16),
)
def test_group_norm_matches_torch_for_any_shape_and_grouping(n, per_group, groups, spatial, seed):
    assume(per_group * math.prod(spatial) > 1)  # torch refuses a group of one value
    shape = (n, per_group * groups, *spatial)
    x, gamma, beta, dy = random_problem(get_norm("groupnorm", groups), shape, seed)
    eps = 1e-3
    y, cache = V.group_norm_forward(x, groups, gamma, beta, eps, backend="numpy")
    dx, dgamma, dbeta = V.group_norm_backward(dy, cache)
    ty, tdx, tdgamma, tdbeta = torch_group_norm(x, groups, gamma, beta, eps, dy)
    assert_close(y, ty, *F64, "y")
    assert_close(
        dx, tdx, test_tol.TORCH_F64_RTOL, max(test_tol.TORCH_F64_ATOL, tol.norm_dx_atol(x, gamma, dy, cache.rstd)), "dx"
    )
    assert_close(dgamma, tdgamma, test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL, "dgamma")
    assert_close(dbeta, tdbeta, *F64, "dbeta")


# ---- the commands ----------------------------------------------------------------------------------


def test_check_and_graph_take_groupnorm_with_groups(capsys, tmp_path):
    from microgradnorm.cli import main

    assert main(["check", "groupnorm", "--groups", "2", "--shape", "2x4x2"]) == 0
    assert "All agree" in capsys.readouterr().out
    assert main(["graph", "groupnorm", "--groups", "4", "--shape", "1x4x2", "-o", str(tmp_path / "g.dot")]) == 0
    assert "mean[3]" in (tmp_path / "g.dot").read_text()  # one mean per example and group
    assert main(["check", "groupnorm", "--groups", "3", "--shape", "2x4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--groups" in err[0] and "4" in err[0] and "3" in err[0]
    assert main(["check", "layernorm", "--groups", "2"]) == 2
    assert "--groups" in capsys.readouterr().err
