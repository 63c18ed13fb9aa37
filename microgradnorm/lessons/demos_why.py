"""Demos of lesson 02: why we normalize at all.

What normalizing means (a small batch standardized per feature and per
example), then the arguments, each computed live: gradients inherit the scale
of the inputs, so badly scaled inputs make a lopsided loss landscape that
gradient descent crawls through; raw weights take on the units of their
features; a deep product of random matrices shrinks or blows up activations
unless they are standardized between the matrices, which also stops the scale
of the initialization from compounding; large pre-activations saturate a
sigmoid and starve the layers below of gradient. Last, the affine step can
undo the normalization exactly (gamma = sqrt(var + eps), beta = mean), and
where it can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.drawing.charts import HeatMap, LineChart, bar_chart, heat_map, line_chart
from microgradnorm.drawing.figure import line_chart_svg
from microgradnorm.engine import Value
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import separated
from microgradnorm.lessons.demo_tools import dim_note, engine_forward, fmt, matrix_table, number_table, rng_for, sci
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_RTOL, cancellation_atol
from microgradnorm.verdicts import (
    Check,
    Checks,
    above,
    all_of,
    at_least,
    at_most,
    below,
    claim,
    close_to,
    exactly,
    first_holding,
    nearest,
    within,
)

# the running example: a distance-like feature and a ratio-like feature
X1, X2 = 10000.0, 0.1
SHOWN = 6  # the most rows and columns step 1 prints of a batch (6 signed 3-digit columns fit 60 columns)
# with 2 rows each standardized column is ±c, c = 1 up to eps: a row mean below this reads as 0 in the table
LOOKS_CENTRED = 1e-3


def shown(problem: str) -> str:
    """The name of a problem, "raw" or "standardized", as the learner reads it in tables, legends and lines."""
    # Translators: the linear fit on the features as measured, and the same fit on standardized features
    names = {
        "raw": pgettext("lesson 2: the fit on the features as measured", "raw"),
        "standardized": pgettext("lesson 2: the fit on standardized features", "standardized"),
    }
    return names[problem]


# ---- what normalizing means ----------------------------------------------------------


def _standardized(x: np.ndarray, axis: int, eps: float) -> np.ndarray:
    """(x − mean) / sqrt(var + eps) along ``axis`` (formulas.moments, the same code every norm uses)."""
    return formulas.moments(x, (axis,), eps).xhat


def _is_standardized(m: np.ndarray, raw: np.ndarray, axis: int, eps: float) -> Checks:
    """Mean 0 and spread √(var/(var + eps)) along ``axis``, the var being the raw numbers'."""
    var = np.var(raw, axis=axis)
    size = float(np.max(np.abs(m)))
    centered = at_most(
        float(np.max(np.abs(np.mean(m, axis=axis)))), cancellation_atol(size, m.shape[axis]), "largest |mean|"
    )
    spread = close_to(np.std(m, axis=axis), np.sqrt(var / (var + eps)), 1e-12, 0.0, "spread vs √(var/(var + eps))")
    return centered & spread


def _spread_line(m: np.ndarray, axis: int, eps: float, which: str) -> str:
    """'each column: mean 0, spread 0.77 to 0.9': the spreads measured in ``m``, never assumed to be 1."""
    spreads = np.std(m, axis=axis)
    lo, hi = fmt(float(spreads.min()), 3), fmt(float(spreads.max()), 3)
    spread = lo if lo == hi else _("{low} to {high}").format(low=lo, high=hi)
    if eps == 0:
        # Translators: {which} is "each column" or "each row"; {spread} is a number or "0.77 to 0.9"
        return _("{which}: mean 0, spread {spread}").format(which=which, spread=spread)
    # Translators: {which} is "each column" or "each row"; {spread} is a number or "0.77 to 0.9"
    return _("{which}: mean 0, spread {spread}, that is √(var/(var+eps))").format(which=which, spread=spread)


def _both_ways_tables(x: np.ndarray, per_feature: np.ndarray, per_example: np.ndarray) -> list[RenderableType]:
    """X and its two standardizations as tables of their first SHOWN rows and columns (saying so if cut)."""
    examples, features = x.shape
    parts: list[RenderableType] = []
    for title, m in (
        (
            _("X: {examples} examples (rows), {features} features (columns)").format(
                examples=examples, features=features
            ),
            x,
        ),
        (_("each feature, down its column (as BatchNorm does)"), per_feature),
        (_("each example, along its row (as LayerNorm does)"), per_example),
    ):
        parts.append(matrix_table(m[:SHOWN, :SHOWN], title=title, digits=3))
    if examples > SHOWN or features > SHOWN:
        shown = _(
            "(the first {rows} of {examples} rows and {columns} of {features} columns shown; the lines below cover all)"
        )
        parts.append(
            dim_note(
                shown.format(
                    rows=min(examples, SHOWN), examples=examples, columns=min(features, SHOWN), features=features
                )
            )
        )
    return parts


def _spread_out(x: np.ndarray) -> np.ndarray:
    """x, nudged when a column or a row is constant (which has no spread to divide by)."""
    if np.ptp(x, axis=0).min() == 0 or np.ptp(x, axis=1).min() == 0:
        x = x + 0.1 * np.arange(x.size).reshape(x.shape) ** 2
    return x


@demo("standardize_both_ways")
def standardize_both_ways(p: LessonParams, examples: int | None = None, features: int | None = None) -> DemoOutput:
    """A small batch standardized per feature (down each column) and per example (along each row).

    Its shape is [--batch, --dim] (3 rows when the lesson runs without a batch); a table wider than
    the screen shows its first columns and says how many it leaves out.
    """
    examples = examples if examples is not None else (p.batch or 3)
    features = features if features is not None else p.dim
    # at least 3 rows drawn, the first `examples` shown: the answer needs a batch whose rows can fail
    drawn = np.round(rng_for(p.seed, 36).normal(5.0, 3.0, size=(max(examples, 3), features)), 1)
    x, third = _spread_out(drawn[:examples].copy()), _spread_out(drawn)
    per_feature, per_example = _standardized(x, 0, p.eps), _standardized(x, 1, p.eps)
    parts = _both_ways_tables(x, per_feature, per_example)
    columns = _spread_line(per_feature, 0, p.eps, _("each column"))
    rows = _spread_line(per_example, 1, p.eps, _("each row"))
    parts += [
        claim(_is_standardized(per_feature, x, 0, p.eps), columns),
        claim(_is_standardized(per_example, x, 1, p.eps), rows),
    ]
    zero = cancellation_atol(float(np.max(np.abs(per_feature))), features)
    row_means = np.abs(per_feature.mean(axis=1))
    happens = bool(row_means.max() <= zero)  # every shown row centred by chance (2 rows: each column is -1, +1)
    # the question is general: the shown rows answer it unless they happen to be centred; then 3 rows do
    # with 2 rows and eps > 0 the row means can be nonzero yet far too small to show it: 3 rows show it
    tiny = examples == 2 and not happens and row_means.max() <= LOOKS_CENTRED
    tested = _standardized(third, 0, p.eps).mean(axis=1) if happens or tiny else per_feature.mean(axis=1)
    evidence = (
        at_most(float(np.abs(tested).max()), zero, "largest |row mean| after standardizing columns"),
        above(float(np.abs(tested).max()), zero, "largest |row mean| after standardizing columns"),
    )
    signed = float(tested[np.argmax(np.abs(tested))])  # the largest in size, with its sign
    if tiny:
        why = _(
            "Here every row's mean is tiny, at most {small} (with 2 rows each standardized column is about "
            "−1, +1); with a third row, one row's mean is {largest}."
        ).format(small=fmt(float(row_means.max()), 3), largest=fmt(signed, 3))
    elif not happens:
        why = _("One row's mean is {largest} here: centering columns says nothing about rows.").format(
            largest=fmt(signed, 3)
        )
    elif examples == 2:
        why = _(
            "Here every row's mean happens to be 0 (with 2 rows each standardized column is −1, +1); "
            "with a third row, one row's mean is {largest}."
        ).format(largest=fmt(signed, 3))
    else:
        why = _("Here every row's mean happens to be 0; with other rows, one row's mean is {largest}.").format(
            largest=fmt(signed, 3)
        )
    prediction = Prediction.from_evidence(
        _("Standardize each column. Does each row get mean 0 too?"),
        (_("yes, every row too"), _("no, not in general")),
        why,
        evidence,
    )
    return DemoOutput(Group(*parts), prediction=prediction)


# ---- the loss landscape of y = w1 x1 + w2 x2 ----------------------------------------


@dataclass(frozen=True)
class LinearProblem:
    """Least squares on two features, raw and standardized.

    raw:        y = w1 x1 + w2 x2                  features [n, 2]
    normalized: y = v1 x̂1 + v2 x̂2 + b,  x̂ = (x - mean) / std per feature (over the data)

    Both models can fit the targets exactly; the loss is mean((y - t)^2) / 2.
    """

    raw: np.ndarray  # n,2
    normalized: np.ndarray  # n,3: the two standardized features and a column of ones for b
    targets: np.ndarray  # n


def linear_problem(seed: int, n: int = 64) -> LinearProblem:
    """Features around x1 = 10000 and x2 = 0.1 (20% spread), targets from fixed weights."""
    rng = rng_for(seed, 30)
    raw = np.column_stack([X1 * (1 + 0.2 * rng.normal(size=n)), X2 * (1 + 0.2 * rng.normal(size=n))])
    targets = raw @ np.array([3e-4, 20.0])  # both features matter: about 3 and 2 on average
    xhat = (raw - raw.mean(axis=0)) / raw.std(axis=0)  # the standardization a norm layer performs
    return LinearProblem(raw, np.column_stack([xhat, np.ones(n)]), targets)


def _loss_and_grad(features: np.ndarray, w: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """L = mean((X w - t)^2) / 2 and dL/dw = X^T (X w - t) / n."""
    r = features @ w - targets  # n
    return float(0.5 * np.mean(r * r)), features.T @ r / len(r)


def descend(features: np.ndarray, targets: np.ndarray, steps: int, tol: float = 1e-6) -> dict[str, object]:
    """Gradient descent from w = 0 with the step 1 / lambda_max of the Hessian X^T X / n.

    That step reaches the bottom along the steepest direction in one move; a step
    beyond 2 / lambda_max diverges there, so no fixed step can do much better.
    Returns the curve of the loss gap relative to the start, (L - L*) / (L0 - L*),
    the step at which it first fell below ``tol`` (None if it never did) and the
    condition number lambda_max / lambda_min.
    """
    n = len(targets)
    hess = features.T @ features / n
    eig = np.linalg.eigvalsh(hess)
    lr = 1.0 / eig[-1]
    w_star = np.linalg.lstsq(features, targets, rcond=None)[0]
    best = _loss_and_grad(features, w_star, targets)[0]
    w = np.zeros(features.shape[1])
    start = _loss_and_grad(features, w, targets)[0]
    gaps, converged = [1.0], None
    for k in range(1, steps + 1):
        _, grad = _loss_and_grad(features, w, targets)
        w = w - lr * grad
        gap = (_loss_and_grad(features, w, targets)[0] - best) / (start - best)
        gaps.append(max(gap, 0.0))
        if converged is None and gap <= tol:
            converged = k
            break
    return {"gaps": gaps, "converged": converged, "condition": float(eig[-1] / eig[0]), "lr": lr}


def _one_example() -> tuple[list[list[str]], Check, Value]:
    """One example through the engine: dL/dw1 and dL/dw2 are dL/dy times x1 and x2 (rows, ratio check, loss)."""
    w1, w2 = Value(1e-4, label="w1"), Value(1.0, label="w2")
    x1, x2 = Value(X1, label="x1"), Value(X2, label="x2")
    y = w1 * x1 + w2 * x2
    y.label = "y"
    loss = 0.5 * (y - 5.0) ** 2
    loss.label = "loss"
    loss.backward()
    rows = [
        ["dL/dy", fmt(y.grad, 4)],
        ["dL/dw1 = dL/dy · x1", fmt(w1.grad, 4)],
        ["dL/dw2 = dL/dy · x2", fmt(w2.grad, 4)],
        [_("ratio dL/dw1 ÷ dL/dw2"), fmt(w1.grad / w2.grad, 4)],
    ]
    return rows, within(w1.grad / w2.grad, X1 / X2, CLOSED_FORM_RTOL, "dL/dw1 ÷ dL/dw2 vs x1 ÷ x2"), loss


def _dataset_gradients(prob: LinearProblem) -> dict[str, tuple[float, float]]:
    """|dL/dw1| and |dL/dw2| at w = 0 from the engine, on the raw and on the standardized features."""
    out = {}
    for name, feats in (("raw", prob.raw), ("standardized", prob.normalized)):
        ws = [Value(0.0) for _k in range(feats.shape[1])]
        terms = [
            (Value.sum([w * float(f) for w, f in zip(ws, row)]) - float(t)) ** 2 for row, t in zip(feats, prob.targets)
        ]
        total = Value.mean(terms) * 0.5
        total.backward()
        out[name] = (abs(ws[0].grad), abs(ws[1].grad))
    return out


@demo("landscape_gradients")
def landscape_gradients(p: LessonParams) -> DemoOutput:
    """dL/dw1 and dL/dw2 from the engine for x1 = 10000, x2 = 0.1, raw and normalized."""
    single, exact, loss = _one_example()
    prob = linear_problem(p.seed)
    grads = _dataset_gradients(prob)
    ratios = {name: g1 / g2 for name, (g1, g2) in grads.items()}
    rows = [[shown(name), fmt(g1, 3), fmt(g2, 3), fmt(ratios[name], 3)] for name, (g1, g2) in grads.items()]
    differ = _("standardized, the two gradients differ by ×{standardized}, raw by ×{raw}").format(
        standardized=fmt(ratios["standardized"], 3), raw=sci(ratios["raw"], 1)
    )
    header = [_("{n} examples, w = 0").format(n=len(prob.targets)), "|dL/dw1|", "|dL/dw2|"]
    return DemoOutput(
        Group(
            number_table(
                [_("one example: w = (1e-4, 1), L = (y − 5)²/2"), pgettext("lesson 2 table header", "engine")], single
            ),
            claim(exact, _("the ratio is exactly x1 ÷ x2 = {ratio}").format(ratio=fmt(X1 / X2, 4))),
            Text(""),
            number_table(
                [*header, pgettext("lesson 2 table header", "ratio")],
                rows,
                caption=_(
                    "L = mean of (y − target)²/2; standardized: each feature over the examples, "
                    "plus a bias b (standardizing removes the features' means)."
                ),
            ),
            claim(below(ratios["standardized"], ratios["raw"], "gradient ratio, standardized vs raw"), differ),
        ),
        graph=loss,
    )


def landscape_grid(feats: np.ndarray, targets: np.ndarray, span: float, size: int) -> np.ndarray:
    """L − L* on a size × size grid of (w1, w2) within ±span of the best weights; rows: w2 from +span down."""
    w_star = np.linalg.lstsq(feats, targets, rcond=None)[0]
    best = _loss_and_grad(feats, w_star, targets)[0]
    offsets = np.linspace(-span, span, size)
    grid = np.zeros((size, size))
    for i, d2 in enumerate(offsets[::-1]):
        for j, d1 in enumerate(offsets):
            w = w_star.copy()
            w[0] += d1
            w[1] += d2
            grid[i, j] = _loss_and_grad(feats, w, targets)[0] - best
    return grid


@demo("loss_landscape")
def loss_landscape(p: LessonParams, size: int = 7) -> DemoOutput:
    """The loss over a grid of (w1, w2) around the optimum, raw and normalized, as heat maps."""
    if not isinstance(size, int) or not 3 <= size <= 21 or size % 2 == 0:
        raise ValueError(_("size: expected an odd integer from 3 to 21, got {size!r}").format(size=size))
    prob = linear_problem(p.seed)
    parts: list[Text | HeatMap] = []
    lopsided, costs = {}, {}
    for name, feats, span in (("raw", prob.raw, 1e-3), ("standardized", prob.normalized, 1.0)):
        grid = landscape_grid(feats, prob.targets, span, size)
        along_w1, along_w2 = grid[size // 2, -1], grid[0, size // 2]
        costs[name] = (float(along_w1), float(along_w2))
        lopsided[name] = max(along_w1, along_w2) / min(along_w1, along_w2)
        title = _("{name}: L − L*, w1 across and w2 down, ±{span} around the best").format(
            name=shown(name), span=f"{span:g}"
        )
        cost = _("a step of {span} costs {along_w1} along w1, {along_w2} along w2").format(
            span=f"{span:g}", along_w1=sci(along_w1), along_w2=sci(along_w2)
        )
        parts += [heat_map(grid, title=title), dim_note("  " + cost)]
    lopsided_line = _("raw, one direction costs {raw} times the other; standardized, {standardized} times").format(
        raw=sci(lopsided["raw"], 1), standardized=fmt(lopsided["standardized"], 3)
    )
    parts.append(
        claim(below(lopsided["standardized"], lopsided["raw"], "lopsidedness, standardized vs raw"), lopsided_line)
    )
    return DemoOutput(Group(*parts), prediction=_steeper_prediction(*costs["raw"]))


# "about the same": the two costs within a factor of 2 of each other
SAME_COST = 2.0


def _steeper_prediction(along_w1: float, along_w2: float) -> Prediction:
    """Raw features, the same step along w1 and along w2: which costs more loss, read off the grid."""
    ratio = along_w1 / along_w2 if along_w2 > 0 else math.inf
    what = "raw: loss of a step along w1 ÷ along w2"
    evidence = (
        above(ratio, SAME_COST, what),
        below(ratio, 1 / SAME_COST, what),
        at_least(ratio, 1 / SAME_COST, what) & at_most(ratio, SAME_COST, what),
    )
    why = _("The same step costs {w1} along w1, {w2} along w2: w1 multiplies x1 ≈ {x1}, w2 only x2 ≈ {x2}.").format(
        w1=sci(along_w1), w2=sci(along_w2), x1=fmt(X1, 6), x2=fmt(X2, 4)
    )
    return Prediction.from_evidence(
        _("Raw features: the same small step along w1 or along w2. Which raises the loss more?"),
        (_("the step along w1"), _("the step along w2"), _("about the same")),
        why,
        evidence,
    )


def _descent_chart(runs: dict[str, dict[str, object]]) -> LineChart:
    """The loss gap of each run per step, on a log scale (a run that stopped is padded with its last gap)."""
    # a run stops once its gap is below the tolerance; its name says so, since its curve is padded
    # with its last value to span the same steps as the other
    curves = {
        (
            shown(name)
            if r["converged"] is None
            else _("{name}, stopped at step {step}").format(name=shown(name), step=r["converged"])
        ): r["gaps"]
        for name, r in runs.items()
    }
    longest = max(len(c) for c in curves.values())
    padded = {n: c + [c[-1]] * (longest - len(c)) for n, c in curves.items()}
    floor = 1e-12
    return line_chart(
        {n: [max(v, floor) for v in c] for n, c in padded.items()},
        log=True,
        height=6,
        title=_("loss gap (L − L*) ÷ (L0 − L*) per step"),
    )


@demo("descent_race")
def descent_race(p: LessonParams, steps: int = 300) -> Group:
    """Gradient descent on the raw and the normalized problem, each with the step 1 / lambda_max."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(_("steps: expected a positive integer, got {steps!r}").format(steps=steps))
    prob = linear_problem(p.seed)
    runs = {name: descend(f, prob.targets, steps) for name, f in (("raw", prob.raw), ("standardized", prob.normalized))}
    reached = {
        name: str(r["converged"]) if r["converged"] is not None else _("not in {steps}").format(steps=steps)
        for name, r in runs.items()
    }
    rows = [[shown(name), sci(r["condition"], 1), reached[name], sci(r["gaps"][-1], 1)] for name, r in runs.items()]
    done = {name: r["converged"] if r["converged"] is not None else steps + 1 for name, r in runs.items()}
    # Translators: "condition" is the column of condition numbers, named again in the caption below
    headers = ["", pgettext("descent table", "condition"), _("steps to 1e-6"), _("last gap")]
    # Translators: {standardized} and {raw} are each a number of steps or "not in {steps}" (as in the table)
    first = _("standardized reaches 1e-6 first: in {standardized} steps, raw {raw}").format(**reached)
    return Group(
        _descent_chart(runs),
        number_table(
            headers,
            rows,
            caption=_(
                "condition = λmax ÷ λmin. With the step 1/λmax, descent needs at most about "
                "condition × ln(1/tolerance) steps."
            ),
        ),
        claim(below(done["standardized"], done["raw"], "steps to 1e-6, standardized vs raw"), first),
    )


# ---- sigmoid saturation -----------------------------------------------------------


@demo("sigmoid_saturation")
def sigmoid_saturation(
    p: LessonParams, zs: tuple[float, ...] = (-100.0, -10.0, -3.0, 0.0, 3.0, 10.0, 100.0)
) -> DemoOutput:
    """sigmoid(z) and its derivative from the engine, for small and large z."""
    rows, slopes, values = [], [], []
    for z in zs:
        v = Value(float(z))
        s = v.sigmoid()
        s.backward()
        rows.append([fmt(float(z), 4), fmt(s.data, 6), sci(v.grad)])
        slopes.append(v.grad)
        values.append(s.data)
    top = int(np.argmax(zs))
    slope_at = dict(zip(zs, slopes))
    prediction = None
    if 0.0 in slope_at and 10.0 in slope_at:
        ratio = slope_at[10.0] / slope_at[0.0]
        evidence = nearest(ratio, (1.0, 0.1, 1e-4), "slope at 10 ÷ slope at 0")
        prediction = Prediction.from_evidence(
            _("Compared with its slope at z = 0, how steep is the sigmoid at z = 10?"),
            (_("about as steep"), _("about a tenth as steep"), _("less than a thousandth as steep")),
            _("The engine's slopes: {at10} at z = 10 against {at0} at z = 0, a ratio of {ratio}.").format(
                at10=sci(slope_at[10.0]), at0=sci(slope_at[0.0]), ratio=sci(ratio)
            ),
            evidence,
        )
    return DemoOutput(
        Group(
            number_table(["z", "sigmoid(z)", "sigmoid'(z)"], rows, title=_("the engine's sigmoid node")),
            claim(
                exactly(zs[int(np.argmax(slopes))], 0.0, "z of the largest slope")
                & exactly(max(slopes), 0.25, "largest slope"),
                _("the slope is largest, 1/4, at z = 0"),
            ),
            claim(
                exactly(values[top], 1.0, "sigmoid at the largest z") & exactly(slopes[top], 0.0, "its slope"),
                _("at z = {z}: sigmoid rounds to exactly 1, its slope to exactly 0").format(z=fmt(float(zs[top]), 4)),
            ),
        ),
        prediction=prediction,
    )


def sigmoid_slopes(values: np.ndarray) -> list[float]:
    """sigmoid'(v) for each value, from the engine's sigmoid node."""
    slopes = []
    for v in values:
        node = Value(float(v))
        node.sigmoid().backward()
        slopes.append(node.grad)
    return slopes


@demo("saturation_before_after")
def saturation_before_after(p: LessonParams, mean: float = 12.0, spread: float = 4.0, layers: int = 5) -> Group:
    """sigmoid' of one layer's pre-activations, raw and standardized, and over several layers."""
    z = rng_for(p.seed, 31).normal(mean, spread, size=p.dim)
    zn = engine_forward("layernorm", z, None, None, p.eps)  # standardized over the units (LayerNorm, lesson 3)
    raw, std = sigmoid_slopes(z), sigmoid_slopes(zn)
    chart = bar_chart(
        [_("unit {i}").format(i=i) for i in range(p.dim)],
        {_("raw sigmoid'"): raw, _("standardized sigmoid'"): std},
        title=_("sigmoid'(z) per unit, z ~ N({mean}, {spread}²), then standardized").format(
            mean=f"{mean:g}", spread=f"{spread:g}"
        ),
        log=False,
    )
    mean_raw, mean_std = float(np.mean(raw)), float(np.mean(std))
    return Group(
        chart,
        number_table(
            ["", _("mean sigmoid'"), _("(mean sigmoid')^{layers}").format(layers=layers)],
            [
                [shown("raw"), sci(mean_raw), sci(mean_raw**layers)],
                [shown("standardized"), fmt(mean_std, 3), sci(mean_std**layers)],
            ],
            caption=_(
                "(mean sigmoid')^{layers}: roughly how much of a gradient survives {layers} such layers, "
                "weights aside (sigmoid' is at most 0.25)."
            ).format(layers=layers),
        ),
        claim(
            above(mean_std, mean_raw, "mean slope, standardized vs raw"),
            _("standardized, the mean slope is {factor} times the raw one").format(factor=fmt(mean_std / mean_raw, 3)),
        ),
        claim(
            below(_off_line(zn), _off_line(z), "largest gap to the tangent, standardized vs raw"),
            _("largest gap between sigmoid(z) and its tangent at 0, 1/2 + z/4: {std} standardized, {raw} raw").format(
                std=fmt(_off_line(zn), 2), raw=fmt(_off_line(z), 3)
            ),
        ),
    )


def _off_line(z: np.ndarray) -> float:
    """How far the sigmoid strays from its straight line at 0 over ``z``: max |σ(z) − (1/2 + z/4)|."""
    return float(np.max(np.abs(1.0 / (1.0 + np.exp(-z)) - (0.5 + z / 4.0))))


# ---- gamma = sigma, beta = mu ------------------------------------------------------


def _centering_size(row: np.ndarray) -> float:
    """The size of what cancels in a standardized row: its largest |value| over its spread."""
    return float(np.max(np.abs(row)) / np.std(row))


def _identity_gaps(x: np.ndarray, eps: float) -> list[float]:
    """max |y − x| when gamma = √(var + eps) and beta = mean are read off the engine's nodes: for BatchNorm
    (the whole batch), and for LayerNorm with row 0's statistics (on row 0, then on the other rows)."""
    stats = get_norm("batchnorm").build_graph(x.tolist(), None, None, eps)
    gamma = [math.sqrt(v.data + eps) for v in stats["var"]]
    beta = [m.data for m in stats["mean"]]
    y_bn = engine_forward("batchnorm", x, gamma, beta, eps)
    row0 = get_norm("layernorm").build_graph(x[0].tolist(), None, None, eps)
    sigma0 = math.sqrt(row0["var"][0].data + eps)
    mu0 = row0["mean"][0].data
    d = x.shape[1]
    y_ln = engine_forward("layernorm", x, [sigma0] * d, [mu0] * d, eps)
    return [
        float(np.max(np.abs(y_bn - x))),
        float(np.max(np.abs(y_ln[0] - x[0]))),
        float(np.max(np.abs(y_ln[1:] - x[1:]))),
    ]


@demo("identity_recovery")
def identity_recovery(p: LessonParams) -> Group:
    """gamma = sqrt(var + eps) and beta = mean turn a norm back into the identity; where that works."""
    n = max(p.batch or 4, 2)  # row 0 and at least one other row
    x = rng_for(p.seed, 32).normal(3.0, 2.0, size=(n, p.dim))
    gaps = _identity_gaps(x, p.eps)
    rows = [
        [_("BatchNorm, each column"), _("whole batch"), sci(gaps[0])],
        [_("LayerNorm, row 0"), _("row 0"), sci(gaps[1])],
        ["", _("other rows"), sci(gaps[2])],
    ]
    exact = CLOSED_FORM_RTOL * float(np.max(np.abs(x)))  # rounding, at the size of x
    # many inputs, one output: at eps = 0 an affine change of a row leaves its LayerNorm exactly as it was
    moved = 3.0 * x[0] + 7.0
    same = float(np.max(np.abs(_standardized(moved, 0, 0.0) - _standardized(x[0], 0, 0.0))))
    return Group(
        number_table(
            [_("gamma, beta from"), pgettext("identity table header", "rows"), "max |y − x|"],
            rows,
            title=_("X [{n}, {d}]; gamma = √(var + eps), beta = mean (the engine's nodes)").format(n=n, d=p.dim),
        ),
        claim(
            at_most(gaps[0], exact, "BatchNorm: max |y − x|"), _("BatchNorm gives back the whole batch, up to rounding")
        ),
        claim(
            at_most(gaps[1], exact, "LayerNorm row 0: max |y − x|") & above(gaps[2], exact, "other rows: max |y − x|"),
            _("LayerNorm gives back row 0 only; the other rows change"),
        ),
        claim(
            at_most(
                same,
                cancellation_atol(_centering_size(moved) + _centering_size(x[0]), p.dim),
                "|LN(3·row 0 + 7) − LN(row 0)| at eps = 0",
            ),
            _(
                "at eps = 0, row 0 and 3·(row 0) + 7 have the same LayerNorm output (max difference {gap}): "
                "many inputs, one output, so no gamma and beta can tell which came in"
            ).format(gap=sci(same)),
        ),
    )


# ---- the weights, not the units, should say what matters --------------------------------

# How much a one-standard-deviation change of each feature moves the target: x1 matters more.
EFFECTS = (2.0, 0.2)


@dataclass(frozen=True)
class UnitsProblem:
    """Two features in very different units, a target that depends on both, and the fits of it.

    raw: [n, 2] a distance around X1 and a ratio around X2; targets: EFFECTS · standardized features + noise.
    """

    raw: np.ndarray
    targets: np.ndarray


def units_problem(seed: int, n: int = 64) -> UnitsProblem:
    rng = rng_for(seed, 33)
    raw = np.column_stack([X1 * (1 + 0.2 * rng.normal(size=n)), X2 * (1 + 0.2 * rng.normal(size=n))])
    z = (raw - raw.mean(axis=0)) / raw.std(axis=0)
    return UnitsProblem(raw, z @ np.array(EFFECTS) + 0.05 * rng.normal(size=n))


def least_squares(features: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """The weights (with an intercept column appended) and the loss mean((X w − t)²)/2 at them."""
    design = np.column_stack([features, np.ones(len(targets))])
    w = np.linalg.lstsq(design, targets, rcond=None)[0]
    return w[:-1], _loss_and_grad(design, w, targets)[0]


def feature_importance(prob: UnitsProblem) -> np.ndarray:
    """How much the best loss rises when each feature is left out (refit without it): unit-free."""
    _, full = least_squares(prob.raw, prob.targets)
    return np.array([least_squares(np.delete(prob.raw, k, axis=1), prob.targets)[1] - full for k in range(2)])


@demo("units_and_weights")
def units_and_weights(p: LessonParams) -> DemoOutput:
    """Raw weights take on the units of their features; standardized weights say what matters."""
    prob = units_problem(p.seed)
    raw_w, _raw_loss = least_squares(prob.raw, prob.targets)
    std_w, _std_loss = least_squares((prob.raw - prob.raw.mean(axis=0)) / prob.raw.std(axis=0), prob.targets)
    rise = feature_importance(prob)
    rows = [
        [f"{name} ≈ {sci(float(np.mean(prob.raw[:, k])), 0)}", sci(raw_w[k]), fmt(std_w[k], 3), sci(rise[k])]
        for k, name in enumerate(("x1", "x2"))
    ]
    # Translators: "loss rise" is named again in the caption under the table
    headers = [pgettext("units table", "feature"), _("raw w"), _("standardized w"), _("loss rise")]
    table = number_table(headers, rows)
    checks = Group(
        claim(
            exactly(_misranked(np.abs(std_w), rise), 0, "features the standardized weights rank out of order"),
            _("standardized weights rank the features as leaving them out does"),
        ),
        claim(
            exactly(_misranked(np.abs(raw_w), -rise), 0, "features the raw weights rank other than reversed"),
            _("raw weights rank them the other way round"),
        ),
    )
    caption = dim_note(_("loss rise: how much the best fit's loss grows when the feature is left out."))
    return DemoOutput(Group(table, caption, checks), prediction=_units_prediction(raw_w, std_w))


def _misranked(sizes: np.ndarray, importance: np.ndarray) -> int:
    """How many places the order of ``sizes`` (largest first) differs from that of ``importance``."""
    return int(np.sum(np.argsort(-sizes) != np.argsort(-importance)))


def _units_prediction(raw_w: np.ndarray, std_w: np.ndarray) -> Prediction:
    ratio = abs(raw_w[0]) / abs(raw_w[1])
    what = "|raw w1| ÷ |raw w2|"
    # "about the same": within a factor of 2 either way
    evidence = (
        above(ratio, 2.0, what),
        below(ratio, 0.5, what),
        at_least(ratio, 0.5, what) & at_most(ratio, 2.0, what),
    )
    why = _(
        "raw w1 = {raw_w1}, w2 = {raw_w2}. A weight must absorb its feature's unit: x2 is "
        "small, so its weight must be large for it to count at all. Standardized: {std_w1} and "
        "{std_w2}, in the order of importance."
    ).format(raw_w1=sci(raw_w[0]), raw_w2=sci(raw_w[1]), std_w1=fmt(std_w[0], 3), std_w2=fmt(std_w[1], 3))
    choices = (_("x1's weight"), _("x2's weight"), _("about the same"))
    return Prediction.from_evidence(
        _("x1 matters more to the target. Fit the raw features: whose weight is larger?"),
        choices,
        why,
        evidence,
    )


# ---- a deep product of matrices, with and without normalization between them ----------------


def standardize(h: np.ndarray, eps: float) -> np.ndarray:
    """(h − mean) / sqrt(var + eps) over the units of one activation vector (LayerNorm without gamma and beta)."""
    return formulas.moments(h, (0,), eps).xhat


@dataclass(frozen=True)
class DepthRun:
    """|h| after each layer (index 0: the input) and, with normalization, |standardize(h)| fed to each matrix."""

    plain: dict[float, list[float]]
    normalized: dict[float, list[float]]
    fed: dict[float, list[float]]
    fed_expected: dict[float, list[float]]  # √(width · var / (var + eps)) of each vector standardized
    width: int


def depth_run(
    seed: int, eps: float, width: int = 64, depth: int = 32, gains: tuple[float, ...] = (0.5, 2.0)
) -> DepthRun:
    """h_k = gain · W_k h_(k−1) and h_k = gain · W_k standardize(h_(k−1)), with the same random W_k."""
    rng = rng_for(seed, 34)
    x = rng.normal(size=width)
    mats = [rng.normal(size=(width, width)) / math.sqrt(width) for _k in range(depth)]  # |W u| ≈ |u|
    plain, normalized, fed, expected = {}, {}, {}, {}
    for gain in gains:
        h, hn = x, x
        plain[gain], normalized[gain] = [float(np.linalg.norm(x))], [float(np.linalg.norm(x))]
        fed[gain], expected[gain] = [], []
        for w in mats:
            h = gain * (w @ h)
            u = standardize(hn, eps)
            expected[gain].append(math.sqrt(width * float(np.var(hn)) / (float(np.var(hn)) + eps)))
            hn = gain * (w @ u)
            plain[gain].append(float(np.linalg.norm(h)))
            normalized[gain].append(float(np.linalg.norm(hn)))
            fed[gain].append(float(np.linalg.norm(u)))
    return DepthRun(plain, normalized, fed, expected, width)


def _depth_checks(run: DepthRun, eps: float) -> list[Text]:
    depth = len(run.plain[next(iter(run.plain))]) - 1
    checks = []
    for gain, norms in run.plain.items():
        factor, expected = norms[-1] / norms[0], gain**depth
        near = below(  # within half the decades
            abs(math.log(factor / expected)),
            depth * abs(math.log(gain)) / 2,
            f"plain {gain:g}: |log(factor ÷ gain^depth)|",
        )
        checks.append(
            claim(
                near,
                _("plain {gain}: |h| ×{factor} in {depth} layers; {gain}^{depth} = {expected}").format(
                    gain=f"{gain:g}", factor=sci(factor, 1), depth=depth, expected=sci(expected, 1)
                ),
            )
        )
    fed = [v for vs in run.fed.values() for v in vs]
    lengths = [v for vs in run.fed_expected.values() for v in vs]
    fixed = close_to(fed, lengths, CLOSED_FORM_RTOL, 0.0, "lengths fed to W vs √(width·var/(var + eps))")
    length = f"√{run.width}" + ("·√(var/(var+eps))" if eps else "")
    checks.append(claim(fixed, _("norm.: each W gets an input of length {length}").format(length=length)))
    checks += _depth_band_checks(run, eps)
    return checks


def _depth_band_checks(run: DepthRun, eps: float) -> list[Text]:
    """|h| stays near gain·√width with normalization, or, where it does not, the reason: var(h) fell to eps's size.

    With an eps that is not small next to var(h), dividing by √(var + eps) no longer restores the scale of h
    (the fed length √width·√(var/(var + eps)) falls short of √width), so small activations shrink again.
    """
    band = {gain: [v / (gain * math.sqrt(run.width)) for v in vs[1:]] for gain, vs in run.normalized.items()}
    kept = [gain for gain, spread in band.items() if 1 / 3 < min(spread) and max(spread) < 3]
    lines = []
    if kept:
        spread = [v for gain in kept for v in band[gain]]
        within = {"low": fmt(min(spread), 3), "high": fmt(max(spread), 3), "width": run.width}
        if len(kept) == len(band):
            line = _("norm.: |h| stays within {low} to {high} × gain·√{width}").format(**within)
        else:
            gains = separated([f"{g:g}" for g in kept])
            line = _("norm. {gains}: |h| stays within {low} to {high} × gain·√{width}").format(gains=gains, **within)
        stays = all_of(
            *(above(min(band[g]), 1 / 3, f"norm. {g:g}: smallest |h| ÷ (gain·√width)") for g in kept),
            *(below(max(band[g]), 3.0, f"norm. {g:g}: largest |h| ÷ (gain·√width)") for g in kept),
        )
        lines.append(claim(stays, line))
    for gain in (g for g in band if g not in kept):
        short = min(run.fed[gain]) / math.sqrt(run.width)  # √(var/(var + eps)) at its smallest
        factor = run.normalized[gain][-1] / run.normalized[gain][0]
        lines.append(
            claim(
                above(eps, 0.0, "eps") & below(short, 0.5, f"norm. {gain:g}: shortest fed length ÷ √width"),
                _(
                    "norm. {gain}: |h| ×{factor}: var(h) is below eps = {eps}, where dividing by "
                    "√(var + eps) no longer restores the scale (W is fed {short} × √{width})"
                ).format(gain=f"{gain:g}", factor=sci(factor, 1), eps=f"{eps:g}", short=sci(short, 1), width=run.width),
            )
        )
    return lines


@demo("depth_norms")
def depth_norms(p: LessonParams, width: int = 64, depth: int = 32) -> DemoOutput:
    """|h| through depth random matrices of gain 0.5 and 2, with and without normalization between them."""
    run = depth_run(p.seed, p.eps, width, depth)
    shown = [k for k in (0, 1, 2, 4, 8, 16, 32, 64, 128) if k <= depth]
    rows = [
        [str(k), *[sci(series[g][k], 1) for g in run.plain for series in (run.plain, run.normalized)]] for k in shown
    ]
    column = {
        "plain": lambda g: _("plain {gain}").format(gain=f"{g:g}"),
        "norm.": lambda g: _("norm. {gain}").format(gain=f"{g:g}"),
    }
    depth_word = pgettext("lesson 2: layers so far", "depth")
    headers = [depth_word, *[column[name](g) for g in run.plain for name in ("plain", "norm.")]]
    table = number_table(
        headers,
        rows,
        title=_("|h| by depth ({width} units; norm.: standardized before each W)").format(width=width),
    )
    curve = {
        "plain": lambda g: _("plain, gain {gain}").format(gain=f"{g:g}"),
        "normalized": lambda g: _("normalized, gain {gain}").format(gain=f"{g:g}"),
    }
    curves = {
        curve[name](g): series[g]
        for g in run.plain
        for name, series in (("plain", run.plain), ("normalized", run.normalized))
    }
    figure = line_chart_svg(curves, title=_("|h| by depth"), xlabel=depth_word, ylabel="|h| (log10)", log_y=True)
    return DemoOutput(Group(table, *_depth_checks(run, p.eps)), graph=figure, prediction=_depth_prediction(run))


# "about the same size": |h| at the end within this factor of |x| either way
SAME_SIZE = 10.0


def _depth_prediction(run: DepthRun) -> Prediction:
    depth = len(run.normalized[2.0]) - 1
    factor = run.normalized[2.0][-1] / run.normalized[2.0][0]
    what = "norm. 2: |h| at the end ÷ |x|"
    evidence = (
        above(factor, SAME_SIZE, what),
        at_least(factor, 1 / SAME_SIZE, what) & at_most(factor, SAME_SIZE, what),
        below(factor, 1 / SAME_SIZE, what),
    )
    answer = first_holding(evidence)
    if answer == 1:
        why = _(
            "|h| went from {start} to {end}: each W sees a standardized input, so only the last gain shows. "
            "Plain, the gains multiply: ×{plain}."
        )
    else:  # eps not small next to var(h): dividing by √(var + eps) no longer restores the scale of h
        why = _(
            "|h| went from {start} to {end}: var(h) is below eps, and dividing by √(var + eps) then no longer "
            "brings h back to unit spread: it divides by nearly the same √(var + eps) whatever h is, so |h| keeps "
            "changing layer after layer (plain, the gains multiply: ×{plain}); the lines below show it."
        )
    why = why.format(
        start=fmt(run.normalized[2.0][0], 3),
        end=fmt(run.normalized[2.0][-1], 3),
        plain=sci(run.plain[2.0][-1] / run.plain[2.0][0], 1),
    )
    ten = f"{SAME_SIZE:g}"
    choices = (
        _("much larger: more than {factor} times").format(factor=ten),
        _("about the same size, within a factor of {factor}").format(factor=ten),
        _("much smaller: less than 1/{factor} of it").format(factor=ten),
    )
    return Prediction(
        _("{depth} layers of gain 2, standardized between them: how large is |h| at the end, next to |x|?").format(
            depth=depth
        ),
        choices,
        answer,
        why,
        evidence,
    )


# ---- a linear layer after normalization: its initial scale stops compounding ----------------------


def init_scale_run(seed: int, dim: int, layers: int, c: float) -> tuple[float, float, list[float]]:
    """|output| of layers × (c·W) plain and with standardize (eps = 0) before each W, and the lengths W is fed."""
    rng = rng_for(seed, 35)
    x = rng.normal(size=dim)
    mats = [rng.normal(size=(dim, dim)) / math.sqrt(dim) for _k in range(layers)]
    h, hn, fed = x, x, []
    for w in mats:
        h = c * (w @ h)
        u = standardize(hn, 0.0)
        fed.append(float(np.linalg.norm(u)))
        hn = c * (w @ u)
    return float(np.linalg.norm(h)), float(np.linalg.norm(hn)), fed


@demo("init_scale")
def init_scale(p: LessonParams, layers: int = 8, scales: tuple[float, ...] = (0.1, 0.5, 2.0, 10.0)) -> DemoOutput:
    """Every weight matrix initialized scaled by c: the output grows like c^layers plain, like c normalized."""
    dim = max(p.dim, 2)
    plain1, norm1, _fed1 = init_scale_run(p.seed, dim, layers, 1.0)
    rows, exact_plain, exact_norm, fed_ok = [], [], [], []
    for c in scales:
        plain, normalized, fed = init_scale_run(p.seed, dim, layers, float(c))
        exact_plain.append(
            within(plain / plain1, c**layers, CLOSED_FORM_RTOL, f"c = {c:g}: plain ÷ (c = 1) vs c^layers")
        )
        exact_norm.append(within(normalized / norm1, c, CLOSED_FORM_RTOL, f"c = {c:g}: normalized ÷ (c = 1) vs c"))
        fed_ok.append(close_to(fed, [math.sqrt(dim)] * len(fed), CLOSED_FORM_RTOL, 0.0, f"c = {c:g}: lengths fed to W"))
        rows.append([fmt(c, 3), sci(plain / plain1), sci(c**layers), fmt(normalized / norm1, 6)])
    table = number_table(
        ["c", _("plain ÷ (c = 1)"), f"c^{layers}", _("normalized ÷ (c = 1)")],
        rows,
        title=_("{layers} layers of width {dim}, every W scaled by c; normalization at eps = 0").format(
            layers=layers, dim=dim
        ),
    )
    checks = [
        claim(all_of(*exact_plain), _("plain: the output scales by exactly c^{layers}").format(layers=layers)),
        claim(all_of(*exact_norm), _("normalized: by exactly c, whatever the depth")),
        claim(
            all_of(*fed_ok),
            _("normalized: every W is fed a vector of length √{dim} = {length}").format(
                dim=dim, length=fmt(math.sqrt(dim), 4)
            ),
        ),
    ]
    return DemoOutput(Group(table, *checks))
