"""The vectorized path agrees with the scalar graph, the closed forms and PyTorch, and follows its rules.

Oracles: the scalar engine's accumulated gradients (built by the registry), the
closed forms of microgradnorm.formulas (through ``NormSpec.node_grads``) and
PyTorch. Every backend is checked; the fused one also in tests/test_fused.py.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import formulas as F
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.check import random_problem
from microgradnorm.registry import NORMS, get_norm
from microgradnorm.vectorized import public_pass
from tests import tolerances as test_tol

from .strategies import norm_problems

# The fused backend needs numba (the [fast] extra); without it, it is not run here and
# tests/test_fused.py reports itself skipped.
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
BACKENDS = ("numpy", "fused", "reference") if HAVE_NUMBA else ("numpy", "reference")
TUNED = ("numpy", "fused") if HAVE_NUMBA else ("numpy",)
SCALAR_SHAPES = {
    "layernorm": [(5,), (3, 4), (1, 1), (2, 1)],
    "batchnorm": [(4, 3), (1, 2), (2, 3, 2, 2)],
    "rmsnorm": [(6,), (3, 4), (2, 1)],
    "groupnorm": [(2, 3), (2, 4, 3), (1, 2, 2, 2)],
}


def run(norm: str, x, gamma, beta, dy, eps=1e-5, backend=None, recompute=None):
    """Forward and backward through the registry's entry: (y, dx, dgamma, dbeta, cache)."""
    spec = get_norm(norm)
    y, cache = public_pass(spec)[0](x, gamma, beta, eps, backend=backend, recompute=recompute)
    dx, dgamma, dbeta = public_pass(spec)[1](dy, cache)
    return y, dx, dgamma, dbeta, cache


def assert_close(a, b, rtol, atol, what=""):
    assert a is not None and b is not None, what
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    abs_err, rel_err = tol.normwise_error(a, b)
    assert tol.close(a, b, rtol, atol), f"{what}: max abs error {abs_err:.3g}, normwise relative {rel_err:.3g}"


def closed_form(norm, x, gamma, beta, eps, dy):
    """y and the closed-form gradients, all in float64 from formulas.py."""
    spec = get_norm(norm)
    x64 = np.asarray(x, dtype=np.float64)
    g = None if gamma is None else np.asarray(gamma, dtype=np.float64)
    b = None if beta is None else np.asarray(beta, dtype=np.float64)
    axes, param_axis = spec.axes(x64.shape), spec.param_axis(x64.shape)
    xv = x64.reshape(spec.view(x64.shape))
    if norm == "rmsnorm":
        xhat = F.rms_moments(xv, axes, eps).xhat
    else:
        xhat = F.moments(xv, axes, eps).xhat.reshape(x64.shape)
    y = F.affine(xhat, F.param_view(g, x64.ndim, param_axis), F.param_view(b, x64.ndim, param_axis))
    grads = spec.node_grads(x64, g, b, eps, np.asarray(dy, dtype=np.float64))
    return y, grads["x"], grads.get("gamma"), grads.get("beta")


# ---- against the scalar graph -------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("eps", [1e-5, 0.1])
@pytest.mark.parametrize("norm", list(NORMS))
def test_matches_the_scalar_graph(norm, eps, backend):
    spec = NORMS[norm]
    for k, shape in enumerate(SCALAR_SHAPES[norm]):
        x, gamma, beta, dy = random_problem(spec, shape, seed=k)
        graph = spec.build_graph(x, gamma, beta, eps)
        graph.loss(dy.tolist()).backward()
        y, dx, dgamma, dbeta, _ = run(norm, x, gamma, beta, dy, eps, backend=backend)
        rt, at = tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL
        where = f"{norm} {shape} eps={eps} {backend}"
        assert_close(y, np.array([v.data for v in graph["y"]]).reshape(shape), rt, at, f"y, {where}")
        assert_close(dx, np.array([v.grad for v in graph["x"]]).reshape(shape), rt, at, f"dx, {where}")
        assert_close(dgamma, [v.grad for v in graph["gamma"]], rt, at, f"dgamma, {where}")
        if spec.has_beta:
            assert_close(dbeta, [v.grad for v in graph["beta"]], rt, at, f"dbeta, {where}")


def test_three_dimensional_layernorm_matches_the_scalar_graph_row_by_row():
    """[B, T, C] as in seed 002: each of the B * T rows is its own LayerNorm."""
    spec = get_norm("layernorm")
    x, gamma, beta, dy = random_problem(spec, (2, 3, 5), seed=7)
    _y, dx, dgamma, dbeta, cache = run("layernorm", x, gamma, beta, dy)
    graph = spec.build_graph(x.reshape(6, 5), gamma, beta, 1e-5)
    graph.loss(dy.reshape(6, 5).tolist()).backward()
    rt, at = tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL
    assert_close(dx.reshape(6, 5), np.array([v.grad for v in graph["x"]]).reshape(6, 5), rt, at, "dx")
    assert_close(dgamma, [v.grad for v in graph["gamma"]], rt, at, "dgamma")
    assert_close(dbeta, [v.grad for v in graph["beta"]], rt, at, "dbeta")
    assert cache.mean.shape == (2, 3, 1) and cache.rstd.shape == (2, 3, 1)  # B,T,1


# ---- against the closed forms, over many shapes ----------------------------------------------------


@pytest.mark.parametrize("norm", list(NORMS))
@given(data=st.data(), backend=st.sampled_from(BACKENDS), recompute=st.sampled_from([None, True, False]))
def test_matches_the_closed_forms_for_any_shape(norm, data, backend, recompute):
    x, gamma, beta, dy, eps = data.draw(norm_problems(norm))
    y, dx, dgamma, dbeta, cache = run(norm, x, gamma, beta, dy, eps, backend=backend, recompute=recompute)
    ry, rdx, rdgamma, rdbeta = closed_form(norm, x, gamma, beta, eps, dy)
    rt, at = tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL
    assert_close(y, ry, rt, at, "y")
    assert_close(dx, rdx, rt, max(at, tol.norm_dx_atol(x, gamma, dy, cache.rstd)), "dx")
    assert (dgamma is None) == (gamma is None) and (dbeta is None) == (beta is None)
    if gamma is not None:
        assert_close(dgamma, rdgamma, rt, max(at, test_tol.norm_dgamma_atol(x, dy, cache.rstd, rdgamma.size)), "dgamma")
    if beta is not None:
        assert_close(dbeta, rdbeta, rt, at, "dbeta")
    assert y.shape == dx.shape == x.shape
    assert y.dtype == dx.dtype == np.float64


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm"])
def test_cache_statistics_are_the_closed_form_moments(norm):
    spec = get_norm(norm)
    for shape in SCALAR_SHAPES[norm][:2] + ([(2, 3, 4)] if norm == "layernorm" else []):
        x, gamma, beta, _ = random_problem(spec, shape, seed=3)
        m = F.moments(x, spec.axes(shape), 1e-5)
        for backend in BACKENDS:
            _, cache = public_pass(spec)[0](x, gamma, beta, 1e-5, backend=backend, recompute=False)
            rt, at = tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL
            for name in ("mean", "var", "rstd", "xhat"):
                assert_close(getattr(cache, name), getattr(m, name), rt, at, f"{name}, {backend}")
            assert_close(cache.std, m.std, rt, at, "std")


# ---- against PyTorch ---------------------------------------------------------------------------------


TORCH_SHAPES = {
    "layernorm": [(7,), (4, 6), (2, 3, 8)],
    "batchnorm": [(6, 4), (3, 2, 4, 4)],
    "rmsnorm": [(5,), (2, 3, 8)],
    "groupnorm": [(4, 6), (3, 2, 4, 4)],
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("norm", list(NORMS))
def test_matches_pytorch(norm, dtype):
    pytest.importorskip("torch")
    from tests.torch_pairs import functional

    spec = get_norm(norm)
    rt, at = (
        (test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL)
        if dtype == "float64"
        else (tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL)
    )
    for k, shape in enumerate(TORCH_SHAPES[norm]):
        for eps in (1e-5, 1e-2):
            x, gamma, beta, dy = (None if a is None else a.astype(dtype) for a in random_problem(spec, shape, seed=k))
            expected = functional(norm, x, gamma, beta, eps, dy)
            for backend in BACKENDS:
                got = run(norm, x, gamma, beta, dy, eps, backend=backend)[:4]
                for name, a, key in zip(("y", "dx", "dgamma", "dbeta"), got, ("y", "x", "gamma", "beta")):
                    if key in expected:
                        assert a.dtype == np.dtype(dtype), f"{name} dtype"
                        assert_close(a, expected[key], rt, at, f"{name}, {norm} {shape} {dtype} eps={eps} {backend}")


# ---- float32 against float64 -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_float32_matches_the_float64_analytic_result(norm, backend):
    spec = get_norm(norm)
    shape = (16, 64) if norm != "batchnorm" else (8, 4, 3, 3)
    x, gamma, beta, dy = (None if a is None else a.astype(np.float32) for a in random_problem(spec, shape, seed=5))
    for recompute in (False, True):
        y, dx, dgamma, dbeta, _ = run(norm, x, gamma, beta, dy, backend=backend, recompute=recompute)
        assert y.dtype == dx.dtype == dgamma.dtype == np.float32
        ry, rdx, rdgamma, rdbeta = closed_form(norm, x, gamma, beta, 1e-5, dy)
        for name, a, b in (("y", y, ry), ("dx", dx, rdx), ("dgamma", dgamma, rdgamma), ("dbeta", dbeta, rdbeta)):
            if b is not None:
                assert_close(a, b, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, f"{name} recompute={recompute}")


# ---- dtypes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_is_computed_in_float32_and_returned_as_float16(backend):
    spec = get_norm("layernorm")
    x, gamma, beta, dy = (a.astype(np.float16) for a in random_problem(spec, (4, 32), seed=1))
    y, dx, dgamma, dbeta, cache = run("layernorm", x, gamma, beta, dy, backend=backend)
    assert y.dtype == dx.dtype == dgamma.dtype == dbeta.dtype == np.float16
    assert cache.compute_dtype == np.float32
    ry, rdx, rdgamma, _ = closed_form("layernorm", x, gamma, beta, 1e-5, dy)
    assert_close(y, ry, test_tol.FLOAT16_RTOL, test_tol.FLOAT16_ATOL, "y")
    assert_close(dx, rdx, test_tol.FLOAT16_RTOL, test_tol.FLOAT16_ATOL, "dx")
    assert_close(dgamma, rdgamma, test_tol.FLOAT16_RTOL, test_tol.FLOAT16_ATOL, "dgamma")


def test_bfloat16_like_input_is_computed_in_float32():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(0).normal(size=(3, 16)).astype(ml_dtypes.bfloat16)
    y, cache = V.layer_norm_forward(x, backend="numpy")
    assert y.dtype == x.dtype and cache.compute_dtype == np.float32


def test_parameters_keep_their_own_dtype_in_the_gradients():
    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    gamma, beta = np.ones(6, np.float64), np.zeros(6, np.float64)
    y, cache = V.layer_norm_forward(x, gamma, beta, backend="numpy")
    dx, dgamma, dbeta = V.layer_norm_backward(np.ones_like(x), cache)
    assert y.dtype == dx.dtype == np.float32 and dgamma.dtype == dbeta.dtype == np.float64


@pytest.mark.parametrize("bad", [np.arange(12).reshape(3, 4), np.ones((3, 4), bool), np.ones((3, 4), complex)])
@pytest.mark.parametrize("norm", list(NORMS))
def test_integer_bool_and_complex_inputs_are_type_errors(norm, bad):
    x = bad if norm != "batchnorm" else bad.reshape(3, 4)
    with pytest.raises(TypeError, match=r"x: expected a floating-point array .* got dtype"):
        run(norm, x, None, None, np.ones(x.shape))


def test_integer_gamma_and_dy_are_type_errors():
    x = np.ones((2, 3)) + np.arange(3)
    with pytest.raises(TypeError, match="gamma"):
        V.layer_norm_forward(x, np.ones(3, dtype=int))
    _, cache = V.layer_norm_forward(x)
    with pytest.raises(TypeError, match="dy"):
        V.layer_norm_backward(np.ones((2, 3), dtype=int), cache)


# ---- inputs are never modified -----------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_read_only_inputs_are_left_untouched(norm, backend):
    spec = get_norm(norm)
    shape = (3, 5) if norm != "batchnorm" else (3, 2, 2, 2)
    arrays = [a for a in random_problem(spec, shape, seed=2)]
    for dtype in (np.float64, np.float32):
        typed = [None if a is None else a.astype(dtype) for a in arrays]
        copies = [None if a is None else a.copy() for a in typed]
        for a in typed:
            if a is not None:
                a.setflags(write=False)
        x, gamma, beta, dy = typed
        for recompute in (False, True):
            run(norm, x, gamma, beta, dy, backend=backend, recompute=recompute)
        for a, c in zip(typed, copies):
            if a is not None:
                np.testing.assert_array_equal(a, c)


# ---- errors ---------------------------------------------------------------------------------------------


def test_gamma_of_the_wrong_shape_names_both_shapes():
    x = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=r"gamma: expected shape \(4,\).*\(2, 3, 4\).*got shape \(3,\)"):
        V.layer_norm_forward(x, np.ones(3))
    with pytest.raises(ValueError, match=r"beta: expected shape \(3,\).*\(5, 3, 2, 2\).*got shape \(4,\)"):
        V.batch_norm_forward(np.zeros((5, 3, 2, 2)), np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match=r"gamma: expected shape \(4,\).*got shape \(2, 2\)"):
        V.rms_norm_forward(np.zeros((3, 4)), np.ones((2, 2)))


@pytest.mark.parametrize("norm", list(NORMS))
def test_dy_of_the_wrong_shape_is_an_error_naming_both_shapes(norm):
    shape = (3, 4) if norm != "batchnorm" else (3, 4, 2, 2)
    x = np.random.default_rng(0).normal(size=shape)
    spec = get_norm(norm)
    _, cache = public_pass(spec)[0](x)
    wrong = np.ones((*shape[:-1], shape[-1] + 1))
    with pytest.raises(ValueError, match=rf"dy: expected shape \({shape[0]}, 4.*got shape \({shape[0]}, "):
        public_pass(spec)[1](wrong, cache)


def test_bad_ranks_eps_and_caches_are_reported():
    with pytest.raises(ValueError, match=r"x: batch_norm expects .* got shape \(2, 3, 4\)"):
        V.batch_norm_forward(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"x: layer_norm expects .*D >= 1, got shape \(3, 0\)"):
        V.layer_norm_forward(np.zeros((3, 0)))
    with pytest.raises(ValueError, match="eps: expected a finite number >= 0, got -1"):
        V.layer_norm_forward(np.ones((2, 2)), eps=-1.0)
    with pytest.raises(TypeError, match="eps: expected a number"):
        V.layer_norm_forward(np.ones((2, 2)), eps="small")
    _, cache = V.rms_norm_forward(np.ones((2, 2)))
    with pytest.raises(ValueError, match="cache: layer_norm_backward expects the cache of a layernorm"):
        V.layer_norm_backward(np.ones((2, 2)), cache)
    with pytest.raises(TypeError, match="cache: expected the NormCache"):
        V.layer_norm_backward(np.ones((2, 2)), (1, 2))


# ---- numerics -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", TUNED)
def test_float32_with_a_mean_offset_of_1e7_stays_accurate(backend):
    """The xhat form and a centered variance; the uncentered forms lose everything here."""
    rng = np.random.default_rng(0)
    x = (1e7 + rng.normal(0.0, 4.0, size=(8, 256))).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 256).astype(np.float32)
    beta = rng.normal(size=256).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    ry, rdx, rdgamma, _ = closed_form("layernorm", x, gamma, beta, 1e-5, dy)
    for recompute in (False, True):
        y, dx, dgamma, _, _ = run("layernorm", x, gamma, beta, dy, backend=backend, recompute=recompute)
        assert_close(y, ry, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, f"y recompute={recompute}")
        assert_close(dx, rdx, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, f"dx recompute={recompute}")
        assert_close(dgamma, rdgamma, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "dgamma")
    # the test can fail: the uncentered variance E[x^2] - E[x]^2 in float32 is far off
    with np.errstate(invalid="ignore"):
        naive = F.moments(x, (-1,), 1e-5, variance_form="naive")
        assert not tol.close(naive.xhat, F.moments(x.astype(np.float64), (-1,), 1e-5).xhat, 1e-2, 1e-2)


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize("norm", ["layernorm", "batchnorm"])
def test_float32_large_groups_with_a_mean_offset_stay_accurate(norm, backend):
    """Groups of 16,384 and 65,536 values near 1e6: a float32 sum misses their mean by more than their spread.

    The first-order correction var = mean(xshift^2) - mean(xshift)^2 then cancels
    catastrophically (y was off by 1.3 on the NumPy path), so the mean's error is
    folded back into the mean before the variance is taken.
    """
    rng = np.random.default_rng(7)
    shape = (2, 65536) if norm == "layernorm" else (16384, 2)
    x = (1e6 + rng.normal(size=shape)).astype(np.float32)
    dy = rng.normal(size=shape).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    beta = rng.normal(size=shape[-1]).astype(np.float32)
    ry, rdx, rdgamma, rdbeta = closed_form(norm, x, gamma, beta, 1e-5, dy)
    for recompute in (False, True):
        y, dx, dgamma, dbeta, _ = run(norm, x, gamma, beta, dy, backend=backend, recompute=recompute)
        assert_close(y, ry, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, f"y recompute={recompute}")
        assert_close(dx, rdx, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, f"dx recompute={recompute}")
        assert_close(dgamma, rdgamma, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "dgamma")
        assert_close(dbeta, rdbeta, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "dbeta")


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize("shape", [(8, 512), (512, 4), (16, 4, 4, 4)], ids=["ln", "bn-columns", "bn-channels"])
def test_float64_with_a_mean_offset_of_1e12_centers_to_full_precision(shape, backend):
    """The float64 sum misses the mean by about 1e-4 here; the fold-back of the residual recovers it.

    The oracle centers on the mean as hi + lo, both from exact sums (math.fsum), so it
    does not share the rounding it checks. Without the fold-back the fused kernels
    were off by 1e-4.
    """
    import math

    norm = "layernorm" if len(shape) == 2 and shape[1] == 512 else "batchnorm"
    rng = np.random.default_rng(11)
    x = 1e12 + rng.normal(size=shape)
    y, _ = (V.layer_norm_forward if norm == "layernorm" else V.batch_norm_forward)(x, None, None, backend=backend)
    groups = x if norm == "layernorm" else np.moveaxis(x, 1, 0).reshape(shape[1], -1)  # one group per row
    hi = np.array([math.fsum(g) / g.size for g in groups])[:, None]  # the mean, correctly rounded
    lo = np.array([math.fsum(g) / g.size for g in groups - hi])[:, None]  # what rounding left out
    xshift = (groups - hi) - lo  # groups - hi is exact: every value is within a factor 2 of hi
    ref = xshift / np.sqrt(np.mean(xshift**2, axis=1, keepdims=True) + 1e-5)
    got = y if norm == "layernorm" else np.moveaxis(y, 1, 0).reshape(shape[1], -1)
    assert_close(got, ref, 1e-12, 1e-12, "y")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_rows_whose_squares_overflow_are_rescaled(norm, backend):
    """|x| near 1e20 in float32 (x^2 overflows) and near 1e200 in float64."""
    rng = np.random.default_rng(1)
    shape = (4, 16) if norm != "batchnorm" else (16, 4)
    base = rng.normal(0.5, 2.0, size=shape)
    for dtype, scale in ((np.float32, 1e20), (np.float64, 1e200)):
        x = base.copy()
        if norm == "batchnorm":
            x[:, 1] *= scale  # one huge channel
        else:
            x[1] *= scale  # one huge row
        x = x.astype(dtype)
        dy = rng.normal(size=shape).astype(dtype)
        gamma = rng.uniform(0.5, 1.5, shape[-1]).astype(dtype)
        y, dx, dgamma, _, cache = run(norm, x, gamma, None, dy, backend=backend)
        assert np.isfinite(y).all() and np.isfinite(dx).all() and np.isfinite(dgamma).all()
        # the oracle: float64 closed forms, with the huge float64 group divided by its scale first
        # (a norm does not change when its group is scaled and eps is negligible; dx scales by 1/scale)
        huge = (slice(None), 1) if norm == "batchnorm" else (1,)
        x64 = x.astype(np.float64)
        if dtype == np.float64:
            x64[huge] /= scale
        ry, rdx, rdgamma, _ = closed_form(norm, x64, gamma, None, 1e-5, dy)
        if dtype == np.float64:
            rdx[huge] /= scale
        rt, at = tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL
        assert_close(y, ry, rt, at, f"y {dtype.__name__}")
        assert_close(dgamma, rdgamma, rt, at, "dgamma")
        assert_close(dx[huge], rdx[huge], rt, 0.0, "dx of the huge group")
        assert_close(dx, rdx, rt, at, "dx")
        assert cache.rstd.reshape(-1)[1] > 0


def one_odd_group(norm: str, seed: int):
    """(base, group, dy, gamma): a small float64 problem whose group 1 (a row; BatchNorm: a column) a test rescales."""
    rng = np.random.default_rng(seed)
    shape = (4, 16) if norm != "batchnorm" else (16, 4)
    group = (slice(None), 1) if norm == "batchnorm" else (1,)
    return rng.normal(0.5, 2.0, size=shape), group, rng.normal(size=shape), rng.uniform(0.5, 1.5, shape[-1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_a_float64_group_beyond_2_to_the_1023_is_rescaled_too(norm, backend):
    """Its scale 2^1024 is not a float64 itself (the rescaling once raised OverflowError here)."""
    base, huge, dy, gamma = one_odd_group(norm, seed=5)
    base[huge] *= 1.7 / np.abs(base[huge]).max()  # largest |x| of the group: 1.7 * 2^1023
    x = base.copy()
    x[huge] = np.ldexp(x[huge], 1023)
    assert np.isfinite(x).all() and np.abs(x).max() > 2.0**1023
    y, _, dgamma, _, _ = run(norm, x, gamma, None, dy, backend=backend)
    ry, _, rdgamma, _ = closed_form(norm, base, gamma, None, 1e-5, dy)  # the same group, 2^1023 times smaller
    assert_close(y, ry, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "y")
    assert_close(dgamma, rdgamma, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "dgamma")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_a_float64_group_with_a_spread_near_1e_300_is_rescaled_at_eps_0(norm, backend):
    """Its squares underflow (the variance came out 0, and y inf); at eps = 0 a norm ignores the scale."""
    base, tiny, dy, gamma = one_odd_group(norm, seed=6)
    x = base.copy()
    x[tiny] *= 1e-300
    y, dx, dgamma, _, _ = run(norm, x, gamma, None, dy, eps=0.0, backend=backend)
    ry, rdx, rdgamma, _ = closed_form(norm, base, gamma, None, 0.0, dy)  # the same group at scale 1
    rdx[tiny] *= 1e300  # dx scales by 1 / scale
    assert_close(y, ry, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "y")
    assert_close(dgamma, rdgamma, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "dgamma")
    assert_close(dx[tiny], rdx[tiny], tol.FLOAT32_RTOL, 0.0, "dx of the tiny group")


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize("norm", list(NORMS))
def test_float32_groups_at_the_ends_of_the_float32_range(norm, backend):
    """A group whose x - mean overflows float32, and one whose 1 / spread does, still normalize right.

    Group 1 holds values near +3e38 and one near -3e38 (x - mean is about -5.6e38);
    group 2 is subnormal, about 1e-41 (1 / its spread is about 1e41). With eps = 0
    their xhat is an ordinary number. dy is zero on both, so their dx is exactly 0
    and they add nothing to dgamma: a NaN or Inf from them would show.
    """
    rng = np.random.default_rng(3)
    d = 16
    shape = (4, d) if norm != "batchnorm" else (d, 4)

    def group(k):
        return (slice(None), k) if norm == "batchnorm" else (k,)

    x = rng.normal(0.5, 2.0, size=shape)
    huge = 3e38 * (1.0 - 0.01 * rng.uniform(size=d))
    huge[5] = -3e38
    x[group(1)] = huge
    x[group(2)] = rng.normal(size=d) * 1e-41
    x = x.astype(np.float32)
    assert np.isfinite(x).all() and 0 < np.abs(x[group(2)]).max() < np.finfo(np.float32).tiny
    dy = rng.normal(size=shape).astype(np.float32)
    dy[group(1)] = 0.0
    dy[group(2)] = 0.0
    gamma = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    y, dx, dgamma, _, _ = run(norm, x, gamma, None, dy, eps=0.0, backend=backend)
    ry, rdx, rdgamma, _ = closed_form(norm, x, gamma, None, 0.0, dy)
    rt, at = tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL
    assert_close(y, ry, rt, at, "y")
    assert (dx[group(1)] == 0).all() and (dx[group(2)] == 0).all(), "dx of the extreme groups"
    assert_close(dx, rdx, rt, at, "dx")
    assert_close(dgamma, rdgamma, rt, at, "dgamma")


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("norm", list(NORMS))
def test_nan_and_inf_stay_in_their_row_or_channel(norm, bad, backend):
    spec = get_norm(norm)
    shape = (4, 8) if norm != "batchnorm" else (4, 3, 2, 2)
    x, gamma, beta, dy = random_problem(spec, shape, seed=4)
    x[1, 2] = bad  # row 1 of LayerNorm/RMSNorm; channel 2 of BatchNorm
    with np.errstate(invalid="ignore", over="ignore"):
        y, dx, *_ = run(norm, x, gamma, beta, dy, backend=backend)
        ry, rdx, *_ = closed_form(norm, x, gamma, beta, 1e-5, dy)
    if norm == "batchnorm":
        spoiled = np.zeros(shape, bool)
        spoiled[:, 2] = True
    else:
        spoiled = np.zeros(shape, bool)
        spoiled[1] = True
    assert np.isfinite(y[~spoiled]).all() and np.isfinite(dx[~spoiled]).all()
    assert not np.isfinite(y[spoiled]).all()
    rt, at = tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL
    assert_close(y[~spoiled], ry[~spoiled], rt, at, "y outside the spoiled group")
    assert_close(dx[~spoiled], rdx[~spoiled], rt, at, "dx outside the spoiled group")


def test_a_group_of_one_value_gives_beta_and_a_zero_gradient():
    x = np.array([[3.0], [-2.0]])
    for backend in BACKENDS:
        y, cache = V.layer_norm_forward(x, np.array([2.0]), np.array([0.5]), backend=backend)
        dx, dgamma, dbeta = V.layer_norm_backward(np.array([[1.0], [4.0]]), cache)
        np.testing.assert_array_equal(y, [[0.5], [0.5]])
        np.testing.assert_array_equal(dx, [[0.0], [0.0]])
        np.testing.assert_array_equal(dgamma, [0.0])
        np.testing.assert_array_equal(dbeta, [5.0])


# ---- the cache ----------------------------------------------------------------------------------------


def test_recompute_keeps_x_mean_rstd_and_reports_the_bytes_saved():
    x = np.random.default_rng(0).normal(size=(8, 16, 32)).astype(np.float32)
    gamma = np.ones(32, np.float32)
    _, full = V.layer_norm_forward(x, gamma, None, backend="numpy", recompute=False)
    _, lean = V.layer_norm_forward(x, gamma, None, backend="numpy", recompute=True)
    assert not full.recompute and full.xhat is not None and full.x is None
    assert lean.recompute and lean.xhat is None and lean.x is not None
    assert lean.mean.shape == lean.rstd.shape == (8, 16, 1)
    full_bytes, lean_bytes = full.nbytes(), lean.nbytes()
    assert full_bytes.saved == 0
    assert lean_bytes.saved == x.nbytes == full.xhat.nbytes
    assert full_bytes.kept - lean_bytes.kept == x.nbytes  # xhat is the only big array of the default cache
    assert lean_bytes.shared >= x.nbytes  # x is the caller's own array, referenced, not copied
    dy = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    for a, b in zip(V.layer_norm_backward(dy, full), V.layer_norm_backward(dy, lean)):
        if a is not None:
            assert_close(a, b, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL)


def test_the_reference_cache_holds_what_seed_002_names():
    x = np.random.default_rng(0).normal(size=(3, 5))
    _, cache = V.layer_norm_forward(x, backend="reference", recompute=False)
    m = F.moments(x, (-1,), 1e-5)
    for name in ("xhat", "xshift", "var", "mean", "rstd"):
        assert_close(getattr(cache, name), getattr(m, name), tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL, name)
    assert cache.eps == 1e-5
    assert cache.nbytes().kept > V.layer_norm_forward(x, backend="numpy")[1].nbytes().kept  # xshift too


# ---- backends ------------------------------------------------------------------------------------------


def test_backend_setting_globally_and_in_a_block(monkeypatch):
    monkeypatch.delenv(V.ENV_VAR, raising=False)
    assert V.get_backend() == "auto"
    x = np.random.default_rng(0).normal(size=(2, 4))
    with V.use_backend("reference"):
        assert V.get_backend() == "reference"
        assert V.layer_norm_forward(x)[1].backend == "reference"
    assert V.get_backend() == "auto"
    V.set_backend("numpy")
    try:
        assert V.layer_norm_forward(x)[1].backend == "numpy"
        assert V.layer_norm_forward(x, backend="reference")[1].backend == "reference"  # per call wins
    finally:
        V.set_backend(None)
    monkeypatch.setenv(V.ENV_VAR, "numpy")
    assert V.resolve_backend() == "numpy"
    monkeypatch.setenv(V.ENV_VAR, "gpu")
    with pytest.raises(ValueError, match="environment variable MICROGRADNORM_BACKEND: expected one of"):
        V.resolve_backend()
    with pytest.raises(ValueError, match="backend: expected one of auto, numpy, fused, reference, got 'cuda'"):
        V.layer_norm_forward(x, backend="cuda")


def test_without_numba_auto_is_numpy_and_fused_says_why(monkeypatch):
    from microgradnorm import fused

    monkeypatch.delenv(V.ENV_VAR, raising=False)
    monkeypatch.setattr(fused, "AVAILABLE", False)
    monkeypatch.setattr(fused, "UNAVAILABLE_REASON", "numba is not installed; pip install 'microgradnorm[fast]'")
    assert V.resolve_backend("auto") == "numpy"
    info = V.backend_info()
    assert info.active == "numpy" and "microgradnorm[fast]" in str(info)
    with pytest.raises(V.BackendUnavailable, match=r"backend: 'fused' needs numba.*microgradnorm\[fast\]"):
        V.layer_norm_forward(np.ones((2, 3)), backend="fused")
    y, cache = V.layer_norm_forward(np.arange(6.0).reshape(2, 3))
    assert cache.backend == "numpy" and np.isfinite(y).all()


def test_public_pass_finds_these_functions_by_the_registrys_public_name():
    assert public_pass(get_norm("layernorm")) == (V.layer_norm_forward, V.layer_norm_backward)
    assert public_pass(get_norm("batchnorm"))[1] is V.batch_norm_backward
    assert public_pass(get_norm("rmsnorm"))[0] is V.rms_norm_forward
    grouped, backward = public_pass(get_norm("groupnorm", 2))  # the entry's num_groups filled in
    x = np.arange(24.0).reshape(2, 4, 3)
    assert backward is V.group_norm_backward
    assert np.array_equal(grouped(x)[0], V.group_norm_forward(x, 2)[0])


# ---- the BatchNorm layer --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(16, 3), (4, 3, 5, 5)])
def test_batchnorm_layer_matches_pytorch_running_stats_and_eval(shape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    layer = V.BatchNorm(3, momentum=0.2, dtype=np.float64)
    layer.gamma[:] = rng.uniform(0.5, 1.5, 3)
    layer.beta[:] = rng.normal(size=3)
    ref = (torch.nn.BatchNorm1d if len(shape) == 2 else torch.nn.BatchNorm2d)(3, momentum=0.2).double()
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(layer.gamma))
        ref.bias.copy_(torch.tensor(layer.beta))
    for step in range(3):
        x = rng.normal(step, 1.0 + step, size=shape)
        dy = rng.normal(size=shape)
        y = layer(x)
        dx = layer.backward(dy)
        xt = torch.tensor(x, requires_grad=True)
        yt = ref(xt)
        yt.backward(torch.tensor(dy))
        rt, at = test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL
        assert_close(y, yt.detach().numpy(), rt, at, "train y")
        assert_close(dx, xt.grad.numpy(), rt, at, "train dx")
        assert_close(layer.dgamma, ref.weight.grad.numpy(), rt, at, "dgamma")
        ref.weight.grad = ref.bias.grad = None
    assert layer.num_batches_tracked == 3
    assert_close(
        layer.running_mean, ref.running_mean.numpy(), test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL, "running mean"
    )
    assert_close(
        layer.running_var, ref.running_var.numpy(), test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL, "running var"
    )
    layer.eval()
    ref.eval()
    x = rng.normal(size=shape)
    dy = rng.normal(size=shape)
    xt = torch.tensor(x, requires_grad=True)
    yt = ref(xt)
    yt.backward(torch.tensor(dy))
    y = layer(x)
    dx = layer.backward(dy)
    assert_close(y, yt.detach().numpy(), test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL, "eval y")
    assert_close(dx, xt.grad.numpy(), test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL, "eval dx")
    assert_close(layer.dgamma, ref.weight.grad.numpy(), test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL, "eval dgamma")
    # in eval mode one example gives the same output alone as in the batch
    np.testing.assert_allclose(layer(x[:1]), y[:1], rtol=0, atol=1e-12)


def test_batchnorm_layer_running_stats_by_hand():
    layer = V.BatchNorm(2, momentum=0.5, dtype=np.float64)
    x = np.array([[1.0, 10.0], [3.0, 14.0]])
    layer(x)
    # batch mean (2, 12), unbiased batch variance (2, 8); running starts at (0, 0) and (1, 1)
    np.testing.assert_allclose(layer.running_mean, [1.0, 6.0])
    np.testing.assert_allclose(layer.running_var, [1.5, 4.5])
    assert "train" in repr(layer) and "eval" in repr(layer.eval())
    with pytest.raises(ValueError, match=r"x: BatchNorm\(2\) expects \[N, 2\]"):
        layer(np.ones((3, 5)))
    with pytest.raises(ValueError, match="momentum"):
        V.BatchNorm(2, momentum=2.0)
    with pytest.raises(RuntimeError, match="call forward first"):
        V.BatchNorm(2).backward(np.ones((1, 2)))


def test_batchnorm_layer_refuses_to_train_on_one_value_per_channel():
    """As PyTorch does: a single value has no spread, and n / (n - 1) would divide by zero."""
    layer = V.BatchNorm(3, dtype=np.float64)
    before = layer.running_var.copy()
    with pytest.raises(ValueError, match=r"x: BatchNorm in training mode needs more than one value per channel"):
        layer(np.ones((1, 3)))
    np.testing.assert_array_equal(layer.running_var, before)  # nothing was updated
    layer(np.arange(6.0).reshape(2, 3))  # two values per channel train
    assert layer.eval()(np.ones((1, 3))).shape == (1, 3)  # eval normalizes one sample fine


@pytest.mark.parametrize("dy_dtype", [np.float16, np.float64])
def test_batchnorm_layer_returns_dx_in_x_dtype_in_eval_mode_as_in_training(dy_dtype):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    dy = rng.normal(size=(4, 3)).astype(dy_dtype)
    for layer in (V.BatchNorm(3, dtype=np.float32), V.BatchNorm(3, dtype=np.float32).eval()):
        layer(x)
        assert layer.backward(dy).dtype == np.float32, "train" if layer.training else "eval"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_constant_groups_at_eps_0_give_nan_quietly_in_both_passes(norm, backend):
    """0 / 0 is NaN, as in PyTorch; neither pass prints a RuntimeWarning for it (recompute included)."""
    import warnings

    shape = (4, 3)  # BatchNorm: 3 constant columns; LayerNorm and RMSNorm: 4 constant rows (RMSNorm: zeros)
    x = np.zeros(shape) if norm == "rmsnorm" else np.full(shape, 2.0)
    for recompute in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y, dx, _, _, _ = run(norm, x, None, None, np.ones(shape), eps=0.0, backend=backend, recompute=recompute)
        assert np.isnan(y).all() and np.isnan(dx).all()


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize("norm", list(NORMS))
def test_float32_parameter_gradients_over_many_rows_keep_float32_precision(norm, backend):
    """dbeta = sum of dy over 262,144 rows: one float32 running sum drifts to about 1e-5 relative.

    dgamma is checked against the float64 sum of dy * xhat with the implementation's
    own float32 xhat (y itself, with gamma = 1 and beta = 0), so that only the
    summation is under test, not the rounding of xhat.
    """
    rng = np.random.default_rng(8)
    shape = (262144, 4)
    x = rng.normal(size=shape).astype(np.float32)
    dy = (1.0 + rng.normal(size=shape)).astype(np.float32)  # a mean far from 0: the sums grow large
    gamma = np.ones(4, np.float32)
    beta = None if norm == "rmsnorm" else np.zeros(4, np.float32)
    y, _, dgamma, dbeta, _ = run(norm, x, gamma, beta, dy, backend=backend, recompute=False)
    dy64 = dy.astype(np.float64)
    assert_close(dgamma, np.sum(dy64 * y, axis=0), test_tol.FLOAT32_PARAM_SUM_RTOL, 0.0, "dgamma")
    if dbeta is not None:
        assert_close(dbeta, np.sum(dy64, axis=0), test_tol.FLOAT32_PARAM_SUM_RTOL, 0.0, "dbeta")


@pytest.mark.parametrize("backend", TUNED)
def test_float32_batchnorm_statistics_over_many_rows_do_not_drift(backend):
    """[16384, 4] near 1e6: a float32 running sum over the rows put y off by 2e-5; blocks of rows keep 2e-7."""
    rng = np.random.default_rng(9)
    x = (1e6 + rng.normal(size=(16384, 4))).astype(np.float32)
    y, cache = V.batch_norm_forward(x, None, None, backend=backend)
    x64 = x.astype(np.float64)
    ry = (x64 - x64.mean(axis=0)) / np.sqrt(x64.var(axis=0) + 1e-5)
    assert_close(y, ry, test_tol.FLOAT32_BN_ROWS_RTOL, 0.0, "y")
    # the cached mean (recompute mode rebuilds xhat from it) is as good, measured in standard deviations
    mean_error = np.abs(cache.mean.reshape(-1) - x64.mean(axis=0)) / x64.std(axis=0)
    assert mean_error.max() <= test_tol.FLOAT32_BN_ROWS_RTOL, mean_error


# ---- a cache rebuilt from saved arrays (what microgradnorm.torch's custom ops keep) -------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("norm", "shape"), [("layernorm", (3, 2, 5)), ("rmsnorm", (4, 6)), ("batchnorm", (3, 2, 2, 3))]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_cache_rebuilt_from_x_mean_and_rstd_gives_the_same_backward(norm, shape, dtype, backend):
    rng = np.random.default_rng(7)
    x = (rng.normal(2.0, 3.0, shape)).astype(dtype)
    c = shape[1] if norm == "batchnorm" else shape[-1]
    gamma = rng.uniform(0.5, 1.5, c).astype(dtype)
    beta = None if norm == "rmsnorm" else rng.normal(size=c).astype(dtype)
    dy = rng.normal(size=shape).astype(dtype)
    _, dx, dgamma, dbeta, cache = run(norm, x, gamma, beta, dy, backend=backend, recompute=True)
    mean = None if cache.mean is None else cache.mean.ravel()  # one value per group, flattened
    saved = V.saved_cache(norm, x, gamma, beta, mean, cache.rstd.ravel(), 1e-5, backend=backend)
    assert saved.recompute and saved.shape == cache.shape and saved.backend == cache.backend
    backward = public_pass(get_norm(norm))[1]
    grads = backward(dy, saved)
    for got, want in zip(grads, (dx, dgamma, dbeta)):
        assert (got is None) == (want is None)  # RMSNorm: no dbeta
        assert got is None or (got.dtype == want.dtype and np.array_equal(got, want))
    assert_close(saved.var, cache.var, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL, "var from rstd and eps")
