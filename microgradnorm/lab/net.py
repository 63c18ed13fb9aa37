"""The lab's small network in NumPy: forward and backward by hand, the norms from the vectorized path.

Every layer is a pair of passes in llm.c's style: ``forward(x)`` keeps what its
backward needs, ``backward(dy)`` returns dx and sets the gradients of its
parameters. The norms are this package's: LayerNorm and RMSNorm through a
``(forward, backward)`` pair (by default :mod:`microgradnorm.vectorized`'s; the
lab swaps in a learner's or a deliberately wrong one), BatchNorm through
:class:`microgradnorm.vectorized.BatchNorm`, which keeps running statistics.
The package's norms run on the NumPy backend (:data:`BACKEND`): the numba
kernels are compiled with fastmath, so a kernel compiled fresh and one loaded
from numba's cache may round differently, and a run that magnifies rounding
(post-LN with warmup) would print other numbers the first time.

Two shapes of network, both ``Linear(FEATURES, width)``, then ``depth`` blocks,
then ``Linear(width, CLASSES)``:

* ``"mlp"``: each block is ``relu(norm(linear(h)))``, the classic placement.
* ``"residual"``: each block adds ``linear2(relu(linear1(...)))`` to h, with the
  norm after the addition (post-LN, the original Transformer) or on the branch's
  input (pre-LN, with one more norm before the head), as in Xiong et al. 2020.

:func:`initial_weights` draws every weight once (PyTorch's default ``Linear``
initialization), so the PyTorch version of the same network
(:mod:`microgradnorm.lab.torch_net`) can start from the very same numbers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from microgradnorm import vectorized as V
from microgradnorm.lab.task import CLASSES, FEATURES
from microgradnorm.registry import get_norm

__all__ = ["NORMS", "Net", "NetSpec", "NormPair", "cross_entropy", "initial_weights"]

NORMS = ("none", "batchnorm", "layernorm", "rmsnorm")
EPS = 1e-5
BACKEND = "numpy"  # bitwise the same on every run; the fused kernels' rounding depends on numba's cache

# (y, cache) = forward(x, gamma, beta, eps); (dx, dgamma, dbeta) = backward(dy, cache)
NormPair = tuple[Callable[..., Any], Callable[..., Any]]


@dataclass(frozen=True)
class NetSpec:
    """Which network: ``kind`` "mlp" or "residual", ``depth`` blocks of ``width``, a norm, and for
    residual blocks its ``placement`` ("pre" or "post")."""

    kind: str = "mlp"
    depth: int = 3
    width: int = 32
    norm: str = "layernorm"
    placement: str = "post"

    def __post_init__(self) -> None:
        if self.kind not in ("mlp", "residual"):
            raise ValueError(f"kind: expected 'mlp' or 'residual', got {self.kind!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm: expected one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.placement not in ("pre", "post"):
            raise ValueError(f"placement: expected 'pre' or 'post', got {self.placement!r}")

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(out, in) of every Linear layer, in order."""
        w = self.width
        if self.kind == "mlp":  # the first block's Linear reads the features
            return [(w, FEATURES)] + [(w, w)] * (self.depth - 1) + [(CLASSES, w)]
        return [(w, FEATURES)] + [(2 * w, w), (w, 2 * w)] * self.depth + [(CLASSES, w)]


def initial_weights(spec: NetSpec, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight [out, in], bias [out]) of every Linear layer.

    The MLP draws them as ``torch.nn.Linear`` does (weights and biases uniform in
    +-1/sqrt(in)); the residual network as the Transformer's implementations do
    (Xavier-uniform weights, in +-sqrt(6 / (in + out)), and zero biases), the
    setting in which Xiong et al. 2020 analyse post-LN and pre-LN.
    """
    rng = np.random.default_rng([seed, 1])
    out = []
    for fan_out, fan_in in spec.linear_shapes():
        if spec.kind == "residual":
            bound = np.sqrt(6.0 / (fan_in + fan_out))
            out.append((rng.uniform(-bound, bound, (fan_out, fan_in)), np.zeros(fan_out)))
        else:
            bound = 1.0 / np.sqrt(fan_in)
            out.append((rng.uniform(-bound, bound, (fan_out, fan_in)), rng.uniform(-bound, bound, fan_out)))
    return out


# ---- layers -------------------------------------------------------------------------------------------


class Linear:
    """y = x @ w.T + b, with w [out, in] as PyTorch stores it."""

    def __init__(self, w: np.ndarray, b: np.ndarray) -> None:
        self.params = [w.copy(), b.copy()]
        self.grads: list[np.ndarray] = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = x  # B,in
        w, b = self.params
        return x @ w.T + b  # B,out

    def backward(self, dy: np.ndarray) -> np.ndarray:
        w, _ = self.params
        self.grads = [dy.T @ self.x, dy.sum(axis=0)]  # out,in and out
        return dy @ w  # B,in


class ReLU:
    params: ClassVar[list[np.ndarray]] = []  # nothing to learn
    grads: ClassVar[list[np.ndarray]] = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.mask = x > 0  # B,W
        return x * self.mask

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return dy * self.mask


class RowNorm:
    """LayerNorm or RMSNorm over the features of each example, through a (forward, backward) pair."""

    def __init__(self, width: int, pair: NormPair, has_beta: bool) -> None:
        self.forward_fn, self.backward_fn = pair
        self.params = [np.ones(width), *([np.zeros(width)] if has_beta else [])]
        self.grads: list[np.ndarray] = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        beta = self.params[1] if len(self.params) > 1 else None
        y, self.cache = self.forward_fn(x, self.params[0], beta, EPS)
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx, *grads = self.backward_fn(dy, self.cache)
        self.grads = list(grads[: len(self.params)])
        return dx


class BatchNormLayer:
    """vectorized.BatchNorm with its gamma and beta exposed as parameters."""

    def __init__(self, width: int) -> None:
        self.layer = V.BatchNorm(width, eps=EPS, momentum=0.1, dtype=np.float64, backend=BACKEND)
        self.params = self.layer.parameters()
        self.grads: list[np.ndarray] = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.layer(x)

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx = self.layer.backward(dy)
        self.grads = [self.layer.dgamma, self.layer.dbeta]
        return dx


class Identity:
    params: ClassVar[list[np.ndarray]] = []  # nothing to learn
    grads: ClassVar[list[np.ndarray]] = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        return x

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return dy


def _as_sequence(pair: NormPair) -> NormPair:
    """``pair`` called as exercise 5 promises, with x [B, T, D]: the batch of rows [N, D] as one sequence
    [1, N, D] (so a dgamma summed over axes (0, 1) is right), and y, dx given back as [N, D]."""
    forward, backward = pair

    def forward3(x, gamma, beta, eps):
        y, cache = forward(x[None], gamma, beta, eps)  # 1,N,D
        return np.asarray(y)[0], cache  # N,D

    def backward3(dy, cache):
        dx, *grads = backward(dy[None], cache)  # 1,N,D
        return (np.asarray(dx)[0], *grads)  # N,D; dgamma, dbeta: D

    return forward3, backward3


def make_norm(norm: str, width: int, pair: NormPair | None = None):
    """A norm layer from the registry's entry; ``pair`` (an exercise-5 pair, called with [B, T, D])
    replaces its (forward, backward)."""
    if norm == "none":
        return Identity()
    spec = get_norm(norm)
    if spec.batch_statistics:  # running averages for eval: the vectorized BatchNorm layer
        return BatchNormLayer(width)
    if pair is None:
        forward, backward = V.public_pass(spec)
        pair = (functools.partial(forward, backend=BACKEND), backward)
        return RowNorm(width, pair, has_beta=spec.has_beta)
    return RowNorm(width, _as_sequence(pair), has_beta=spec.has_beta)


class Residual:
    """h + linear2(relu(linear1(norm(h)))) (pre) or norm(h + linear2(relu(linear1(h)))) (post)."""

    def __init__(self, linear1: Linear, linear2: Linear, norm, placement: str) -> None:
        self.branch = [linear1, ReLU(), linear2]
        self.norm, self.pre = norm, placement == "pre"
        self.layers = [norm, *self.branch]

    def forward(self, h: np.ndarray) -> np.ndarray:
        a = self.norm.forward(h) if self.pre else h
        for layer in self.branch:
            a = layer.forward(a)
        return h + a if self.pre else self.norm.forward(h + a)

    def backward(self, dy: np.ndarray) -> np.ndarray:
        ds = dy if self.pre else self.norm.backward(dy)  # through the post-LN norm first
        da = ds
        for layer in reversed(self.branch):
            da = layer.backward(da)
        if self.pre:
            da = self.norm.backward(da)
        return ds + da  # the skip path and the branch


# ---- the network ---------------------------------------------------------------------------------------


class Net:
    """The whole network: ``forward(x) -> logits``, ``backward(dlogits)``, ``parameters()``, ``gradients()``."""

    def __init__(self, spec: NetSpec, seed: int = 0, ln_pair: NormPair | None = None) -> None:
        self.spec = spec
        linears = [Linear(w, b) for w, b in initial_weights(spec, seed)]
        self.layers: list[Any] = [] if spec.kind == "mlp" else [linears[0]]
        self.blocks: list[Any] = []
        for k in range(spec.depth):
            norm = make_norm(spec.norm, spec.width, ln_pair)
            if spec.kind == "mlp":
                block = [linears[k], norm, ReLU()]
            else:
                block = [Residual(linears[1 + 2 * k], linears[2 + 2 * k], norm, spec.placement)]
            self.blocks.append(block)
            self.layers += block
        if spec.kind == "residual" and spec.placement == "pre":
            self.layers.append(make_norm(spec.norm, spec.width, ln_pair))
        self.layers.append(linears[-1])

    def _leaves(self) -> list[Any]:
        out = []
        for layer in self.layers:
            out += layer.layers if isinstance(layer, Residual) else [layer]
        return out

    def forward(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, dtype=np.float64)
        for layer in self.layers:
            h = layer.forward(h)
        return h

    def backward(self, dlogits: np.ndarray) -> None:
        d = dlogits
        for layer in reversed(self.layers):
            d = layer.backward(d)

    def parameters(self) -> list[np.ndarray]:
        return [p for layer in self._leaves() for p in layer.params]

    def gradients(self) -> list[np.ndarray]:
        return [g for layer in self._leaves() for g in layer.grads]

    def block_weight_grads(self) -> list[float]:
        """The norm of the gradient of each block's Linear weights (both Linears of a residual block)."""
        norms = []
        for block in self.blocks:
            layers = block[0].branch if isinstance(block[0], Residual) else block
            grads = [layer.grads[0] for layer in layers if isinstance(layer, Linear)]
            norms.append(float(np.sqrt(sum(np.sum(g * g) for g in grads))))
        return norms

    def train(self, mode: bool = True) -> None:
        """Training or eval mode (only BatchNorm behaves differently)."""
        for layer in self._leaves():
            if isinstance(layer, BatchNormLayer):
                layer.layer.train(mode)


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """(mean softmax cross-entropy, its gradient with respect to the logits)."""
    shifted = logits - logits.max(axis=1, keepdims=True)  # B,K
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))  # B,K  log softmax
    n = len(labels)
    loss = -float(logp[np.arange(n), labels].mean())
    dlogits = np.exp(logp)  # B,K  softmax
    dlogits[np.arange(n), labels] -= 1.0
    return loss, dlogits / n
