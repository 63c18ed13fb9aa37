"""The vectorized path agrees with the scalar graph, the closed forms and PyTorch, and follows its rules.

Oracles: the scalar engine's accumulated gradients (built by the registry), the
closed forms of microgradnorm.formulas (through ``NormSpec.node_grads``) and
PyTorch. Every backend is checked; the fused one also in tests/test_fused.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import formulas as F
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.registry import NORMS, get_norm
from microgradnorm.vectorized import public_pass
from tests import tolerances as test_tol

from .helpers import BACKENDS, TUNED, assert_close, assert_results_close, problem, run, scalar_results, torch_results
from .strategies import norm_problems

SCALAR_SHAPES = {
    "layernorm": [(5,), (3, 4), (1, 1), (2, 1)],
    "batchnorm": [(4, 3), (1, 2), (2, 3, 2, 2)],
    "rmsnorm": [(6,), (3, 4), (2, 1)],
    "groupnorm": [(2, 3), (2, 4, 3), (1, 2, 2, 2)],
}


def closed_form(norm, x, gamma, beta, eps, dy):
    """y and the closed-form gradients, all in float64 from formulas.py."""
    spec = get_norm(norm)
    x64, g, b, dy64 = (None if a is None else np.asarray(a, dtype=np.float64) for a in (x, gamma, beta, dy))
    axes, param_axis = spec.axes(x64.shape), spec.param_axis(x64.shape)
    moments = F.rms_moments if norm == "rmsnorm" else F.moments  # by name: the backends branch on spec.centered
    xhat = moments(x64.reshape(spec.view(x64.shape)), axes, eps).xhat.reshape(x64.shape)
    y = F.affine(xhat, F.param_view(g, x64.ndim, param_axis), F.param_view(b, x64.ndim, param_axis))
    grads = spec.node_grads(x64, g, b, eps, dy64)
    return y, grads["x"], grads.get("gamma"), grads.get("beta")


# ---- against the scalar graph -------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("eps", [1e-5, 0.1])
@pytest.mark.parametrize("norm", list(NORMS))
def test_matches_the_scalar_graph(norm, eps, backend):
    for k, shape in enumerate(SCALAR_SHAPES[norm]):
        x, gamma, beta, dy = problem(norm, shape, seed=k)
        got = run(norm, x, gamma, beta, dy, eps, backend=backend)[:4]
        want = scalar_results(norm, x, gamma, beta, dy, eps)
        assert_results_close(got, want, *test_tol.VECTORIZED_F64, f"{shape} eps={eps}")


def test_three_dimensional_layernorm_matches_the_scalar_graph_row_by_row():
    """[B, T, C] as in seed 002: each of the B * T rows is its own LayerNorm."""
    x, gamma, beta, dy = problem("layernorm", (2, 3, 5), seed=7)
    y, dx, dgamma, dbeta, cache = run("layernorm", x, gamma, beta, dy)
    got = (y.reshape(6, 5), dx.reshape(6, 5), dgamma, dbeta)
    want = scalar_results("layernorm", x.reshape(6, 5), gamma, beta, dy.reshape(6, 5), 1e-5)
    assert_results_close(got, want, *test_tol.VECTORIZED_F64)
    assert cache.mean.shape == (2, 3, 1) and cache.rstd.shape == (2, 3, 1)  # B,T,1


# ---- against the closed forms, over many shapes ----------------------------------------------------


@pytest.mark.parametrize("norm", list(NORMS))
@given(data=st.data(), backend=st.sampled_from(BACKENDS), recompute=st.sampled_from([None, True, False]))
def test_matches_the_closed_forms_for_any_shape(norm, data, backend, recompute):
    x, gamma, beta, dy, eps = data.draw(norm_problems(norm))
    y, dx, dgamma, dbeta, cache = run(norm, x, gamma, beta, dy, eps, backend=backend, recompute=recompute)
    ry, rdx, rdgamma, rdbeta = closed_form(norm, x, gamma, beta, eps, dy)
    rt, at = test_tol.VECTORIZED_F64
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
    """And the reference backend's cache also holds xshift, as seed 002 names it."""
    spec = get_norm(norm)
    for shape in SCALAR_SHAPES[norm][:2] + ([(2, 3, 4)] if norm == "layernorm" else []):
        x, gamma, beta, _ = problem(spec, shape, seed=3)
        m = F.moments(x, spec.axes(shape), 1e-5)
        caches = {b: public_pass(spec)[0](x, gamma, beta, 1e-5, backend=b, recompute=False)[1] for b in BACKENDS}
        for backend, cache in caches.items():
            for name in ("mean", "var", "rstd", "xhat", "std", *(["xshift"] if backend == "reference" else [])):
                assert_close(getattr(cache, name), getattr(m, name), *test_tol.VECTORIZED_F64, f"{name}, {backend}")
            assert cache.eps == 1e-5
        assert caches["reference"].nbytes().kept > caches["numpy"].nbytes().kept  # xshift too


# ---- against PyTorch ---------------------------------------------------------------------------------


GROUPED = [((4, 6), 1), ((3, 2, 4, 4), 1), ((2, 4), 2), ((2, 6, 3), 3), ((1, 4, 2, 2), 2), ((3, 4, 2), 1),
           ((2, 4, 3), 4), ((4, 8, 3, 3), 4), ((2, 6, 2, 2, 2), 2), ((4, 8, 5, 5), 4)]  # fmt: skip
TORCH_CASES = [  # (norm, shape, GroupNorm's num_groups: one, a few, one per channel as InstanceNorm)
    *(("layernorm", shape, 1) for shape in [(7,), (4, 6), (2, 3, 8)]),
    *(("batchnorm", shape, 1) for shape in [(6, 4), (3, 2, 4, 4)]),
    *(("rmsnorm", shape, 1) for shape in [(5,), (2, 3, 8)]),
    *(("groupnorm", shape, groups) for shape, groups in GROUPED),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("norm", "shape", "groups"), TORCH_CASES)
def test_matches_pytorch(norm, shape, groups, dtype):
    """Every backend, with and without recompute, in x's dtype (GroupNorm's statistics: one per example and group)."""
    pytest.importorskip("torch")
    spec = get_norm(norm, groups)
    tolerance = test_tol.TORCH_F64 if dtype == "float64" else test_tol.FLOAT32
    for seed, eps in enumerate((1e-5, 1e-2)):
        x, gamma, beta, dy = problem(spec, shape, seed, dtype)
        expected = torch_results(norm, x, gamma, beta, dy, eps, groups)
        for backend, recompute in itertools.product(BACKENDS, (False, True)):
            *got, cache = run(spec, x, gamma, beta, dy, eps, backend=backend, recompute=recompute)
            what = f"{shape} {dtype} eps={eps} {backend} recompute={recompute}"
            assert all(a is None or a.dtype == np.dtype(dtype) for a in got), what
            assert_results_close(got, expected, *tolerance, what)
            if spec.grouped:
                assert cache.mean.shape == cache.rstd.shape == (shape[0], groups, 1), what  # N,G,1


# ---- float32 and float16 against float64 --------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("dtype", "tolerance"), [(np.float32, test_tol.FLOAT32), (np.float16, test_tol.FLOAT16)])
@pytest.mark.parametrize("norm", list(NORMS))
def test_float32_and_float16_match_the_float64_analytic_result(norm, dtype, tolerance, backend):
    """Both are computed in float32 and returned in their own dtype."""
    shape = (16, 64) if norm != "batchnorm" else (8, 4, 3, 3)
    x, gamma, beta, dy = problem(norm, shape, seed=5, dtype=dtype)
    want = closed_form(norm, x, gamma, beta, 1e-5, dy)
    for recompute in (False, True):
        *got, cache = run(norm, x, gamma, beta, dy, backend=backend, recompute=recompute)
        assert all(a is None or a.dtype == dtype for a in got) and cache.compute_dtype == np.float32
        assert_results_close(got, want, *tolerance, f"recompute={recompute}")


# ---- dtypes ------------------------------------------------------------------------------------------


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
    with pytest.raises(TypeError, match=r"x: expected a floating-point array .* got dtype"):
        run(norm, bad, None, None, np.ones(bad.shape))


# ---- inputs are never modified -----------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_read_only_inputs_are_left_untouched(norm, backend):
    shape = (3, 5) if norm != "batchnorm" else (3, 2, 2, 2)
    for dtype in (np.float64, np.float32):
        arrays = problem(norm, shape, seed=2, dtype=dtype)
        given = [a for a in arrays if a is not None]
        copies = [a.copy() for a in given]
        for a in given:
            a.setflags(write=False)
        for recompute in (False, True):
            run(norm, *arrays, backend=backend, recompute=recompute)
        for a, c in zip(given, copies):
            np.testing.assert_array_equal(a, c)


# ---- errors ---------------------------------------------------------------------------------------------


X23 = np.ones((2, 3)) + np.arange(3)
BAD_CALLS = [  # (what, call, error, match); a bad eps: tests/test_inputs.py
    ("integer-gamma", lambda: V.layer_norm_forward(X23, np.ones(3, dtype=int)), TypeError, "gamma"),
    ("integer-dy", lambda: V.layer_norm_backward(np.ones((2, 3), dtype=int), V.layer_norm_forward(X23)[1]), TypeError,
     "dy"),
    ("ln-gamma-shape", lambda: V.layer_norm_forward(np.zeros((2, 3, 4)), np.ones(3)), ValueError,
     r"gamma: expected shape \(4,\).*\(2, 3, 4\).*got shape \(3,\)"),
    ("bn-beta-shape", lambda: V.batch_norm_forward(np.zeros((5, 3, 2, 2)), np.ones(3), np.ones(4)), ValueError,
     r"beta: expected shape \(3,\).*\(5, 3, 2, 2\).*got shape \(4,\)"),
    ("rms-gamma-shape", lambda: V.rms_norm_forward(np.zeros((3, 4)), np.ones((2, 2))), ValueError,
     r"gamma: expected shape \(4,\).*got shape \(2, 2\)"),
    ("bn-rank", lambda: V.batch_norm_forward(np.zeros((2, 3, 4))), ValueError,
     r"x: batch_norm expects .* got shape \(2, 3, 4\)"),
    ("ln-empty-rows", lambda: V.layer_norm_forward(np.zeros((3, 0))), ValueError,
     r"x: layer_norm expects .*D >= 1, got shape \(3, 0\)"),
    ("cache-of-rmsnorm", lambda: V.layer_norm_backward(np.ones((2, 2)), V.rms_norm_forward(np.ones((2, 2)))[1]),
     ValueError, "cache: layer_norm_backward expects the cache of a layernorm"),
    ("cache-tuple", lambda: V.layer_norm_backward(np.ones((2, 2)), (1, 2)), TypeError, "cache: expected the NormCache"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "match"), [pytest.param(*c[1:], id=c[0]) for c in BAD_CALLS])
def test_bad_arguments_are_errors_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("norm", list(NORMS))
def test_dy_of_the_wrong_shape_is_an_error_naming_both_shapes(norm):
    shape = (3, 4) if norm != "batchnorm" else (3, 4, 2, 2)
    x = np.random.default_rng(0).normal(size=shape)
    spec = get_norm(norm)
    _, cache = public_pass(spec)[0](x)
    wrong = np.ones((*shape[:-1], shape[-1] + 1))
    with pytest.raises(ValueError, match=rf"dy: expected shape \({shape[0]}, 4.*got shape \({shape[0]}, "):
        public_pass(spec)[1](wrong, cache)


# ---- numerics -----------------------------------------------------------------------------------------


def drawn(norm: str, shape, seed: int, dtype=np.float64, mean: float = 0.0, std: float = 1.0) -> tuple:
    """(x, gamma, beta, dy) drawn from ``seed`` in ``dtype``: x normal about ``mean`` with a spread ``std``, gamma in
    [0.5, 1.5] and beta normal (one of each per channel; RMSNorm has no beta), dy normal."""
    rng = np.random.default_rng(seed)
    c = get_norm(norm).param_size(shape)
    x = (mean + rng.normal(0.0, std, size=shape)).astype(dtype)
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(dtype), rng.normal(size=c).astype(dtype)
    return x, gamma, None if norm == "rmsnorm" else beta, rng.normal(size=shape).astype(dtype)


def group(norm: str, k: int) -> tuple:
    """The index of group ``k`` of a [4, 16] problem (a row), or of its [16, 4] BatchNorm twin (a column)."""
    return (slice(None), k) if norm == "batchnorm" else (k,)


def odd_group_problem(norm: str, seed: int, dtype=np.float64) -> tuple:
    """(x, gamma, dy): a small problem whose groups (rows of [4, 16]; BatchNorm: columns of [16, 4]) a test rescales."""
    x, gamma, _beta, dy = drawn(norm, (4, 16) if norm != "batchnorm" else (16, 4), seed, dtype, 0.5, 2.0)
    return x, gamma, dy


OFFSETS = [  # (norm, shape, mean, std, seed)
    pytest.param("layernorm", (8, 256), 1e7, 4.0, 0, id="ln-offset-1e7"),
    pytest.param("layernorm", (2, 65536), 1e6, 1.0, 7, id="ln-65536-wide"),
    pytest.param("batchnorm", (16384, 2), 1e6, 1.0, 7, id="bn-16384-rows"),
]


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize(("norm", "shape", "mean", "std", "seed"), OFFSETS)
def test_float32_with_a_large_mean_offset_stays_accurate(norm, shape, mean, std, seed, backend):
    """The xhat form and a centered variance; the uncentered forms lose everything here.

    In groups of 16,384 and 65,536 values near 1e6 a float32 sum misses their mean by
    more than their spread. The first-order correction var = mean(xshift^2) -
    mean(xshift)^2 then cancels catastrophically (y was off by 1.3 on the NumPy path),
    so the mean's error is folded back into the mean before the variance is taken.
    """
    x, gamma, beta, dy = drawn(norm, shape, seed, np.float32, mean, std)
    want = closed_form(norm, x, gamma, beta, 1e-5, dy)
    for recompute in (False, True):
        got = run(norm, x, gamma, beta, dy, backend=backend, recompute=recompute)[:4]
        assert_results_close(got, want, *test_tol.FLOAT32, f"recompute={recompute}")
    # the test can fail: the uncentered variance E[x^2] - E[x]^2 in float32 is far off
    axes = get_norm(norm).axes(shape)
    with np.errstate(invalid="ignore"):
        naive = F.moments(x, axes, 1e-5, variance_form="naive")
        assert not tol.close(naive.xhat, F.moments(x.astype(np.float64), axes, 1e-5).xhat, 1e-2, 1e-2)


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
    huge = group(norm, 1)  # one huge row (BatchNorm: channel)
    for dtype, scale in ((np.float32, 1e20), (np.float64, 1e200)):
        x, gamma, dy = odd_group_problem(norm, seed=1, dtype=dtype)
        x[huge] *= scale
        y, dx, dgamma, _, cache = run(norm, x, gamma, None, dy, backend=backend)
        assert np.isfinite(y).all() and np.isfinite(dx).all() and np.isfinite(dgamma).all()
        # the oracle: float64 closed forms, with the huge float64 group divided by its scale first
        # (a norm does not change when its group is scaled and eps is negligible; dx scales by 1/scale)
        x64 = x.astype(np.float64)
        if dtype == np.float64:
            x64[huge] /= scale
        ry, rdx, rdgamma, _ = closed_form(norm, x64, gamma, None, 1e-5, dy)
        if dtype == np.float64:
            rdx[huge] /= scale
        assert_results_close((y, dx, dgamma), (ry, rdx, rdgamma), *test_tol.FLOAT32, dtype.__name__)
        assert_close(dx[huge], rdx[huge], tol.FLOAT32_RTOL, 0.0, "dx of the huge group")
        assert cache.rstd.reshape(-1)[1] > 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_a_float64_group_beyond_2_to_the_1023_is_rescaled_too(norm, backend):
    """Its scale 2^1024 is not a float64 itself (the rescaling once raised OverflowError here)."""
    huge = group(norm, 1)
    base, gamma, dy = odd_group_problem(norm, seed=5)
    base[huge] *= 1.7 / np.abs(base[huge]).max()  # largest |x| of the group: 1.7 * 2^1023
    x = base.copy()
    x[huge] = np.ldexp(x[huge], 1023)
    assert np.isfinite(x).all() and np.abs(x).max() > 2.0**1023
    y, _, dgamma, _, _ = run(norm, x, gamma, None, dy, backend=backend)
    ry, _, rdgamma, _ = closed_form(norm, base, gamma, None, 1e-5, dy)  # the same group, 2^1023 times smaller
    assert_results_close((y, None, dgamma), (ry, None, rdgamma), *test_tol.FLOAT32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", list(NORMS))
def test_a_float64_group_with_a_spread_near_1e_300_is_rescaled_at_eps_0(norm, backend):
    """Its squares underflow (the variance came out 0, and y inf); at eps = 0 a norm ignores the scale."""
    tiny = group(norm, 1)
    base, gamma, dy = odd_group_problem(norm, seed=6)
    x = base.copy()
    x[tiny] *= 1e-300
    y, dx, dgamma, _, _ = run(norm, x, gamma, None, dy, eps=0.0, backend=backend)
    ry, rdx, rdgamma, _ = closed_form(norm, base, gamma, None, 0.0, dy)  # the same group at scale 1
    rdx[tiny] *= 1e300  # dx scales by 1 / scale
    assert_results_close((y, None, dgamma), (ry, None, rdgamma), *test_tol.FLOAT32)  # dx: below
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
    x, gamma, dy = odd_group_problem(norm, seed=3)
    rng = np.random.default_rng(4)
    huge = 3e38 * (1.0 - 0.01 * rng.uniform(size=16))
    huge[5] = -3e38
    x[group(norm, 1)] = huge
    x[group(norm, 2)] = rng.normal(size=16) * 1e-41
    x, gamma, dy = (a.astype(np.float32) for a in (x, gamma, dy))
    assert np.isfinite(x).all() and 0 < np.abs(x[group(norm, 2)]).max() < np.finfo(np.float32).tiny
    dy[group(norm, 1)] = 0.0
    dy[group(norm, 2)] = 0.0
    y, dx, dgamma, _, _ = run(norm, x, gamma, None, dy, eps=0.0, backend=backend)
    ry, rdx, rdgamma, _ = closed_form(norm, x, gamma, None, 0.0, dy)
    assert_results_close((y, dx, dgamma), (ry, rdx, rdgamma), *test_tol.FLOAT32)
    assert (dx[group(norm, 1)] == 0).all() and (dx[group(norm, 2)] == 0).all(), "dx of the extreme groups"


@pytest.mark.parametrize("backend", TUNED)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("norm", list(NORMS))
def test_nan_and_inf_stay_in_their_row_or_channel(norm, bad, backend):
    shape = (4, 8) if norm != "batchnorm" else (4, 3, 2, 2)
    x, gamma, beta, dy = problem(norm, shape, seed=4)
    x[1, 2] = bad  # row 1 of LayerNorm/RMSNorm; channel 2 of BatchNorm
    with np.errstate(invalid="ignore", over="ignore"):
        y, dx, *_ = run(norm, x, gamma, beta, dy, backend=backend)
        ry, rdx, *_ = closed_form(norm, x, gamma, beta, 1e-5, dy)
    spoiled = np.zeros(shape, bool)
    spoiled[(slice(None), 2) if norm == "batchnorm" else 1] = True
    assert np.isfinite(y[~spoiled]).all() and np.isfinite(dx[~spoiled]).all()
    assert not np.isfinite(y[spoiled]).all()
    healthy = (y[~spoiled], dx[~spoiled]), (ry[~spoiled], rdx[~spoiled])
    assert_results_close(*healthy, *test_tol.VECTORIZED_F64, "outside the spoiled group")


@pytest.mark.parametrize("how", ["scalar graph 1-D", "scalar graph", *BACKENDS])
def test_a_group_of_one_value_gives_beta_and_a_zero_gradient(how):
    x, gamma, beta, dy = np.array([[3.0], [-2.0]]), np.array([2.0]), np.array([0.5]), np.array([[1.0], [4.0]])
    want = ([[0.5], [0.5]], [[0.0], [0.0]], [0.0], [5.0])  # y, dx, dgamma, dbeta exactly
    if how == "scalar graph 1-D":  # one row of one value: the smallest input the scalar layer_norm takes
        x, dy, want = x[0], dy[0], ([0.5], [0.0], [0.0], [1.0])
    if how.startswith("scalar graph"):
        got = scalar_results("layernorm", x, gamma, beta, dy, 1e-5)
    else:
        got = run("layernorm", x, gamma, beta, dy, backend=how)[:4]
    for a, w in zip(got, want):
        np.testing.assert_array_equal(a, w)


# ---- the cache ----------------------------------------------------------------------------------------


def test_recompute_keeps_x_mean_rstd_and_reports_the_bytes_saved():
    """Each cache's bytes, kept and shared, in full: test_lessons_kernel.py's test_recompute_keeps_the_statistics_..."""
    x = np.random.default_rng(0).normal(size=(8, 16, 32)).astype(np.float32)
    gamma = np.ones(32, np.float32)
    _, full = V.layer_norm_forward(x, gamma, None, backend="numpy", recompute=False)
    _, lean = V.layer_norm_forward(x, gamma, None, backend="numpy", recompute=True)
    assert not full.recompute and full.xhat is not None and full.x is None
    assert lean.recompute and lean.xhat is None and lean.x is not None
    assert lean.mean.shape == lean.rstd.shape == (8, 16, 1)
    assert lean.nbytes().saved == x.nbytes == full.xhat.nbytes
    dy = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    for a, b in zip(V.layer_norm_backward(dy, full), V.layer_norm_backward(dy, lean)):
        if a is not None:
            assert_close(a, b, *test_tol.FLOAT32)


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
    F64 = test_tol.TORCH_F64
    rng = np.random.default_rng(0)
    layer = V.BatchNorm(3, momentum=0.2, dtype=np.float64)
    layer.gamma[:] = rng.uniform(0.5, 1.5, 3)
    layer.beta[:] = rng.normal(size=3)
    ref = (torch.nn.BatchNorm1d if len(shape) == 2 else torch.nn.BatchNorm2d)(3, momentum=0.2).double()
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(layer.gamma))
        ref.bias.copy_(torch.tensor(layer.beta))

    def step(mean=0.0, std=1.0, mode="train"):
        """One forward and backward through both layers: y, dx and dgamma agree."""
        x, dy = rng.normal(mean, std, size=shape), rng.normal(size=shape)
        xt = torch.tensor(x, requires_grad=True)
        yt = ref(xt)
        yt.backward(torch.tensor(dy))
        ours = (layer(x), layer.backward(dy), layer.dgamma)
        assert_results_close(ours, (yt.detach().numpy(), xt.grad.numpy(), ref.weight.grad.numpy()), *F64, mode)
        ref.weight.grad = ref.bias.grad = None
        return x, ours[0]

    for k in range(3):
        step(k, 1.0 + k)
    assert layer.num_batches_tracked == 3
    assert_close(layer.running_mean, ref.running_mean.numpy(), *F64, "running mean")
    assert_close(layer.running_var, ref.running_var.numpy(), *F64, "running var")
    layer.eval()
    ref.eval()
    x, y = step(mode="eval")
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
    x, gamma, beta, dy = drawn(norm, shape, 7, dtype, mean=2.0, std=3.0)
    _, dx, dgamma, dbeta, cache = run(norm, x, gamma, beta, dy, backend=backend, recompute=True)
    mean = None if cache.mean is None else cache.mean.ravel()  # one value per group, flattened
    saved = V.saved_cache(norm, x, gamma, beta, mean, cache.rstd.ravel(), 1e-5, backend=backend)
    assert saved.recompute and saved.shape == cache.shape and saved.backend == cache.backend
    backward = public_pass(get_norm(norm))[1]
    grads = backward(dy, saved)
    for got, want in zip(grads, (dx, dgamma, dbeta)):
        assert (got is None) == (want is None)  # RMSNorm: no dbeta
        assert got is None or (got.dtype == want.dtype and np.array_equal(got, want))
    assert_close(saved.var, cache.var, *test_tol.FLOAT32, "var from rstd and eps")
