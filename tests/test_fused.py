"""The fused numba kernels give the NumPy path's numbers, for every norm, dtype and cache mode.

Skipped as a whole when numba is not installed (the package then runs on NumPy,
which tests/test_vectorized.py covers, including what happens without numba).
"""

from __future__ import annotations

import numpy as np
import pytest

from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.check import random_problem
from microgradnorm.registry import NORMS, get_norm
from tests import tolerances as test_tol
from tests.helpers import assert_results_close, run

pytest.importorskip("numba")

from microgradnorm import fused

SHAPES = {
    "layernorm": [(1, 1), (3, 1), (5, 37), (2, 3, 130)],
    "batchnorm": [(1, 3), (7, 5), (9, 150), (3, 4, 5, 6)],  # 150 columns: three column blocks, the last partial
    "rmsnorm": [(2, 1), (6, 33), (2, 2, 70)],
    "groupnorm": [(2, 1), (3, 4, 35), (2, 6, 5, 7)],
}
# problems above fused.SMALL run on all threads, with one partial dgamma per worker
THREADED_SHAPES = {
    "layernorm": [(300, 256)],
    "rmsnorm": [(2, 150, 256)],
    "batchnorm": [(300, 256), (64, 32, 6, 6)],
    "groupnorm": [(64, 32, 6, 6)],
}
CASES = [  # (norm, shape, seed, threaded)
    *(pytest.param(n, shape, k, False, id=f"{n}-{shape}") for n in NORMS for k, shape in enumerate(SHAPES[n])),
    *(pytest.param(n, shape, 9, True, id=f"{n}-{shape}-threads") for n in NORMS for shape in THREADED_SHAPES[n]),
]


def test_numba_is_there_and_auto_picks_fused(monkeypatch):
    monkeypatch.delenv(V.ENV_VAR, raising=False)
    assert fused.AVAILABLE and fused.UNAVAILABLE_REASON == ""
    assert V.resolve_backend("auto") == "fused"
    assert "numba" in str(V.backend_info())
    assert fused.num_workers() >= 1


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("norm", "shape", "seed", "threaded"), CASES)
def test_fused_equals_numpy(norm, shape, seed, threaded, dtype):
    """With and without gamma and beta, in every cache mode."""
    assert not threaded or np.prod(shape) >= fused.SMALL
    tolerance = test_tol.VECTORIZED_F64 if dtype == "float64" else test_tol.FLOAT32
    x, gamma, beta, dy = (None if a is None else a.astype(dtype) for a in random_problem(get_norm(norm), shape, seed))
    for recompute in (None, False, True):
        for g, b in ((gamma, beta), (None, None)):
            *got, cache = run(norm, x, g, b, dy, backend="fused", recompute=recompute)
            want = run(norm, x, g, b, dy, backend="numpy", recompute=recompute)[:4]
            assert cache.backend == "fused"
            assert cache.recompute == (recompute is not False)  # fused recomputes unless told not to
            assert all(a is None or a.dtype == np.dtype(dtype) for a in (*got, *want))
            assert_results_close(got, want, *tolerance, f"recompute={recompute}")


def test_non_contiguous_input_is_copied_for_the_kernel_and_left_alone():
    rng = np.random.default_rng(0)
    wide = rng.normal(size=(6, 20))
    x = wide[:, ::2]  # strided view
    before = wide.copy()
    y, cache = V.layer_norm_forward(x, backend="fused")
    y_ref, _ = V.layer_norm_forward(np.ascontiguousarray(x), backend="numpy")
    assert tol.close(y, y_ref, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)
    np.testing.assert_array_equal(wide, before)
    assert cache.x.flags.c_contiguous and cache.nbytes().kept >= x.nbytes  # its own contiguous copy


def test_the_per_worker_partial_sums_add_up_to_dgamma():
    """Call the backward kernel directly: each worker's row of partial sums covers its own rows only."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(9, 4))
    dy = rng.normal(size=(9, 4))
    gamma = rng.uniform(0.5, 1.5, 4)
    _, mean, _, rstd, _ = fused.layer_norm_forward(x, gamma, np.zeros(4), 1e-5, False)
    workers = 3
    dgamma_part, dbeta_part = np.zeros((workers, 4)), np.zeros((workers, 4))
    dx = np.empty_like(dy)
    fused.layer_norm_backward_rows(dy, x, mean, rstd, gamma, dx, dgamma_part, dbeta_part, False)
    xhat = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    for w in range(workers):  # 9 rows over 3 workers: rows 3w .. 3w + 2
        rows = slice(3 * w, 3 * w + 3)
        np.testing.assert_allclose(dgamma_part[w], (dy[rows] * xhat[rows]).sum(axis=0), rtol=1e-12)
        np.testing.assert_allclose(dbeta_part[w], dy[rows].sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("shape", [(16, 3, 40, 40), (3000, 2)])
def test_batchnorm_sums_in_float64_as_the_module_says(shape):
    # a float32 group of thousands of values near 1000: summed in float32, its mean, variance and dbeta
    # would be off by about 1e-7 relative or more; the kernels sum in float64 (the products dy * xhat
    # behind dgamma are float32, so dgamma is not a test of the sums)
    rng = np.random.default_rng(5)
    x = (1000.0 + rng.normal(size=shape)).astype(np.float32)
    dy = (1.0 + rng.normal(size=shape)).astype(np.float32)
    axes = (0,) if len(shape) == 2 else (0, 2, 3)
    grouped = (x.reshape(shape[0], shape[1], -1), dy.reshape(shape[0], shape[1], -1)) if len(shape) == 4 else (x, dy)
    _, mean, var, rstd, _ = fused.batch_norm_forward(grouped[0], None, None, 1e-5, keep_xhat=False)
    _, _, dbeta = fused.batch_norm_backward(grouped[1], grouped[0], mean, rstd, None, have_xhat=False)
    rt = tol.VECTORIZED_F64_RTOL
    assert tol.close(mean, x.astype(np.float64).mean(axis=axes), rt, 0.0)
    assert tol.close(var, x.astype(np.float64).var(axis=axes), rt, 0.0)
    assert tol.close(dbeta, dy.astype(np.float64).sum(axis=axes), rt, 0.0)
