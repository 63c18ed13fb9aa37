"""Demos of lessons 4 and 5: LayerNorm backward, one contribution at a time, and what its gradients are for.

* the backward sweep through LayerNorm replayed stage by stage (:func:`microgradnorm.trace.trace_backward`,
  each contribution tagged with the path it took into x), the node and parameter gradients against the
  closed forms, and the three paths into x added up (:func:`microgradnorm.formulas.dx_paths`);
* what the parameters' gradients (dgamma, dbeta) are for, and what the input's
  gradient dx is for: the layer below turns dx into its own weight gradient;
* whether dgamma cares about the scale of x (a question asked before the numbers);
* a slip that is easy to make: a non-zero dvar/dmean, which shrinks
  the variance path by (n - 1)/n.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.check import check_norm, random_problem
from microgradnorm.engine import Value
from microgradnorm.finite_diff import numerical_gradient
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import CJKText, assemble, sentences, separated
from microgradnorm.lessons.demo_layernorm import LNBuilt, build_ln, ln_problem, node_values, traced
from microgradnorm.lessons.demo_tools import (
    PATH_STYLE,
    PATHS,
    agree,
    autograd_dx,
    closed_paths,
    difference,
    dim_note,
    fd_agree,
    index_table,
    num,
    path_label,
    plain_table,
    rng_for,
    start_line,
    trace_table,
    vec,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.source import code_of
from microgradnorm.norms import NormGraph, layer_norm
from microgradnorm.numfmt import bracketed, err
from microgradnorm.present import check_table
from microgradnorm.registry import get_norm
from microgradnorm.trace import Contribution, Trace
from microgradnorm.verdicts import (
    above,
    all_of,
    at_least,
    at_most,
    below,
    cancels,
    claim,
    close_to,
    differs,
    equal,
    exactly,
    first_holding,
    largest,
    mark,
    within,
)

# ---- lessons 4 and 5: LayerNorm backward, one contribution at a time -------------------------


def _closed(built: LNBuilt, eps: float) -> dict[str, np.ndarray]:
    """The closed forms on the lesson's numbers (NumPy, from the inputs alone)."""
    return get_norm("layernorm").node_grads(built.x, built.gamma, built.beta, eps, built.dy)


@demo("ln_loss_setup")
def ln_loss_setup(p: LessonParams) -> DemoOutput:
    """The forward output y, a random upstream gradient dy and the loss sum(y · dy)."""
    built = build_ln(p, backward=True)
    ygrad = node_values(built, "y", "grad")
    table = index_table(("i", "y", "dy", "y.grad"), node_values(built, "y"), built.dy, ygrad)
    ok = equal(ygrad, built.dy, "y.grad vs dy")
    loss = Text.assemble(("loss = Σ y·dy = ", "bold"), num(built.loss.data))
    return DemoOutput(Group(table, loss, claim(ok, _("after backward(), y.grad is exactly dy"))), graph=built.graph)


@demo("ln_backward_steps")
def ln_backward_steps(p: LessonParams, stages: tuple[str, ...] = ("loss", "affine"), ask: str = "") -> DemoOutput:
    """Backward through the given stages of LayerNorm, one contribution at a time.

    ``ask`` puts a question first: "y_count" (how many contributions y_0 receives), "rstd_count"
    (how many rstd collects), "dvar_sign" (the sign of dL/dvar) or "x_count" (how many x_0 receives),
    each answered from the traced run.
    """
    built, trace = traced(p)

    def keep(c: Contribution) -> bool:
        return (c.out.stage or "") in stages

    table = trace_table(trace, built.name, keep, built.constants)
    parts: list[RenderableType] = [start_line("loss.grad = 1")] if "loss" in stages else []
    parts.append(table)
    if any(c.tag for c in trace.contributions if keep(c)):
        parts.append(path_legend())
    parts.append(dim_note(_("k/m: the k-th of m contributions; constants not shown")))
    questions = {
        "": None,
        "rstd_count": _rstd_count_prediction,
        "dvar_sign": _dvar_sign_prediction,
        "x_count": _x_count_prediction,
        "y_count": _y_count_prediction,
    }
    if ask not in questions:
        raise ValueError(f"ask: expected one of {sorted(questions)}, got {ask!r}")
    prediction = questions[ask](built, trace) if ask else None
    return DemoOutput(Group(*parts), graph=built.graph, prediction=prediction)


def _y_count_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """How many contributions y_0 receives, counted in the trace."""
    count = trace.incoming.get(id(built.graph["y"][0]), 0)
    d = len(built.graph["x"])
    counts = (1, 2, d) if d != 2 else (1, d)  # at d = 2 the choice "2" would be "d = 2" again
    evidence = tuple(exactly(count, k, "contributions y_0 receives") for k in counts)
    why = _("The trace counts {count}: y_0 is used once, by its own term y_0·dy_0 of the loss.").format(count=count)
    return Prediction.from_evidence(
        _("How many contributions will y_0 receive?"), (*(str(k) for k in counts[:-1]), f"d = {d}"), why, evidence
    )


@demo("ln_siblings")
def ln_siblings(p: LessonParams) -> DemoOutput:
    """Where xhat's gradient comes from: the product node γ·xhat, beside gamma's and beta's, not through them."""
    built, trace = traced(p)
    dxhat, dgamma = node_values(built, "xhat", "grad"), node_values(built, "gamma", "grad")
    table = index_table(("i", "dy_i", "gamma_i", "xhat.grad", "gamma.grad"), built.dy, built.gamma, dxhat, dgamma)
    return DemoOutput(
        Group(table, _siblings_line(built, trace)),
        graph=built.graph,
        prediction=_via_params_prediction(built, trace),
    )


def _from_params(built: LNBuilt, trace: Trace) -> tuple[int, int]:
    """How many contributions of the sweep leave a gamma node and a beta node (leaves: they have no inputs)."""
    gammas = {id(v) for v in built.graph["gamma"]}
    betas = {id(v) for v in built.graph["beta"]}
    return (
        sum(id(c.out) in gammas for c in trace.contributions),
        sum(id(c.out) in betas for c in trace.contributions),
    )


def _siblings_line(built: LNBuilt, trace: Trace) -> CJKText:
    """The checked line: dxhat = gamma · dy, and no contribution leaves gamma or beta (their gradients go nowhere)."""
    from_gamma, from_beta = _from_params(built, trace)
    dxhat, expected = node_values(built, "xhat", "grad"), built.gamma * built.dy
    ok = (
        equal(dxhat, expected, "xhat.grad vs gamma · dy")
        & exactly(from_gamma, 0, "contributions leaving gamma")
        & exactly(from_beta, 0, "contributions leaving beta")
    )
    return claim(
        ok,
        _(
            "dxhat = gamma · dy exactly, and {count} contributions leave gamma or beta: their gradients "
            "are siblings of xhat's, not steps on its path"
        ).format(count=from_gamma + from_beta),
    )


def _via_params_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """Does the gradient reach xhat through dgamma and dbeta? Counted in the trace."""
    from_gamma, from_beta = _from_params(built, trace)
    evidence = (
        exactly(from_beta, 0, "contributions leaving beta") & at_least(from_gamma, 1, "contributions leaving gamma"),
        at_least(from_gamma, 1, "contributions leaving gamma") & at_least(from_beta, 1, "contributions leaving beta"),
        exactly(from_gamma + from_beta, 0, "contributions leaving gamma or beta"),
    )
    why = _(
        "The trace has {count} contributions leaving gamma or beta: they are leaves, so their gradients stop "
        "there. xhat gets its share from the product node γ·xhat, as gamma_i × the product's gradient dy_i."
    ).format(count=from_gamma + from_beta)
    return Prediction.from_evidence(
        _("Does the gradient reach xhat_i by way of dgamma_i and dbeta_i?"),
        (_("yes, through dgamma_i"), _("yes, through both"), _("no: it comes from the product node, beside them")),
        why,
        evidence,
    )


def _rstd_count_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """How many contributions rstd collects, counted in the trace."""
    rstd = built.graph["rstd"][0]
    count = trace.incoming.get(id(rstd), 0)
    d = len(built.graph["x"])
    choices = (_("1: it is one node"), _("d = {d}: one from every xhat_i").format(d=d), f"2·d = {2 * d}")
    why = _(
        "The trace counts {count}: every xhat_i = xshift_i · rstd uses rstd once, and the row has {d} of them."
    ).format(count=count, d=d)
    evidence = tuple(exactly(count, k, "contributions rstd collects") for k in (1, d, 2 * d))
    return Prediction.from_evidence(_("How many contributions will rstd collect?"), choices, why, evidence)


def _x_count_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """How many contributions x_0 receives in all, counted in the trace (2, though three paths reach it)."""
    count = trace.incoming.get(id(built.graph["x"][0]), 0)
    choices = ("1", "2", _("3: one per path"))
    why = _(
        "The trace counts {count} for x_0: one from xshift_0, which already carries the direct and the "
        "variance paths added together, and one from the mean's sum. Three paths, {count} edges."
    ).format(count=count)
    evidence = tuple(exactly(count, k, "contributions x_0 receives") for k in (1, 2, 3))
    return Prediction.from_evidence(_("How many contributions will x_0 receive in all?"), choices, why, evidence)


def _dvar_sign_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """The sign of dL/dvar, read off the var node after backward."""
    var = built.graph["var"][0]
    xshift = node_values(built, "xshift")
    dxhat = node_values(built, "xhat", "grad")
    total = float(np.sum(dxhat * xshift))
    # Σ dxhat·xshift is 0 up to the rounding of its terms: then so is dL/dvar, whatever its printed sign
    rounding = tol.cancellation_atol(float(np.sum(np.abs(dxhat * xshift))), len(xshift))
    what = "Σ dxhat·xshift (dL/dvar has the opposite sign)"
    evidence = (
        below(total, -rounding, what),
        above(total, rounding, what),
        at_most(abs(total), rounding, "|" + what + "|"),
    )
    choices = (_("positive"), _("negative"), _("zero"))
    why = _(
        "dL/dvar = {dvar}: `−½ (var + eps)^(−3/2)` is negative, so dL/dvar has the opposite sign of "
        "`Σ dxhat·xshift = {total}`."
    ).format(dvar=num(var.grad), total=num(total))
    return Prediction.from_evidence(_("What sign will dL/dvar have on this run?"), choices, why, evidence)


def path_legend() -> CJKText:
    """'paths into x: direct  via mean  via var', each name in its path's colour (the words carry it without)."""
    names = Text()
    for k in PATHS:
        names.append(f"{path_label(k)}  ", style=PATH_STYLE[k])
    return assemble(_("paths into x: {paths}"), "dim", paths=names)


@demo("ln_param_grads")
def ln_param_grads(p: LessonParams, rows: int = 2) -> DemoOutput:
    """dgamma and dbeta: autograd against the closed forms, summed over the rows that share them."""
    built = build_ln(p, rows, backward=True)
    m = formulas.moments(built.x, (-1,), p.eps)
    dgamma = formulas.dgamma(built.dy, m.xhat, (0,))
    dbeta = formulas.dbeta(built.dy, (0,))
    auto_g = node_values(built, "gamma", "grad")
    auto_b = node_values(built, "beta", "grad")
    table = index_table(("j", "Σ dy·xhat", "gamma.grad", "Σ dy", "beta.grad"), dgamma, auto_g, dbeta, auto_b)
    ok = agree(auto_g, dgamma, what="gamma.grad vs Σ dy·xhat") & agree(auto_b, dbeta, what="beta.grad vs Σ dy")
    note = dim_note(_("x has {rows} rows here, so each sum runs over {rows} rows.").format(rows=rows))
    return DemoOutput(Group(table, note, claim(ok, _("autograd = closed form for gamma and beta"))), graph=built.graph)


@demo("ln_node_grads")
def ln_node_grads(p: LessonParams, nodes: tuple[str, ...] = ("xhat",)) -> DemoOutput:
    """Named nodes' gradients: autograd against the closed forms of formulas.py."""
    built = build_ln(p, backward=True)
    closed = _closed(built, p.eps)
    autograd_h, closed_h = _("autograd"), _("closed form")
    table = plain_table(_("node"), autograd_h, closed_h, right=(autograd_h, closed_h))
    checks = []
    for name in nodes:
        auto = node_values(built, name, "grad")
        cf = np.ravel(closed[name])
        checks.append(agree(auto, cf, what=f"{name}: autograd vs closed form"))
        for k in range(len(auto)):
            table.add_row(built.graph.index_label(name, k), num(auto[k]), num(cf[k]))
    return DemoOutput(Group(table, claim(all_of(*checks), _("autograd = closed form"))), graph=built.graph)


@demo("ln_dvar_dmean")
def ln_dvar_dmean(p: LessonParams) -> DemoOutput:
    """Why the variance sends (almost) nothing into the mean: dvar/dmean = -(2/n) Σ xshift = 0."""
    built, trace = traced(p)
    xshift = node_values(built, "xshift")
    n = p.dim
    dvar_dmean = -2.0 / n * float(np.sum(xshift))
    mean = built.graph["mean"][0]
    parts = trace.parts_of(mean)
    value = pgettext("table header", "value")
    table = plain_table(_("quantity"), value, right=(value,))
    table.add_row(_("Σ xshift (should be 0)"), num(float(np.sum(xshift))))
    table.add_row("dvar/dmean = −(2/n) Σ xshift", num(dvar_dmean))
    direct, via_var = _("mean.grad, part from xhat (direct)"), _("mean.grad, part via the variance")
    table.add_row(Text(direct, style=PATH_STYLE["direct"]), num(parts.get("direct", 0.0)))
    table.add_row(Text(via_var, style=PATH_STYLE["var"]), num(parts.get("var", 0.0)))
    table.add_row(_("mean.grad (autograd, total)"), num(mean.grad))
    table.add_row(_("−rstd · Σ dxhat (closed form)"), num(float(np.ravel(_closed(built, p.eps)["mean"])[0])))
    scale = max(abs(mean.grad), 1.0)
    share = parts.get("var", 0.0)
    bound = tol.cancellation_atol(scale, n, units=1e3)  # rounding of n terms of mean.grad's size, with room
    ok = at_most(abs(share), bound, "|mean.grad's share via the variance|")
    rounding = (
        _("the variance's share of mean.grad is rounding error: 0 in exact arithmetic")
        if share != 0.0
        else _("the variance's share of mean.grad is exactly 0 here, as in exact arithmetic")
    )
    what = "mean.grad's share via the variance"
    evidence = (ok, above(share, bound, what), below(share, -bound, what))
    why = (
        _(
            "The engine's share of mean.grad via the variance is {share}, rounding error next to mean.grad = "
            "{grad}: dvar/dmean = −(2/n) Σ xshift, and values centered on their mean sum to zero."
        )
        if share != 0.0
        else _(
            "The engine's share of mean.grad via the variance is exactly 0 (mean.grad = {grad}): "
            "dvar/dmean = −(2/n) Σ xshift, and values centered on their mean sum to zero."
        )
    ).format(share=num(share), grad=num(mean.grad))
    prediction = Prediction.from_evidence(
        _("What does the variance path add to dL/dmean?"),
        (_("nothing: it is 0"), _("a positive amount"), _("a negative amount")),
        why,
        evidence,
    )
    return DemoOutput(Group(table, claim(ok, rounding)), graph=built.graph, prediction=prediction)


@demo("ln_x_paths")
def ln_x_paths(p: LessonParams) -> DemoOutput:
    """x's gradient split into its three paths by the traced backward, against formulas.dx_paths."""
    built, trace = traced(p)
    _m, _g, (direct, via_mean, via_var) = closed_paths(built.x, built.gamma, built.dy, p.eps)
    split = [trace.parts_of(node) for node in built.graph["x"]]
    auto = {k: np.array([parts.get(k, 0.0) for parts in split]) for k in PATHS}
    styled = {k: [Text(num(v), style=PATH_STYLE[k]) for v in auto[k]] for k in PATHS}
    xgrad = node_values(built, "x", "grad")
    table = index_table(
        ("i", *(Text(path_label(k), style=PATH_STYLE[k]) for k in PATHS), "x.grad"), *styled.values(), xgrad
    )
    ok = all_of(
        *(agree(auto[k], ref, what=f"{k} path vs dx_paths") for k, ref in zip(PATHS, (direct, via_mean, via_var)))
    )
    total_ok = agree(auto["direct"] + auto["mean"] + auto["var"], xgrad, 1e-12, 1e-14, "sum of paths vs x.grad")
    return DemoOutput(
        Group(
            table,
            claim(ok, _("each path matches its closed form in formulas.dx_paths")),
            claim(total_ok, _("the three paths add up to x.grad")),
        ),
        graph=built.graph,
        graph_options={"paths": True, "path_input": 0},
        prediction=path_prediction(trace.parts_of(built.graph["x"][0]), built.graph),
    )


@demo("ln_paths_code")
def ln_paths_code(p: LessonParams) -> DemoOutput:
    """formulas.dx_paths, the closed form of the three paths in NumPy, beside the traced contributions into x[0]."""
    built, trace = traced(p)
    m, g, closed = closed_paths(built.x, built.gamma, built.dy, p.eps)
    parts = trace.parts_of(built.graph["x"][0])
    # Translators: the headers of a table comparing, per path into x[0], the NumPy closed form with the sum of
    # the traced contributions
    numpy_h, traced_h = _("these lines"), _("traced")
    table = plain_table(_("path into x[0]"), numpy_h, traced_h, right=(numpy_h, traced_h))
    checks = []
    for k, ref in zip(PATHS, closed):
        got = parts.get(k, 0.0)
        checks.append(agree(got, ref[0], what=f"{k} path into x[0]: traced vs these lines"))
        table.add_row(Text(path_label(k), style=PATH_STYLE[k]), num(float(ref[0])), num(got))
    dvar = float(np.ravel(formulas.dvar(g, m.xshift, m.std, (-1,)))[0])
    prediction = _via_var_sum_prediction(np.ravel(closed[2]), dvar)
    return DemoOutput(
        Group(code_of(formulas.dx_paths), table, claim(all_of(*checks), _("each path: these lines = the traced sum"))),
        graph=built.graph,
        graph_options={"paths": True, "path_input": 0},
        prediction=prediction,
    )


def _via_var_sum_prediction(via_var: np.ndarray, dvar: float) -> Prediction:
    """Add the via-variance path up over every x_i: 0 (the centered values sum to 0), measured."""
    total = float(np.sum(via_var))
    zero = cancels(total, float(np.sum(np.abs(via_var))), "sum over i of the via-variance path", len(via_var))
    is_dvar = within(total, dvar, 1e-6, "sum over i of the via-variance path vs dL/dvar")
    evidence = (zero, all_of(~zero, is_dvar), all_of(~zero, ~is_dvar))
    why = _(
        "The sum is {total}: each term is dL/dvar · 2·xshift_i / n, and the centered values xshift_i sum to 0."
    ).format(total=err(total))
    return Prediction.from_evidence(
        _("Add up the via-variance path over every x_i. What is the total?"),
        (_("0, up to rounding"), _("the same as dL/dvar"), _("some other number")),
        why,
        evidence,
    )


@demo("norm_code")
def norm_code(p: LessonParams, norm: str = "layernorm") -> DemoOutput:
    """The package function that builds a norm's graph, as its live source, and the call this demo made."""
    spec = get_norm(norm)
    shape = spec.default_shape(p.dim, p.batch)
    x, gamma, beta, _dy = (None if a is None else np.round(a, 2) for a in random_problem(spec, shape, p.seed))
    args = [x.tolist(), gamma.tolist()] + ([beta.tolist()] if spec.has_beta else [])
    y = spec.builder(*args, eps=p.eps)
    call = "{name}(x, gamma{beta}, eps={eps})".format(
        name=spec.builder.__name__, beta=", beta" if spec.has_beta else "", eps=f"{p.eps:g}"
    )
    # Translators: {call} is a Python call such as layer_norm(x, gamma, beta, eps=1e-05); {shape} is like [4]
    ran = _("called here as {call}, x of shape {shape}, {count} output Values").format(
        call=call, shape=bracketed(shape), count=math.prod(shape)
    )
    return DemoOutput(Group(code_of(spec.builder), dim_note(ran)), graph=y.graph)


def path_prediction(parts: dict[str, float], graph: NormGraph | None = None) -> Prediction:
    """Which of the three paths into x[0] is largest in size, answered from the traced split ``parts``.

    With the ``graph`` (after backward), ``why`` writes each path out as its factors, read off the nodes.
    """
    sizes = tuple(abs(parts.get(k, 0.0)) for k in PATHS)
    evidence = largest(sizes, PATHS, "size of the path into x[0]")
    # Translators: one path's share, e.g. "via mean 1.627"
    shares = separated([_("{path} {share}").format(path=path_label(k), share=num(parts.get(k, 0.0))) for k in PATHS])
    why = _("For x[0]: {shares}.").format(shares=shares)
    if graph is not None:
        n = len(graph["x"])
        rstd, dxhat0 = graph["rstd"][0].data, graph["xhat"][0].grad
        dmean, dvar, xshift0 = graph["mean"][0].grad, graph["var"][0].grad, graph["xshift"][0].data
        d, m, v = (num(parts.get(k, 0.0)) for k in PATHS)
        why = _(
            "direct = rstd·dxhat_0 = {rstd} × {dxhat0} = {direct}; via mean = dL/dmean / n = "
            "{dmean} / {n} = {via_mean}; via var = dL/dvar · 2·xshift_0 / n = {dvar} × 2 × {xshift0} / {n} = "
            "{via_var}."
        ).format(
            rstd=num(rstd),
            dxhat0=num(dxhat0),
            direct=d,
            dmean=num(dmean),
            n=n,
            via_mean=m,
            dvar=num(dvar),
            xshift0=num(xshift0),
            via_var=v,
        )
    return Prediction.from_evidence(
        _("Which of the three paths carries the most gradient into x[0] (largest in size)?"),
        (pgettext("choice", "direct"), _("via the mean"), _("via the variance")),
        why,
        evidence,
    )


@demo("ln_simplified")
def ln_simplified(p: LessonParams) -> DemoOutput:
    """The simplified formula rstd · (g − mean(g) − xhat · mean(g · xhat)), term by term, against autograd."""
    built = build_ln(p, backward=True)
    m = formulas.moments(built.x, (-1,), p.eps)
    g = formulas.dxhat(built.dy, built.gamma)
    m1 = float(np.mean(g))
    m2 = float(np.mean(g * m.xhat))
    dx = formulas.dx_simplified(g, m.xhat, m.rstd, (-1,))
    auto = node_values(built, "x", "grad")
    head = Text.assemble(
        ("mean(g) = ", "bold"),
        num(m1),
        ("   mean(g·xhat) = ", "bold"),
        num(m2),
        ("   rstd = ", "bold"),
        num(float(m.rstd.ravel()[0])),
    )
    table = index_table(("i", "g", "xhat", _("formula"), _("autograd")), g, m.xhat, dx, auto)
    same = _("formula = autograd ({difference})").format(difference=difference(auto, dx))
    return DemoOutput(
        Group(head, table, claim(agree(auto, dx, what="autograd vs formula"), same)),
        graph=built.graph,
        prediction=_shift_g_prediction(g, m),
    )


SHIFT_G = 3.0  # added to every g_i in lesson 5's question on the simplified formula


def _shift_g_prediction(g: np.ndarray, m: formulas.Moments) -> Prediction:
    """Add the same number to every g_i: what happens to dx? Measured with the formula itself."""
    rstd = float(m.rstd.ravel()[0])
    moved = formulas.dx_simplified(g + SHIFT_G, m.xhat, m.rstd, (-1,)) - formulas.dx_simplified(
        g, m.xhat, m.rstd, (-1,)
    )
    gap = float(np.max(np.abs(moved)))
    size = rstd * (float(np.max(np.abs(g))) + SHIFT_G) * (1.0 + float(np.max(m.xhat**2)))
    bound = tol.cancellation_atol(size, len(g))  # what rounding leaves of terms that cancel
    evidence = (
        at_most(gap, bound, "max |dx(g + c) − dx(g)|"),
        close_to(moved, np.full_like(moved, rstd * SHIFT_G), 1e-6, 0.0, "dx(g + c) − dx(g) vs rstd·c"),
        close_to(moved, np.full_like(moved, SHIFT_G), 1e-6, 0.0, "dx(g + c) − dx(g) vs c"),
    )
    if gap == 0:
        why = _(
            "dx did not move: every entry is exactly the same. The mean path subtracts mean(g), which took "
            "the {c} with it, and mean(g·xhat) gains {c}·mean(xhat) = 0."
        )
    else:
        why = _(
            "dx moved by at most {gap}: rounding. The mean path subtracts mean(g), which took the {c} with it, "
            "and mean(g·xhat) gains {c}·mean(xhat) = 0."
        )
    why = why.format(gap=err(gap), c=f"{SHIFT_G:g}")
    c = f"{SHIFT_G:g}"
    return Prediction.from_evidence(
        _("Add {c} to every g_i. What happens to dx?").format(c=c),
        (_("nothing"), _("every dx_i grows by rstd·{c}").format(c=c), _("every dx_i grows by {c}").format(c=c)),
        why,
        evidence,
    )


@demo("ln_check_table")
def ln_check_table(p: LessonParams, rows: int | None = None) -> DemoOutput:
    """The per-node three-way check (autograd, closed form, finite difference) on the lesson's numbers."""
    x, gamma, beta, dy = ln_problem(p, rows)
    report = check_norm("layernorm", x, gamma, beta, p.eps, dy)
    for node in report.nodes:  # the table's ✓/✗ per node, with what decided it
        agreeing = node.entry_ok if node.entry_ok is not None else np.array([node.passed])
        mark(at_most(int(np.sum(~agreeing)), 0, f"{node.name}: entries where autograd, closed form and fd disagree"))
    built = build_ln(p, rows, backward=True)
    return DemoOutput(check_table(report), graph=built.graph)


# ---- the gradient for the parameters and the gradient handed back ----------------------


def previous_layer(p: LessonParams, inputs: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The layer below LayerNorm in lesson 4: x = W·u with W [dim, inputs] and u [inputs], rounded."""
    rng = rng_for(p.seed, 40)
    return np.round(rng.normal(size=(p.dim, inputs)), 2), np.round(rng.normal(size=inputs), 2)


def linear_then_ln(p: LessonParams, inputs: int = 2) -> dict[str, object]:
    """x = W·u, then LayerNorm, then loss = Σ y·dy, all in one graph; backward() once.

    Returns W, u, the W leaves' gradients, the gradient that reached the x nodes
    (what LayerNorm hands back) and the graph.
    """
    _x, gamma, beta, dy = ln_problem(p)
    w, u = previous_layer(p, inputs)
    w_leaves = [[Value(float(v), label="W") for v in row] for row in w]
    x = [Value.dot(row, u.tolist()) for row in w_leaves]  # x_i = Σ_j W[i,j] u_j
    graph = layer_norm(x, gamma.tolist(), beta.tolist(), p.eps).graph
    loss = graph.loss(dy.tolist())
    loss.backward()
    return {
        "w": w,
        "u": u,
        "w_grad": np.array([[v.grad for v in row] for row in w_leaves]),
        "dx": np.array([v.grad for v in x]),
        "dgamma": np.array([v.grad for v in graph["gamma"]]),
        "graph": graph,
    }


@demo("ln_param_vs_input")
def ln_param_vs_input(p: LessonParams, inputs: int = 2) -> DemoOutput:
    """A linear layer x = W·u below LayerNorm: its weight gradient is LayerNorm's dx times uᵀ."""
    r = linear_then_ln(p, inputs)
    u, dx, w_grad = r["u"], r["dx"], r["w_grad"]
    layer = Text(_("x = W·u with u = {u}").format(u=vec(u)))
    head = assemble(_("the layer below: {layer}"), "bold", layer=layer)
    table = index_table(("i", _("dx_i (handed back)"), *(f"W.grad[i,{j}]" for j in range(len(u)))), dx, *w_grad.T)
    ok = agree(w_grad, np.outer(dx, u), what="W.grad vs dx·uᵀ")
    grad_line = _("W.grad[i,j] = dx_i · u_j for every entry ({difference})").format(
        difference=difference(w_grad, np.outer(dx, u))
    )
    # a drift below: the layer below's outputs all move by DRIFT (a bias that wandered)
    _x, gamma, beta, dy = ln_problem(p)
    x = r["w"] @ r["u"]
    drifted = autograd_dx("layernorm", x + DRIFT, gamma, beta, p.eps, dy)[0]["x"]
    change = float(np.max(np.abs(drifted - dx)))
    rstd = 1.0 / np.sqrt(np.var(x) + p.eps)
    steady = at_most(change, 2 * tol.norm_dx_atol(x + DRIFT, gamma, dy, rstd), "max |dx after the drift − dx|")
    drift = _("every x moved by {drift} (a drift below): dx handed back changed by {change}").format(
        drift=f"{DRIFT:g}", change=f"{change:.1e}"
    )
    return DemoOutput(Group(head, table, claim(ok, grad_line), claim(steady, drift)), graph=r["graph"])


# "about c": the best factor within 5% of c, and every entry within 5% of the column's size of c times
# the old one (a tolerance for the reading, far above rounding; the why prints the factor itself)
FACTOR_RTOL = 0.05
DRIFT = 3.0  # how far ln_param_vs_input moves every x to show that LayerNorm's dx ignores a drift in the mean


# ---- does dgamma care about the scale of x? -----------------------------------------------


def _grads_at(p: LessonParams, x: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    _x, gamma, beta, dy = ln_problem(p)
    return autograd_dx("layernorm", x, gamma, beta, eps, dy)[0]


def scale_ratio(new: np.ndarray, old: np.ndarray) -> float:
    """The factor c that best explains new ≈ c·old (least squares); NaN when old is zero."""
    denominator = float(old @ old)
    return float(new @ old) / denominator if denominator > 0 else float("nan")


@demo("ln_double_x")
def ln_double_x(p: LessonParams, factor: float = 2.0) -> DemoOutput:
    """dgamma and dx for x and for factor·x (asked as a prediction first)."""
    x = ln_problem(p)[0]
    one, scaled = _grads_at(p, x, p.eps), _grads_at(p, factor * x, p.eps)
    # LN_eps(c·x) = LN_{eps/c²}(x): whatever changes in dgamma is eps's doing, and this predicts it exactly
    predicted = _grads_at(p, x, p.eps / factor**2)
    # Translators: {factor}x is the input scaled, e.g. "at 2x"
    at_scaled = _("at {factor}x").format(factor=f"{factor:g}")
    cols = ("j", _("dgamma at x"), at_scaled, _("dx at x"), at_scaled)
    table = index_table(cols, one["gamma"], scaled["gamma"], one["x"], scaled["x"])
    same = agree(scaled["gamma"], predicted["gamma"], what="dgamma at c·x vs dgamma at x with eps/c²")
    change = difference(scaled["gamma"], one["gamma"])
    # Translators: {factor}x is the input scaled, e.g. "2x"; {square} is the factor squared, e.g. 4
    moved = _(
        "dgamma at {factor}x = dgamma at x with eps/{square}: "
        "the whole change from x to {factor}x ({change}) is eps's doing"
    )
    if p.eps == 0:  # nothing for eps to do: the two columns agree up to rounding
        # Translators: {factor}x is the input scaled, e.g. "2x"
        moved = _("dgamma at {factor}x = dgamma at x: at eps = 0 LayerNorm ignores the scale of x ({change})")
    lines = [table, claim(same, moved.format(factor=f"{factor:g}", square=f"{factor**2:g}", change=change))]
    reading = (p.eps, float(np.var(x)))
    _x, gamma, _beta, dy = ln_problem(p)
    floor = tol.norm_dx_atol(x, gamma, dy, 1.0 / math.sqrt(reading[1] + p.eps))
    return DemoOutput(Group(*lines), prediction=_double_prediction(one, scaled, factor, reading, floor))


def _double_prediction(
    one: dict[str, np.ndarray],
    scaled: dict[str, np.ndarray],
    factor: float,
    reading: tuple[float, float] = (0.0, 1.0),
    dx_floor: float = 0.0,
) -> Prediction:
    """The answer from the two dgamma columns; ``reading`` is (eps, var(x)), for the why when eps is not small.

    For one row, xhat at c·x is xhat at x times c·√((var + eps)/(c²·var + eps)): one factor for every
    dgamma_j, between 1 (eps ≪ var) and c (eps ≫ var). The least-squares factor between the two columns
    is the answer's measure: a choice "about k" holds when that factor is within :data:`FACTOR_RTOL` of k
    and explains every entry to that tolerance too; "a factor between 1 and c" when one factor explains
    every entry and lies between, away from both. ``dx_floor``: the size below which a dx entry is rounding.
    """
    f = f"{factor:g}"
    choices = (
        _("it is multiplied by about {factor}").format(factor=f),
        _("it stays about the same"),
        _("it is divided by about {factor}").format(factor=f),
        _("it grows, by one factor clearly between 1 and {factor}").format(factor=f),
    )
    g_one, g_scaled = one["gamma"], scaled["gamma"]
    g_ratio = scale_ratio(g_scaled, g_one)
    # how far one factor is from explaining the scaled column: the fit's residual, relative to the column
    size = float(np.max(np.abs(g_scaled)))
    residual = float(np.max(np.abs(g_scaled - g_ratio * g_one))) / size if size > 0 else 0.0
    residual = residual if residual == residual else math.inf
    off = [abs(g_ratio / t - 1.0) if g_ratio == g_ratio else math.inf for t in (factor, 1.0, 1.0 / factor)]
    what = "dgamma at {f}x ÷ dgamma at x: |best factor ÷ {t} − 1| and the fit's relative residual"
    low, high = sorted((1.0, factor))
    between = (
        at_most(residual, FACTOR_RTOL, "the one factor's relative residual over the dgamma column")
        & above(min(off), FACTOR_RTOL, "the nearest simple factor's miss")
        & above(g_ratio, low, "the factor, above the lower end")
        & below(g_ratio, high, "the factor, below the upper end")
    )
    evidence = (
        *(
            at_most(max(o, residual), FACTOR_RTOL, what.format(f=f"{factor:g}", t=f"{t:g}"))
            for o, t in zip(off, (factor, 1.0, 1.0 / factor))
        ),
        between,
    )
    answer = first_holding(evidence)
    eps, var = reading
    if answer == 1:
        why = _(
            "`dgamma = Σ dy·xhat`, and xhat does not see the scale of x (only eps does): "
            "every dgamma_j was multiplied by the same {g_ratio}."
        )
    else:
        # Translators: {factor} is the scale, e.g. 2; {square} its square, e.g. 4
        why = _(
            "`dgamma = Σ dy·xhat`. Without eps, xhat would not see the scale of x; but eps = {eps} is not small "
            "next to var(x) = {var}, so xhat grows with x, by `{factor}·√((var + eps)/({square}·var + eps))`: "
            "every dgamma_j was multiplied by the same {g_ratio}."
        )
    why = why.format(eps=f"{eps:g}", var=num(var), g_ratio=num(g_ratio, 6), factor=f, square=f"{factor**2:g}")
    return Prediction(
        _("Multiply every x_i by {factor}. What happens to dgamma?").format(factor=f),
        choices,
        answer,
        sentences((why, _dx_reading(one["x"], scaled["x"], dx_floor, eps))),
        evidence,
    )


def _dx_reading(dx1: np.ndarray, dx2: np.ndarray, floor: float, eps: float) -> str:
    """What scaling x did to dx: one factor, a range of factors entry by entry, or none (dx is 0)."""
    live = np.abs(dx1) > floor
    if not live.any():
        if len(dx1) == 2 and eps == 0:
            return _(
                "dx is 0 here (d = 2, eps = 0: the output is ±1 whatever x is), so it has no factor; "
                "rerun with --dim 3 to see one."
            )
        return _("dx is 0 here up to rounding, so it has no factor.")
    ratios = dx2[live] / dx1[live]
    low, high = float(np.min(ratios)), float(np.max(ratios))
    if low > 0 and high <= low * (1 + FACTOR_RTOL):
        return _("dx, by contrast, was multiplied by about {x_ratio}.").format(x_ratio=num(scale_ratio(dx2, dx1), 3))
    return _("dx, by contrast, has no common factor: its entries were multiplied by {low} to {high}.").format(
        low=num(low, 3), high=num(high, 3)
    )


# ---- the slip: a non-zero dvar/dmean -------------------------------------------------------


def ln_loss_numpy(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, dy: np.ndarray, eps: float) -> float:
    """loss = Σ dy · (gamma · (x − mean)/sqrt(var + eps) + beta), written out in NumPy."""
    xshift = x - x.mean()
    return float(np.sum(dy * (gamma * xshift / np.sqrt(np.mean(xshift**2) + eps) + beta)))


def slipped_variance_path(dvar: np.ndarray, xshift: np.ndarray, n: int) -> np.ndarray:
    """The variance path as the slipped derivation writes it.

    It lets x_i reach the variance twice: directly (dvar/dx_i = 2·xshift_i/n) and
    through the mean, with dvar/dmean taken to be −2·xshift_i/n (one term of a
    sum that is really zero) times dmean/dx_i = 1/n.
    """
    direct = 2.0 * xshift / n
    through_mean = (-2.0 * xshift / n) * (1.0 / n)
    return dvar * (direct + through_mean)


@demo("ln_dvar_dmean_slip")
def ln_dvar_dmean_slip(p: LessonParams) -> DemoOutput:
    """The variance path with a non-zero dvar/dmean, beside the true one and a finite difference."""
    x, gamma, beta, dy = ln_problem(p)
    n = p.dim
    m, g, (direct, via_mean, via_var) = closed_paths(x, gamma, dy, p.eps)
    slipped = slipped_variance_path(formulas.dvar(g, m.xshift, m.std, (-1,)), m.xshift, n)
    ratios = [num(s / v if v != 0 else float("nan"), 6) for s, v in zip(slipped, via_var)]
    table = index_table(("i", _("via var (true)"), _("via var (slip)"), _("slip ÷ true")), via_var, slipped, ratios)
    fd = numerical_gradient(lambda v: ln_loss_numpy(v, gamma, beta, dy, p.eps), x)
    right, wrong = direct + via_mean + via_var, direct + via_mean + slipped
    shrunk = agree(slipped, (n - 1) / n * via_var, what="slipped var path vs (n − 1)/n × true")
    misses = differs(wrong, fd, tol.FD_RTOL, tol.FD_ATOL, "slipped dx vs finite difference")
    true_ok = fd_agree(right, fd, "true dx")
    return DemoOutput(
        Group(
            table,
            claim(
                shrunk,
                _("the slip multiplies the variance path by (n − 1)/n = {factor}").format(factor=num((n - 1) / n, 6)),
            ),
            claim(true_ok, _("true dx vs finite difference: {difference}").format(difference=difference(right, fd))),
            claim(
                misses,
                _("slipped dx vs finite difference: {difference}, a real error").format(
                    difference=difference(wrong, fd)
                ),
            ),
        )
    )
