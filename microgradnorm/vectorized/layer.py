"""The :class:`BatchNorm` layer: learnable gamma and beta, running statistics, train and eval modes.

A thin layer over :func:`batch_norm_forward` / :func:`batch_norm_backward`:
what it adds is state (the running averages PyTorch's ``BatchNorm1d/2d`` keep)
and the eval-mode pass, in which the statistics are constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from microgradnorm import formulas as F
from microgradnorm.inputs import check_eps, check_int
from microgradnorm.vectorized.api import batch_norm_backward, batch_norm_forward
from microgradnorm.vectorized.cache import NormCache, as_array, compute_dtype

_CHANNEL_AXIS = 1  # gamma, beta and the statistics run along axis 1 of [N, C] and [N, C, H, W]


class BatchNorm:
    """A BatchNorm layer with learnable gamma and beta, running statistics and an eval mode.

    In training mode (the default) each forward pass normalizes with the
    batch's own statistics and updates the running averages
    ``running = (1 - momentum) * running + momentum * batch`` (the running
    variance uses the unbiased batch variance, n / (n - 1) times the biased
    one, as PyTorch does). In eval mode (:meth:`eval`) it normalizes with the
    running averages, so one example gives the same output alone or in a batch.

    ``backward(dy)`` returns dx and stores ``dgamma`` and ``dbeta`` on the layer.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        *,
        affine: bool = True,
        dtype: Any = np.float32,
        backend: str | None = None,
    ) -> None:
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum: expected a number in [0, 1], got {momentum!r}")
        self.num_features = check_int("num_features", num_features)
        self.eps = check_eps(eps)
        self.momentum = float(momentum)
        self.dtype = np.dtype(dtype)
        compute_dtype(self.dtype, "dtype")
        self.backend = backend
        self.gamma = np.ones(self.num_features, self.dtype) if affine else None
        self.beta = np.zeros(self.num_features, self.dtype) if affine else None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None
        self.running_mean = np.zeros(self.num_features)
        self.running_var = np.ones(self.num_features)
        self.num_batches_tracked = 0
        self.training = True
        self._cache: NormCache | None = None
        self._eval_xhat: np.ndarray | None = None

    def train(self, mode: bool = True) -> BatchNorm:
        self.training = bool(mode)
        return self

    def eval(self) -> BatchNorm:
        return self.train(False)

    def __call__(self, x: Any) -> np.ndarray:
        return self.forward(x)

    def forward(self, x: Any) -> np.ndarray:
        """Normalize x [N, C] or [N, C, H, W]: batch statistics in training mode, running ones in eval mode."""
        x = as_array(x, "x")
        if x.ndim not in (2, 4) or x.shape[1] != self.num_features:
            raise ValueError(
                f"x: BatchNorm({self.num_features}) expects [N, {self.num_features}] or "
                f"[N, {self.num_features}, H, W], got shape {x.shape}"
            )
        return self._train_forward(x) if self.training else self._eval_forward(x)

    def _train_forward(self, x: np.ndarray) -> np.ndarray:
        """The batch's own statistics; the running averages move towards them by ``momentum``."""
        m = x.size // self.num_features
        if m < 2:  # no spread to measure, and the unbiased running variance would divide by 0
            raise ValueError(
                f"x: BatchNorm in training mode needs more than one value per channel, got shape {x.shape} "
                "(use a bigger batch, or eval() to normalize with the running statistics)"
            )
        y, cache = batch_norm_forward(x, self.gamma, self.beta, self.eps, backend=self.backend)
        batch_var = cache.var.reshape(-1) * (m / (m - 1))
        self.running_mean = (1.0 - self.momentum) * self.running_mean + self.momentum * cache.mean.reshape(-1)
        self.running_var = (1.0 - self.momentum) * self.running_var + self.momentum * batch_var
        self.num_batches_tracked += 1
        self._cache, self._eval_xhat = cache, None
        return y

    def _eval_forward(self, x: np.ndarray) -> np.ndarray:
        """A fixed affine map per channel: xhat = (x - running_mean) / sqrt(running_var + eps)."""
        cdt = compute_dtype(x.dtype, "x")
        param_axis = _CHANNEL_AXIS
        mean = F.param_view(self.running_mean.astype(cdt), x.ndim, param_axis)  # 1,C(,1,1)
        rstd = F.param_view((1.0 / np.sqrt(self.running_var + self.eps)).astype(cdt), x.ndim, param_axis)
        xhat = (x.astype(cdt, copy=False) - mean) * rstd  # N,C(,H,W)
        gamma = None if self.gamma is None else F.param_view(self.gamma.astype(cdt), x.ndim, param_axis)
        beta = None if self.beta is None else F.param_view(self.beta.astype(cdt), x.ndim, param_axis)
        self._cache, self._eval_xhat = None, xhat
        self._eval_rstd, self._eval_dtype = rstd, x.dtype
        return F.affine(xhat, gamma, beta).astype(x.dtype, copy=False)

    def backward(self, dy: Any) -> np.ndarray:
        """dx for the last forward pass; sets ``self.dgamma`` and ``self.dbeta``."""
        if self._cache is not None:
            dx, self.dgamma, self.dbeta = batch_norm_backward(dy, self._cache)
            return dx
        if self._eval_xhat is None:
            raise RuntimeError("BatchNorm.backward: call forward first")
        xhat = self._eval_xhat
        dy = as_array(dy, "dy")
        if dy.shape != xhat.shape:
            raise ValueError(f"dy: expected shape {xhat.shape} (the shape of x and y), got shape {dy.shape}")
        param_axis = _CHANNEL_AXIS
        shared = F.param_axes(xhat.ndim, param_axis)
        dyc = dy.astype(xhat.dtype, copy=False)
        gamma = None if self.gamma is None else F.param_view(self.gamma.astype(xhat.dtype), xhat.ndim, param_axis)
        # in eval mode the statistics are constants: dx = gamma * rstd * dy, no paths through mean or var
        dx = F.dxhat(dyc, gamma) * self._eval_rstd
        if self.gamma is not None:
            self.dgamma = F.dgamma(dyc, xhat, shared).astype(self.gamma.dtype)
            self.dbeta = F.dbeta(dyc, shared).astype(self.beta.dtype)
        return dx.astype(self._eval_dtype, copy=False)  # in x's dtype, as in training mode

    def parameters(self) -> list[np.ndarray]:
        return [] if self.gamma is None else [self.gamma, self.beta]

    def __repr__(self) -> str:
        mode = "train" if self.training else "eval"
        return f"BatchNorm({self.num_features}, eps={self.eps:g}, momentum={self.momentum:g}, mode={mode})"
