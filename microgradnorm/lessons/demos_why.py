"""Demos of lesson 02: why we normalize at all (seed 004).

Three arguments, each computed live: badly scaled inputs make a lopsided loss
landscape that gradient descent crawls through; large pre-activations saturate a
sigmoid and starve the layers below of gradient; and the affine step can undo the
normalization exactly (gamma = sigma, beta = mu), so normalizing never costs
the layer the ability to pass its input through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm.engine import Value
from microgradnorm.lessons.charts import bar_chart, heat_map, line_chart
from microgradnorm.lessons.demo_tools import engine_forward, fmt, number_table, rng_for, sci
from microgradnorm.lessons.demos import DemoOutput, LessonParams, demo
from microgradnorm.registry import get_norm

# seed 004's example: a distance-like feature and a ratio-like feature
X1, X2 = 10000.0, 0.1


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
    """Features around seed 004's x1 = 10000 and x2 = 0.1 (20% spread), targets from fixed weights."""
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


@demo("landscape_gradients")
def landscape_gradients(p: LessonParams) -> DemoOutput:
    """dL/dw1 and dL/dw2 from the engine for x1 = 10000, x2 = 0.1, raw and normalized."""
    # one example, as in seed 004: the gradient of each weight is dL/dy times its input
    w1, w2 = Value(1e-4, label="w1"), Value(1.0, label="w2")
    x1, x2 = Value(X1, label="x1"), Value(X2, label="x2")
    y = w1 * x1 + w2 * x2
    y.label = "y"
    loss = 0.5 * (y - 5.0) ** 2
    loss.label = "loss"
    loss.backward()
    single = [
        ["dL/dy", fmt(y.grad, 4)],
        ["dL/dw1 = dL/dy · x1", fmt(w1.grad, 4)],
        ["dL/dw2 = dL/dy · x2", fmt(w2.grad, 4)],
        ["ratio dL/dw1 ÷ dL/dw2", fmt(w1.grad / w2.grad, 4)],
    ]
    # a small data set, raw and standardized, gradients at w = 0 from the engine
    prob = linear_problem(p.seed)
    rows = []
    for name, feats in (("raw", prob.raw), ("normalized", prob.normalized)):
        ws = [Value(0.0) for _ in range(feats.shape[1])]
        terms = [
            (Value.sum([w * float(f) for w, f in zip(ws, row)]) - float(t)) ** 2 for row, t in zip(feats, prob.targets)
        ]
        total = Value.mean(terms) * 0.5
        total.backward()
        g = [abs(w.grad) for w in ws[:2]]
        rows.append([name, fmt(g[0], 3), fmt(g[1], 3), fmt(g[0] / g[1], 3)])
    return DemoOutput(
        Group(
            number_table(["one example, w = (1e-4, 1), t = 5", "engine"], single),
            Text(""),
            number_table(
                [f"{len(prob.targets)} examples, w = 0", "|dL/dw1|", "|dL/dw2|", "ratio"],
                rows,
                caption="normalized: each feature standardized over the examples (mean 0, variance 1).",
            ),
        ),
        graph=loss,
    )


@demo("loss_landscape")
def loss_landscape(p: LessonParams, size: int = 11) -> Group:
    """The loss over a grid of (w1, w2) around the optimum, raw and normalized, as heat maps."""
    if not isinstance(size, int) or not 3 <= size <= 21:
        raise ValueError(f"size: expected an integer from 3 to 21, got {size!r}")
    prob = linear_problem(p.seed)
    maps = []
    for name, feats in (("raw", prob.raw), ("normalized", prob.normalized)):
        w_star = np.linalg.lstsq(feats, prob.targets, rcond=None)[0]
        best = _loss_and_grad(feats, w_star, prob.targets)[0]
        span = 1.0 if name == "normalized" else 1e-3  # the same span along both axes
        offsets = np.linspace(-span, span, size)
        grid = np.zeros((size, size))
        for i, d2 in enumerate(offsets[::-1]):  # rows: w2, largest on top
            for j, d1 in enumerate(offsets):  # columns: w1
                w = w_star.copy()
                w[0] += d1
                w[1] += d2
                grid[i, j] = _loss_and_grad(feats, w, prob.targets)[0] - best
        maps.append((name, span, grid))
    parts = []
    for name, span, grid in maps:
        parts.append(
            heat_map(grid, title=f"{name}: L − L* for w1 (across) and w2 (down) within ±{span:g} of the optimum")
        )
        along_w1 = grid[size // 2, -1]
        along_w2 = grid[0, size // 2]
        parts.append(
            Text(f"  a step of {span:g} along w1 costs {sci(along_w1)}, along w2 {sci(along_w2)}", style="dim")
        )
        parts.append(Text(""))
    return Group(*parts[:-1])


@demo("descent_race")
def descent_race(p: LessonParams, steps: int = 300) -> Group:
    """Gradient descent on the raw and the normalized problem, each with the step 1 / lambda_max."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected a positive integer, got {steps!r}")
    prob = linear_problem(p.seed)
    runs = {name: descend(f, prob.targets, steps) for name, f in (("raw", prob.raw), ("normalized", prob.normalized))}
    curves = {name: r["gaps"] for name, r in runs.items()}
    longest = max(len(c) for c in curves.values())
    # pad the converged run with its last value, so both curves span the same steps
    padded = {n: c + [c[-1]] * (longest - len(c)) for n, c in curves.items()}
    floor = 1e-12
    chart = line_chart(
        {n: [max(v, floor) for v in c] for n, c in padded.items()},
        log=True,
        height=8,
        title="loss gap (L − L*) ÷ (L0 − L*) per step",
    )
    rows = []
    for name, r in runs.items():
        done = r["converged"]
        rows.append(
            [
                name,
                sci(r["condition"], 1),
                str(done) if done is not None else f"not in {steps}",
                sci(r["gaps"][-1], 1),
            ]
        )
    return Group(
        chart,
        number_table(
            ["", "condition", "steps to 1e-6", "gap at end"],
            rows,
            caption="condition = λmax ÷ λmin of the Hessian. The step size is 1/λmax for each problem; "
            "descent needs roughly condition × ln(1/tolerance) steps.",
        ),
    )


# ---- sigmoid saturation -----------------------------------------------------------


@demo("sigmoid_saturation")
def sigmoid_saturation(p: LessonParams, zs: tuple[float, ...] = (-100.0, -10.0, -3.0, 0.0, 3.0, 10.0, 100.0)) -> Group:
    """sigmoid(z) and its derivative from the engine, for small and large z."""
    rows = []
    for z in zs:
        v = Value(float(z))
        s = v.sigmoid()
        s.backward()
        rows.append([fmt(float(z), 4), fmt(s.data, 6), sci(v.grad)])
    return number_table(["z", "sigmoid(z)", "d sigmoid / dz"], rows, title="the engine's sigmoid node")


@demo("saturation_before_after")
def saturation_before_after(p: LessonParams, mean: float = 12.0, spread: float = 4.0, layers: int = 5) -> Group:
    """sigmoid' of one layer's pre-activations, raw and after LayerNorm, and over several layers."""
    rng = rng_for(p.seed, 31)
    z = rng.normal(mean, spread, size=p.dim)
    zn = engine_forward("layernorm", z, None, None, p.eps)
    deriv = {}
    for name, values in (("raw", z), ("after LN", zn)):
        d = []
        for v in values:
            node = Value(float(v))
            node.sigmoid().backward()
            d.append(node.grad)
        deriv[name] = d
    chart = bar_chart(
        [f"unit {i}" for i in range(p.dim)],
        {"raw σ'": deriv["raw"], "after LN σ'": deriv["after LN"]},
        title=f"sigmoid'(z) per unit, z ~ N({mean:g}, {spread:g}²), then normalized",
        log=False,
    )
    mean_raw, mean_ln = float(np.mean(deriv["raw"])), float(np.mean(deriv["after LN"]))
    return Group(
        chart,
        number_table(
            ["", "mean σ'", f"(mean σ')^{layers}"],
            [
                ["raw", sci(mean_raw), sci(mean_raw**layers)],
                ["after LN", fmt(mean_ln, 3), sci(mean_ln**layers)],
            ],
            caption=f"(mean σ')^{layers}: roughly how much of a gradient survives {layers} such layers "
            "(sigmoid' is at most 0.25).",
        ),
    )


# ---- gamma = sigma, beta = mu ------------------------------------------------------


@demo("identity_recovery")
def identity_recovery(p: LessonParams) -> Group:
    """gamma = sqrt(var + eps) and beta = mean turn a norm back into the identity; where that works."""
    n = max(p.batch or 4, 2)  # row 0 and at least one other row
    x = rng_for(p.seed, 32).normal(3.0, 2.0, size=(n, p.dim))
    bn = get_norm("batchnorm")
    stats = bn.build_graph(x.tolist(), None, None, p.eps)
    gamma = [math.sqrt(v.data + p.eps) for v in stats["var"]]
    beta = [m.data for m in stats["mean"]]
    y_bn = engine_forward("batchnorm", x, gamma, beta, p.eps)
    ln = get_norm("layernorm")
    row0 = ln.build_graph(x[0].tolist(), None, None, p.eps)
    sigma0 = math.sqrt(row0["var"][0].data + p.eps)
    mu0 = row0["mean"][0].data
    y_ln = engine_forward("layernorm", x, [sigma0] * p.dim, [mu0] * p.dim, p.eps)
    rows = [
        ["BatchNorm, γ_j = σ_j, β_j = μ_j", "whole batch", sci(float(np.max(np.abs(y_bn - x))))],
        ["LayerNorm, γ = σ, β = μ of row 0", "row 0", sci(float(np.max(np.abs(y_ln[0] - x[0]))))],
        ["", "other rows", sci(float(np.max(np.abs(y_ln[1:] - x[1:]))))],
    ]
    return number_table(
        ["setting (engine)", "rows", "max |y − x|"],
        rows,
        title=f"X [{n}, {p.dim}]; γ and β read off the engine's mean and var nodes",
    )
