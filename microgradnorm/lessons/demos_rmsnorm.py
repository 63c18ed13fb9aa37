"""Demos of lesson 09: RMSNorm (seeds 004 and 001).

RMSNorm divides by the root mean square and nothing else: no mean, no shift, no
beta. Its Jacobian is (1/rms) diag(gamma) (I - xhat xhat^T / d)
(:func:`microgradnorm.formulas.rms_jacobian`): only the radial half of
LayerNorm's projection. The last demo times LayerNorm and RMSNorm side by side on
the vectorized path, in one run, and reports medians.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.jacobian import autograd_jacobian
from microgradnorm.lessons.charts import bar_chart, heat_map
from microgradnorm.lessons.demo_tools import (
    autograd_dx,
    check_mark,
    engine_forward,
    fmt,
    number_table,
    random_dy,
    random_gamma,
    random_vector,
    rng_for,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, demo
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL, close

# The range seed 004 quotes for how much faster RMSNorm's forward and backward are.
SEED_CLAIM = (0.10, 0.50)


def _vector(p: LessonParams) -> np.ndarray:
    if p.dim < 2:
        raise ValueError(f"dim: this lesson needs at least 2 features, got {p.dim}")
    return random_vector(p.seed, p.dim, loc=1.5)


@demo("rms_vs_ln_forward")
def rms_vs_ln_forward(p: LessonParams) -> Group:
    """LayerNorm and RMSNorm of the same vector, and of the same vector centered first."""
    x = _vector(p)
    ln = engine_forward("layernorm", x, None, None, p.eps)
    rms = engine_forward("rmsnorm", x, None, None, p.eps)
    xc = x - x.mean()
    rms_c = engine_forward("rmsnorm", xc, None, None, p.eps)
    rows = [[str(i), fmt(x[i], 4), fmt(ln[i], 4), fmt(rms[i], 4)] for i in range(p.dim)]
    rows.append([Text("mean", style="bold"), fmt(x.mean(), 4), sci(ln.mean()), fmt(rms.mean(), 4)])
    rows.append(
        [
            Text("root mean sq", style="bold"),
            fmt(float(np.sqrt(np.mean(x * x))), 4),
            fmt(float(np.sqrt(np.mean(ln * ln))), 6),
            fmt(float(np.sqrt(np.mean(rms * rms))), 6),
        ]
    )
    return Group(
        number_table(["i", "x", "LN(x)", "RMS(x)"], rows, title=f"one vector, d = {p.dim}, eps = {p.eps:g}"),
        Text(f"max |RMS(x − mean(x)) − LN(x)| = {sci(float(np.max(np.abs(rms_c - ln))))}"),
    )


@demo("rms_gradient")
def rms_gradient(p: LessonParams, eps: float | None = None) -> DemoOutput:
    """The RMSNorm input gradient: autograd vs the closed form, and which directions it keeps."""
    e = p.eps if eps is None else eps
    x = _vector(p)
    g = random_gamma(p.seed, p.dim)
    dy = random_dy(p.seed, p.dim)
    rms_grads, graph = autograd_dx("rmsnorm", x, g, None, e, dy)
    ln_grads, _ = autograd_dx("layernorm", x, g, None, e, dy)
    m = formulas.rms_moments(x, (0,), e)
    closed = formulas.rms_dx(formulas.dxhat(dy, g), m.xhat, m.rrms, (0,))
    ln_xhat = formulas.moments(x, (0,), e).xhat
    dx_r, dx_l = rms_grads["x"], ln_grads["x"]
    rows = [
        ["|dx|", fmt(float(np.linalg.norm(dx_l)), 4), fmt(float(np.linalg.norm(dx_r)), 4)],
        ["1 · dx", sci(float(dx_l.sum())), sci(float(dx_r.sum()))],
        ["own xhat · dx", sci(float(ln_xhat @ dx_l)), sci(float(m.xhat @ dx_r))],
    ]
    ok = close(dx_r, closed, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)
    return DemoOutput(
        Group(
            number_table(
                ["autograd dx", "LayerNorm", "RMSNorm"],
                rows,
                title=f"same x, gamma, dy; d = {p.dim}, eps = {e:g}",
            ),
            Text.assemble(
                check_mark(ok),
                " RMSNorm dx: max |autograd − rrms·(g − xhat·mean(g·xhat))| = ",
                sci(float(np.max(np.abs(dx_r - closed)))),
            ),
        ),
        graph=graph,
    )


@demo("rms_jacobian_heatmap")
def rms_jacobian_heatmap(p: LessonParams) -> Group:
    """The RMSNorm Jacobian from autograd beside LayerNorm's, and the rank of what each removes."""
    x = _vector(p)
    j_rms = autograd_jacobian("rmsnorm", x.tolist(), None, None, p.eps)
    j_ln = autograd_jacobian("layernorm", x.tolist(), None, None, p.eps)
    m = formulas.rms_moments(x, (0,), p.eps)
    closed = formulas.rms_jacobian(m.xhat, float(m.rrms[0]), None)
    ones = np.ones(p.dim)
    # what each Jacobian removes: I - J / (its 1/scale factor), a projection (or nearly, for eps > 0)
    removed_rms = np.eye(p.dim) - j_rms / float(m.rrms[0])
    removed_ln = np.eye(p.dim) - j_ln / float(formulas.moments(x, (0,), p.eps).rstd[0])
    scale = float(max(np.max(np.abs(j_rms)), np.max(np.abs(j_ln))))
    rows = [
        ["max |J autograd − closed form|", sci(float(np.max(np.abs(j_rms - closed)))), ""],
        [
            "rank of the removed part",
            str(np.linalg.matrix_rank(removed_rms, tol=1e-6)),
            str(np.linalg.matrix_rank(removed_ln, tol=1e-6)),
        ],
        [
            "|J · 1|  (a shift of all inputs)",
            fmt(float(np.linalg.norm(j_rms @ ones)), 4),
            sci(float(np.linalg.norm(j_ln @ ones))),
        ],
        ["|J · x|  (a stretch of x)", sci(float(np.linalg.norm(j_rms @ x))), fmt(float(np.linalg.norm(j_ln @ x)), 4)],
    ]
    return Group(
        heat_map(j_rms, title="RMSNorm dy/dx (autograd)", scale=scale, legend=False),
        Text(""),
        heat_map(j_ln, title="LayerNorm dy/dx (autograd), same scale", scale=scale),
        number_table(["", "RMSNorm", "LayerNorm"], rows),
    )


def _median_time(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


@demo("rms_speed")
def rms_speed(p: LessonParams, rows: int = 256, features: int = 1024, repeats: int = 15) -> Group:
    """LayerNorm vs RMSNorm forward + backward on the vectorized NumPy path, timed side by side."""
    from microgradnorm import vectorized as V

    for name, v in (("rows", rows), ("features", features), ("repeats", repeats)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected a positive integer, got {v!r}")
    rng = rng_for(p.seed, 7)
    x = rng.normal(size=(rows, features))
    gamma = rng.uniform(0.5, 1.5, size=features)
    beta = rng.normal(size=features)
    dy = rng.normal(size=(rows, features))

    def ln_fwd():
        return V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy")

    def rms_fwd():
        return V.rms_norm_forward(x, gamma, p.eps, backend="numpy")

    def ln_both():
        _, cache = ln_fwd()
        return V.layer_norm_backward(dy, cache)

    def rms_both():
        _, cache = rms_fwd()
        return V.rms_norm_backward(dy, cache)

    for f in (ln_both, rms_both):  # warm up: first calls pay for allocation
        f()
    samples: dict[str, list[float]] = {"ln_f": [], "rms_f": [], "ln_b": [], "rms_b": []}
    # interleaved, so that a noisy neighbour slows both sides alike
    for _ in range(repeats):
        samples["ln_f"] += _median_time(ln_fwd, 1)
        samples["rms_f"] += _median_time(rms_fwd, 1)
        samples["ln_b"] += _median_time(ln_both, 1)
        samples["rms_b"] += _median_time(rms_both, 1)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    fwd_gain = med["ln_f"] / med["rms_f"] - 1.0
    both_gain = med["ln_b"] / med["rms_b"] - 1.0
    lo, hi = SEED_CLAIM

    def verdict(gain: float) -> str:
        return "below" if gain < lo else "above" if gain > hi else "inside"

    ms = 1e3
    chart = bar_chart(
        ["forward", "fwd + bwd"],
        {"LayerNorm ms": [med["ln_f"] * ms, med["ln_b"] * ms], "RMSNorm ms": [med["rms_f"] * ms, med["rms_b"] * ms]},
        title=f"median of {repeats} runs, x [{rows}, {features}] float64, NumPy backend",
    )
    return Group(
        chart,
        number_table(
            ["", "LN ÷ RMS", "RMS faster by", f"vs {lo:.0%}–{hi:.0%}"],
            [
                ["forward", fmt(med["ln_f"] / med["rms_f"], 3), f"{fwd_gain:+.0%}", verdict(fwd_gain)],
                ["fwd + bwd", fmt(med["ln_b"] / med["rms_b"], 3), f"{both_gain:+.0%}", verdict(both_gain)],
            ],
            caption=f"seed 004 claims RMSNorm is {lo:.0%} to {hi:.0%} faster. Measured just now on this "
            "machine, median of interleaved runs; run it again and the numbers move a little.",
        ),
    )
