"""The vectorized path: LayerNorm, BatchNorm, GroupNorm and RMSNorm on whole NumPy arrays.

The scalar graph (:mod:`microgradnorm.norms`) is for seeing every node; this
package is for speed. It follows llm.c's ``doc/layernorm/layernorm.py``: a forward
pass returns ``(y, cache)``, a backward pass takes ``(dy, cache)``, and the cache
holds what the backward pass needs::

    y, cache = layer_norm_forward(x, gamma, beta)        # x [B, T, C]
    dx, dgamma, dbeta = layer_norm_backward(dy, cache)   # dy = dL/dy, same shape as y

Read :mod:`microgradnorm.textbook` first: the four norms as a
textbook writes them, about ten lines a pass. :mod:`microgradnorm.formulas` is
the same maths split into its closed forms,
the way llm.c writes it, one closed form per function (mean, xshift, var, rstd,
xhat; dxhat, dx, dgamma, dbeta). This package computes the same numbers and is
longer for three reasons, each in its own module: it is tuned for memory
traffic (``numpy_path``: in-place buffers, one-pass ``einsum`` reductions, and
``fused``'s numba kernels), it stays right where the plain formulas go wrong in
floating point (``repairs``: the mean's rounding error, squares that overflow
or underflow, float32 groups near the ends of its range), and it checks every
argument so that bad input is a one-line error, not a wrong number (``cache``).

Where things are:

``api``
    ``layer_norm_forward/backward``, ``rms_norm_forward/backward``,
    ``batch_norm_forward/backward``, ``group_norm_forward/backward``: check,
    dispatch to a backend, keep the cache. Every forward takes ``(x, gamma,
    beta, eps)`` (GroupNorm: ``(x, num_groups, gamma, beta, eps)``; RMSNorm's
    beta is None) and every backward returns ``(dx, dgamma, dbeta)``.
``backend``
    which backend runs: :func:`set_backend`, :func:`use_backend`,
    :func:`backend_info`, the environment variable ``MICROGRADNORM_BACKEND``.
``cache``
    :class:`NormCache` (what a forward pass keeps) and the argument checks.
``numpy_path``, ``repairs``, ``reference``
    the tuned NumPy path, the numerics repairs, the textbook baseline.
``layer``
    the :class:`BatchNorm` layer (running statistics, train and eval modes).

Three backends compute the same numbers (within float rounding):

``"numpy"``
    The tuned NumPy path. The backward pass uses the xhat form of the gradient,
    ``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`` with ``g = gamma * dy``.
``"fused"``
    The numba kernels of :mod:`microgradnorm.fused`: one pass over memory per
    row (or channel) forward and backward (``pip install microgradnorm[fast]``).
``"reference"``
    The readable baseline: the closed forms of :mod:`microgradnorm.formulas`
    called one after another, exactly as a textbook writes them. Slow, and
    kept that way on purpose: it is what the benchmark calls "NumPy naive".

``backend="auto"`` (the default) means fused when numba can be imported and
numpy otherwise. Choose for one call with ``backend=...``, for the whole
program with :func:`set_backend` (or :func:`use_backend` for a ``with`` block,
or the environment variable ``MICROGRADNORM_BACKEND``); :func:`backend_info`
says which one is in use and why.

Rules every backend follows:

* dtypes: float32 and float64 are computed in their own precision and
  returned as such; float16 and bfloat16-like inputs are computed in float32
  and returned in their own dtype; integer, bool and complex input is a
  TypeError. The per-group statistics (mean, var, rstd) are kept in float64.
* Inputs are never written to.
* Numerics: the variance is centered (two-pass), with the rounding error of
  the mean corrected (``var = mean(xshift^2) - mean(xshift)^2``, the second term
  is zero in exact arithmetic); a group whose squares overflow (``|x|`` near
  1e20 in float32) or underflow (a float64 spread under about 1e-135 with eps
  smaller still) is recomputed after scaling by a power of two ``s`` near its
  largest ``|x|``, using ``LN_eps(x) = LN_{eps/s^2}(x/s)``; a NaN or Inf stays in
  its own row (LayerNorm, RMSNorm) or channel (BatchNorm).
"""

from __future__ import annotations

from microgradnorm.vectorized.api import (
    batch_norm_backward,
    batch_norm_forward,
    group_norm_backward,
    group_norm_forward,
    layer_norm_backward,
    layer_norm_forward,
    public_pass,
    rms_norm_backward,
    rms_norm_forward,
    saved_cache,
)
from microgradnorm.vectorized.backend import (
    BACKENDS,
    ENV_VAR,
    BackendInfo,
    BackendUnavailable,
    backend_info,
    get_backend,
    resolve_backend,
    set_backend,
    use_backend,
)
from microgradnorm.vectorized.cache import CacheBytes, NormCache
from microgradnorm.vectorized.layer import BatchNorm

__all__ = [
    "BACKENDS",
    "ENV_VAR",
    "BackendInfo",
    "BackendUnavailable",
    "BatchNorm",
    "CacheBytes",
    "NormCache",
    "backend_info",
    "batch_norm_backward",
    "batch_norm_forward",
    "get_backend",
    "group_norm_backward",
    "group_norm_forward",
    "layer_norm_backward",
    "layer_norm_forward",
    "public_pass",
    "resolve_backend",
    "rms_norm_backward",
    "rms_norm_forward",
    "saved_cache",
    "set_backend",
    "use_backend",
]
