"""Demos of lesson 07: the LayerNorm Jacobian as a rank-2 projection.

For one vector x of length d, dy/dx = (1/sigma) diag(gamma) (I - P) with
P = (1/d) (1 1^T + xhat xhat^T) (:func:`microgradnorm.formulas.layer_norm_jacobian`).
Every demo takes the Jacobian from autograd (one backward pass per output, see
:func:`microgradnorm.jacobian.autograd_jacobian`) and sets it beside the closed
form, or measures one consequence of the projection structure.
"""

from __future__ import annotations

import math

import numpy as np
from rich.columns import Columns
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.jacobian import autograd_jacobian, projection_report
from microgradnorm.lessons.charts import HeatMapLegend, heat_map
from microgradnorm.lessons.demo_tools import (
    autograd_dx,
    check_mark,
    engine_forward,
    fmt,
    matrix_table,
    number_table,
    random_dy,
    random_gamma,
    random_vector,
    ratio,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.demos_core import nearest_factor
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL, close

# Above this size a matrix is drawn only as a heat map: its numbers no longer fit 60 columns.
_MAX_NUMBER_COLUMNS = 6
# Rounding in a sum of d terms of size s is at most about d · s · this (float64, with room to spare).
ROUNDING = 64 * np.finfo(float).eps


def _d2_note(d: int) -> list[Text]:
    """With d = 2, 1 and xhat span the whole plane: P = I, and at eps = 0 LayerNorm has no gradient."""
    if d != 2:
        return []
    return [
        Text(
            "d = 2: 1 and xhat span the whole plane, so P = I and (at eps = 0) dy/dx = 0: "
            "the output is ±1 whatever x is. Try --dim 4 or more.",
            style="yellow",
        )
    ]


def _cancelling_scale(x: np.ndarray, gamma: np.ndarray | None, eps: float) -> float:
    """The size of the terms that cancel in a row of J (and in dx per unit of g): rstd · |gamma| · (1 + xhat²).

    A sum that should be 0 is judged against these terms, not against the result, which can itself
    be 0 (d = 2 at eps = 0, where J is 0 up to rounding).
    """
    m = formulas.moments(x, (0,), eps)
    top = float(np.max(np.abs(gamma))) if gamma is not None else 1.0
    return float(m.rstd[0]) * top * (1.0 + float(np.max(m.xhat**2)))


def _problem(p: LessonParams, gamma: str) -> tuple[np.ndarray, np.ndarray | None]:
    if gamma not in ("random", "ones"):
        raise ValueError(f"gamma: expected 'random' or 'ones', got {gamma!r}")
    if p.dim < 2:
        raise ValueError(f"dim: the Jacobian lesson needs at least 2 features, got {p.dim}")
    x = random_vector(p.seed, p.dim)
    g = random_gamma(p.seed, p.dim) if gamma == "random" else None
    return x, g


@demo("jacobian_rows")
def jacobian_rows(p: LessonParams, gamma: str = "random") -> DemoOutput:
    """The LayerNorm Jacobian built row by row: one backward pass per output y_i."""
    x, g = _problem(p, gamma)
    j = autograd_jacobian("layernorm", x.tolist(), None if g is None else g.tolist(), None, p.eps)
    graph = get_norm("layernorm").build_graph(x.tolist(), None if g is None else g.tolist(), None, p.eps)
    parts = [
        Text(f"x = [{', '.join(fmt(v, 3) for v in x)}]"),
        Text(
            "gamma = [" + ", ".join(fmt(v, 3) for v in g) + "]" if g is not None else "gamma = 1 (no affine)",
        ),
        Text(f"eps = {p.eps:g}, d = {p.dim}: {p.dim} backward passes, one per row", style="dim"),
    ]
    if p.dim <= _MAX_NUMBER_COLUMNS:
        parts.append(matrix_table(j, title="dy/dx from autograd (row i = grad of y_i)", row_label="i\\j"))
    else:
        parts.append(heat_map(j, title="dy/dx from autograd (too wide for numbers)"))
    worst = float(np.max(np.abs(j.sum(axis=1))))
    rounding = ROUNDING * p.dim * _cancelling_scale(x, g, p.eps)
    parts.append(
        Text.assemble(
            check_mark(worst <= rounding), f" every row sums to 0 up to rounding (largest |sum| {sci(worst)})"
        )
    )
    return DemoOutput(Group(*parts), graph=graph)


@demo("jacobian_heatmap")
def jacobian_heatmap(p: LessonParams, gamma: str = "random") -> DemoOutput:
    """Heat maps of the autograd Jacobian and of (1/sigma) diag(gamma) (I - P), on one scale."""
    x, g = _problem(p, gamma)
    j_auto = autograd_jacobian("layernorm", x.tolist(), None if g is None else g.tolist(), None, p.eps)
    m = formulas.moments(x, (0,), p.eps)
    j_closed = formulas.layer_norm_jacobian(m.xhat, float(m.rstd[0]), g)
    scale = float(np.max(np.abs(j_auto))) or 1.0  # d = 2 at eps = 0: J is exactly 0, drawn all at 0
    err = float(np.max(np.abs(j_auto - j_closed)))
    ok = close(j_auto, j_closed, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)
    maps = Columns(  # side by side where they fit, one above the other where they do not
        [
            heat_map(j_auto, title="autograd", scale=scale, legend=False),
            heat_map(j_closed, title="(1/σ) diag(γ) (I − P)", scale=scale, legend=False),
        ],
        padding=(0, 4),
    )
    return DemoOutput(
        Group(
            maps,
            HeatMapLegend(scale),
            Text.assemble(
                check_mark(ok), f" max |autograd − closed form| = {sci(err)} (1/σ = {fmt(float(m.rstd[0]), 4)})"
            ),
        )
    )


@demo("projection_facts")
def projection_facts(p: LessonParams, eps: float = 0.0) -> DemoOutput:
    """P = (1/d)(1 1^T + xhat xhat^T) at the given eps: symmetric, P @ P = P, rank 2."""
    x, _ = _problem(p, "ones")
    r = projection_report(x, None, eps, seed=p.seed)
    m = formulas.moments(x, (0,), eps)
    pm = formulas.projection(m.xhat)
    svs = ", ".join(fmt(s, 4) for s in r.singular_values)
    rounding = ROUNDING * r.d
    exact = eps == 0
    lines = [
        (r.symmetric_error <= rounding, f"P is symmetric: max |P − Pᵀ| = {sci(r.symmetric_error)}"),
        (
            r.idempotent_error <= rounding
            if exact
            else math.isclose(r.idempotent_error, r.idempotent_predicted, rel_tol=1e-6),
            f"max |P @ P − P| = {sci(r.idempotent_error)}"
            + (": rounding" if exact else f", eps predicts {sci(r.idempotent_predicted)}"),
        ),
        (r.rank == 2, f"rank {r.rank}; singular values {svs}"),
        (
            math.isclose(r.xhat_norm_sq, r.d * r.var / (r.var + eps), rel_tol=1e-12),
            f"|xhat|² / d = {fmt(r.xhat_norm_sq / r.d, 8)}" + ("" if exact else " = var/(var + eps)"),
        ),
        (abs(float(np.sum(m.xhat))) <= rounding * math.sqrt(r.d), f"1 · xhat = {sci(float(np.sum(m.xhat)))}"),
    ]
    return DemoOutput(
        Group(
            *_d2_note(p.dim),
            heat_map(pm, title=f"P for d = {r.d}, eps = {eps:g}: the part of a gradient LayerNorm removes"),
            *[Text.assemble(check_mark(ok), " ", text) for ok, text in lines],
        )
    )


def _orthogonal_column(x: np.ndarray, g: np.ndarray, dy: np.ndarray, eps: float) -> dict[str, float]:
    """dx from autograd at one eps, and its parts along 1 and xhat, with what eps predicts for the radial one.

    ``rounding`` is how far from 0 a dot product of dx may be by rounding alone: a multiple of the terms that
    cancel in dx (rstd·g and its two subtracted parts), not of |dx|, which is itself 0 at d = 2 and eps = 0.
    When dx is 0 up to rounding its cosines mean nothing and are NaN (shown as a dash).
    """
    grads, _ = autograd_dx("layernorm", x, g, None, eps, dy)
    dx = grads["x"]
    m = formulas.moments(x, (0,), eps)
    gx = formulas.dxhat(dy, g)
    shrink = eps / (float(m.var[0]) + eps)
    n, nh, d = float(np.linalg.norm(dx)), float(np.linalg.norm(m.xhat)), len(x)
    rounding = ROUNDING * d * float(m.rstd[0]) * float(np.linalg.norm(gx)) * (1.0 + float(np.max(m.xhat**2)))
    zero = n <= rounding
    return {
        "|dx|": n,
        "zero": float(zero),
        "sum": float(np.sum(dx)),
        "dot": float(m.xhat @ dx),
        "dot predicted": float(m.rstd[0]) * shrink * float(m.xhat @ gx),
        "rounding": rounding * max(1.0, nh, math.sqrt(d)),
        "mean": math.nan if zero else ratio(float(np.sum(dx)), n * math.sqrt(d)),
        "radial": math.nan if zero else ratio(float(m.xhat @ dx), n * nh),
        "removed": float(np.linalg.norm(formulas.projection(m.xhat) @ gx)),
        "before mean": ratio(float(np.sum(gx)), float(np.linalg.norm(gx)) * math.sqrt(d)),
        "before radial": ratio(float(m.xhat @ gx), float(np.linalg.norm(gx)) * nh),
    }


@demo("gradient_orthogonal")
def gradient_orthogonal(p: LessonParams) -> DemoOutput:
    """dx from autograd has no component along 1 and (at eps = 0) none along xhat, at the lesson's eps and at 0."""
    x, g = _problem(p, "random")
    dy = random_dy(p.seed, p.dim)
    epsilons = (p.eps, 0.0) if p.eps > 0 else (0.0,)
    cols = [_orthogonal_column(x, g, dy, e) for e in epsilons]
    labels = [
        ("cos(γ·dy, 1), before", "before mean"),
        ("cos(γ·dy, xhat), before", "before radial"),
        ("|P (γ·dy)|, the part removed", "removed"),
        ("cos(dx, 1), after", "mean"),
        ("cos(dx, xhat), after", "radial"),
    ]
    rows = [[name, *[sci(c[key]) for c in cols]] for name, key in labels]
    caption = "— : dx is 0 up to rounding, so it has no direction" if any(c["zero"] for c in cols) else None
    table = number_table(["autograd dx, random dy", *[f"eps = {e:g}" for e in epsilons]], rows, caption=caption)
    checks = [
        (all(abs(c["sum"]) <= c["rounding"] for c in cols), "no part along 1 after, at any eps"),
        (abs(cols[-1]["dot"]) <= cols[-1]["rounding"], "no part along xhat after, at eps = 0"),
    ]
    if p.eps > 0:
        c = cols[0]
        checks.append(
            (
                abs(c["dot"] - c["dot predicted"]) <= 1e-6 * abs(c["dot predicted"]) + c["rounding"],
                f"at eps = {p.eps:g}, the radial part is what eps predicts ({sci(c['radial'])})",
            )
        )
    graph = autograd_dx("layernorm", x, g, None, p.eps, dy)[1]
    return DemoOutput(
        Group(*_d2_note(p.dim), table, *[Text.assemble(check_mark(ok), " ", t) for ok, t in checks]), graph=graph
    )


def _scale_row(x: np.ndarray, g: np.ndarray, dy: np.ndarray, eps: float, c: float) -> dict[str, float]:
    """LN(c·x) against LN(x), the gradient's size at c·x, and what eps alone predicts for both.

    LayerNorm of c·x with eps is LayerNorm of x with eps/c² (divide top and bottom by |c|), so
    any difference from "same" (or "flipped") and from "grad ratio 1" is eps's doing.
    """
    y, yc = (
        engine_forward("layernorm", x, g.tolist(), None, eps),
        engine_forward("layernorm", c * x, g.tolist(), None, eps),
    )
    dx0 = autograd_dx("layernorm", x, g, None, eps, dy)[0]["x"]
    dxc = autograd_dx("layernorm", c * x, g, None, eps, dy)[0]["x"]
    m = formulas.moments(x, (0,), eps / c**2)
    y_pred = math.copysign(1.0, c) * formulas.affine(m.xhat, g, None)
    dx_pred = formulas.dx_projection(dy, g, m.xhat, float(m.rstd[0])) / abs(c)
    base = float(np.linalg.norm(dx0))
    rounding = ROUNDING * len(x) * _cancelling_scale(x, g, eps) * float(np.linalg.norm(dy))
    return {
        "same": float(np.max(np.abs(yc - y))),
        "flipped": float(np.max(np.abs(yc + y))),
        # a ratio of two gradients that are 0 up to rounding (d = 2 at eps = 0) is noise: none is shown
        "ratio": float(np.linalg.norm(dxc)) * abs(c) / base if base > rounding else math.nan,
        "ok": bool(
            close(yc, y_pred, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)
            and close(dxc, dx_pred, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL * max(1.0, abs(1 / c)))
        ),
    }


@demo("scale_invariance")
def scale_invariance(p: LessonParams, scales: tuple[float, ...] = (0.01, 0.5, 2.0, 100.0, -1.0)) -> DemoOutput:
    """LN(c x) against LN(x) for several c, and how the input gradient scales: like 1/c."""
    x, g = _problem(p, "random")
    dy = random_dy(p.seed, p.dim)
    runs = {float(c): _scale_row(x, g, dy, p.eps, float(c)) for c in scales}
    rows = [
        [fmt(c, 4), sci(r["same"]), sci(r["flipped"]), fmt(r["ratio"], 6) if r["ratio"] == r["ratio"] else "— (dx = 0)"]
        for c, r in runs.items()
    ]
    table = number_table(
        ["c", "same", "flipped", "grad ratio"],
        rows,
        title=f"LayerNorm of c·x (eps = {p.eps:g}, d = {p.dim})",
        caption="same = max|LN(cx) − LN(x)|, flipped = max|LN(cx) + LN(x)|, "
        "grad ratio = |c|·|dx at cx| / |dx at x| (1 means dx shrinks like 1/c)",
    )
    ok = all(r["ok"] for r in runs.values())
    check = Text.assemble(
        check_mark(ok), " every gap from same/flipped and from ratio 1 is eps's: LN of c·x is LN of x with eps/c²"
    )
    return DemoOutput(Group(*_d2_note(p.dim), table, check), prediction=_scale_prediction(runs))


def _scale_prediction(runs: dict[float, dict[str, float]]) -> Prediction:
    c = max(runs)
    r = runs[c]
    factor = r["ratio"] / c  # |dx at cx| / |dx at x|
    targets = (c, 1.0, 1.0 / c)
    answer = 1 if not factor > 0 else nearest_factor(factor, targets)
    if factor != factor:  # NaN: dx is 0 up to rounding at x
        why = "At d = 2 and eps = 0, dx is 0 whatever the scale of x (see the note above the table): 0 stays 0."
    elif factor > 0 and abs(math.log(factor * c)) < math.log(2.0):  # within a factor 2 of 1/c
        why = (
            f"|dx at {c:g}x| / |dx at x| = {sci(factor)}: the output does not change, so the same upstream "
            "gradient meets a Jacobian carrying 1/sigma, and sigma grew with c."
        )
    else:  # d = 2: the only gradient left is eps's, which does not scale like 1/c
        why = (
            f"|dx at {c:g}x| / |dx at x| = {sci(factor)}, not 1/{c:g}: at d = 2 the projection removes every "
            "direction, and what gradient is left comes from eps alone (see the note above the table)."
        )
    choices = (f"it grows {c:g} times", "it stays the same", f"it shrinks {c:g} times")
    return Prediction(f"Multiply x by {c:g}. What happens to the size of dx?", choices, answer, why)


@demo("eps_effect")
def eps_effect(
    p: LessonParams,
    eps_values: tuple[float, ...] = (0.0, 1e-5, 1e-3, 0.1, 1.0),
    scale: float = 1.0,
    caption: bool = True,
) -> Group:
    """What eps > 0 does to the projection, measured beside the algebra's prediction."""
    x, _ = _problem(p, "ones")
    x = x * float(scale)
    rows, ok, any_zero = [], True, False
    var = float(formulas.moments(x, (0,), 0.0).var[0])
    dy = random_dy(p.seed, p.dim)
    for e in eps_values:
        r = projection_report(x, None, float(e), dy=dy, c=3.0)
        # rounding in xhat · dx is judged against the terms that cancel in dx (rstd · dy and its parts)
        cancelling = _cancelling_scale(x, None, float(e)) * float(np.linalg.norm(dy)) * math.sqrt(r.d)
        rounding = ROUNDING * r.d
        dx_zero = r.dx_norm <= rounding * cancelling
        any_zero |= dx_zero
        scale_dx = r.dx_norm * math.sqrt(r.xhat_norm_sq)
        radial = math.nan if dx_zero else ratio(r.xhat_dot_dx, scale_dx)
        predicted = 0.0 if dx_zero else ratio(r.xhat_dot_dx_predicted, scale_dx)
        gap = abs(r.xhat_dot_dx - r.xhat_dot_dx_predicted)
        ok &= gap <= 1e-6 * abs(r.xhat_dot_dx_predicted) + rounding * cancelling
        ok &= abs(r.idempotent_error - r.idempotent_predicted) <= 1e-6 * r.idempotent_predicted + rounding
        rows.append(
            [
                f"{float(e):g}",
                sci(float(e) / (var + float(e)), 1),
                sci(r.idempotent_error, 1),
                sci(radial, 1),
                sci(predicted, 1),
                sci(r.scale_error, 1),
            ]
        )
    note = (
        "shrink = eps/(var+eps); P²−P = max|P@P − P|; radial = the cosine between dx (closed form) and xhat, "
        "predicted = shrink·rstd·(xhat·dy) ÷ (|dx| |xhat|) (gamma = 1 here); 3x vs x = max|LN(3x) − LN(x)|"
    ) + ("; — : dx is 0 up to rounding" if any_zero else "")
    return Group(
        *_d2_note(p.dim),
        Text(f"x scaled by {float(scale):g}: var(x) = {fmt(var, 4)}, d = {p.dim}", style="bold"),
        number_table(
            ["eps", "shrink", "P²−P", "radial", "predicted", "3x vs x"], rows, caption=note if caption else None
        ),
        Text.assemble(check_mark(bool(ok)), " radial and P²−P are what the algebra predicts, in every row"),
    )
