"""Demos of lesson 12: numerical traps in normalization layers.

Five ways a correct formula gives a wrong number, each shown live: the one-pass
variance E[x^2] - E[x]^2 cancelling; eps placed outside the square root; a test
loss sum(y) whose input gradient is zero; float32 against float64 (and what that
does to finite differences); dividing the variance by N or by N - 1.

Two graphs here are built by hand from :class:`~microgradnorm.engine.Value`
nodes because they are deliberately *not* what the package's norms build:
LayerNorm with eps outside the square root, and with the variance divided by
N - 1.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.engine import DomainError, Value
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

# The example of the issue: four numbers whose variance is 22.5, far from zero.
CANCELLATION_X = (4.0, 7.0, 13.0, 16.0)


# ---- E[x^2] - E[x]^2 ----------------------------------------------------------------


@demo("variance_cancellation")
def variance_cancellation(
    p: LessonParams, offsets: tuple[float, ...] = (0.0, 1e3, 1e6, 1e7, 1e8, 1e9), offset: float = 1e9
) -> Group:
    """The naive and the two-pass variance of [4, 7, 13, 16] + offset in float64, and the engine's reaction."""
    base = np.array(CANCELLATION_X)
    rows = []
    for c in offsets:
        x = base + float(c)
        naive = float(formulas.naive_variance(x, (0,))[0])
        two_pass = float(formulas.variance(x - formulas.mean(x, (0,)), (0,))[0])
        rows.append([f"{float(c):g}", fmt(naive, 6), fmt(two_pass, 6)])
    x = base + float(offset)
    try:
        engine_forward("layernorm", x, None, None, p.eps, variance="naive")
        engine = Text(f"the engine built LayerNorm of [4, 7, 13, 16] + {float(offset):g} with the naive variance")
    except DomainError as exc:
        engine = Text.assemble(("DomainError: ", "bold red"), str(exc))
    return Group(
        number_table(
            ["offset", "E[x²] − E[x]²", "mean((x − mean)²)"],
            rows,
            title="variance of [4, 7, 13, 16] + offset, float64",
        ),
        Text(""),
        Text("layer_norm(x, variance='naive') at offset " + f"{float(offset):g}:", style="bold"),
        engine,
    )


# ---- eps inside or outside the square root ------------------------------------------


def layer_norm_eps_outside(xs: list[Value], eps: float) -> list[Value]:
    """xhat = (x - mean) / (sqrt(var) + eps): eps added after the square root (the trap)."""
    n = len(xs)
    mean = Value.sum(xs) * (1.0 / n)
    xshift = [x - mean for x in xs]
    var = Value.sum([s * s for s in xshift]) * (1.0 / n)
    std = var.sqrt() + eps
    return [s / std for s in xshift]


def eps_outside_grad(x: np.ndarray, dy: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(y, dL/dx) for loss = sum(y * dy) with eps outside the square root, from the engine."""
    xs = [Value(float(v)) for v in x]
    ys = layer_norm_eps_outside(xs, eps)
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    return np.array([y.data for y in ys]), np.array([v.grad for v in xs])


@demo("eps_placement")
def eps_placement(p: LessonParams, constant: float = 3.0) -> DemoOutput:
    """A constant input: eps inside sqrt(var + eps) gives a finite gradient, outside gives NaN."""
    d = p.dim
    dy = random_dy(p.seed, d)
    eps = p.eps if p.eps > 0 else 1e-5
    rows = []
    graph = None
    for name, x in (("constant", np.full(d, float(constant))), ("random", random_vector(p.seed, d))):
        grads, g = autograd_dx("layernorm", x, None, None, eps, dy)
        if graph is None:
            graph = g
        y_in = np.array([v.data for v in g["y"]])
        y_out, dx_out = eps_outside_grad(x, dy, eps)
        rows.append([name, "inside", fmt(float(np.max(np.abs(y_in))), 4), fmt(float(np.max(np.abs(grads["x"]))), 4)])
        rows.append(["", "outside", fmt(float(np.max(np.abs(y_out))), 4), _nan_aware(dx_out)])
    return DemoOutput(
        Group(
            number_table(
                ["x", "eps", "max |y|", "max |dx|"],
                rows,
                title=f"LayerNorm, d = {d}, eps = {eps:g}, loss = sum(y · dy)",
                caption="inside: sqrt(var + eps), the package's norm. outside: sqrt(var) + eps, built by hand.",
            ),
        ),
        graph=graph,
    )


def _nan_aware(a: np.ndarray) -> str:
    if np.isnan(a).any():
        return f"nan ({int(np.isnan(a).sum())} of {a.size})"
    return fmt(float(np.max(np.abs(a))), 4)


# ---- loss = sum(y) --------------------------------------------------------------------


@demo("sum_loss_hides_bugs")
def sum_loss_hides_bugs(p: LessonParams) -> Group:
    """With gamma = 1, loss = sum(y) gives dx = 0, so a backward that forgets a path still 'passes'."""
    x = random_vector(p.seed, p.dim)
    m = formulas.moments(x, (0,), p.eps)
    rows = []
    for gamma_name, gamma in (("1", None), ("random", random_gamma(p.seed, p.dim))):
        for loss_name, dy in (("sum(y)", np.ones(p.dim)), ("sum(y · dy)", random_dy(p.seed, p.dim))):
            grads, _ = autograd_dx("layernorm", x, gamma, None, p.eps, dy)
            gx = formulas.dxhat(dy, None if gamma is None else gamma)
            direct, via_mean, _ = formulas.dx_paths(gx, m.xshift, m.std, m.rstd, (0,))
            buggy = direct + via_mean  # a backward pass that forgot the variance path
            err = float(np.max(np.abs(buggy - grads["x"])))
            ok = tol.close(buggy, grads["x"], tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
            rows.append([gamma_name, loss_name, sci(float(np.max(np.abs(grads["x"]))), 1), sci(err, 1), check_mark(ok)])
    return number_table(
        ["gamma", "loss", "max |dx|", "bug's error", "passes"],
        rows,
        title="autograd dx, and a backward pass missing the variance path",
        caption="passes: the buggy gradient agrees with autograd within the closed-form tolerance.",
    )


# ---- float32 vs float64 -----------------------------------------------------------------


def _ln_loss(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> float:
    y, _ = V.layer_norm_forward(x, gamma, None, eps, backend="numpy")
    return float(np.sum(y * dy.astype(x.dtype), dtype=x.dtype))


def fd_errors(seed: int, dim: int, eps: float, steps: tuple[float, ...]) -> dict[str, list[float]]:
    """Relative error of a central finite difference dL/dx_0 at each step h, in float32 and float64.

    The reference is the closed-form gradient in float64. NaN marks a step so small
    that x + h rounds back to x in that precision.
    """
    x = random_vector(seed, dim)
    gamma = random_gamma(seed, dim)
    dy = random_dy(seed, dim)
    m = formulas.moments(x, (0,), eps)
    exact = float(formulas.dx_simplified(formulas.dxhat(dy, gamma), m.xhat, m.rstd, (0,))[0])
    out: dict[str, list[float]] = {"float32": [], "float64": []}
    for dtype in (np.float32, np.float64):
        xd, gd = x.astype(dtype), gamma.astype(dtype)
        for h in steps:
            plus, minus = xd.copy(), xd.copy()
            plus[0] += dtype(h)
            minus[0] -= dtype(h)
            step = float(plus[0]) - float(minus[0])  # the step actually taken, after rounding
            if step == 0.0:  # x + h rounded back to x: no step at all
                out[np.dtype(dtype).name].append(math.nan)
                continue
            fd = (_ln_loss(plus, gd, dy, eps) - _ln_loss(minus, gd, dy, eps)) / step
            out[np.dtype(dtype).name].append(abs(fd - exact) / abs(exact))
    return out


@demo("float_precision")
def float_precision(p: LessonParams, steps: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8)) -> Group:
    """LayerNorm in float32 against float64, and finite differences in both precisions."""
    rng = rng_for(p.seed, 40)
    x = rng.normal(0.5, 2.0, size=(64, max(p.dim, 2)))
    gamma = rng.uniform(0.5, 1.5, size=x.shape[1])
    dy = rng.normal(size=x.shape)
    y64, c64 = V.layer_norm_forward(x, gamma, None, p.eps, backend="numpy")
    dx64 = V.layer_norm_backward(dy, c64)[0]
    y32, c32 = V.layer_norm_forward(x.astype(np.float32), gamma.astype(np.float32), None, p.eps, backend="numpy")
    dx32 = V.layer_norm_backward(dy.astype(np.float32), c32)[0]
    ey = tol.normwise_error(y32, y64)[1]
    edx = tol.normwise_error(dx32, dx64)[1]
    fd = fd_errors(p.seed, max(p.dim, 2), p.eps, tuple(steps))
    return Group(
        number_table(
            ["float32 vs float64", "relative error", "within"],
            [
                ["y", sci(ey, 1), check_mark(ey <= tol.FLOAT32_RTOL)],
                ["dx", sci(edx, 1), check_mark(edx <= tol.FLOAT32_RTOL)],
            ],
            title=f"LayerNorm of x [{x.shape[0]}, {x.shape[1]}] on the vectorized path",
            caption=f"within: at most FLOAT32_RTOL = {tol.FLOAT32_RTOL:g}, the package's tolerance for float32.",
        ),
        Text(""),
        number_table(
            ["step h", "float32", "float64"],
            [[f"{h:g}", sci(a, 1), sci(b, 1)] for h, a, b in zip(steps, fd["float32"], fd["float64"])],
            title="central finite difference of dL/dx_0, relative error against the closed form",
            caption=f"— : x + h rounds back to x, no step is taken. The package checks gradients in float64 "
            f"with h = {tol.FD_STEP:g} (FD_STEP) and accepts a relative error of {tol.FD_RTOL:g} (FD_RTOL).",
        ),
    )


# ---- N or N - 1 --------------------------------------------------------------------------


def layer_norm_unbiased(xs: list[Value], eps: float) -> list[Value]:
    """LayerNorm with the variance divided by n - 1 (the sample variance), built from Values."""
    n = len(xs)
    mean = Value.sum(xs) * (1.0 / n)
    xshift = [x - mean for x in xs]
    var = Value.sum([s * s for s in xshift]) * (1.0 / (n - 1))
    rstd = (var + eps) ** -0.5
    return [s * rstd for s in xshift]


@demo("n_or_n_minus_1")
def n_or_n_minus_1(p: LessonParams, sizes: tuple[int, ...] = (2, 4, 16, 256)) -> Group:
    """Biased (÷N) and unbiased (÷(N−1)) variance: how far apart, and what mixing them does to dx."""
    rng = rng_for(p.seed, 41)
    rows = []
    for n in sizes:
        if not isinstance(n, int) or n < 2:
            raise ValueError(f"sizes: expected integers >= 2, got {n!r}")
        x = rng.normal(0.5, 2.0, size=n)
        v_n = float(np.var(x))
        v_n1 = float(np.var(x, ddof=1))
        rows.append([str(n), fmt(v_n, 4), fmt(v_n1, 4), fmt(v_n1 / v_n, 4), fmt(math.sqrt(v_n / v_n1), 4)])
    # a forward that divides by n - 1, checked against a backward formula that assumes n
    x = random_vector(p.seed, p.dim)
    dy = random_dy(p.seed, p.dim)
    xs = [Value(float(v)) for v in x]
    ys = layer_norm_unbiased(xs, p.eps)
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    auto = np.array([v.grad for v in xs])
    xhat = np.array([y.data for y in ys])
    rstd = float((np.var(x, ddof=1) + p.eps) ** -0.5)
    assumed = formulas.dx_simplified(dy, xhat, rstd, (0,))  # the ÷n backward, fed the ÷(n−1) forward
    err = tol.normwise_error(assumed, auto)[1]
    return Group(
        number_table(
            ["n", "var ÷ n", "var ÷ (n−1)", "ratio", "xhat shrinks"],
            rows,
            title="one random sample per size",
            caption="xhat shrinks: the factor sqrt(var÷n / var÷(n−1)) by which xhat changes if the "
            "forward pass switches to n − 1.",
        ),
        Text(""),
        Text.assemble(
            check_mark(err <= tol.CLOSED_FORM_RTOL),
            f" forward ÷(n−1), backward formula for ÷n, d = {p.dim}: relative error of dx {sci(err, 1)}",
        ),
    )
