"""Demos of lesson 08: BatchNorm.

BatchNorm is LayerNorm's formulas applied along another axis: one statistic per
column of an [N, D] batch, or per channel of [N, C, H, W] over N, H and W. The
demos build it from scalar nodes, read its gradients off the graph, and set them
beside the closed forms of :mod:`microgradnorm.formulas`, including a form of
dX that circulates in tutorials and gives the variance a second, bogus route
through the mean (a slip this lesson shows live), and the cube figure of which
values each norm pools (:mod:`microgradnorm.lessons.norm_axes`).
"""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import CJKText, cjk_text
from microgradnorm.lessons.demo_tools import (
    agree,
    autograd_dx,
    closed_paths,
    dim_note,
    engine_forward,
    fmt,
    index_rows,
    maxabs,
    number_table,
    path_label,
    random_dy,
    random_gamma,
    rng_for,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.norm_axes import LAYOUTS, axes_figure, axes_panels, group_ids, moved_by_one, poolings
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL, DISPLAY_RTOL
from microgradnorm.verdicts import (
    Check,
    above,
    at_least,
    at_most,
    cancels,
    claim,
    close_to,
    differs,
    exactly,
)

_DEFAULT_BATCH = 4


def _batch(p: LessonParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X [N, D], gamma [D], beta [D], dy [N, D] from the lesson's seed."""
    n = p.batch or _DEFAULT_BATCH
    if n < 2:
        raise ValueError(
            _("batch: BatchNorm over a batch of {n} normalizes every column to 0; use --batch 2 or more").format(n=n)
        )
    x = rng_for(p.seed, 0).normal(0.5, 2.0, size=(n, p.dim))
    gamma = random_gamma(p.seed, p.dim)
    beta = rng_for(p.seed, 3).normal(size=p.dim)
    dy = random_dy(p.seed, (n, p.dim))
    return x, gamma, beta, dy


def dx_with_mean_slip(dxhat: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    """dL/dX of BatchNorm [N, d] with a slip that is easy to make included.

    It takes two routes from X_ij to the variance: the direct one,
    d var / d X_ij = (2/m)(X_ij - mean), and a second one through the mean, where
    it writes d var / d mean = -(2/m)(X_ij - mean). But the variance depends on
    the mean through every element of the column: d var / d mean =
    -(2/m) sum_k (X_kj - mean) = 0. Keeping the bogus term makes
    d var / d X_ij = (2/m^2)(m - 1)(X_ij - mean): the variance path comes out
    (m - 1)/m times too small. Everything else is the correct chain rule, reused
    from :mod:`microgradnorm.formulas`.
    """
    axes = (0,)
    m = x.shape[0]
    mo = formulas.moments(x, axes, eps)
    direct, via_mean, _via_var = formulas.dx_paths(dxhat, mo.xshift, mo.std, mo.rstd, axes)
    dvar_dx_direct = (2.0 / m) * mo.xshift
    dvar_dmean_slip = -(2.0 / m) * mo.xshift  # should be -(2/m) * sum over the column = 0
    dvar_dx_slip = dvar_dx_direct + dvar_dmean_slip * (1.0 / m)
    return direct + via_mean + formulas.dvar(dxhat, mo.xshift, mo.std, axes) * dvar_dx_slip


AXES_ROWS, AXES_COLUMNS = 6, 4  # the most rows and columns of a batch a table prints (fits 60 columns)


def _corner_note(n: int, d: int) -> list[CJKText]:
    """The dim line under a table that shows only the corner of an [n, d] batch (none when it shows all)."""
    shown_n, shown_d = min(n, AXES_ROWS), min(d, AXES_COLUMNS)
    if (shown_n, shown_d) == (n, d):
        return []
    note = _("(the first {rows} of {n} rows and {columns} of {d} columns shown; sums, statistics and checks cover all)")
    return [dim_note(note.format(rows=shown_n, n=n, columns=shown_d, d=d))]


@demo("bn_axes")
def bn_axes(p: LessonParams) -> Group:
    """Which axis BatchNorm reduces for X [N, D], beside LayerNorm: the engine's statistics and NumPy's."""
    x, *_others = _batch(p)
    n, d = x.shape
    bn, ln = get_norm("batchnorm"), get_norm("layernorm")
    graph = bn.build_graph(x.tolist(), None, None, p.eps)
    ln_graph = ln.build_graph(x.tolist(), None, None, p.eps)
    col_mean = np.array([v.data for v in graph["mean"]])
    col_var = np.array([v.data for v in graph["var"]])
    row_mean = np.array([v.data for v in ln_graph["mean"]])
    shown_n, shown_d = min(n, AXES_ROWS), min(d, AXES_COLUMNS)  # the corner that fits 60 columns
    headers = [pgettext("demo table header", "row")] + [f"x[:,{j}]" for j in range(shown_d)]
    headers.append(pgettext("demo table header", "LN mean"))
    rows = [[str(i)] + [fmt(v, 3) for v in x[i, :shown_d]] + [fmt(row_mean[i], 3)] for i in range(shown_n)]
    for name, stat in (
        (pgettext("demo table row", "BN mean"), col_mean),
        (pgettext("demo table row", "BN var"), col_var),
    ):
        rows.append([Text(name, style="bold")] + [fmt(v, 3) for v in stat[:shown_d]] + [""])
    return Group(
        number_table(headers, rows, title=_("X [{n}, {d}]: one BatchNorm statistic per column").format(n=n, d=d)),
        *_corner_note(n, d),
        claim(
            agree(col_mean, x.mean(axis=0), what="BN mean vs x.mean(axis=0)"),
            _("BN mean: NumPy's x.mean(axis=0), down each column"),
        ),
        claim(agree(col_var, x.var(axis=0), what="BN var vs x.var(axis=0)"), _("BN var: x.var(axis=0), divided by N")),
        claim(
            agree(row_mean, x.mean(axis=1), what="LN mean vs x.mean(axis=1)"),
            _("LN mean: x.mean(axis=1), along each row"),
        ),
        cjk_text(
            # Translators: {bn} and {ln} are tuples of axes, e.g. (0,) and (1,)
            _("registry axes for [N, d]: BatchNorm {bn}, LayerNorm {ln}").format(
                bn=bn.axes((n, d)), ln=ln.axes((n, d))
            ),
            style="dim",
        ),
    )


@demo("norm_axes_cube")
def norm_axes_cube(p: LessonParams, layout: str = "images") -> DemoOutput:
    """The cube figure: which values share one statistic in BatchNorm, LayerNorm, GroupNorm or RMSNorm."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, got {layout!r}")
    lay = LAYOUTS[layout]
    x = rng_for(p.seed, 5).normal(size=lay.shape)
    wrong = 0  # (value moved, output) pairs where "moves" disagrees with "in the same group", over every pooling
    for pooling in poolings(lay):
        ids = group_ids(pooling, lay.shape).reshape(-1)
        same = ids[:, None] == ids[None, :]
        wrong += int(np.sum(moved_by_one(pooling, x) != same))
    return DemoOutput(
        Group(
            axes_panels(lay),
            claim(
                exactly(wrong, 0, "outputs that move outside their value's group, or stay inside it"),
                _(
                    "changing any one of the {n} values moves exactly the outputs of its own group "
                    "(the vectorized forward pass, one value at a time)"
                ).format(n=x.size),
            ),
        ),
        graph=axes_figure(lay),
    )


SHIFT = 5.0  # added to every value of X in the question of bn_param_grads


def _shifted_dgamma(p: LessonParams, x: np.ndarray, gamma, beta, dy) -> np.ndarray:
    return autograd_dx("batchnorm", x + SHIFT, gamma, beta, p.eps, dy)[0]["gamma"]


def _shift_prediction(dg: np.ndarray, dg_shifted: np.ndarray) -> Prediction:
    """Does dgamma change when the same number is added to every X? Read off the two gradients."""
    shift = f"{SHIFT:g}"
    choices = (_("it stays the same"), _("it grows with the shift"), _("it changes by no simple rule"))
    scale = float(np.max(np.abs(dg)))
    change = float(np.max(np.abs(dg_shifted - dg)))
    shrunk = int(np.sum(np.abs(dg_shifted) < np.abs(dg)))  # entries that did not grow
    moved = above(change, DISPLAY_RTOL * scale, "max |dgamma change|")
    evidence = (
        at_most(change, DISPLAY_RTOL * scale, "max |dgamma change|"),
        moved & exactly(shrunk, 0, "entries of dgamma that shrank"),
        moved & at_least(shrunk, 1, "entries of dgamma that shrank"),
    )
    why = _(
        "dgamma_j = Σ_i dY_ij · xhat_ij, and each column's mean takes the shift with it, so xhat does not move: "
        "after adding {shift} to every X, dgamma changed by at most {change}, against entries up to {scale}."
    ).format(shift=shift, change=sci(change), scale=sci(scale))
    question = _("Add {shift} to every value of X (dY stays). What happens to dgamma?").format(shift=shift)
    return Prediction.from_evidence(question, choices, why, evidence)


@demo("bn_param_grads")
def bn_param_grads(p: LessonParams) -> DemoOutput:
    """dgamma and dbeta: every row of the batch adds its share, autograd agrees with the sums."""
    x, gamma, beta, dy = _batch(p)
    grads, graph = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    xhat = np.array([v.data for v in graph["xhat"]]).reshape(x.shape)
    contrib = dy * xhat
    n, d = x.shape
    shown_n, shown_d = min(n, AXES_ROWS), min(d, AXES_COLUMNS)
    rows = [[_("row {i}").format(i=i)] + [fmt(v, 3) for v in contrib[i, :shown_d]] for i in range(shown_n)]
    dg = formulas.dgamma(dy, xhat, (0,))
    db = formulas.dbeta(dy, (0,))
    rows.append([Text(pgettext("demo table row", "sum"), style="bold")] + [fmt(v, 4) for v in dg[:shown_d]])
    rows.append(
        [Text(pgettext("demo table row", "autograd"), style="bold")] + [fmt(v, 4) for v in grads["gamma"][:shown_d]]
    )
    err_g = float(np.max(np.abs(grads["gamma"] - dg)))
    err_b = float(np.max(np.abs(grads["beta"] - db)))
    cols = [_("col {j}").format(j=j) for j in range(shown_d)]
    return DemoOutput(
        Group(
            number_table(["dY · xhat", *cols], rows, title="dgamma_j = Σ_i dY_ij · xhat_ij"),
            *_corner_note(n, d),
            claim(
                agree(grads["gamma"], dg, what="dgamma vs Σ dY·xhat"),
                _("dgamma: max error {error}").format(error=sci(err_g)),
            ),
            claim(
                agree(grads["beta"], db, what="dbeta vs Σ dY"),
                _("dbeta = Σ_i dY_ij (the column sums of dY): max error {error}").format(error=sci(err_b)),
            ),
        ),
        prediction=_shift_prediction(dg, _shifted_dgamma(p, x, gamma, beta, dy)),
    )


def _m2_note(m: int, eps: float) -> list[Text]:
    """With m = 2 values per column and eps = 0 each column normalizes to ±1: dX is 0, its entries rounding."""
    if m != 2 or eps != 0:
        return []
    note = _(
        "m = 2, eps = 0: each column normalizes to ±1 whatever X is, so dX is 0 here (its entries are "
        "rounding); rerun with --batch 3 or more."
    )
    return [cjk_text(note, style="yellow")]


@demo("bn_three_paths")
def bn_three_paths(p: LessonParams, column: int = 0) -> DemoOutput:
    """dX of one column as the sum of three paths (direct, via mean, via var) against autograd."""
    x, gamma, beta, dy = _batch(p)
    if not 0 <= column < x.shape[1]:
        raise ValueError(f"column: expected 0 .. {x.shape[1] - 1}, got {column}")
    grads, graph = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    _mo, _gx, (direct, via_mean, via_var) = closed_paths(x, gamma, dy, p.eps, (0,))
    total = direct + via_mean + via_var
    j = column
    rows = index_rows(*(a[:, j] for a in (direct, via_mean, via_var, total, grads["x"])))
    err = float(np.max(np.abs(total - grads["x"])))
    ok = agree(total, grads["x"], what="sum of paths vs autograd")
    return DemoOutput(
        Group(
            cjk_text(_("dL/dX[i, {j}] along the three paths (m = {m})").format(j=j, m=x.shape[0]), style="italic"),
            # the three paths under the names lesson 5's tables give them, translated (issue 22 item 9)
            number_table(
                [
                    "i",
                    path_label("direct"),
                    path_label("mean"),
                    path_label("var"),
                    pgettext("demo table header", "sum"),
                    pgettext("demo table header", "autograd"),
                ],
                rows,
            ),
            claim(ok, _("all columns: max |sum − autograd| = {error}").format(error=sci(err))),
            *_m2_note(x.shape[0], p.eps),
        ),
        graph=graph,
        graph_options={"paths": True, "path_input": j},  # X[0, j]: its three paths in colour
    )


def slip_paths(p: LessonParams) -> dict[str, np.ndarray]:
    """The variance path of dX, correct and with the slip; both whole dX; and autograd's dX."""
    x, gamma, beta, dy = _batch(p)
    grads, _graph = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    _mo, gx, (direct, via_mean, via_var) = closed_paths(x, gamma, dy, p.eps, (0,))
    correct = direct + via_mean + via_var  # the three-path dx
    slipped = dx_with_mean_slip(gx, x, p.eps)
    return {
        "via_var": via_var,
        "slip_via_var": slipped - (correct - via_var),
        "correct": correct,
        "slipped": slipped,
        "autograd": grads["x"],
    }


def _slip_prediction(paths: dict[str, np.ndarray], m: int) -> Prediction:
    ratio = float(np.sum(paths["slip_via_var"] * paths["via_var"]) / np.sum(paths["via_var"] ** 2))
    what = "slipped ÷ true variance path"
    kept = (m - 1) / m  # distinct from 1 and 0 for every m >= 2

    def near(target: float) -> Check:
        return at_least(ratio, target - DISPLAY_RTOL, what) & at_most(ratio, target + DISPLAY_RTOL, what)

    evidence = (near(1.0), near(kept), near(0.0))
    why = _(
        "The bogus term is −1/m times the true variance path, leaving (m − 1)/m = {kept} for "
        "m = {m} of it: the table's ratio, {ratio}. The smaller the batch, the more it loses."
    ).format(kept=fmt(kept, 4), m=m, ratio=fmt(ratio, 4))
    return Prediction.from_evidence(
        _("With the bogus term, how much of the true variance path of dX is left (m = {m})?").format(m=m),
        (_("all of it"), _("(m − 1)/m of it"), _("none of it")),
        why,
        evidence,
    )


def _engine_dvar_dmean(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, column: int) -> float:
    """d var / d mean of one column, from the engine: backpropagate from that column's variance node alone."""
    graph = get_norm("batchnorm").build_graph(x.tolist(), gamma.tolist(), beta.tolist(), eps)
    var_node, mean_node = graph["var"][column], graph["mean"][column]
    var_node.backward()
    return mean_node.grad


def _slip_claims(paths: dict[str, np.ndarray]) -> Group:
    """The three correct paths equal autograd; the slipped ones do not."""
    return Group(
        claim(
            agree(paths["correct"], paths["autograd"], what="three paths vs autograd"),
            _("three paths, d var/d mean = 0: equals autograd"),
        ),
        claim(
            differs(
                paths["slipped"],
                paths["autograd"],
                CLOSED_FORM_RTOL,
                CLOSED_FORM_ATOL,
                "slipped vs autograd",
            ),
            _("with the slip: differs from autograd (max error {error})").format(
                error=maxabs(paths["slipped"] - paths["autograd"])
            ),
        ),
    )


@demo("bn_variance_slip")
def bn_variance_slip(p: LessonParams, column: int = 0) -> DemoOutput:
    """The slipped variance path with a bogus d var/d mean against the correct one, caught by autograd."""
    x, gamma, beta, _dy = _batch(p)
    m = x.shape[0]
    if not 0 <= column < x.shape[1]:
        raise ValueError(f"column: expected 0 .. {x.shape[1] - 1}, got {column}")
    dvar_dmean = _engine_dvar_dmean(x, gamma, beta, p.eps, column)
    paths = slip_paths(p)
    j = column
    via, slip = paths["via_var"], paths["slip_via_var"]
    rows = index_rows(via[:, j], slip[:, j], [fmt(s / v, 6) for s, v in zip(slip[:, j], via[:, j])])
    xs = x[:, j] - x[:, j].mean()
    return DemoOutput(
        Group(
            claim(
                cancels(dvar_dmean, 2.0 / m * np.sum(np.abs(xs)), "engine's dvar/dmean"),
                _("engine: dvar/dmean = {value} (column {j})").format(value=sci(dvar_dmean), j=j),
            ),
            number_table(
                [
                    "i",
                    path_label("var"),
                    pgettext("demo table header", "with slip"),
                    pgettext("demo table header", "ratio"),
                ],
                rows,
                title=_("the variance path of dL/dX[i, {j}], m = {m}").format(j=j, m=m),
            ),
            _slip_claims(paths),
        ),
        prediction=_slip_prediction(paths, m),
    )


def _column_sum_prediction(zero: Check, col_sums: np.ndarray, dy: np.ndarray, rstd: np.ndarray) -> Prediction:
    """What each column of dX adds up to: 0 (``zero``), the column's sum of dY, or that times rstd."""
    sums_dy = dy.sum(axis=0)
    evidence = (
        zero,
        ~zero & close_to(col_sums, sums_dy, 1e-6, 0.0, "column sums of dX vs of dY"),
        ~zero & close_to(col_sums, rstd * sums_dy, 1e-6, 0.0, "column sums of dX vs rstd × those of dY"),
    )
    why = _("The largest column sum of dX is {value}: rounding. A column's mean is removed from its gradient.").format(
        value=maxabs(col_sums)
    )
    return Prediction.from_evidence(
        _("What will each column of dX add up to?"),
        ("0", _("the column's sum of dY"), _("the column's sum of dY, times rstd")),
        why,
        evidence,
    )


def _radial_claim(dx: np.ndarray, gx: np.ndarray, mo: formulas.Moments, eps: float, terms: np.ndarray) -> CJKText:
    """What dX keeps along xhat, per column: rstd·Σ(dxhat·xhat)·eps/(var + eps), zero at eps = 0."""
    radial = (dx * mo.xhat).sum(axis=0)
    # for eps > 0, xhat's mean square is var/(var + eps) < 1, which leaves exactly this much along xhat
    radial_expected = (mo.rstd * (gx * mo.xhat).sum(axis=0) * eps / (mo.var + eps)).reshape(-1)
    return claim(
        cancels(radial - radial_expected, terms * np.max(np.abs(mo.xhat)), "Σ dX·xhat − eps's prediction"),
        _("Σ_i dX_ij · xhat_ij = rstd·Σ(dxhat·xhat)·eps/(var + eps): up to {value}").format(value=maxabs(radial)),
    )


@demo("bn_simplified")
def bn_simplified(p: LessonParams) -> DemoOutput:
    """The simplified dX = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), per column, and what it removes."""
    x, gamma, beta, dy = _batch(p)
    grads, _graph = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    axes = (0,)
    mo = formulas.moments(x, axes, p.eps)
    gx = formulas.dxhat(dy, gamma)
    simple = formulas.dx_simplified(gx, mo.xhat, mo.rstd, axes)
    paths = formulas.dx_three_path(gx, mo.xshift, mo.std, mo.rstd, axes)
    dx = grads["x"]
    col_sums = dx.sum(axis=0)
    terms = np.abs(mo.rstd * gx).sum(axis=0) * 3  # the size of what the column sums add up
    zero = cancels(col_sums, terms, "column sums of dX")
    return DemoOutput(
        Group(
            cjk_text(
                _("dX for X [{n}, {d}], eps = {eps}").format(n=x.shape[0], d=x.shape[1], eps=f"{p.eps:g}"), "italic"
            ),
            claim(
                agree(simple, dx, what="simplified vs autograd"),
                _("simplified form = autograd: max error {error}").format(error=maxabs(simple - dx)),
            ),
            claim(
                agree(paths, dx, what="three paths vs autograd"),
                _("three paths = autograd: max error {error}").format(error=maxabs(paths - dx)),
            ),
            claim(zero, _("each column of dX sums to zero: largest sum {value}").format(value=maxabs(col_sums))),
            _radial_claim(dx, gx, mo, p.eps, terms),
            dim_note(
                _(
                    "The last line is zero at eps = 0: each column's gradient is orthogonal to its xhat, the LayerNorm "
                    "projection one column at a time. eps leaves the remainder shown."
                )
                if p.eps > 0
                else _(
                    "The last line is zero at eps = 0: each column's gradient is orthogonal to its xhat, the LayerNorm "
                    "projection one column at a time. What it shows here is rounding."
                )
            ),
            *_m2_note(x.shape[0], p.eps),
        ),
        prediction=_column_sum_prediction(zero, col_sums, dy, mo.rstd.reshape(-1)),
    )


@demo("bn_is_ln_transposed")
def bn_is_ln_transposed(p: LessonParams) -> Group:
    """BN(X) = LN(X^T)^T, forward and backward, for [N, D]; and per channel for [N, C, H, W]."""
    x, _gamma, _beta, dy = _batch(p)
    bn = engine_forward("batchnorm", x, None, None, p.eps)
    ln_t = engine_forward("layernorm", x.T, None, None, p.eps).T
    dx_bn = autograd_dx("batchnorm", x, None, None, p.eps, dy)[0]["x"]
    dx_ln_t = autograd_dx("layernorm", x.T, None, None, p.eps, dy.T)[0]["x"].T
    x4 = rng_for(p.seed, 4).normal(1.0, 2.0, size=(2, 3, 2, 2))
    bn4 = engine_forward("batchnorm", x4, None, None, p.eps)
    rows_c = x4.transpose(1, 0, 2, 3).reshape(3, -1)  # [C, N*H*W]: one row per channel
    ln4 = engine_forward("layernorm", rows_c, None, None, p.eps).reshape(3, 2, 2, 2).transpose(1, 0, 2, 3)
    return Group(
        cjk_text(_("engine, no gamma or beta:"), style="italic"),
        claim(
            agree(bn, ln_t, what="BN(X) vs LN(Xᵀ)ᵀ"),
            _("BN(X) = LN(Xᵀ)ᵀ for X [{n}, {d}]: max |diff| {value}").format(
                n=x.shape[0], d=x.shape[1], value=maxabs(bn - ln_t)
            ),
        ),
        claim(
            agree(dx_bn, dx_ln_t, what="dX of BN vs of LN on Xᵀ"),
            _("dX of BN = (dX of LN on Xᵀ, dYᵀ)ᵀ: max |diff| {value}").format(value=maxabs(dx_bn - dx_ln_t)),
        ),
        claim(
            agree(bn4, ln4, what="BN [2, 3, 2, 2] vs LN of its channel rows"),
            _("BN of [2, 3, 2, 2] = LN of its [C, N·H·W] rows: max |diff| {value}").format(value=maxabs(bn4 - ln4)),
        ),
        dim_note(
            _(
                "gamma and beta are left out: BatchNorm has one per column (d of them), while LayerNorm on Xᵀ "
                "would have one per row of X (N of them). The normalization itself is the same."
            )
        ),
    )


# the bound wider than a 60-column line: broken by hand after its factor, each part kept whole (backticks)
_BOUND = "`|dX_j|² ≤ (gamma_j/std_j)² ·`\n`(|dY_j|² − (1·dY_j)²/m − (xhat_j·dY_j)²/m)`"


def gradient_bound(
    x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column j: |dX_j|², the bound (gamma_j/std_j)² (|dY_j|² − (1·dY_j)²/m − (xhat_j·dY_j)²/m), and its scale.

    dX_j = (gamma_j/std_j)(I − P) dY_j with P = (1 1ᵀ + xhat xhatᵀ)/m. At eps = 0, P is a projection and
    the two are equal (Santurkar et al., 2018, Theorem 4.1); for eps > 0, |xhat|² < m and P removes less
    than the whole xhat component, so |dX_j|² is below the bound. The scale, (gamma_j/std_j)² |dY_j|², is
    the size of the terms the bound subtracts from each other (at m = 2 they cancel to zero).
    """
    m = x.shape[0]
    mo = formulas.moments(x, (0,), eps)
    dx = formulas.dx_simplified(formulas.dxhat(dy, gamma), mo.xhat, mo.rstd, (0,))
    factor = (gamma / mo.std.reshape(-1)) ** 2
    removed = np.sum(dy, axis=0) ** 2 / m + np.sum(mo.xhat * dy, axis=0) ** 2 / m
    return np.sum(dx * dx, axis=0), factor * (np.sum(dy * dy, axis=0) - removed), factor * np.sum(dy * dy, axis=0)


@demo("bn_gradient_bound")
def bn_gradient_bound(p: LessonParams) -> Group:
    """How large BatchNorm's dX can be: gamma/std times what is left of dY without its 1 and xhat parts."""
    x, gamma, beta, dy = _batch(p)
    dx = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)[0]["x"]
    _dx_sq, bound, scale = gradient_bound(x, gamma, dy, p.eps)
    lhs = np.sum(dx * dx, axis=0)
    slack = CLOSED_FORM_RTOL * scale
    # |dX_j|² − bound_j in units of the rounding slack: <= 1 everywhere (below), and >= -1 too at eps = 0 (equal)
    gap = (lhs - bound) / slack
    under = at_most(float(np.max(gap)), 1.0, "max (|dX_j|² − bound_j) ÷ slack")
    if p.eps == 0:
        under &= at_least(float(np.min(gap)), -1.0, "min (|dX_j|² − bound_j) ÷ slack")
    if p.eps == 0:
        # Translators: {bound} is the inequality |dX_j|² ≤ (gamma_j/std_j)²·(...)
        text = _("{bound} in every column (autograd's dX): equal at eps = 0").format(bound=_BOUND)
    else:
        text = _("{bound} in every column (autograd's dX): below it by up to {gap} at eps = {eps}").format(
            bound=_BOUND, gap=maxabs(bound - lhs), eps=f"{p.eps:g}"
        )
    return Group(claim(under, text), *_m2_note(x.shape[0], p.eps))
