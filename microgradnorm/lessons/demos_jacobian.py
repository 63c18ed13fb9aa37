"""Demos of lesson 07: the LayerNorm Jacobian as a rank-2 projection (seed 001).

For one vector x of length d, dy/dx = (1/sigma) diag(gamma) (I - P) with
P = (1/d) (1 1^T + xhat xhat^T) (:func:`microgradnorm.formulas.layer_norm_jacobian`).
Every demo takes the Jacobian from autograd (one backward pass per output, see
:func:`microgradnorm.jacobian.autograd_jacobian`) and sets it beside the closed
form, or measures one consequence of the projection structure.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.jacobian import autograd_jacobian, projection_report
from microgradnorm.lessons.charts import heat_map
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
from microgradnorm.lessons.demos import DemoOutput, LessonParams, demo
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL, close

# Above this size a matrix is drawn only as a heat map: its numbers no longer fit 60 columns.
_MAX_NUMBER_COLUMNS = 6


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
    row_sums = j.sum(axis=1)
    parts.append(
        Text(f"largest |row sum| = {sci(float(np.max(np.abs(row_sums))))}  (each row of J sums to ~0)", style="dim")
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
    return DemoOutput(
        Group(
            heat_map(j_auto, title="autograd: row i from y_i.backward()", scale=scale, legend=False),
            Text(""),
            heat_map(j_closed, title="closed form: (1/σ) diag(γ) (I − P)", scale=scale),
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
    table = number_table(
        ["property", "measured", "exact if eps = 0"],
        [
            ["max |P − Pᵀ|", sci(r.symmetric_error), "0"],
            ["max |P @ P − P|", sci(r.idempotent_error), "0"],
            ["  predicted from eps", sci(r.idempotent_predicted), ""],
            ["rank of P (numpy)", str(r.rank), "2"],
            ["|xhat|² / d", fmt(r.xhat_norm_sq / r.d, 8), "1"],
            ["1 · xhat", sci(float(np.sum(m.xhat))), "0"],
        ],
        title=f"P for d = {r.d}, eps = {eps:g}",
    )
    return DemoOutput(
        Group(
            *_d2_note(p.dim),
            heat_map(pm, title="P: the part of a gradient that LayerNorm removes"),
            table,
            Text(f"singular values of P: {svs}", overflow="fold"),
        )
    )


@demo("gradient_orthogonal")
def gradient_orthogonal(p: LessonParams, eps: float | None = None) -> DemoOutput:
    """dx from autograd has no component along 1 and (at eps = 0) none along xhat."""
    e = p.eps if eps is None else eps
    x, g = _problem(p, "random")
    dy = random_dy(p.seed, p.dim)
    grads, graph = autograd_dx("layernorm", x, g, None, e, dy)
    dx = grads["x"]
    m = formulas.moments(x, (0,), e)
    gx = formulas.dxhat(dy, g)
    removed = formulas.projection(m.xhat) @ gx
    n = float(np.linalg.norm(dx))
    rows = [
        ["|dx|", fmt(n, 4), ""],
        ["1 · dx  (mean direction)", sci(float(np.sum(dx))), sci(ratio(float(np.sum(dx)), n))],
        ["xhat · dx  (radial direction)", sci(float(m.xhat @ dx)), sci(ratio(float(m.xhat @ dx), n))],
        ["1 · (γ·dy), before LayerNorm", fmt(float(np.sum(gx)), 4), ""],
        ["xhat · (γ·dy), before", fmt(float(m.xhat @ gx), 4), ""],
        ["|P (γ·dy)|, the part removed", fmt(float(np.linalg.norm(removed)), 4), ""],
    ]
    table = number_table(
        ["quantity", "value", "÷ |dx|"],
        rows,
        title=f"autograd dx for a random dy, d = {p.dim}, eps = {e:g}",
    )
    return DemoOutput(Group(*_d2_note(p.dim), table), graph=graph)


@demo("scale_invariance")
def scale_invariance(p: LessonParams, scales: tuple[float, ...] = (0.01, 0.5, 2.0, 100.0, -1.0)) -> DemoOutput:
    """LN(c x) against LN(x) for several c, and how the input gradient scales: like 1/c."""
    x, g = _problem(p, "random")
    dy = random_dy(p.seed, p.dim)
    y = engine_forward("layernorm", x, g.tolist(), None, p.eps)
    dx0 = autograd_dx("layernorm", x, g, None, p.eps, dy)[0]["x"]
    base = float(np.linalg.norm(dx0))  # 0 for d = 2 at eps = 0, where y does not depend on x
    rows = []
    for c in scales:
        c = float(c)
        yc = engine_forward("layernorm", c * x, g.tolist(), None, p.eps)
        dxc = autograd_dx("layernorm", c * x, g, None, p.eps, dy)[0]["x"]
        ratio = fmt(float(np.linalg.norm(dxc) * abs(c) / base), 6) if base > 0 else "— (dx = 0)"
        rows.append([fmt(c, 4), sci(float(np.max(np.abs(yc - y)))), sci(float(np.max(np.abs(yc + y)))), ratio])
    return number_table(
        ["c", "same", "flipped", "grad ratio"],
        rows,
        title=f"LayerNorm of c·x (eps = {p.eps:g}, d = {p.dim})",
        caption="same = max|LN(cx) − LN(x)|, flipped = max|LN(cx) + LN(x)|, "
        "grad ratio = |c|·|dx at cx| / |dx at x| (1 means dx shrinks like 1/c)",
    )


@demo("eps_effect")
def eps_effect(
    p: LessonParams, eps_values: tuple[float, ...] = (0.0, 1e-5, 1e-3, 0.1, 1.0), scale: float = 1.0
) -> Group:
    """What eps > 0 does to the projection, measured beside the algebra's prediction."""
    x, _ = _problem(p, "ones")
    x = x * float(scale)
    rows = []
    var = float(formulas.moments(x, (0,), 0.0).var[0])
    dy = random_dy(p.seed, p.dim)
    for e in eps_values:
        e = float(e)
        r = projection_report(x, None, e, dy=dy, c=3.0)
        rows.append(
            [
                f"{e:g}",
                sci(e / (var + e), 1),
                sci(r.idempotent_error, 1),
                sci(ratio(r.xhat_dot_dx, r.dx_norm * math.sqrt(r.xhat_norm_sq)), 1),
                sci(ratio(r.xhat_dot_dx_predicted, r.dx_norm * math.sqrt(r.xhat_norm_sq)), 1),
                sci(r.scale_error, 1),
            ]
        )
    return Group(
        *_d2_note(p.dim),
        Text(f"x scaled by {float(scale):g}: var(x) = {fmt(var, 4)}, d = {p.dim}", style="bold"),
        number_table(
            ["eps", "shrink", "P²−P", "radial", "predicted", "3x vs x"],
            rows,
            caption="shrink = eps/(var+eps); P²−P = max|P@P − P|; radial = the cosine between dx "
            "(closed form) and xhat, predicted = shrink·rstd·(xhat·dy) ÷ (|dx| |xhat|); "
            "3x vs x = max|LN(3x) − LN(x)|",
        ),
    )
