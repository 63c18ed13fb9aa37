"""GroupNorm (Wu & He, 2018), added through the registry: the scalar graph, the closed forms, the
vectorized paths and the textbook file, against PyTorch (float64), finite differences and its two
special cases (G = 1 is LayerNorm over (C, H, W); G = C is InstanceNorm). The scalar graph and every backend
against PyTorch for several groupings: tests/test_norms.py's and tests/test_vectorized.py's test_matches_pytorch.

Also: every norm's tuned backends against the textbook NumPy file, and the textbook file against
PyTorch, so that the textbook a learner reads is checked by an independent oracle.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.check import random_problem
from microgradnorm.norms import group_norm, layer_norm
from microgradnorm.registry import NORMS, get_norm
from tests import tolerances as test_tol
from tests.helpers import BACKENDS, assert_close, assert_results_close, graph_results, run, torch_results

torch = pytest.importorskip("torch")
F64 = test_tol.TORCH_F64


# ---- the scalar graph (against PyTorch for several groupings: tests/test_norms.py's TORCH_CASES) ----------


def test_one_group_is_layer_norm_over_channels_and_positions():
    x, _gamma, _beta, dy = random_problem(get_norm("groupnorm", 1), (3, 2, 2), seed=4)
    gn = group_norm(x.tolist(), 1, eps=1e-5)
    ln = layer_norm(x.reshape(3, 4).tolist(), eps=1e-5)
    gn.graph.loss(dy.tolist()).backward()
    ln.graph.loss(dy.reshape(3, 4).tolist()).backward()
    assert_results_close(graph_results(gn.graph, (3, 4)), graph_results(ln.graph, (3, 4)), *F64)  # y, dx


def test_one_channel_per_group_is_instance_norm():
    x, gamma, beta, dy = random_problem(get_norm("groupnorm", 3), (2, 3, 4), seed=6)
    y = group_norm(x.tolist(), 3, gamma.tolist(), beta.tolist(), 1e-5)
    y.graph.loss(dy.tolist()).backward()
    xt, gt, bt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    yt = torch.nn.functional.instance_norm(xt, weight=gt, bias=bt, eps=1e-5)
    yt.backward(torch.tensor(dy))
    want = (yt.detach().numpy(), xt.grad.numpy(), gt.grad.numpy(), bt.grad.numpy())
    assert_results_close(graph_results(y.graph, x.shape), want, *F64)


def test_a_constant_group_at_eps_zero_names_the_group():
    with pytest.raises(ValueError, match=r"group_norm: the std of group 1 is 0"):
        group_norm([[1.0, 2.0, 5.0, 5.0]], 2, eps=0.0)


# ---- the vectorized paths ------------------------------------------------------------------------


def test_without_gamma_and_beta_the_parameter_gradients_are_none():
    x = np.random.default_rng(0).normal(size=(2, 4, 3))
    y, cache = V.group_norm_forward(x, 2)
    _dx, dgamma, dbeta = V.group_norm_backward(np.ones_like(x), cache)
    assert dgamma is None and dbeta is None
    assert_close(y.reshape(2, 2, 6).mean(-1), np.zeros((2, 2)), 0.0, tol.cancellation_atol(np.abs(y).max(), 6), "mean")


# ---- every norm: the tuned backends against the textbook file, the textbook against PyTorch ---------


def _textbook(spec, x, gamma, beta, dy, eps):
    forward, backward = spec.numpy().textbook_forward, spec.numpy().textbook_backward
    args = (x, spec.num_groups, gamma, beta, eps) if spec.grouped else (x, gamma, beta, eps)
    y, cache = forward(*args)
    return (y, *backward(dy, cache))


SHAPES = {"layernorm": (3, 4, 6), "batchnorm": (5, 4, 2, 3), "rmsnorm": (4, 7), "groupnorm": (3, 4, 2, 3)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(NORMS))
def test_the_tuned_backends_agree_with_the_textbook_file(name, backend):
    spec = get_norm(name, 2)
    x, gamma, beta, dy = random_problem(spec, SHAPES[name], seed=11)
    expected = _textbook(spec, x, gamma, beta, dy, 1e-5)
    for recompute in (False, True):
        got = run(spec, x, gamma, beta, dy, backend=backend, recompute=recompute)[:4]
        assert_results_close(got, expected, *test_tol.VECTORIZED_F64, f"{backend} recompute={recompute}")


@pytest.mark.parametrize("name", list(NORMS))
def test_the_textbook_file_agrees_with_pytorch(name):
    spec = get_norm(name, 2)
    x, gamma, beta, dy = random_problem(spec, SHAPES[name], seed=12)
    want = torch_results(name, x, gamma, beta, dy, 1e-5, groups=2)
    assert_results_close(_textbook(spec, x, gamma, beta, dy, 1e-5), want, *F64)


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
    ty, tdx, tdgamma, tdbeta = torch_results("groupnorm", x, gamma, beta, dy, eps, groups)
    assert_results_close((y, None, dgamma, dbeta), (ty, None, tdgamma, tdbeta), *F64)  # dx: a scaled atol
    dx_atol = max(test_tol.TORCH_F64_ATOL, tol.norm_dx_atol(x, gamma, dy, cache.rstd))
    assert_close(dx, tdx, test_tol.TORCH_F64_RTOL, dx_atol, "dx")


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
