"""Demos of lesson 10: LayerNorm vs BatchNorm in practice (seeds 004 and 002).

BatchNorm's statistics pool different examples of a batch; LayerNorm's stay
inside one example. Three consequences, each computed live: zero padding in a
batch of sentences pollutes BatchNorm's statistics and leaves LayerNorm alone;
an example's BatchNorm output depends on which batch it is in and how big that
batch is; and normalizing the wrong axis for the data can stall training.

The computations are plain functions (``padded_batch``, ``batch_spread``,
``train_wrong_axis``) that return numbers, so the tests can check the claims;
the demos only lay them out.
"""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import vectorized as V
from microgradnorm.lessons.charts import line_chart
from microgradnorm.lessons.demo_tools import check_mark, engine_forward, fmt, number_table, rng_for, sci
from microgradnorm.lessons.demos import LessonParams, demo

# Padding rows and a batch of one are constant groups: with eps = 0 they divide by zero.
# The demos then run at this eps instead, and say so.
_EPS_FLOOR = 1e-5


def _eps(p: LessonParams) -> tuple[float, Text | None]:
    if p.eps > 0:
        return p.eps, None
    note = Text(f"eps = 0 would divide by zero on constant rows; using eps = {_EPS_FLOOR:g} here", style="dim")
    return _EPS_FLOOR, note


# ---- padding ----------------------------------------------------------------------


def padded_batch(
    seed: int, dim: int, lengths: tuple[int, ...], pad_to: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A batch of sentences [N, L, D] zero-padded to length L, and the mask of real tokens [N, L].

    Token features are drawn around a nonzero mean (real activations are rarely
    centered), so that zeros are visibly out of place among them.
    """
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"lengths: expected positive integers (tokens per sentence), got {lengths!r}")
    longest = max(lengths)
    pad_to = longest if pad_to is None else pad_to
    if pad_to < longest:
        raise ValueError(f"pad_to: expected at least the longest sentence ({longest}), got {pad_to}")
    rng = rng_for(seed, 10)
    offset = rng.normal(1.0, 1.0, size=dim)  # D: each feature has its own typical level
    x = np.zeros((len(lengths), pad_to, dim))
    mask = np.zeros((len(lengths), pad_to), dtype=bool)
    for i, n in enumerate(lengths):
        x[i, :n] = offset + rng.normal(0.0, 1.0, size=(n, dim))
        mask[i, :n] = True
    return x, mask


@demo("padding_pollution")
def padding_pollution(p: LessonParams, lengths: tuple[int, ...] = (5, 2, 3)) -> Group:
    """BatchNorm statistics with and without zero padding; LayerNorm of the real tokens, both ways."""
    eps, note = _eps(p)
    x, mask = padded_batch(p.seed, p.dim, tuple(lengths))
    n, length, d = x.shape
    real = x[mask]  # T,D: the real tokens only
    flat = x.reshape(-1, d)  # N*L,D: what BatchNorm sees when the padding is not masked
    bn_real = get_graph("batchnorm", real, eps)
    bn_pad = get_graph("batchnorm", flat, eps)
    rows = []
    for j in range(d):
        rows.append(
            [
                f"feature {j}",
                fmt(bn_real["mean"][j].data, 3),
                fmt(bn_pad["mean"][j].data, 3),
                fmt(bn_real["var"][j].data, 3),
                fmt(bn_pad["var"][j].data, 3),
            ]
        )
    ln_real = engine_forward("layernorm", real, None, None, eps)
    ln_pad = engine_forward("layernorm", flat, None, None, eps)[mask.reshape(-1)]
    y_real = np.array([v.data for v in bn_real["y"]]).reshape(real.shape)
    y_pad = np.array([v.data for v in bn_pad["y"]]).reshape(flat.shape)[mask.reshape(-1)]
    pads = int((~mask).sum())
    return Group(
        *([note] if note else []),
        Text(f"{n} sentences of {list(lengths)} tokens, padded to {length}: {pads} of {n * length} rows are zeros"),
        number_table(
            ["", "mean real", "mean padded", "var real", "var padded"],
            rows,
            title="BatchNorm statistics per feature (engine)",
        ),
        number_table(
            ["output of the real tokens", "max change from padding"],
            [
                ["BatchNorm", sci(float(np.max(np.abs(y_pad - y_real))))],
                ["LayerNorm", sci(float(np.max(np.abs(ln_pad - ln_real))))],
            ],
        ),
    )


def get_graph(norm: str, x: np.ndarray, eps: float):
    """The scalar graph of ``norm`` on x (no affine)."""
    from microgradnorm.registry import get_norm

    return get_norm(norm).build_graph(x.tolist(), None, None, eps)


@demo("padding_growth")
def padding_growth(
    p: LessonParams, lengths: tuple[int, ...] = (5, 2, 3), pad_to: tuple[int, ...] = (5, 10, 20, 40)
) -> Group:
    """The more padding, the further BatchNorm's mean and variance drift from the real tokens'."""
    eps, note = _eps(p)
    rows = []
    for length in pad_to:
        x, mask = padded_batch(p.seed, p.dim, tuple(lengths), int(length))
        flat = x.reshape(-1, p.dim)
        m_pad = formulas.moments(flat, (0,), eps)
        m_real = formulas.moments(x[mask], (0,), eps)
        ln_pad, _ = V.layer_norm_forward(flat, None, None, eps, backend="numpy")
        ln_real, _ = V.layer_norm_forward(x[mask], None, None, eps, backend="numpy")
        rows.append(
            [
                str(length),
                f"{(~mask).mean():.0%}",
                fmt(float(m_pad.mean[0, 0]), 3) + " / " + fmt(float(m_real.mean[0, 0]), 3),
                fmt(float(m_pad.var[0, 0]), 3) + " / " + fmt(float(m_real.var[0, 0]), 3),
                sci(float(np.max(np.abs(ln_pad[mask.reshape(-1)] - ln_real))), 1),
            ]
        )
    table = number_table(
        ["pad to", "padding", "BN mean", "BN var", "LN change"],
        rows,
        title=f"feature 0, sentences of {list(lengths)} tokens",
        caption="BN mean and var: padded batch / real tokens only. LN change: max change of the real "
        "tokens' LayerNorm output caused by the padding.",
    )
    return Group(note, table) if note else Group(table)


# ---- batch size -------------------------------------------------------------------


def batch_spread(seed: int, dim: int, sizes: tuple[int, ...], trials: int, eps: float) -> list[dict[str, float]]:
    """How much one fixed example's normalized output moves when the rest of its batch changes.

    For each batch size B, ``trials`` batches of B - 1 random companions are drawn
    and the fixed example is normalized in each. Returns, per size, the largest
    spread (max - min over trials) of any of its outputs, for BatchNorm and LayerNorm.
    """
    rng = rng_for(seed, 11)
    x0 = rng.normal(0.5, 2.0, size=dim)
    out = []
    for b in sizes:
        bn_outs, ln_outs = [], []
        for _ in range(trials):
            batch = np.vstack([x0, rng.normal(0.5, 2.0, size=(b - 1, dim))])
            y_bn, _ = V.batch_norm_forward(batch, None, None, eps, backend="numpy")
            y_ln, _ = V.layer_norm_forward(batch, None, None, eps, backend="numpy")
            bn_outs.append(y_bn[0])
            ln_outs.append(y_ln[0])
        bn_arr, ln_arr = np.array(bn_outs), np.array(ln_outs)
        out.append(
            {
                "size": b,
                "bn_spread": float(np.max(np.ptp(bn_arr, axis=0))),
                "ln_spread": float(np.max(np.ptp(ln_arr, axis=0))),
                "bn_max_abs": float(np.max(np.abs(bn_arr))),
            }
        )
    return out


@demo("batch_size_dependence")
def batch_size_dependence(p: LessonParams, sizes: tuple[int, ...] = (1, 2, 4, 16, 64), trials: int = 20) -> Group:
    """One example, many random batches: its BatchNorm output moves, its LayerNorm output does not."""
    if any(not isinstance(b, int) or b < 1 for b in sizes):
        raise ValueError(f"sizes: expected positive batch sizes, got {sizes!r}")
    eps, note = _eps(p)
    stats = batch_spread(p.seed, p.dim, tuple(sizes), trials, eps)
    rows = [[str(s["size"]), fmt(s["bn_spread"], 3), fmt(s["bn_max_abs"], 3), fmt(s["ln_spread"], 3)] for s in stats]
    table = number_table(
        ["batch", "BN spread", "BN max |y|", "LN spread"],
        rows,
        title=f"one fixed example in {trials} random batches of each size",
        caption="spread: the largest range (max − min over the batches) of any of the example's outputs. "
        "A batch of one normalizes every feature to exactly zero.",
    )
    return Group(note, table) if note else Group(table)


# ---- the wrong axis ---------------------------------------------------------------


def _tokens(rng: np.random.Generator, n: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """n tokens whose label lies in the pattern of their features, not in their size or level.

    Each token is z * s + b: a pattern z, an overall scale s spread over four
    orders of magnitude (one token comes from a loud context, the next from a quiet
    one) and a common offset b. Its label is whether u . z > 0, with u orthogonal
    to the all-ones vector, so neither s nor b changes it.
    """
    d = u.shape[0]
    z = rng.normal(size=(n, d))
    labels = (z @ u > 0).astype(np.float64)
    s = 10.0 ** rng.uniform(-2.0, 2.0, size=(n, 1))
    b = rng.normal(0.0, 3.0, size=(n, 1))
    return z * s + b, labels


def _normalize(norm: str, x: np.ndarray, eps: float) -> np.ndarray:
    if norm == "layernorm":  # each token over its own features
        return V.layer_norm_forward(x, None, None, eps, backend="numpy")[0]
    if norm == "batchnorm":  # each feature over the tokens of the batch
        return V.batch_norm_forward(x, None, None, eps, backend="numpy")[0]
    raise ValueError(f"norm: expected 'layernorm' or 'batchnorm', got {norm!r}")


def _logistic_loss(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean binary cross-entropy, log(1 + e^z) - t z, written so that it never overflows."""
    return float(np.mean(np.logaddexp(0.0, logits) - labels * logits))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # = 1 / (1 + e^-z), without overflow


def train_wrong_axis(
    seed: int, features: int = 8, batch: int = 32, steps: int = 200, lr: float = 0.5, eps: float = 1e-5
) -> dict[str, list[float]]:
    """Logistic regression on normalized tokens, trained by gradient descent, once per norm.

    The model is ``sigmoid(norm(x) @ w + c)``; the norm has no parameters. Each step
    draws a fresh batch of tokens, takes one gradient step on w and c, then records
    the loss on a fixed evaluation batch of 256 tokens (normalized the same way).
    Both norms see exactly the same batches. Returns the loss curve of each.
    """
    rng = rng_for(seed, 12)
    u = rng.normal(size=features)
    u -= u.mean()
    u /= np.linalg.norm(u)
    x_eval, t_eval = _tokens(rng, 256, u)
    batches = [_tokens(rng, batch, u) for _ in range(steps)]
    curves = {}
    for norm in ("layernorm", "batchnorm"):
        w = np.zeros(features)
        c = 0.0
        xe = _normalize(norm, x_eval, eps)
        curve = [_logistic_loss(xe @ w + c, t_eval)]
        for x, t in batches:
            xn = _normalize(norm, x, eps)  # B,D
            err = _sigmoid(xn @ w + c) - t  # B: dL/dlogit for each token
            w -= lr * (xn.T @ err) / batch  # D
            c -= lr * float(err.mean())
            curve.append(_logistic_loss(xe @ w + c, t_eval))
        curves[norm] = curve
    return curves


@demo("wrong_axis_loss")
def wrong_axis_loss(p: LessonParams, steps: int = 200, features: int = 8) -> Group:
    """The loss curve of the same model with LayerNorm and with BatchNorm on scale-varying tokens."""
    if not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps: expected an integer >= 2, got {steps!r}")
    curves = train_wrong_axis(p.seed, features=features, steps=steps, eps=p.eps)
    chance = float(np.log(2.0))
    ln, bn = curves["layernorm"], curves["batchnorm"]
    tail = max(steps // 10, 1)
    return Group(
        line_chart(
            {"LayerNorm": ln, "BatchNorm": bn},
            height=10,
            title="evaluation loss per step (same model, same batches)",
        ),
        number_table(
            ["", "start", f"mean of last {tail}", ""],
            [
                [
                    "LayerNorm",
                    fmt(ln[0], 3),
                    fmt(float(np.mean(ln[-tail:])), 3),
                    check_mark(np.mean(ln[-tail:]) < 0.5 * chance),
                ],
                [
                    "BatchNorm",
                    fmt(bn[0], 3),
                    fmt(float(np.mean(bn[-tail:])), 3),
                    check_mark(np.mean(bn[-tail:]) < 0.5 * chance),
                ],
            ],
            caption=f"log 2 = {fmt(chance, 3)} is the loss of guessing; ✓ marks a curve that got below half of it.",
        ),
    )
