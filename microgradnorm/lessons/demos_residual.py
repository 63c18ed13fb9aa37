"""Demos of lesson 11: pre-LN vs post-LN in a deep residual stack (seed 001).

A stack of ``layers`` residual blocks on ``tokens`` vectors of width ``width``; each
block is a small MLP, f(h) = tanh(h W1 + b1) W2. The two arrangements:

    pre-LN:   x_{l+1} = x_l + f_l(LN(x_l))        (and one LN after the last block)
    post-LN:  x_{l+1} = LN(x_l + f_l(x_l))

The loss is sum(out * g) for a random g. Forward and backward run on the
vectorized NumPy path (:mod:`microgradnorm.vectorized`, ``backend="numpy"``),
with the MLP's backward written out below. What is measured is the gradient
norm |dL/dx_l| at the input of every layer.

``identity_only=True`` keeps only the skip connections in the backward pass (the
blocks' Jacobians are left out): in pre-LN that path is the identity, in post-LN
it still passes through every LayerNorm, each a (1/sigma)(I - P) (lesson 07).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import vectorized as V
from microgradnorm.lessons.charts import bar_chart
from microgradnorm.lessons.demo_tools import check_mark, fmt, number_table, ratio, rng_for
from microgradnorm.lessons.demos import LessonParams, demo

ARRANGEMENTS = ("pre", "post")


@dataclass(frozen=True)
class StackWeights:
    """The weights of a residual stack and the problem it runs on."""

    w1: list[np.ndarray]  # each D,H
    b1: list[np.ndarray]  # each H
    w2: list[np.ndarray]  # each H,D
    x: np.ndarray  # T,D: the input tokens
    g: np.ndarray  # T,D: dL/d(output), the random upstream gradient


def stack_weights(
    seed: int, layers: int, width: int = 32, tokens: int = 16, gain: float = 0.5, bias: float = 2.0
) -> StackWeights:
    """Random weights: W1 ~ N(0, gain^2 / D), b1 ~ N(0, bias^2), W2 ~ N(0, 1 / H) with H = 4 D.

    ``gain`` is how hard the tanh is driven by the stream; ``bias`` moves each tanh
    unit's operating point, so a large bias saturates it (its output is then mostly
    constant and its slope small).
    """
    for name, v in (("layers", layers), ("width", width), ("tokens", tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected a positive integer, got {v!r}")
    if not gain > 0:
        raise ValueError(f"gain: expected a positive number, got {gain!r}")
    if not bias >= 0:
        raise ValueError(f"bias: expected a number >= 0, got {bias!r}")
    rng = rng_for(seed, 20)
    hidden = 4 * width
    w1 = [rng.normal(0.0, gain / np.sqrt(width), size=(width, hidden)) for _ in range(layers)]
    b1 = [rng.normal(0.0, bias, size=hidden) for _ in range(layers)]
    w2 = [rng.normal(0.0, 1.0 / np.sqrt(hidden), size=(hidden, width)) for _ in range(layers)]
    return StackWeights(w1, b1, w2, rng.normal(size=(tokens, width)), rng.normal(size=(tokens, width)))


@dataclass(frozen=True)
class StackGradients:
    """|dL/dx_l| at the input of each layer (index 0 = first layer) and what it is measured against."""

    arrangement: str
    norms: np.ndarray  # L: Frobenius norm over all tokens
    top: float  # |dL/dx_L|, the gradient arriving at the output of the last block
    sigma: np.ndarray  # L,T: the std each LayerNorm divided by, per layer and token


def _ln(x: np.ndarray) -> tuple[np.ndarray, V.NormCache]:
    return V.layer_norm_forward(x, None, None, 1e-5, backend="numpy")


def _ln_dx(dy: np.ndarray, cache: V.NormCache) -> np.ndarray:
    return V.layer_norm_backward(dy, cache)[0]


def stack_gradients(weights: StackWeights, arrangement: str, identity_only: bool = False) -> StackGradients:
    """Run the stack forward and backward and return |dL/dx_l| for every layer l."""
    if arrangement not in ARRANGEMENTS:
        raise ValueError(f"arrangement: expected 'pre' or 'post', got {arrangement!r}")
    h = weights.x
    saved = []
    for w1, b1, w2 in zip(weights.w1, weights.b1, weights.w2):
        if arrangement == "pre":
            u, cache = _ln(h)  # T,D
            r = np.tanh(u @ w1 + b1)  # T,H
            saved.append((cache, u, r))
            h = h + r @ w2  # T,D: the skip connection adds the block's output
        else:
            r = np.tanh(h @ w1 + b1)  # T,H
            h, cache = _ln(h + r @ w2)  # T,D: the sum goes through LayerNorm
            saved.append((cache, h, r))
    if arrangement == "pre":
        _, final = _ln(h)
        dh = _ln_dx(weights.g, final)  # T,D: through the final LayerNorm
    else:
        dh = weights.g
    top = float(np.linalg.norm(dh))
    layers = len(weights.w1)
    norms = np.zeros(layers)
    for k in reversed(range(layers)):
        cache, _, r = saved[k]
        w1, w2 = weights.w1[k], weights.w2[k]
        if arrangement == "pre":
            if not identity_only:
                da = (dh @ w2.T) * (1.0 - r * r)  # T,H: back through W2 and tanh
                dh = dh + _ln_dx(da @ w1.T, cache)  # T,D: identity + the block's path
        else:
            ds = _ln_dx(dh, cache)  # T,D: back through the LayerNorm on the sum
            dh = ds if identity_only else ds + ((ds @ w2.T) * (1.0 - r * r)) @ w1.T
        norms[k] = np.linalg.norm(dh)
    sigma = np.stack([1.0 / c.rstd.reshape(-1) for c, _, _ in saved])  # L,T
    return StackGradients(arrangement, norms, top, sigma)


def _bars(p: LessonParams, weights: StackWeights, identity_only: bool, title: str) -> Group:
    layers = len(weights.w1)
    runs = {a: stack_gradients(weights, a, identity_only) for a in ARRANGEMENTS}
    stride = 1 if layers <= 24 else -(-layers // 16)  # every layer up to 24, else about 16 rows
    shown = list(range(0, layers, stride))
    if shown[-1] != layers - 1:
        shown.append(layers - 1)
    series = {f"{a}-LN": [runs[a].norms[i] / runs[a].top for i in shown] for a in ARRANGEMENTS}
    chart = bar_chart([f"layer {i}" for i in shown], series, log=True, title=title)
    pre, post = runs["pre"].norms / runs["pre"].top, runs["post"].norms / runs["post"].top
    return Group(
        chart,
        number_table(
            ["", "layer 0 ÷ top", "max ÷ min"],
            [
                ["pre-LN", fmt(float(pre[0]), 3), fmt(ratio(float(pre.max()), float(pre.min())), 3)],
                ["post-LN", fmt(float(post[0]), 3), fmt(ratio(float(post.max()), float(post.min())), 3)],
            ],
            caption="bars: |dL/dx_l| ÷ |dL/dx_top|, where top is the gradient arriving at the last block."
            + (f" One layer in {stride} shown." if stride > 1 else ""),
        ),
    )


@demo("residual_gradients")
def residual_gradients(p: LessonParams, layers: int = 24, gain: float = 0.5, bias: float = 2.0) -> Group:
    """|dL/dx_l| at every layer of a deep residual stack, pre-LN and post-LN, as a bar chart."""
    weights = stack_weights(p.seed, layers, width=p.dim, gain=gain, bias=bias)
    title = f"{layers} layers (gain {gain:g}, bias {bias:g}): |dL/dx_l| relative to the top"
    return _bars(p, weights, False, title)


@demo("residual_depth")
def residual_depth(
    p: LessonParams,
    depths: tuple[int, ...] = (24, 48),
    blocks: tuple[tuple[float, float], ...] = ((0.5, 2.0), (1.0, 3.0), (0.5, 0.0), (2.0, 0.0), (4.0, 0.0)),
) -> Group:
    """How the bottom-to-top gradient ratio changes with depth and with the blocks (gain, bias)."""
    rows = []
    for gain, bias in blocks:
        for depth in depths:
            weights = stack_weights(p.seed, int(depth), width=p.dim, gain=float(gain), bias=float(bias))
            runs = {a: stack_gradients(weights, a) for a in ARRANGEMENTS}
            ratio = {a: float(r.norms[0] / r.top) for a, r in runs.items()}
            rows.append(
                [f"{float(gain):g}", f"{float(bias):g}", str(depth), fmt(ratio["pre"], 3), fmt(ratio["post"], 3)]
            )
    return number_table(
        ["gain", "bias", "layers", "pre-LN", "post-LN"],
        rows,
        title="|dL/dx_0| ÷ |dL/dx_top|: the first layer's gradient against the last's",
        caption="gain scales W1 (how hard each tanh is driven), bias spreads the tanh's operating points "
        "(a large bias saturates it). Together they set how strongly a block reacts to the stream compared "
        "with how much it adds to it.",
    )


@demo("identity_path")
def identity_path(p: LessonParams, layers: int = 24, gain: float = 0.5, bias: float = 2.0) -> Group:
    """Only the skip connections: the identity in pre-LN, a chain of (1/sigma)(I - P) in post-LN."""
    weights = stack_weights(p.seed, layers, width=p.dim, gain=gain, bias=bias)
    chart = _bars(p, weights, True, f"skip connections only, {layers} layers: |path| relative to the top")
    post = stack_gradients(weights, "post", identity_only=True)
    # |(1/sigma)(I - P) v| <= |v| / sigma for each token: the chain is bounded by the product of 1/sigma
    bound = float(np.sqrt(np.sum(np.prod(1.0 / post.sigma, axis=0) ** 2 * np.sum(weights.g**2, axis=1))))
    ok = post.norms[0] <= bound * (1 + 1e-9)
    return Group(
        chart,
        Text.assemble(
            check_mark(ok),
            f" post-LN, layer 0: {fmt(float(post.norms[0] / post.top), 3)} ≤ {fmt(bound / post.top, 3)}, "
            "the bound from the product of 1/σ over the layers",
        ),
        Text(
            f"mean σ of a post-LN sum: {fmt(float(post.sigma.mean()), 3)} (each LayerNorm divides by it)",
            style="dim",
        ),
    )
