"""Demos of lesson 07: the LayerNorm Jacobian as a rank-2 projection.

For one vector x of length d, dy/dx = (1/std) diag(gamma) (I - P) with
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
from microgradnorm.drawing.charts import HeatMapLegend, heat_map
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import cjk_text
from microgradnorm.jacobian import autograd_jacobian, projection_report
from microgradnorm.lessons.demo_tools import (
    agree,
    autograd_dx,
    dim_note,
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
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL
from microgradnorm.verdicts import (
    Checks,
    above,
    all_of,
    at_most,
    below,
    claim,
    close_to,
    closest,
    exactly,
    first_holding,
    within,
)

# Above this size a matrix is drawn only as a heat map: its numbers no longer fit 60 columns.
_MAX_NUMBER_COLUMNS = 6
# Rounding in a sum of d terms of size s is at most about d · s · this (float64, with room to spare).
ROUNDING = 64 * np.finfo(float).eps
RANK_RTOL = 1e3 * np.finfo(float).eps  # a singular value below this share of the largest is rounding


def _d2_note(d: int) -> list[Text]:
    """With d = 2, 1 and xhat span the whole plane: P = I, and at eps = 0 LayerNorm has no gradient."""
    if d != 2:
        return []
    return [
        cjk_text(
            _(
                "d = 2: 1 and xhat span the whole plane, so P = I and (at eps = 0) dy/dx = 0: "
                "the output is ±1 whatever x is. Try --dim 4 or more."
            ),
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
        raise ValueError(_("gamma: expected 'random' or 'ones', got {given!r}").format(given=gamma))
    if p.dim < 2:
        raise ValueError(_("dim: the Jacobian lesson needs at least 2 features, got {dim}").format(dim=p.dim))
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
            "gamma = [" + ", ".join(fmt(v, 3) for v in g) + "]" if g is not None else _("gamma = 1 (no affine)"),
        ),
        dim_note(_("eps = {eps}, d = {d}: {d} backward passes, one per row").format(eps=f"{p.eps:g}", d=p.dim)),
    ]
    if p.dim <= _MAX_NUMBER_COLUMNS:
        parts.append(matrix_table(j, title=_("dy/dx from autograd (row i = grad of y_i)"), row_label="i\\j"))
    else:
        parts.append(heat_map(j, title=_("dy/dx from autograd (too wide for numbers)")))
    worst = float(np.max(np.abs(j.sum(axis=1))))
    rounding = ROUNDING * p.dim * _cancelling_scale(x, g, p.eps)
    parts.append(
        claim(
            at_most(worst, rounding, "largest |row sum| of J"),
            _("every row sums to 0 up to rounding (largest |sum| {worst})").format(worst=sci(worst)),
        )
    )
    why = _("The largest |row sum| is {worst}, rounding: the rows of this J add up to 0.").format(worst=sci(worst))
    row0 = float(j.sum(axis=1)[0])
    near = closest(row0, (0.0, 1.0, float(g[0]) if g is not None else 1.0), "row 0's sum")
    zero = at_most(worst, rounding, "largest |row sum| of J")
    not_zero = above(worst, rounding, "largest |row sum| of J")
    evidence = (zero, not_zero & near[1], not_zero & near[2])
    prediction = Prediction.from_evidence(
        _("Each row of J is how y_i reacts to every x_j. What will a row add up to?"),
        ("0", "1", _("gamma_i, the row's scale")),
        why,
        evidence,
    )
    return DemoOutput(Group(*parts), graph=graph, prediction=prediction)


@demo("jacobian_heatmap")
def jacobian_heatmap(p: LessonParams, gamma: str = "random") -> DemoOutput:
    """Heat maps of the autograd Jacobian and of (1/std) diag(gamma) (I - P), on one scale."""
    x, g = _problem(p, gamma)
    j_auto = autograd_jacobian("layernorm", x.tolist(), None if g is None else g.tolist(), None, p.eps)
    m = formulas.moments(x, (0,), p.eps)
    j_closed = formulas.layer_norm_jacobian(m.xhat, float(m.rstd[0]), g)
    scale = float(np.max(np.abs(j_auto))) or 1.0  # d = 2 at eps = 0: J is exactly 0, drawn all at 0
    err = float(np.max(np.abs(j_auto - j_closed)))
    ok = agree(j_auto, j_closed, what="J: autograd vs closed form")
    maps = Columns(  # side by side where they fit, one above the other where they do not
        [
            heat_map(j_auto, title=pgettext("heat map title", "autograd"), scale=scale, legend=False),
            heat_map(j_closed, title="diag(γ)(I − P)/std", scale=scale, legend=False),
        ],
        padding=(0, 4),
    )
    return DemoOutput(
        Group(
            maps,
            HeatMapLegend(scale),
            claim(
                ok,
                _("max |autograd − closed form| = {error} (1/std = {rstd})").format(
                    error=sci(err), rstd=fmt(float(m.rstd[0]), 4)
                ),
            ),
            *_shape_claims(j_auto, m.xhat, g, float(m.rstd[0])),
        )
    )


def _shape_claims(j: np.ndarray, xhat: np.ndarray, gamma: np.ndarray | None, rstd: float) -> list[Text]:
    """Whether J is symmetric, and its rank, measured on the autograd J against the same facts of I − P.

    A singular value counts when it is above the rounding of J's entries, whose terms are of size
    rstd·|gamma| (``RANK_RTOL`` of that, times d);
    ``I − P`` is rank d − 2 at eps = 0 and d − 1 at eps > 0, where its xhat direction keeps a singular
    value of shrink = eps / (var + eps), which a very small eps can push under that line.
    """
    d = len(xhat)
    size = rstd * (1.0 if gamma is None else float(np.max(np.abs(gamma))))
    tolerance = RANK_RTOL * d * size
    rank = int(np.linalg.matrix_rank(j, tol=tolerance))
    i_minus_p = np.eye(d) - formulas.projection(xhat)
    svals = np.linalg.svd(i_minus_p, compute_uv=False)
    expected = int(np.sum(svals > RANK_RTOL * d)) if gamma is None or np.all(gamma != 0) else rank
    asym = float(np.max(np.abs(j - j.T)))
    lines = [
        claim(
            exactly(rank, expected, "rank of J vs rank of I − P"),
            _("rank of J: {rank} of {d}, as I − P (cut at {tol})").format(rank=rank, d=d, tol=sci(tolerance)),
        )
    ]
    if asym > tolerance:
        text = _("J ≠ Jᵀ: max |J − Jᵀ| = {asym} (gamma scales rows, not columns)")
        fact = above(asym, tolerance, "max |J − Jᵀ|")
    else:
        text = _("J = Jᵀ here, up to rounding: max |J − Jᵀ| = {asym}")
        fact = at_most(asym, tolerance, "max |J − Jᵀ|")
    lines.append(claim(fact, text.format(asym=sci(asym))))
    return lines


@demo("projection_facts")
def projection_facts(p: LessonParams, eps: float = 0.0) -> DemoOutput:
    """P = (1/d)(1 1^T + xhat xhat^T) at the given eps: symmetric, P @ P = P, rank 2."""
    x, _gamma = _problem(p, "ones")
    r = projection_report(x, None, eps, seed=p.seed)
    m = formulas.moments(x, (0,), eps)
    pm = formulas.projection(m.xhat)
    svs = ", ".join(fmt(s, 4) for s in r.singular_values)
    rounding = ROUNDING * r.d
    exact = eps == 0
    idempotent = sci(r.idempotent_error)
    lines = [
        claim(
            at_most(r.symmetric_error, rounding, "max |P − Pᵀ|"),
            _("P is symmetric: max |P − Pᵀ| = {error}").format(error=sci(r.symmetric_error)),
        ),
        claim(
            at_most(r.idempotent_error, rounding, "max |P·P − P|")
            if exact
            else within(r.idempotent_error, r.idempotent_predicted, 1e-6, "max |P·P − P| vs eps's prediction"),
            _("max |P @ P − P| = {error}: rounding").format(error=idempotent)
            if exact
            else _("max |P @ P − P| = {error}, eps predicts {predicted}").format(
                error=idempotent, predicted=sci(r.idempotent_predicted)
            ),
        ),
        claim(
            exactly(r.rank, 2, "rank of P"), _("rank {rank}; singular values {values}").format(rank=r.rank, values=svs)
        ),
        claim(
            within(r.xhat_norm_sq, r.d * r.var / (r.var + eps), 1e-12, "|xhat|² vs d·var/(var + eps)"),
            f"|xhat|² / d = {fmt(r.xhat_norm_sq / r.d, 8)}" + ("" if exact else " = var/(var + eps)"),
        ),
        claim(
            at_most(abs(float(np.sum(m.xhat))), rounding * math.sqrt(r.d), "|1 · xhat|"),
            f"1 · xhat = {sci(float(np.sum(m.xhat)))}",
        ),
    ]
    title = _("P for d = {d}, eps = {eps}: the part of a gradient LayerNorm removes").format(d=r.d, eps=f"{eps:g}")
    return DemoOutput(Group(*_d2_note(p.dim), heat_map(pm, title=title), *lines))


def _orthogonal_column(x: np.ndarray, g: np.ndarray, dy: np.ndarray, eps: float) -> dict[str, float]:
    """dx from autograd at one eps, and its parts along 1 and xhat, with what eps predicts for the radial one.

    ``rounding`` is how far from 0 a dot product of dx may be by rounding alone: a multiple of the terms that
    cancel in dx (rstd·g and its two subtracted parts), not of |dx|, which is itself 0 at d = 2 and eps = 0.
    When dx is 0 up to rounding its cosines mean nothing and are NaN (shown as a dash).
    """
    grads, _graph = autograd_dx("layernorm", x, g, None, eps, dy)
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
        "signal": float(np.linalg.norm(gx)),
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
        (_("cos(γ·dy, 1), before"), "before mean"),
        (_("cos(γ·dy, xhat), before"), "before radial"),
        (_("|γ·dy|, the whole signal"), "signal"),
        (_("|P (γ·dy)|, the part removed"), "removed"),
        (_("cos(dx, 1), after"), "mean"),
        (_("cos(dx, xhat), after"), "radial"),
    ]
    rows = [[name, *[sci(c[key]) for c in cols]] for name, key in labels]
    caption = _("— : dx is 0 up to rounding, so it has no direction") if any(c["zero"] for c in cols) else None
    header = _("autograd dx, random dy")
    table = number_table([header, *[f"eps = {e:g}" for e in epsilons]], rows, caption=caption)
    checks = [
        claim(
            all_of(*(at_most(abs(c["sum"]), c["rounding"], "|Σ dx_i|") for c in cols)),
            _("no part along 1 after, at each eps shown"),
        ),
        claim(
            at_most(abs(cols[-1]["dot"]), cols[-1]["rounding"], "|xhat · dx| at eps = 0"),
            _("no part along xhat after, at eps = 0"),
        ),
    ]
    if p.eps > 0:
        c = cols[0]
        checks.append(
            claim(
                at_most(
                    abs(c["dot"] - c["dot predicted"]),
                    1e-6 * abs(c["dot predicted"]) + c["rounding"],
                    "|xhat · dx − eps's prediction|",
                ),
                _("at eps = {eps}, the radial part is what eps predicts ({radial})").format(
                    eps=f"{p.eps:g}", radial=sci(c["radial"])
                ),
            )
        )
    graph = autograd_dx("layernorm", x, g, None, p.eps, dy)[1]
    return DemoOutput(Group(*_d2_note(p.dim), table, *checks), graph=graph)


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
        "ok": agree(yc, y_pred, what=f"c = {c:g}: LN(cx) vs LN_eps/c²(x)")
        & close_to(dxc, dx_pred, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL * max(1.0, abs(1 / c)), f"c = {c:g}: dx at cx"),
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
    # Translators: the column names "same", "flipped" and "grad ratio" recur in the caption and the claim below
    headers = [pgettext("LN(cx) table", "same"), pgettext("LN(cx) table", "flipped"), _("grad ratio")]
    table = number_table(
        ["c", *headers],
        rows,
        title=_("LayerNorm of c·x (eps = {eps}, d = {d})").format(eps=f"{p.eps:g}", d=p.dim),
        caption=_(
            "same = max|LN(cx) − LN(x)|, flipped = max|LN(cx) + LN(x)|, "
            "grad ratio = |c|·|dx at cx| / |dx at x| (1 means dx shrinks like 1/|c|)"
        ),
    )
    ok = all_of(*(r["ok"] for r in runs.values()))
    check = claim(ok, _("every gap from same/flipped and from ratio 1 is eps's: LN of c·x is LN of x with eps/c²"))
    return DemoOutput(Group(*_d2_note(p.dim), table, check), prediction=_scale_prediction(runs, p.dim))


# a factor the question names is the answer only within the precision the why prints it to (3 digits)
SCALE_ANSWER_RTOL = 5e-3


def _scale_prediction(runs: dict[float, dict[str, float]], dim: int) -> Prediction:
    c = max(runs)
    r = runs[c]
    factor = r["ratio"] / c  # |dx at cx| / |dx at x|
    targets = (c, 1.0, 1.0 / c)
    what = "|dx at cx| ÷ |dx at x|: |factor ÷ {t} − 1|"
    # NaN: dx is 0 up to rounding at x, at every scale; 0 stays 0, which is "the same"
    off = [abs(factor / t - 1.0) if factor == factor else (0.0 if t == 1.0 else math.inf) for t in targets]
    evidence = (
        *(at_most(o, SCALE_ANSWER_RTOL, what.format(t=f"{t:g}")) for o, t in zip(off, targets)),
        above(min(off), SCALE_ANSWER_RTOL, "the nearest named factor's miss"),
    )
    answer = first_holding(evidence)
    if factor != factor:
        why = _("At d = 2 and eps = 0, dx is 0 whatever the scale of x (see the note above the table): 0 stays 0.")
    elif answer == 2:
        why = _(
            "`|dx at {c}x| / |dx at x|` = {ratio}: the output does not change, so the same upstream "
            "gradient meets a Jacobian carrying 1/std, and std grew with c."
        ).format(c=f"{c:g}", ratio=sci(factor))
    elif dim == 2:
        why = _(
            "`|dx at {c}x| / |dx at x|` = {ratio}, not 1/{c}: at d = 2 the projection removes every "
            "direction, and what gradient is left comes from eps alone (see the note above the table)."
        ).format(c=f"{c:g}", ratio=sci(factor))
    else:
        why = _(
            "`|dx at {c}x| / |dx at x|` = {ratio}, not 1/{c}: eps is not small beside the variance of x, so "
            "std = sqrt(var + eps) does not grow in proportion to c."
        ).format(c=f"{c:g}", ratio=sci(factor))
    times = f"{c:g}"
    choices = (
        _("it grows {c} times").format(c=times),
        _("it stays the same"),
        _("it shrinks to 1/{c} of its size").format(c=times),
        _("it changes by some other factor"),
    )
    return Prediction(
        _("Multiply x by {c}. What happens to the size of dx?").format(c=times), choices, answer, why, evidence
    )


def _eps_row(x: np.ndarray, dy: np.ndarray, eps: float, var: float) -> tuple[list[str], Checks, bool]:
    """One row of :func:`eps_effect`: the measurements at ``eps``, whether they match the algebra, whether dx is 0."""
    r = projection_report(x, None, eps, dy=dy, c=3.0)
    # rounding in xhat · dx is judged against the terms that cancel in dx (rstd · dy and its parts)
    cancelling = _cancelling_scale(x, None, eps) * float(np.linalg.norm(dy)) * math.sqrt(r.d)
    rounding = ROUNDING * r.d
    dx_zero = r.dx_norm <= rounding * cancelling
    scale_dx = r.dx_norm * math.sqrt(r.xhat_norm_sq)
    radial = math.nan if dx_zero else ratio(r.xhat_dot_dx, scale_dx)
    predicted = 0.0 if dx_zero else ratio(r.xhat_dot_dx_predicted, scale_dx)
    gap = abs(r.xhat_dot_dx - r.xhat_dot_dx_predicted)
    ok = at_most(gap, 1e-6 * abs(r.xhat_dot_dx_predicted) + rounding * cancelling, f"eps {eps:g}: |radial − predicted|")
    ok &= at_most(
        abs(r.idempotent_error - r.idempotent_predicted),
        1e-6 * r.idempotent_predicted + rounding,
        f"eps {eps:g}: |P²−P − predicted|",
    )
    row = [f"{eps:g}", sci(eps / (var + eps), 1), sci(r.idempotent_error, 1)]
    row += [sci(radial, 1), sci(predicted, 1), sci(r.scale_error, 1)]
    return row, ok, bool(dx_zero)


def _eps_note(any_zero: bool) -> str:
    """The caption of :func:`eps_effect`'s table: what each column means."""
    # Translators: "radial", "predicted" and "3x vs x" are the column names of the table above (translate them
    # as you did there); "shrink" is a quantity the lesson names in its formulas and stays as it is
    note = _(
        "shrink = eps/(var+eps); P²−P = max|P@P − P|; radial = the cosine between dx (closed form) and xhat, "
        "predicted = shrink·rstd·(xhat·dy) ÷ `(|dx| |xhat|)` (gamma = 1 here); 3x vs x = max|LN(3x) − LN(x)|"
    )
    if any_zero:  # one more entry of the same list of definitions
        note += pgettext("chart notes separator", "; ") + _("— : dx is 0 up to rounding")
    return note


@demo("eps_effect")
def eps_effect(
    p: LessonParams,
    eps_values: tuple[float, ...] = (0.0, 1e-5, 1e-3, 0.1, 1.0),
    scale: float = 1.0,
    caption: bool = True,
    ask: bool = False,
) -> DemoOutput:
    """What eps > 0 does to the projection, measured beside the algebra's prediction.

    ``ask`` first asks what becomes of shrink at eps = 1e-3 when x is scaled by ``scale``.
    """
    x, _gamma = _problem(p, "ones")
    x = x * float(scale)
    var = float(formulas.moments(x, (0,), 0.0).var[0])
    dy = random_dy(p.seed, p.dim)
    measured = [_eps_row(x, dy, float(e), var) for e in eps_values]
    ok = all_of(*(row_ok for _row, row_ok, _zero in measured))
    headers = [
        "eps",
        "shrink",  # a quantity the lesson names in its formulas: kept as written, like eps
        "P²−P",
        pgettext("eps table", "radial"),
        pgettext("eps table", "predicted"),
        pgettext("eps table", "3x vs x"),
    ]
    title = _("x scaled by {scale}: var(x) = {var}, d = {d}").format(
        scale=f"{float(scale):g}", var=fmt(var, 4), d=p.dim
    )
    note = _eps_note(any(zero for _row, _ok, zero in measured)) if caption else None
    return DemoOutput(
        Group(
            *_d2_note(p.dim),
            cjk_text(title, style="bold"),
            number_table(headers, [row for row, _ok, _zero in measured], caption=note),
            claim(ok, _("radial and P²−P are what the algebra predicts, in every row")),
        ),
        prediction=_shrink_prediction(var, float(scale)) if ask else None,
    )


def _shrink_prediction(var: float, scale: float, eps: float = 1e-3) -> Prediction:
    """shrink = eps / (var + eps) for x scaled by ``scale`` (var is already the scaled one) against unscaled."""
    before = eps / (var / scale**2 + eps)
    after = eps / (var + eps)
    what = "shrink after ÷ shrink before"
    change = after / before
    evidence = (above(change, 1 + 1e-9, what), within(change, 1.0, 1e-9, what), below(change, 1 - 1e-9, what))
    why = _("At eps = {eps}: shrink = eps / (var + eps) went from {before} to {after}; eps stayed, var moved.").format(
        eps=f"{eps:g}", before=fmt(before, 3), after=fmt(after, 3)
    )
    question = _("Scale x by {scale} and keep eps = {eps}. What does shrink do?").format(
        scale=f"{scale:g}", eps=f"{eps:g}"
    )
    return Prediction.from_evidence(question, (_("it grows"), _("it stays the same"), _("it falls")), why, evidence)
