"""Demos of lesson 3: LayerNorm forward, stage by stage, with its shapes, its cache and its eps.

Every number is computed here, live, from the scalar norm, the closed forms of :mod:`microgradnorm.formulas`
and the registry; the lesson file only names the demos. :func:`forward_rows` lists the nodes of a graph in
the order they were created -- always a topological order, since a node can only be made from nodes that
exist -- with op, inputs, stage and value. :func:`ln_subgraph`, the named nodes of a few stages drawn as
text, serves lessons 3 to 5.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.engine import DomainError, Value, topological_order
from microgradnorm.i18n import _, ngettext, pgettext
from microgradnorm.i18n.text import CJKText, assemble, cjk_text, separated
from microgradnorm.lessons.demo_layernorm import LNBuilt, build_ln, ln_problem, node_values
from microgradnorm.lessons.demo_tools import agree, difference, dim_note, index_table, max_rel, num, plain_table, vec
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.textgraph import text_graph
from microgradnorm.norms import layer_norm
from microgradnorm.numfmt import err, nbytes_text
from microgradnorm.verdicts import above, all_of, at_most, below, claim, exactly, first_holding, within


@demo("ln_problem_table")
def ln_problem_table(p: LessonParams, show_dy: bool = False) -> DemoOutput:
    """The lesson's input x with gamma and beta (and dy), drawn from the seed."""
    x, gamma, beta, dy = ln_problem(p)
    shown = {"x": x, "gamma": gamma, "beta": beta} | ({"dy": dy} if show_dy else {})
    return DemoOutput(index_table(("i", *shown), *shown.values()))


def forward_rows(graph_root: Value | Sequence[Value], names: Callable[[Value], str], stages: Sequence[str]) -> Table:
    """Nodes in creation order (a topological order), those of ``stages`` only, numbered in the whole order.

    Each stage starts with a bold row naming it.
    """
    nodes = sorted(topological_order(graph_root), key=lambda n: n.id)
    value = pgettext("table header", "value")
    table = plain_table("#", _("node"), "op", _("inputs"), value, right=("#", value))
    # what the op column says for a leaf: an input, a parameter (gamma, beta) or a constant (1/n, eps)
    kind = {"input": pgettext("op of a leaf node", "input"), "affine": pgettext("op of a leaf node", "param")}
    current = None
    for k, node in enumerate(nodes, 1):
        stage = node.stage or ""
        if stage not in stages:
            continue
        if stage != current:
            # Translators: {stage} is the stage's name in the code (mean, center, var, sqrt, divide, affine)
            table.add_row("", Text(_("{stage} stage").format(stage=stage), style="bold"), "", "", "")
            current = stage
        kids = [names(c) for c in node.children]
        inputs = ", ".join(kids) if len(kids) <= 2 else f"{kids[0]} … {kids[-1]}"
        const = pgettext("op of a leaf node", "const")
        op = node.op or (kind.get(stage, const) if not node.children else "")
        table.add_row(str(k), names(node), op, inputs or "—", num(node.data))
    return table


@demo("ln_forward_steps")
def ln_forward_steps(
    p: LessonParams, stages: tuple[str, ...] = ("input", "mean", "center"), ask: bool = False
) -> DemoOutput:
    """LayerNorm's nodes in the order they are built, with op, inputs, stage and value.

    ``ask`` first asks what the mean square of xhat comes out as (1 only at eps = 0), read off the nodes.
    """
    built = build_ln(p)
    roots = built.graph.roots()
    table = forward_rows(roots, built.name, stages)
    total = len(topological_order(roots))
    # Translators: {stages} is a list of stage names, "input, mean, center"
    note = ngettext(
        "The nodes of stage {stages}, of the {total} nodes of LayerNorm at d = {dim}.",
        "The nodes of stages {stages}, of the {total} nodes of LayerNorm at d = {dim}.",
        len(stages),
    )
    return DemoOutput(
        Group(table, dim_note(note.format(stages=separated(stages), total=total, dim=p.dim))),
        graph=built.graph,
        prediction=_mean_square_prediction(built, p.eps) if ask else None,
    )


def _mean_square_prediction(built: LNBuilt, eps: float) -> Prediction:
    """mean(xhat²) from the xhat nodes: var / (var + eps), so 1 only at eps = 0 (up to rounding)."""
    xhat = node_values(built, "xhat")
    ms = float(np.mean(xhat**2))
    var = float(built.graph["var"][0].data)
    rounding = tol.cancellation_atol(1.0, len(xhat))
    what = "mean(xhat²) − 1"
    evidence = (
        at_most(abs(ms - 1.0), rounding, "|mean(xhat²) − 1|"),
        below(ms - 1.0, -rounding, what),
        above(ms - 1.0, rounding, what),
    )
    why = _("mean(xhat²) = var/(var + eps) = {ms} (var = {var}, eps = {eps}): 1 only at eps = 0.").format(
        ms=num(ms, 8), var=num(var), eps=f"{eps:g}"
    )
    choices = (_("1, up to rounding"), _("below 1"), _("above 1"))
    return Prediction.from_evidence(_("What will the mean of xhat² be?"), choices, why, evidence)


@demo("ln_stage_summary")
def ln_stage_summary(p: LessonParams) -> DemoOutput:
    """Each stage's result from the scalar graph, next to the NumPy formulas of formulas.moments."""
    built = build_ln(p)
    g = built.graph
    m = formulas.moments(built.x, (-1,), p.eps)
    y_np = formulas.affine(m.xhat, built.gamma, built.beta)
    rows = [
        ("mean", "mean = Σx / n", node_values(built, "mean"), m.mean),
        ("center", "xshift = x − mean", node_values(built, "xshift"), m.xshift),
        ("var", "var = Σxshift² / n", node_values(built, "var"), m.var),
        ("sqrt", "std = √(var + eps)", node_values(built, "std"), m.std),
        ("divide", "rstd = 1 / std", node_values(built, "rstd"), m.rstd),
        ("divide", "xhat = xshift · rstd", node_values(built, "xhat"), m.xhat),
        ("affine", "y = gamma·xhat + beta", node_values(built, "y"), y_np),
    ]
    table = plain_table(_("stage"), _("computes"), _("value (scalar graph)"))
    worst = 0.0
    for stage, what, got, ref in rows:
        worst = max(worst, max_rel(got, ref))
        table.add_row(stage, what, num(got[0]) if got.size == 1 else vec(got, 3))
    ok = all_of(
        *(agree(got, ref, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL, what) for _stage, what, got, ref in rows)
    )
    same = _("formulas.moments (NumPy) gives the same, largest relative difference {error}").format(error=err(worst))
    xshift = node_values(built, "xshift")
    total = float(np.sum(xshift))
    zero = tol.cancellation_atol(float(np.sum(np.abs(built.x))), p.dim)
    sum_x = float(np.sum(built.x))
    what = "|Σ xshift|"
    # the other two choices are the same number (n · mean = Σx): each holds when Σ xshift is not 0 and is nearer to Σx
    off_sum = abs(total - sum_x)
    evidence = (
        at_most(abs(total), zero, what),
        above(abs(total), zero, what) & below(off_sum, abs(total), "|Σ xshift − Σx| vs |Σ xshift|"),
        above(abs(total), zero, what) & below(off_sum, abs(total), "|Σ xshift − n·mean| vs |Σ xshift|"),
    )
    why = _("Σ xshift = {total} on the graph's numbers: subtracting the mean leaves values that sum to 0.").format(
        total=num(total)
    )
    prediction = Prediction.from_evidence(
        _("What will the centered values xshift add up to?"),
        (_("0, up to rounding"), _("the sum of x"), _("n times the mean")),
        why,
        evidence,
    )
    return DemoOutput(Group(table, claim(ok, same)), graph=g, prediction=prediction)


@demo("ln_shapes")
def ln_shapes(p: LessonParams, batch: int = 2, seq: int = 3) -> DemoOutput:
    """Shapes of every stage for x of shape [batch, seq, hidden], with and without keepdims."""
    rng = np.random.default_rng(p.seed)
    d = p.dim
    x = rng.normal(0.5, 2.0, size=(batch, seq, d))
    m = formulas.moments(x, (-1,), p.eps)
    table = _shapes_table(x.shape, m, (d,))
    flat_mean = x.mean(axis=-1)
    try:
        x - flat_mean
        outcome = cjk_text(_("x − mean without keepdims: no error (shapes happened to line up)."))
    except ValueError as exc:
        refusal = assemble(_("NumPy refuses: {message}"), "red", message=Text(str(exc)))
        outcome = assemble(_("x − mean without keepdims: {outcome}"), "bold", outcome=refusal)
    # The quiet failure: one sentence [seq, hidden] with seq == hidden. The flat
    # mean [seq] lines up with the hidden axis and is subtracted along the wrong one.
    sq = rng.normal(0.5, 2.0, size=(d, d))
    flat = sq.mean(axis=-1)
    wrong = sq - flat
    right = sq - sq.mean(axis=-1, keepdims=True)
    what = _(
        "one sentence of shape {shape} (seq = hidden = {d}) minus a mean of shape {mean_shape} raises nothing, "
        "but subtracts token j's mean from feature j of every token."
    ).format(shape=list(sq.shape), d=d, mean_shape=list(flat.shape))
    quiet = assemble(_("The quiet version: {what}"), "bold", what=Text(what))
    worst = float(np.abs(wrong - right).max())
    wrong_by = _("same shape, no error, wrong by up to {error}").format(error=num(worst))
    verdict = claim(
        exactly(wrong.size, right.size, "entries of x − mean, with and without keepdims")
        & above(worst, 0.0, "largest |wrong − right|"),
        wrong_by,
    )
    return DemoOutput(
        Group(table, Text(""), outcome, Text(""), quiet, verdict),
        prediction=_keepdims_prediction(batch, seq, d, _broadcast_error(x, flat_mean, m.xshift)),
    )


def _broadcast_error(x: np.ndarray, mean: np.ndarray, xshift: np.ndarray) -> float:
    """max |(x − mean) − xshift| for a mean without keepdims; NaN when NumPy refuses to broadcast."""
    try:
        return float(np.max(np.abs((x - mean) - xshift)))
    except ValueError:
        return math.nan


def _keepdims_prediction(batch: int, seq: int, d: int, error: float) -> Prediction:
    """What x − mean does without keepdims, as NumPy answered it just now (``error`` NaN: it refused)."""
    refused = error != error
    count = exactly(1.0 if refused else 0.0, 1.0, "NumPy's refusals")
    ran = exactly(0.0 if refused else 1.0, 1.0, "runs without an error")
    gap = math.inf if refused else error
    evidence = (count, ran & at_most(gap, 0.0, "largest error"), ran & above(gap, 0.0, "largest error"))
    shape, mean_shape = [batch, seq, d], [batch, seq]
    if refused:
        why = _("Matched from the last axis, {shape} and {mean_shape} do not fit: NumPy refuses.")
    else:
        why = _("Matched from the last axis, {shape} and {mean_shape} fit: each mean goes along the wrong axis.")
    question = _("Here x is {shape} and a mean without keepdims is {mean_shape}: which happens?")
    return Prediction.from_evidence(
        question.format(shape=shape, mean_shape=mean_shape),
        (_("NumPy raises an error"), _("it runs and is right"), _("it runs and is wrong")),
        why.format(shape=shape, mean_shape=mean_shape),
        evidence,
    )


def _shapes_table(shape_x: tuple[int, ...], m: formulas.Moments, shape_gamma: tuple[int, ...]) -> Table:
    """Each quantity of LayerNorm forward with its shape, for x of ``shape_x``."""
    per_token = _("one per token")
    table = plain_table(_("quantity"), _("shape"), _("note"))
    table.add_row("x", str(list(shape_x)), "[batch, seq, hidden]")
    table.add_row("mean", str(list(m.mean.shape)), _("one per token, axis kept"))
    table.add_row("xshift", str(list(m.xshift.shape)), _("x − mean broadcasts"))
    table.add_row("var", str(list(m.var.shape)), per_token)
    table.add_row("rstd", str(list(m.rstd.shape)), "")
    table.add_row("xhat", str(list(m.xhat.shape)), "")
    table.add_row("gamma, beta", str(list(shape_gamma)), _("one per feature"))
    table.add_row("y", str(list(np.broadcast_shapes(shape_gamma, m.xhat.shape))), "")  # gamma · xhat
    return table


@demo("ln_cache")
def ln_cache(p: LessonParams, batch: int = 8, seq: int = 1024, hidden: int = 768) -> DemoOutput:
    """What a forward pass keeps for backward, its size, and that xhat and rstd are enough for dx."""
    shape_x = (batch, seq, hidden)
    shape_s = (batch, seq, 1)
    n_x, n_s = math.prod(shape_x), math.prod(shape_s)
    table = plain_table(_("cached"), _("shape"), "float32", _("backward uses it for"), right=("float32",))
    for name, shape, count, use in (
        ("xhat", shape_x, n_x, "dgamma, dx"),
        ("rstd", shape_s, n_s, _("dx (the 1/std factor)")),
        ("mean", shape_s, n_s, _("recomputing xhat from x")),
        ("xshift", shape_x, n_x, _("three-path form only")),
    ):
        table.add_row(name, str(list(shape)), nbytes_text(4 * count), use)
    built = build_ln(p, backward=True)
    m = formulas.moments(built.x, (-1,), p.eps)
    g = formulas.dxhat(built.dy, built.gamma)
    from_cache = formulas.dx_simplified(g, m.xhat, m.rstd, (-1,))
    three = formulas.dx_three_path(g, m.xshift, m.std, m.rstd, (-1,))
    autograd = node_values(built, "x", "grad")
    ok = agree(from_cache, autograd, what="dx from (xhat, rstd) vs autograd") & agree(
        three, autograd, what="three-path dx vs autograd"
    )
    line = _(
        "on your numbers, dx from (xhat, rstd) alone matches autograd ({difference}), "
        "and so does the three-path form that needs xshift and std"
    ).format(difference=difference(from_cache, autograd))
    return DemoOutput(Group(table, Text(""), claim(ok, line)))


PYTORCH_EPS = 1e-5  # torch.nn.LayerNorm's default


def _exact_constant(near: float, dim: int) -> float:
    """A value c near ``near`` whose row [c] * dim the engine centers to exactly 0.

    The engine's mean is sum(x) · (1/n), rounded twice: for some c and n it misses c by one
    rounding step, and at eps = 0 LayerNorm then blows that rounding error up to xhat = ±1
    instead of dividing 0 by 0. The question is about the exact arithmetic, so such a c is
    replaced by a rounder one (0 always works).
    """
    for c in (near, round(near, 1), float(round(near)), 1.0, 0.0):
        try:
            layer_norm([c] * dim, None, None, 0.0)
        except DomainError:  # std exactly 0: the mean came out exactly c
            return c
    return 0.0


def _eps_rows(p: LessonParams, eps: float) -> list[tuple[str, list[float]]]:
    """The three rows of the eps demo, by key: the lesson's x, a constant row, and that row plus tiny noise."""
    x = ln_problem(p)[0]
    c = _exact_constant(float(x[0]), p.dim)
    noise = np.random.default_rng(p.seed + 1).normal(size=p.dim)
    return [("your x", x.tolist()), ("constant", [c] * p.dim), ("nearly const.", (c + 1e-4 * noise).tolist())]


def _eps_row_name(key: str) -> str:
    """How the eps table names a row of :func:`_eps_rows`, in the reader's language."""
    names = {
        "your x": _("your x"),
        "constant": pgettext("row of the eps table", "constant"),
        "nearly const.": pgettext("row of the eps table", "nearly const."),
    }
    return names[key]


def _ln_stats(row: list[float], eps: float) -> tuple[float, float, float, float] | None:
    """std, rstd, the spread of xhat and its largest |xhat_i| for LayerNorm of ``row``; None if it divides by 0."""
    try:
        g = layer_norm(row, None, None, eps).graph
    except DomainError:
        return None
    xhat = np.array([v.data for v in g["xhat"]])
    return g["std"][0].data, g["rstd"][0].data, float(np.std(xhat)), float(np.max(np.abs(xhat)))


@demo("ln_eps")
def ln_eps(p: LessonParams) -> DemoOutput:
    """What eps does: a constant row, a nearly constant row, and a normal row, with and without it."""
    eps = p.eps if p.eps > 0 else PYTORCH_EPS
    spread = _("std of xhat")
    table = plain_table(_("row"), "eps", "std", "rstd", spread, right=("eps", "std", "rstd", spread))
    stats: dict[tuple[str, float], tuple[float, float, float, float] | None] = {}
    for key, row in _eps_rows(p, eps):
        for e in (0.0, eps):
            stats[key, e] = got = _ln_stats(row, e)
            refused = ["0", Text("1/0", style="red"), Text(pgettext("table cell", "error"), style="red")]
            cells = refused if got is None else [num(got[0]), num(got[1]), num(got[2], 6)]
            table.add_row(_eps_row_name(key) if e == 0.0 else "", num(e), *cells)
    parts: list[RenderableType] = [table]
    if p.eps == 0:
        parts.append(
            dim_note(_("You ran with --eps 0: the rows with eps use PyTorch's default {eps}.").format(eps=f"{eps:g}"))
        )
    parts += _eps_claims(stats, eps, float(np.var(ln_problem(p)[0])))
    return DemoOutput(Group(*parts), prediction=_constant_row_prediction(stats["constant", 0.0]))


def _eps_claims(stats: dict[tuple[str, float], Any], eps: float, var: float) -> list[CJKText]:
    """The eps demo's three checked claims, from its rows' ``stats`` (keyed by row and eps)."""
    capped = all_of(
        *(
            at_most(v[1], 1 / math.sqrt(eps), f"{row}: rstd with eps")
            for (row, e), v in stats.items()
            if e > 0 and v is not None
        )
    )
    near_with, near_without = stats["nearly const.", eps][2], stats["nearly const.", 0.0][2]
    yours = stats["your x", eps][2]
    return [
        claim(capped, _("with eps, rstd never exceeds 1/√eps = {cap}").format(cap=num(1.0 / math.sqrt(eps)))),
        claim(
            below(near_with, near_without, "nearly const.: xhat's spread with vs without eps"),
            _("nearly const.: xhat's spread {with_eps} with eps, {without} without").format(
                with_eps=num(near_with, 3), without=num(near_without, 3)
            ),
        ),
        claim(
            within(yours, math.sqrt(var / (var + eps)), tol.CLOSED_FORM_RTOL, "your x: xhat's spread"),
            _("your x: xhat's spread is √(var/(var + eps)) = {spread}").format(spread=num(yours, 6)),
        ),
    ]


def _constant_row_prediction(at_zero: tuple[float, float, float, float] | None) -> Prediction:
    """The answer from what the engine did with a constant row at eps = 0 (its ``_ln_stats``)."""
    choices = (_("every xhat_i is 0"), _("every xhat_i is 1"), _("no number at all: 0/0"))
    largest = math.inf if at_zero is None else at_zero[3]  # the largest |xhat_i|
    evidence = (
        exactly(largest, 0.0, "largest |xhat_i|"),
        exactly(largest, 1.0, "largest |xhat_i|"),
        exactly(1.0 if at_zero is None else 0.0, 1.0, "the engine's refusals to divide"),
    )
    answer = first_holding(evidence)
    why = (
        _("xshift = 0 and std = 0, so xhat = 0/0: the engine refuses to divide (1/0 below).")
        if answer == 2
        else _("The engine computed a number for it (see the table).")
    )
    question = _("A token whose d features are all equal: what is xhat at eps = 0?")
    return Prediction(question, choices, answer, why, evidence)


# ---- the subgraph a step talks about, drawn as text (lessons 3 to 5) ------------------------------

# Above this many features the drawing would crowd a screen: the step says the g key draws the graph.
SUBGRAPH_MAX_DIM = 4


@demo("ln_subgraph")
def ln_subgraph(p: LessonParams, stages: tuple[str, ...] = ("mean",), grads: bool = True) -> DemoOutput:
    """The named nodes of ``stages`` as text: each value, what it is computed from, and (``grads``) its gradient.

    The gradients are those of the whole backward sweep; a step shows the stages whose nodes are
    complete at that point of the sweep (a node is complete once it passes its gradient on).
    """
    built = build_ln(p, backward=grads)
    if p.dim > SUBGRAPH_MAX_DIM:
        note = _(
            "At d = {dim} this listing would crowd the screen: press g to draw the graph, "
            "or run with --dim {max_dim} to see it here."
        ).format(dim=p.dim, max_dim=SUBGRAPH_MAX_DIM)
        return DemoOutput(dim_note(note), graph=built.graph)
    # Translators: the key under the text drawing of a graph; "node", "value" and "grad" are its column heads
    key = _("node = value ← computed from; right: its grad, dL/d(node)") if grads else _("node = value ← computed from")
    return DemoOutput(Group(text_graph(built.graph, stages=stages, grads=grads), dim_note(key)), graph=built.graph)
