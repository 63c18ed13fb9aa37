"""Demos of lesson 11: pre-LN vs post-LN in a deep residual stack (Xiong et al., 2020).

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

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Group

from microgradnorm import vectorized as V
from microgradnorm.drawing.charts import bar_chart
from microgradnorm.i18n import _
from microgradnorm.i18n.text import cjk_text, sentences
from microgradnorm.lessons.demo_tools import dim_note, fmt, number_table, rng_for
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.tolerances import CLOSED_FORM_RTOL
from microgradnorm.verdicts import above, at_least, at_most, below, claim, close_to, nearest, within

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


def stack_forward(weights: StackWeights, arrangement: str) -> tuple[list, np.ndarray]:
    """Run the stack forward: what each block saved for backward, and dL/d(top) (through the final LN in pre-LN)."""
    if arrangement not in ARRANGEMENTS:
        raise ValueError(f"arrangement: expected 'pre' or 'post', got {arrangement!r}")
    h = weights.x
    saved = []
    for w1, b1, w2 in zip(weights.w1, weights.b1, weights.w2):
        if arrangement == "pre":
            u, cache = _ln(h)  # T,D
            r = np.tanh(u @ w1 + b1)  # T,H
            saved.append((cache, r))
            h = h + r @ w2  # T,D: the skip connection adds the block's output
        else:
            r = np.tanh(h @ w1 + b1)  # T,H
            h, cache = _ln(h + r @ w2)  # T,D: the sum goes through LayerNorm
            saved.append((cache, r))
    if arrangement == "post":
        return saved, weights.g
    return saved, _ln_dx(weights.g, _ln(h)[1])  # T,D: back through the final LayerNorm


def block_vjp(weights: StackWeights, saved: list, k: int, v: np.ndarray) -> np.ndarray:
    """Pre-LN block k's own term: v times the Jacobian of f_k(LN(x)) with respect to x (per token)."""
    cache, r = saved[k]
    da = (v @ weights.w2[k].T) * (1.0 - r * r)  # T,H: back through W2 and tanh
    return _ln_dx(da @ weights.w1[k].T, cache)  # T,D: back through W1 and the block's LayerNorm


def stack_gradients(weights: StackWeights, arrangement: str, identity_only: bool = False) -> StackGradients:
    """Run the stack forward and backward and return |dL/dx_l| for every layer l."""
    saved, dh = stack_forward(weights, arrangement)
    top = float(np.linalg.norm(dh))
    layers = len(weights.w1)
    norms = np.zeros(layers)
    for k in reversed(range(layers)):
        if arrangement == "pre":
            if not identity_only:
                dh = dh + block_vjp(weights, saved, k, dh)  # T,D: identity + the block's path
        else:
            cache, r = saved[k]
            ds = _ln_dx(dh, cache)  # T,D: back through the LayerNorm on the sum
            dh = ds if identity_only else ds + ((ds @ weights.w2[k].T) * (1.0 - r * r)) @ weights.w1[k].T
        norms[k] = np.linalg.norm(dh)
    sigma = np.stack([1.0 / c.rstd.reshape(-1) for c, _ in saved])  # L,T
    return StackGradients(arrangement, norms, top, sigma)


@dataclass(frozen=True)
class Expansion:
    """Pre-LN's gradient at every layer split as I + Σ A_k (first order) and the rest (cross terms)."""

    full: np.ndarray  # L: |g_l|, all relative to |g_top|
    first: np.ndarray  # L: |(I + Σ_{k>=l} A_k)ᵀ g_top|
    cross: np.ndarray  # L: |g_l − first-order part|


def pre_ln_expansion(weights: StackWeights) -> Expansion:
    """Unroll g_l = (I + A_l)ᵀ ... (I + A_top)ᵀ g_top and split off its first-order terms."""
    saved, g_top = stack_forward(weights, "pre")
    layers = len(weights.w1)
    full, first, cross = np.zeros(layers), np.zeros(layers), np.zeros(layers)
    g, g1 = g_top, g_top
    for k in reversed(range(layers)):
        g = g + block_vjp(weights, saved, k, g)  # T,D: the exact recursion
        g1 = g1 + block_vjp(weights, saved, k, g_top)  # T,D: identity + each block's own term on g_top
        full[k], first[k], cross[k] = np.linalg.norm(g), np.linalg.norm(g1), np.linalg.norm(g - g1)
    top = float(np.linalg.norm(g_top))
    return Expansion(full / top, first / top, cross / top)


def _shown_layers(layers: int, rows: int = 12) -> list[int]:
    """About ``rows`` layers from the bottom up, always including the first and the last."""
    stride = max(1, -(-layers // rows))
    shown = list(range(0, layers, stride))
    if shown[-1] != layers - 1:
        shown.append(layers - 1)
    return shown


def _bars(weights: StackWeights, identity_only: bool, title: str) -> tuple[Group, dict[str, StackGradients]]:
    layers = len(weights.w1)
    runs = {a: stack_gradients(weights, a, identity_only) for a in ARRANGEMENTS}
    shown = _shown_layers(layers)
    series = {f"{a}-LN": [runs[a].norms[i] / runs[a].top for i in shown] for a in ARRANGEMENTS}
    chart = bar_chart([_layer(i) for i in shown], series, log=True, title=title)
    if identity_only:  # the bars show the skip connections' share of dL/dx_l, not all of it
        caption = _(
            "bars: |the identity path's part of dL/dx_l| ÷ |dL/dx_top|, top: the gradient arriving at the last block."
        )
    else:
        caption = _("bars: |dL/dx_l| ÷ |dL/dx_top|, top: the gradient arriving at the last block.")
    if len(shown) < layers:
        shown_of = _("{shown} of the {layers} layers shown.").format(shown=len(shown), layers=layers)
        caption = sentences([caption, shown_of])
    return Group(chart, dim_note(caption)), runs


def _layer(i: int) -> str:
    """A row label: which layer of the stack (0 is the first, nearest the input)."""
    return _("layer {i}").format(i=i)


def bottom_ratio(run: StackGradients) -> float:
    """|dL/dx_0| ÷ |dL/dx_top|."""
    return float(run.norms[0] / run.top)


def _depth_reading(runs: dict[str, StackGradients], versus: dict[str, StackGradients] | None) -> list[str]:
    """What the chart says, in numbers: the bottom's share, post-LN's mean factor per layer, against depth."""
    layers = len(runs["post"].norms)
    pre, post = bottom_ratio(runs["pre"]), bottom_ratio(runs["post"])
    lines = [
        _("pre-LN: layer 0 gets {ratio} × the top's gradient.").format(ratio=fmt(pre, 3)),
        _("post-LN: layer 0 gets {ratio} × it, a factor {factor} per layer on average.").format(
            ratio=fmt(post, 3), factor=fmt(post ** (1 / layers), 3)
        ),
    ]
    if versus is not None:
        before = len(versus["post"].norms)
        growth = log_growth(post, bottom_ratio(versus["post"]))
        lines.append(
            _(
                "{before} → {layers} layers: post-LN's log(ratio) × {growth} (equal per-layer factors would "
                "give {expected}); pre-LN's ratio × {pre_change}."
            ).format(
                before=before,
                layers=layers,
                growth=_signed(growth),
                expected=fmt(layers / before, 3),
                pre_change=fmt(pre / bottom_ratio(versus["pre"]), 3),
            )
        )
    return lines


def _closer_prediction(runs: dict[str, StackGradients]) -> Prediction:
    dist = {a: abs(math.log(max(bottom_ratio(r), 1e-300))) for a, r in runs.items()}
    apart = abs(dist["pre"] - dist["post"]) / max(dist["pre"], dist["post"], 1e-300)
    what = "|log(layer 0 ÷ top)|, relative difference pre vs post"
    distinct = above(apart, 0.1, what)
    evidence = (
        distinct & below(dist["pre"], dist["post"], "|log(layer 0 ÷ top)|, pre vs post"),
        distinct & above(dist["pre"], dist["post"], "|log(layer 0 ÷ top)|, pre vs post"),
        at_most(apart, 0.1, what),
    )
    answer = next(i for i, e in enumerate(evidence) if e)
    why = _(
        "At layer 0 the gradient is {pre} × the top's in pre-LN and {post} × in post-LN. Post-LN passes it "
        "through every layer's LayerNorm Jacobian; pre-LN also sends it along the skip connections untouched."
    ).format(pre=fmt(bottom_ratio(runs["pre"]), 3), post=fmt(bottom_ratio(runs["post"]), 3))
    return Prediction(
        _("Which arrangement's gradient at layer 0 of {layers} is closer to the top's?").format(
            layers=len(runs["pre"].norms)
        ),
        ("pre-LN", "post-LN", _("about equally close")),
        answer,
        why,
        evidence,
    )


@demo("residual_gradients")
def residual_gradients(
    p: LessonParams, layers: int = 24, gain: float = 0.5, bias: float = 2.0, versus: int | None = None
) -> DemoOutput:
    """|dL/dx_l| at every layer of a deep residual stack, pre-LN and post-LN, as a bar chart with its reading."""
    weights = stack_weights(p.seed, layers, width=p.dim, gain=gain, bias=bias)
    title = _("{layers} layers (gain {gain}, bias {bias}): |dL/dx_l| ÷ the top's").format(
        layers=layers, gain=f"{gain:g}", bias=f"{bias:g}"
    )
    chart, runs = _bars(weights, False, title)
    earlier = None
    if versus is not None:
        small = stack_weights(p.seed, int(versus), width=p.dim, gain=gain, bias=bias)
        earlier = {a: stack_gradients(small, a) for a in ARRANGEMENTS}
    reading = [cjk_text(line) for line in _depth_reading(runs, earlier)]
    return DemoOutput(Group(chart, *reading), prediction=None if versus else _closer_prediction(runs))


@demo("residual_depth")
def residual_depth(
    p: LessonParams,
    depths: tuple[int, int] = (24, 48),
    blocks: tuple[tuple[float, float], ...] = ((0.5, 2.0), (1.0, 3.0), (0.5, 0.0), (2.0, 0.0), (4.0, 0.0)),
) -> Group:
    """How the bottom-to-top gradient ratio changes with depth and with the blocks (gain, bias)."""
    short, deep = (int(d) for d in depths)
    rows, growth, pre_growth = [], [], []
    for gain, bias in blocks:
        ratio = {}
        for depth in (short, deep):
            weights = stack_weights(p.seed, depth, width=p.dim, gain=float(gain), bias=float(bias))
            for a in ARRANGEMENTS:
                ratio[a, depth] = bottom_ratio(stack_gradients(weights, a))
        post_log = log_growth(ratio["post", deep], ratio["post", short])
        growth.append(post_log)
        pre_growth.append(ratio["pre", deep] / ratio["pre", short])
        rows.append(
            [f"{float(gain):g}, {float(bias):g}"]
            + [fmt(ratio[a, d], 3) for a in ARRANGEMENTS for d in (short, deep)]
            + [_signed(post_log)]
        )
    return Group(
        number_table(
            [_("gain, bias"), f"pre {short}", f"pre {deep}", f"post {short}", f"post {deep}", "log ×"],
            rows,
            title=_("|dL/dx_0| ÷ |dL/dx_top| at two depths"),
            caption=_(
                "gain scales W1 (how hard each tanh is driven), bias spreads the tanh's operating points "
                "(a large bias saturates it). `log ×`: `log(post {deep}) ÷ log(post {short})`, "
                "{ratio} for a product of equal per-layer factors."
            ).format(deep=deep, short=short, ratio=fmt(deep / short, 3)),
        ),
        cjk_text(
            _(
                "post-LN: {short} → {deep} layers multiplied log(ratio) by {span}. "
                "pre-LN: the ratio changed by × {low} to × {high}."
            ).format(
                short=short,
                deep=deep,
                span=_span(growth),
                low=fmt(min(pre_growth), 3),
                high=fmt(max(pre_growth), 3),
            )
        ),
    )


def _span(values: list[float]) -> str:
    """'a to b' over the finite values, or a dash when there are none."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "—"
    # Translators: a range of two numbers inside a sentence, "1.75 to 2.23"
    return _("{low} to {high}").format(low=_signed(min(finite)), high=_signed(max(finite)))


def _signed(value: float) -> str:
    """``fmt(value, 3)`` with a true minus sign (U+2212), as the lessons' prose writes it."""
    return "−" + fmt(-value, 3) if value < 0 else fmt(value, 3)


def log_growth(deep: float, short: float) -> float:
    """log(deep) ÷ log(short): how a ratio's logarithm grew with depth (NaN when short is too close to 1)."""
    if not (deep > 0 and short > 0) or abs(math.log(short)) <= 1e-3:
        return math.nan
    return math.log(deep) / math.log(short)


# ---- one LayerNorm: how far can it stretch a gradient? -------------------------------------------


def ln_jacobian(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """The Jacobian dy/dx of LayerNorm at one vector x, column by column from the vectorized backward pass.

    Row i of the backward pass's dx for dy = e_i is row i of J (dx = Jᵀ dy, and
    dy = e_i picks out row i of J): so the D rows of dx for dy = I are J itself.
    """
    d = x.shape[0]
    _y, cache = V.layer_norm_forward(np.tile(x, (d, 1)), gamma, None, eps, backend="numpy")
    return V.layer_norm_backward(np.eye(d), cache)[0]


def _stretch_prediction(norm_j: float, sigma: float, d: int) -> Prediction:
    factors = (1.0, math.sqrt(d), float(d))
    stretch = norm_j * sigma
    what = "‖J‖₂ · std"
    evidence = (
        *(at_least(stretch, 0.5, what) & near for near in nearest(stretch, factors, what)),
        below(stretch, 0.5, what),
    )
    answer = next(i for i, e in enumerate(evidence) if e)
    if d > 2:
        why = _(
            "Here ‖J‖₂ · std = {stretch}. With gamma = 1 the Jacobian is (1/std)(I − P), and I − P is (up to "
            "eps) a projection: it never lengthens a vector, and the directions it keeps (d − 2 of them) it "
            "leaves as they are."
        )
    else:  # the ones vector and xhat span the whole plane: nothing is kept
        why = _(
            "Here ‖J‖₂ · std = {stretch}. With gamma = 1 the Jacobian is (1/std)(I − P), and I − P is (up to "
            "eps) a projection: it never lengthens a vector, and at d = 2 it keeps no direction at all (the "
            "ones vector and xhat span the plane): a LayerNorm of two numbers outputs ±1 whatever they are, so "
            "J is zero up to eps."
        )
    return Prediction(
        _("gamma = 1, d = {d}: by what factor can one LayerNorm's Jacobian at most stretch a gradient?").format(d=d),
        ("1/std", f"√d/std = {fmt(math.sqrt(d), 3)}/std", f"d/std = {d}/std", _("less than 1/std")),
        answer,
        why.format(stretch=fmt(stretch, 6)),
        evidence,
    )


@demo("ln_stretch")
def ln_stretch(p: LessonParams) -> DemoOutput:
    """The spectral norm of one LayerNorm Jacobian against max|gamma|/sigma and ‖gamma‖/sigma."""
    rng = rng_for(p.seed, 21)
    x = rng.normal(0.5, 2.0, size=p.dim)
    sigma = float(np.sqrt(np.var(x) + 1e-5))
    rows, checks, norms = [], [], {}
    gammas = (("1", "gamma 1", np.ones(p.dim)), ("random", _("gamma random"), rng.uniform(0.2, 2.0, size=p.dim)))
    for name, label, gamma in gammas:
        norms[name] = float(np.linalg.norm(ln_jacobian(x, gamma, 1e-5), 2))
        tight, loose = float(np.max(np.abs(gamma))) / sigma, float(np.linalg.norm(gamma)) / sigma
        rows.append([label, fmt(norms[name], 4), fmt(tight, 4), fmt(loose, 4)])
        checks.append(
            claim(
                at_most(norms[name], tight * (1 + 1e-12), f"{name}: ‖J‖₂ vs max|gamma_i|/std"),
                _("{gamma}: ‖J‖₂ ≤ max|gamma_i|/std").format(gamma=label),
            )
        )
    if p.dim >= 3:  # a direction orthogonal to both 1 and xhat, which I - P keeps whole
        checks.append(
            claim(within(norms["1"], 1 / sigma, 1e-9, "gamma 1: ‖J‖₂ vs 1/std"), _("gamma 1: ‖J‖₂ = 1/std exactly"))
        )
    return DemoOutput(
        Group(
            number_table(
                ["", "‖J‖₂", "max|gamma_i|/std", "‖gamma‖/std"],
                rows,
                title=_("one token, d = {d}, std = {sigma}: the largest stretch of J").format(
                    d=p.dim, sigma=fmt(sigma, 4)
                ),
                caption=_("‖J‖₂: the spectral norm, the most J can lengthen any vector (numpy.linalg.norm(J, 2))."),
            ),
            *checks,
        ),
        prediction=_stretch_prediction(norms["1"], sigma, p.dim),
    )


# ---- the skip connections alone ---------------------------------------------------------------


@demo("identity_path")
def identity_path(p: LessonParams, layers: int = 24, gain: float = 0.5, bias: float = 2.0) -> Group:
    """Only the skip connections: the identity in pre-LN, a chain of (1/sigma)(I - P) in post-LN."""
    weights = stack_weights(p.seed, layers, width=p.dim, gain=gain, bias=bias)
    chart, runs = _bars(
        weights, True, _("skip connections only, {layers} layers: |path| ÷ the top's").format(layers=layers)
    )
    pre, post = runs["pre"], runs["post"]
    # |(1/sigma)(I - P) v| <= |v| / sigma for each token: the chain is bounded by the product of 1/sigma
    bound = float(np.sqrt(np.sum(np.prod(1.0 / post.sigma, axis=0) ** 2 * np.sum(weights.g**2, axis=1))))
    return Group(
        chart,
        claim(
            close_to(pre.norms, np.full(layers, pre.top), CLOSED_FORM_RTOL, 0.0, "pre-LN: |path| vs |top|"),
            _("pre-LN: the top's gradient, unchanged"),
        ),
        claim(
            at_most(post.norms[0], bound * (1 + 1e-9), "post-LN layer 0: |path| vs the product of 1/std"),
            _("post-LN, layer 0: {ratio} ≤ {bound}, the product of 1/std over the layers").format(
                ratio=fmt(bottom_ratio(post), 3), bound=fmt(bound / post.top, 3)
            ),
        ),
        dim_note(
            _("post-LN sums: std from {low} to {high}").format(
                low=fmt(float(post.sigma.min()), 3), high=fmt(float(post.sigma.max()), 3)
            )
        ),
    )


# ---- unrolled pre-LN: a product, not a sum ---------------------------------------------------------


def _cross_prediction(exp: Expansion, dim: int) -> Prediction:
    evidence = (
        above(exp.first[0], exp.cross[0], "layer 0: first-order part vs cross terms"),
        at_least(exp.cross[0], exp.first[0], "layer 0: cross terms vs first-order part"),
    )
    answer = 0 if evidence[0] else 1
    if answer == 1:
        why = _(
            "At layer 0 the first-order part has size {first}, the cross terms {cross} (÷ the top's gradient): "
            "the A's are strong, and their products far outnumber them."
        )
    elif dim == 2:
        why = _(
            "At layer 0 the first-order part has size {first}, the cross terms {cross} (÷ the top's gradient): "
            "at d = 2 that is luck (the line under the table says why)."
        )
    else:
        why = _(
            "At layer 0 the first-order part has size {first}, the cross terms {cross} (÷ the top's gradient): "
            "these A's are weak, so their products are weaker still."
        )
    return Prediction(
        _("Unroll the strong pre-LN stack. At layer 0, which part of the gradient is larger?"),
        (_("I + Σ A_k (the first-order part)"), _("the cross terms (products of two or more A_k)")),
        answer,
        why.format(first=fmt(exp.first[0], 3), cross=fmt(exp.cross[0], 3)),
        evidence,
    )


def _additive_claim(exp: Expansion, dim: int) -> Any:
    """Under the expansion: the checked claim that the cross terms win (d >= 3); at d = 2, why no claim is made."""
    if dim == 2:
        return dim_note(
            _(
                "Not checked at d = 2: a LayerNorm of two numbers outputs ±1 whatever they are, so its Jacobian, "
                "and each A_k with it, is near zero unless the two nearly coincide (then it is large): which part "
                "wins is luck. Try --dim 3 or more."
            )
        )
    return Group(
        claim(
            above(exp.cross[0], exp.first[0], "layer 0: cross terms vs first-order part"),
            _("at layer 0 the cross terms outweigh the first-order part: not additive"),
        )
    )


@demo("pre_ln_cross_terms")
def pre_ln_cross_terms(p: LessonParams, layers: int = 24, gain: float = 4.0, bias: float = 0.0) -> DemoOutput:
    """Pre-LN's gradient split into the identity plus single-block terms, and the cross terms of the product."""
    weights = stack_weights(p.seed, layers, width=p.dim, gain=gain, bias=bias)
    exp = pre_ln_expansion(weights)
    shown = _shown_layers(layers, rows=8)
    rows = [[_layer(i), fmt(exp.full[i], 3), fmt(exp.first[i], 3), fmt(exp.cross[i], 3)] for i in shown]
    full = stack_gradients(weights, "pre")
    return DemoOutput(
        Group(
            number_table(
                ["", "|g_l|", "|I + Σ A_k|", _("|cross terms|")],
                rows,
                title=_("pre-LN, {layers} layers, gain {gain}, bias {bias}; all ÷ |g_top|").format(
                    layers=layers, gain=f"{gain:g}", bias=f"{bias:g}"
                ),
                caption=_("|I + Σ A_k|: the identity plus each block from l up, each alone."),
            ),
            claim(
                close_to(exp.full, full.norms / full.top, CLOSED_FORM_RTOL, 0.0, "|g_l|: expansion vs stack"),
                _("|g_l| is the stack's own gradient"),
            ),
            _additive_claim(exp, p.dim),
        ),
        prediction=_cross_prediction(exp, p.dim),
    )
