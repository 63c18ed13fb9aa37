"""Demos of lesson 6: one formula for dL/dx in several forms (three paths, simplified, projection), all equal.

Each form is computed by its own function in :mod:`microgradnorm.formulas` on the lesson's numbers, and the
demos show that they agree with each other and with autograd, term by term.
"""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.drawing.charts import heat_map
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import cjk_text, sentences
from microgradnorm.lessons.demo_layernorm import build_ln, ln_problem, node_values
from microgradnorm.lessons.demo_tools import (
    PATH_STYLE,
    agree,
    closed_paths,
    difference,
    dim_note,
    index_table,
    num,
    path_label,
    shown_difference,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.numfmt import err
from microgradnorm.verdicts import above, all_of, at_most, claim, close_to, closest, exactly


def _forms(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    """dL/dx of one vector by each closed form in formulas.py."""
    m = formulas.moments(x, (-1,), eps)
    g = formulas.dxhat(dy, gamma)
    return {
        "three-path": formulas.dx_three_path(g, m.xshift, m.std, m.rstd, (-1,)),
        "simplified": formulas.dx_simplified(g, m.xhat, m.rstd, (-1,)),
        "projection": formulas.dx_projection(dy, gamma, m.xhat, float(m.rstd.ravel()[0])),
    }


def form_name(form: str) -> str:
    """The name of a form of dx (a key of :func:`_forms`) in the reader's language."""
    names = {
        "three-path": pgettext("form of dx", "three-path"),
        "simplified": pgettext("form of dx", "simplified"),
        "projection": pgettext("form of dx", "projection"),
    }
    return names[form]


def _agreement_text(auto: np.ndarray) -> str:
    """Which tolerance the forms of dx agree within, and why that one (it depends on how small dx is)."""
    largest = float(np.max(np.abs(auto)))
    if tol.CLOSED_FORM_RTOL * largest < tol.CLOSED_FORM_ATOL < largest:
        # dx is small but not 0 (a large eps, for one): the absolute allowance is the larger of the two
        return _(
            "all agree within {atol} absolute (tolerances.CLOSED_FORM_ATOL): autograd's dx is small here "
            "(largest |dx_i| = {largest}), so the absolute allowance is the larger one"
        ).format(atol=f"{tol.CLOSED_FORM_ATOL:.0e}", largest=err(largest))
    if tol.CLOSED_FORM_RTOL * largest < tol.CLOSED_FORM_ATOL:
        # dx is 0 up to rounding (d = 2 with eps = 0 makes y independent of x): a relative difference
        # would divide by about 0, so the verdict and the differences are absolute
        return _(
            "all agree within {atol} absolute (tolerances.CLOSED_FORM_ATOL): "
            "autograd's dx is 0 up to rounding here, so a relative difference would divide by about 0"
        ).format(atol=f"{tol.CLOSED_FORM_ATOL:.0e}")
    return _("all agree within {rtol} relative (tolerances.CLOSED_FORM_RTOL)").format(
        rtol=f"{tol.CLOSED_FORM_RTOL:.0e}"
    )


@demo("forms_agree")
def forms_agree(p: LessonParams) -> DemoOutput:
    """dx by autograd and by the three-path, simplified and projection forms, side by side."""
    built = build_ln(p, backward=True)
    auto = node_values(built, "x", "grad")
    forms = _forms(built.x, built.gamma, built.dy, p.eps)
    table = index_table(("i", _("autograd"), *map(form_name, forms)), auto, *forms.values(), digits=5)
    diffs = Table.grid(padding=(0, 1))
    diffs.add_column()
    diffs.add_column(justify="right")
    checks = []
    for name, f in forms.items():
        checks.append(agree(f, auto, what=f"{name} vs autograd"))
        absolute, value = shown_difference(f, auto)
        # Translators: {form} is the name of a form of dx (three-path, simplified, projection)
        largest = (
            _("{form} vs autograd, largest absolute difference:")
            if absolute
            else _("{form} vs autograd, largest relative difference:")
        )
        diffs.add_row(cjk_text(largest.format(form=form_name(name))), value)
    ok = all_of(*checks)
    verdict = claim(ok, _agreement_text(auto))
    prediction = _double_dy_prediction(built.x, built.gamma, built.dy, p.eps, forms)
    return DemoOutput(Group(table, Text(""), diffs, verdict), graph=built.graph, prediction=prediction)


SCALE_DY = 2.0  # the factor on dy in lesson 6's question on the forms


def _double_dy_prediction(
    x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float, forms: dict[str, np.ndarray]
) -> Prediction:
    """Multiply dy by SCALE_DY: what happens to dx? Measured with all three forms."""
    k = f"{SCALE_DY:g}"
    before = np.concatenate(list(forms.values()))
    after = np.concatenate(list(_forms(x, gamma, SCALE_DY * dy, eps).values()))
    same = close_to(after, before, 1e-6, 0.0, "dx(k·dy) vs dx(dy), every form")
    scaled = close_to(after, SCALE_DY * before, 1e-6, 0.0, "dx(k·dy) vs k·dx(dy), every form")
    evidence = (same, all_of(~same, scaled), all_of(~same, ~scaled))
    ratio = float(np.max(np.abs(after)) / np.max(np.abs(before)))
    why = _(
        "In every form, largest |dx| grew {ratio} times: each form is linear in g = gamma·dy. LayerNorm "
        "ignores the scale of x, not the scale of the gradient that comes back."
    ).format(ratio=num(ratio))
    if float(np.max(np.abs(before))) <= tol.CLOSED_FORM_ATOL:  # dx is 0 up to rounding: the ratio is of roundings
        zero = (
            _(
                "Here dx is 0 (d = 2, eps = 0: the output is ±1 whatever x), so it stays 0; "
                "rerun with --dim 3 to see it double."
            )
            if x.shape[-1] == 2 and eps == 0
            else _("Here dx is 0 up to rounding, so it stays 0; rerun with other options to see it double.")
        )
        # the ratio above is one of roundings: say what dx is first, then why the answer holds all the same
        linear = _(
            "Each form is linear in g = gamma·dy: LayerNorm ignores the scale of x, not the scale of the "
            "gradient that comes back."
        )
        why = sentences([zero, linear])
    return Prediction.from_evidence(
        _("Multiply every dy_i by {k}. What happens to dx?").format(k=k),
        (
            _("nothing"),
            _("every dx_i is multiplied by {k}").format(k=k),
            _("it changes some other way"),
        ),
        why,
        evidence,
    )


@demo("three_path_terms")
def three_path_terms(p: LessonParams) -> DemoOutput:
    """The three paths rewritten with xhat: each term of formulas.dx_paths against its simplified shape."""
    x, gamma, _beta, dy = ln_problem(p)
    m, g, (direct, via_mean, via_var) = closed_paths(x, gamma, dy, p.eps)
    rstd = float(m.rstd.ravel()[0])
    n = p.dim
    mean_term = -rstd * np.mean(g) * np.ones(n)
    var_term = -rstd * m.xhat * np.mean(g * m.xhat)
    m1, m2 = float(np.mean(g)), float(np.mean(g * m.xhat))
    head = Text.assemble(("m1 = mean(g) = ", "bold"), num(m1), ("   m2 = mean(g·xhat) = ", "bold"), num(m2))
    mean_h, var_h = (Text(path_label(k), style=PATH_STYLE[k]) for k in ("mean", "var"))
    headers = ("i", mean_h, "−rstd·m1", var_h, "−rstd·xhat·m2")
    table = index_table(headers, via_mean, mean_term, via_var, var_term)
    ok = agree(via_mean, mean_term, what="via mean vs −rstd·m1") & agree(
        via_var, var_term, what="via var vs −rstd·xhat·m2"
    )
    direct_ok = agree(direct, rstd * g, what="direct vs rstd·g")
    return DemoOutput(
        Group(
            head,
            table,
            claim(direct_ok, _("and the direct path is rstd · g")),
            claim(ok, _("each path equals its rewritten shape, so their sum is the simplified form")),
        )
    )


@demo("projection_form")
def projection_form(p: LessonParams, part: int = 1) -> DemoOutput:
    """P = (1/d)(1 1ᵀ + xhat xhatᵀ) on your numbers: part 1 its entries and facts, part 2 dx = rstd · (g − P g)."""
    if part not in (1, 2):
        raise ValueError(f"part: expected 1 (the matrix) or 2 (applied to g), got {part!r}")
    x, gamma, _beta, dy = ln_problem(p)
    m = formulas.moments(x, (-1,), p.eps)
    P = formulas.projection(m.xhat)
    if part == 1:
        # above 6 columns the numbers no longer fit 60 columns: the matrix is drawn as a heat map instead
        shown = _matrix_of(P) if p.dim <= 6 else heat_map(P, title=_("P for d = {d}").format(d=p.dim))
        return DemoOutput(Group(shown, Text(""), *_projection_facts(x, P, m, p)))
    g = formulas.dxhat(dy, gamma)
    rstd = float(m.rstd.ravel()[0])
    pg = P @ g
    dx = rstd * (g - pg)
    steps = index_table(("i", "g", "P·g", "g − P·g", "× rstd"), g, pg, g - pg, dx)
    ref = formulas.dx_simplified(g, m.xhat, m.rstd, (-1,))
    return DemoOutput(
        Group(
            steps,
            claim(
                agree(dx, ref, what="rstd·(g − P·g) vs simplified form"),
                _("equals the simplified form ({difference})").format(difference=difference(dx, ref)),
            ),
        ),
        prediction=_sum_prediction(dx, g, rstd),
    )


def _matrix_of(P: np.ndarray) -> Table:
    return index_table(("P", *(str(j) for j in range(P.shape[0]))), *P.T, digits=3)


def _projection_facts(x: np.ndarray, P: np.ndarray, m: formulas.Moments, p: LessonParams) -> list[Text]:
    """Symmetric, rank 2, and P·P = P at eps = 0; at eps > 0 off by exactly −(shrink/n) xhat xhatᵀ."""
    n = p.dim
    rounding = tol.cancellation_atol(1.0, n, units=64)  # the entries of P are at most 1 in size
    P0 = formulas.projection(formulas.moments(x, (-1,), 0.0).xhat)
    rank = int(np.linalg.matrix_rank(P))
    idempotent = float(np.abs(P0 @ P0 - P0).max())
    lines = [
        claim(at_most(float(np.abs(P - P.T).max()), rounding, "largest |P − Pᵀ|"), _("P is symmetric")),
        claim(exactly(rank, 2, "rank of P"), _("rank of P: {rank}").format(rank=rank)),
        claim(
            at_most(idempotent, rounding, "at eps = 0, largest |P·P − P|"),
            _("at eps = 0, largest |P·P − P| = {error}: rounding").format(error=err(idempotent)),
        ),
    ]
    if p.eps > 0:
        shrink = p.eps / (float(m.var.ravel()[0]) + p.eps)
        predicted = -(shrink / n) * np.outer(m.xhat, m.xhat)
        off = _(
            "at eps = {eps}, largest |P·P − P| = {error}, exactly −(shrink/n)·xhat xhatᵀ with shrink = eps/(var + eps)"
        ).format(eps=f"{p.eps:g}", error=err(float(np.abs(P @ P - P).max())))
        lines.append(
            claim(agree(P @ P - P, predicted, tol.CLOSED_FORM_RTOL, rounding, "P·P − P vs −(shrink/n)·xhat xhatᵀ"), off)
        )
    else:
        note = _("This run has eps = 0, so there is no line for an eps > 0: rerun with one, e.g. --eps 0.1, to see it.")
        lines.append(dim_note(note))
    return lines


def _sum_prediction(dx: np.ndarray, g: np.ndarray, rstd: float) -> Prediction:
    total = float(np.sum(dx))
    candidates = (0.0, rstd * float(np.sum(g)), float(np.sum(g)))
    # "0, up to rounding": the rounding of rstd·Σ|g_i|; the other two by plain distance
    zero = tol.cancellation_atol(rstd * float(np.sum(np.abs(g))), len(g))
    near = closest(total, candidates, "Σ dx_i")
    evidence = (
        at_most(abs(total), zero, "|Σ dx_i|"),
        above(abs(total), zero, "|Σ dx_i|") & near[1],
        above(abs(total), zero, "|Σ dx_i|") & near[2],
    )
    why = _(
        "Σ dx_i = {total}. P·1 = 1 (xhat sums to 0) and P is symmetric, so 1·(P·g) = (P·1)·g = 1·g: "
        "g − P·g sums to 0, at any eps. (rstd · Σ g_i would have been {other}.)"
    ).format(total=err(total), other=num(candidates[1]))
    choices = (_("0, up to rounding"), "rstd · Σ g_i", "Σ g_i")
    return Prediction.from_evidence(_("dx = rstd · (g − P·g): what do the dx_i add up to?"), choices, why, evidence)
