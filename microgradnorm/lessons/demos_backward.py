"""Demos of lessons 04 and 05 that go beyond one backward sweep through LayerNorm.

* what the parameters' gradients (dgamma, dbeta) are for, and what the input's
  gradient dx is for: the layer below turns dx into its own weight gradient;
* whether dgamma cares about the scale of x (a question asked before the numbers);
* a slip that is easy to make: a non-zero dvar/dmean, which shrinks
  the variance path by (n - 1)/n;
The step-by-step backward tables themselves, and the three paths into x, are
in :mod:`demos_core`.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.engine import Value
from microgradnorm.finite_diff import numerical_gradient
from microgradnorm.i18n import _
from microgradnorm.i18n.text import assemble
from microgradnorm.lessons.demo_tools import autograd_dx, rng_for
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.demos_core import (
    agree,
    difference,
    fd_agree,
    ln_problem,
    num,
    plain_table,
    vec,
)
from microgradnorm.norms import layer_norm
from microgradnorm.verdicts import above, at_most, claim, differs, first_holding

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
    cols = ["i", _("dx_i (handed back)"), *[f"W.grad[i,{j}]" for j in range(len(u))]]
    table = plain_table(*cols, right=cols)
    for i in range(len(dx)):
        table.add_row(str(i), num(dx[i]), *[num(w_grad[i, j]) for j in range(len(u))])
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
    table = plain_table(*cols, right=cols)
    for j in range(p.dim):
        table.add_row(str(j), num(one["gamma"][j]), num(scaled["gamma"][j]), num(one["x"][j]), num(scaled["x"][j]))
    same = agree(scaled["gamma"], predicted["gamma"], what="dgamma at c·x vs dgamma at x with eps/c²")
    change = difference(scaled["gamma"], one["gamma"])
    # Translators: {factor}x is the input scaled, e.g. "2x"; {square} is the factor squared, e.g. 4
    moved = _(
        "dgamma at {factor}x = dgamma at x with eps/{square}: "
        "the whole change from x to {factor}x ({change}) is eps's doing"
    )
    lines = [table, claim(same, moved.format(factor=f"{factor:g}", square=f"{factor**2:g}", change=change))]
    reading = (p.eps, float(np.var(x)))
    return DemoOutput(Group(*lines), prediction=_double_prediction(one, scaled, factor, reading))


def _double_prediction(
    one: dict[str, np.ndarray], scaled: dict[str, np.ndarray], factor: float, reading: tuple[float, float] = (0.0, 1.0)
) -> Prediction:
    """The answer from the two dgamma columns; ``reading`` is (eps, var(x)), for the why when eps is not small.

    The least-squares factor between the two columns is the answer's measure: a choice "about c" holds when
    that factor is within :data:`FACTOR_RTOL` of c and explains every entry to that tolerance too; otherwise
    the answer is "no simple factor", with the factor in the why.
    """
    f = f"{factor:g}"
    choices = (
        _("it is multiplied by about {factor}").format(factor=f),
        _("it stays about the same"),
        _("it is divided by about {factor}").format(factor=f),
        _("it changes by no simple factor"),
    )
    g_one, g_scaled = one["gamma"], scaled["gamma"]
    g_ratio = scale_ratio(g_scaled, g_one)
    # how far one factor is from explaining the scaled column: the fit's residual, relative to the column
    size = float(np.max(np.abs(g_scaled)))
    residual = float(np.max(np.abs(g_scaled - g_ratio * g_one))) / size if size > 0 else 0.0
    residual = residual if residual == residual else math.inf
    off = [abs(g_ratio / t - 1.0) if g_ratio == g_ratio else math.inf for t in (factor, 1.0, 1.0 / factor)]
    what = "dgamma at {f}x ÷ dgamma at x: |best factor ÷ {t} − 1| and the fit's relative residual"
    evidence = (
        *(
            at_most(max(o, residual), FACTOR_RTOL, what.format(f=f"{factor:g}", t=f"{t:g}"))
            for o, t in zip(off, (factor, 1.0, 1.0 / factor))
        ),
        above(min(max(o, residual) for o in off), FACTOR_RTOL, "the nearest simple factor's miss"),
    )
    answer = first_holding(evidence)
    x_ratio = scale_ratio(scaled["x"], one["x"])
    eps, var = reading
    if answer == 1:
        why = _(
            "dgamma = Σ dy·xhat, and xhat does not see the scale of x (only eps does): the best factor "
            "between the two dgamma columns is {g_ratio}. dx, by contrast, was multiplied by about {x_ratio}."
        )
    else:
        why = _(
            "dgamma = Σ dy·xhat. Without eps, xhat would not see the scale of x; but eps = {eps} is not small "
            "next to var(x) = {var}, so xhat still grows with x: the best factor "
            "between the two dgamma columns is {g_ratio}. dx, by contrast, was multiplied by about {x_ratio}."
        )
    why = why.format(eps=f"{eps:g}", var=num(var), g_ratio=num(g_ratio, 6), x_ratio=num(x_ratio, 3))
    question = _("Multiply every x_i by {factor}. What happens to dgamma?").format(factor=f)
    return Prediction(question, choices, answer, why, evidence)


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
    m = formulas.moments(x, (-1,), p.eps)
    g = formulas.dxhat(dy, gamma)
    direct, via_mean, via_var = formulas.dx_paths(g, m.xshift, m.std, m.rstd, (-1,))
    slipped = slipped_variance_path(formulas.dvar(g, m.xshift, m.std, (-1,)), m.xshift, n)
    cols = ("i", _("via var (true)"), _("via var (slip)"), _("slip ÷ true"))
    table = plain_table(*cols, right=cols)
    for i in range(n):
        ratio = slipped[i] / via_var[i] if via_var[i] != 0 else float("nan")
        table.add_row(str(i), num(via_var[i]), num(slipped[i]), num(ratio, 6))
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
