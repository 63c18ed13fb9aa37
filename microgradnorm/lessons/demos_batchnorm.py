"""Demos of lesson 08: BatchNorm (seeds 003 and 004).

BatchNorm is LayerNorm's formulas applied along another axis: one statistic per
column of an [N, D] batch, or per channel of [N, C, H, W] over N, H and W. The
demos build it from scalar nodes, read its gradients off the graph, and set them
beside the closed forms of :mod:`microgradnorm.formulas`, including the form of
dX that seed 003 derives, which carries a slip this lesson shows live.
"""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.lessons.demo_tools import (
    autograd_dx,
    check_mark,
    engine_forward,
    fmt,
    number_table,
    random_dy,
    random_gamma,
    rng_for,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, demo
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL, close

_DEFAULT_BATCH = 4


def _batch(p: LessonParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X [N, D], gamma [D], beta [D], dy [N, D] from the lesson's seed."""
    n = p.batch or _DEFAULT_BATCH
    if n < 2:
        raise ValueError(f"batch: BatchNorm over a batch of {n} normalizes every column to 0; use --batch 2 or more")
    x = rng_for(p.seed, 0).normal(0.5, 2.0, size=(n, p.dim))
    gamma = random_gamma(p.seed, p.dim)
    beta = rng_for(p.seed, 3).normal(size=p.dim)
    dy = random_dy(p.seed, (n, p.dim))
    return x, gamma, beta, dy


def seed003_dx(dxhat: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    """dL/dX of BatchNorm [N, D] as seed 003 derives it, slip included.

    Seed 003 takes two routes from X_ij to the variance: the direct one,
    d var / d X_ij = (2/m)(X_ij - mean), and a second one through the mean, where
    it writes d var / d mean = -(2/m)(X_ij - mean). But the variance depends on
    the mean through every element of the column: d var / d mean =
    -(2/m) sum_k (X_kj - mean) = 0 (seed 004 says so). Keeping the bogus term
    makes d var / d X_ij = (2/m^2)(m - 1)(X_ij - mean): the variance path comes
    out (m - 1)/m times too small. Everything else is the correct chain rule,
    reused from :mod:`microgradnorm.formulas`.
    """
    axes = (0,)
    m = x.shape[0]
    mo = formulas.moments(x, axes, eps)
    direct, via_mean, _ = formulas.dx_paths(dxhat, mo.xshift, mo.std, mo.rstd, axes)
    dvar_dx_direct = (2.0 / m) * mo.xshift
    dvar_dmean_slip = -(2.0 / m) * mo.xshift  # should be -(2/m) * sum over the column = 0
    dvar_dx_seed = dvar_dx_direct + dvar_dmean_slip * (1.0 / m)
    return direct + via_mean + formulas.dvar(dxhat, mo.xshift, mo.std, axes) * dvar_dx_seed


@demo("bn_axes")
def bn_axes(p: LessonParams) -> Group:
    """Which axes BatchNorm reduces: per column of [N, D], per channel of [N, C, H, W]."""
    x, *_ = _batch(p)
    n, d = x.shape
    graph = get_norm("batchnorm").build_graph(x.tolist(), None, None, p.eps)
    ln_graph = get_norm("layernorm").build_graph(x.tolist(), None, None, p.eps)
    col_mean = [v.data for v in graph["mean"]]
    col_var = [v.data for v in graph["var"]]
    row_mean = [v.data for v in ln_graph["mean"]]
    headers = ["row"] + [f"x[:,{j}]" for j in range(d)] + ["LN mean"]
    rows = [[str(i)] + [fmt(v, 3) for v in x[i]] + [fmt(row_mean[i], 3)] for i in range(n)]
    rows.append([Text("BN mean", style="bold")] + [fmt(v, 3) for v in col_mean] + [""])
    rows.append([Text("BN var", style="bold")] + [fmt(v, 3) for v in col_var] + [""])
    table2 = number_table(headers, rows, title=f"X [{n}, {d}]: BatchNorm reduces each column, LayerNorm each row")

    shape4 = (2, 3, 2, 2)
    x4 = rng_for(p.seed, 4).normal(1.0, 2.0, size=shape4)
    spec = get_norm("batchnorm")
    g4 = spec.build_graph(x4.tolist(), None, None, p.eps)
    axes = spec.axes(shape4)
    np_mean = formulas.mean(x4, axes).ravel()
    rows4 = [
        [f"channel {c}", str(len(g4.groups[c])), fmt(g4["mean"][c].data, 6), fmt(float(np_mean[c]), 6)]
        for c in range(shape4[1])
    ]
    table4 = number_table(
        ["", "values", "engine mean", "NumPy mean"],
        rows4,
        title=f"X [N, C, H, W] = {list(shape4)}: registry axes {axes}",
        caption="one statistic per channel, taken over N·H·W values",
    )
    ln_axes = get_norm("layernorm").axes((n, d))
    return Group(
        table2,
        Text(f"registry: BatchNorm [N, D] reduces axes {spec.axes((n, d))}, LayerNorm axes {ln_axes}", style="dim"),
        Text(""),
        table4,
    )


@demo("bn_param_grads")
def bn_param_grads(p: LessonParams) -> Group:
    """dgamma and dbeta: every row of the batch adds its share, autograd agrees with the sums."""
    x, gamma, beta, dy = _batch(p)
    grads, graph = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    xhat = np.array([v.data for v in graph["xhat"]]).reshape(x.shape)
    d = x.shape[1]
    contrib = dy * xhat
    rows = [[f"row {i}"] + [fmt(v, 3) for v in contrib[i]] for i in range(x.shape[0])]
    dg = formulas.dgamma(dy, xhat, (0,))
    db = formulas.dbeta(dy, (0,))
    rows.append([Text("sum", style="bold")] + [fmt(v, 4) for v in dg])
    rows.append([Text("autograd", style="bold")] + [fmt(v, 4) for v in grads["gamma"]])
    ok_g = close(grads["gamma"], dg, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)
    ok_b = close(grads["beta"], db, CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)
    beta_rows = [
        ["sum of dy", *[fmt(v, 4) for v in db]],
        ["autograd", *[fmt(v, 4) for v in grads["beta"]]],
    ]
    cols = [f"col {j}" for j in range(d)]
    return Group(
        number_table(["dy · xhat", *cols], rows, title="dgamma_j = Σ_i dy_ij · xhat_ij"),
        Text.assemble(check_mark(ok_g), f" dgamma: max error {sci(float(np.max(np.abs(grads['gamma'] - dg))))}"),
        Text(""),
        number_table(["dbeta", *cols], beta_rows, title="dbeta_j = Σ_i dy_ij"),
        Text.assemble(check_mark(ok_b), f" dbeta: max error {sci(float(np.max(np.abs(grads['beta'] - db))))}"),
    )


@demo("bn_three_paths")
def bn_three_paths(p: LessonParams, column: int = 0) -> DemoOutput:
    """dX of one column as the sum of three paths (direct, via mean, via var) against autograd."""
    x, gamma, beta, dy = _batch(p)
    if not 0 <= column < x.shape[1]:
        raise ValueError(f"column: expected 0 .. {x.shape[1] - 1}, got {column}")
    grads, graph = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    axes = (0,)
    mo = formulas.moments(x, axes, p.eps)
    gx = formulas.dxhat(dy, gamma)
    direct, via_mean, via_var = formulas.dx_paths(gx, mo.xshift, mo.std, mo.rstd, axes)
    total = direct + via_mean + via_var
    j = column
    rows = [
        [
            str(i),
            fmt(direct[i, j], 4),
            fmt(via_mean[i, j], 4),
            fmt(via_var[i, j], 4),
            fmt(total[i, j], 4),
            fmt(grads["x"][i, j], 4),
        ]
        for i in range(x.shape[0])
    ]
    err = float(np.max(np.abs(total - grads["x"])))
    ok = close(total, grads["x"], CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)
    return DemoOutput(
        Group(
            number_table(
                ["i", "direct", "via mean", "via var", "sum", "autograd"],
                rows,
                title=f"dL/dX[i, {j}] along the three paths (m = {x.shape[0]})",
            ),
            Text.assemble(check_mark(ok), f" all columns: max |sum − autograd| = {sci(err)}"),
        ),
        graph=graph,
        graph_options={"paths": True, "path_input": j},  # X[0, j]: its three paths in colour
    )


@demo("bn_seed003_slip")
def bn_seed003_slip(p: LessonParams, column: int = 0) -> Group:
    """Seed 003's variance path against the correct one: off by (m - 1)/m, caught by autograd."""
    x, gamma, beta, dy = _batch(p)
    m = x.shape[0]
    if not 0 <= column < x.shape[1]:
        raise ValueError(f"column: expected 0 .. {x.shape[1] - 1}, got {column}")
    graph = get_norm("batchnorm").build_graph(x.tolist(), gamma.tolist(), beta.tolist(), p.eps)
    # d var / d mean, from the engine: backpropagate from the variance node alone.
    var_node, mean_node = graph["var"][column], graph["mean"][column]
    var_node.backward()
    dvar_dmean = mean_node.grad
    var_node.zero_grad()
    grads, _ = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    axes = (0,)
    mo = formulas.moments(x, axes, p.eps)
    gx = formulas.dxhat(dy, gamma)
    correct = formulas.dx_three_path(gx, mo.xshift, mo.std, mo.rstd, axes)
    seed = seed003_dx(gx, x, p.eps)
    _, _, via_var = formulas.dx_paths(gx, mo.xshift, mo.std, mo.rstd, axes)
    seed_via_var = seed - (correct - via_var)
    j = column
    rows = [
        [str(i), fmt(via_var[i, j], 4), fmt(seed_via_var[i, j], 4), fmt(seed_via_var[i, j] / via_var[i, j], 6)]
        for i in range(m)
    ]
    err_c = float(np.max(np.abs(correct - grads["x"])))
    err_s = float(np.max(np.abs(seed - grads["x"])))
    return Group(
        Text(f"engine: d var / d mean = {sci(dvar_dmean)} (column {j}, from var.backward())"),
        number_table(
            ["i", "via var", "seed 003", "ratio"],
            rows,
            title=f"the variance path of dL/dX[i, {j}], m = {m}",
            caption=f"(m − 1)/m = {fmt((m - 1) / m, 6)}",
        ),
        number_table(
            ["dX formula", "max |formula − autograd|", ""],
            [
                [
                    "three paths, d var/d mean = 0",
                    sci(err_c),
                    check_mark(close(correct, grads["x"], CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)),
                ],
                [
                    "seed 003 (bogus mean term)",
                    sci(err_s),
                    check_mark(close(seed, grads["x"], CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)),
                ],
            ],
        ),
    )


@demo("bn_simplified")
def bn_simplified(p: LessonParams) -> Group:
    """The simplified dX = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), per column."""
    x, gamma, beta, dy = _batch(p)
    grads, _ = autograd_dx("batchnorm", x, gamma, beta, p.eps, dy)
    axes = (0,)
    mo = formulas.moments(x, axes, p.eps)
    gx = formulas.dxhat(dy, gamma)
    simple = formulas.dx_simplified(gx, mo.xhat, mo.rstd, axes)
    paths = formulas.dx_three_path(gx, mo.xshift, mo.std, mo.rstd, axes)
    rows = [
        [
            "simplified vs autograd",
            sci(float(np.max(np.abs(simple - grads["x"])))),
            check_mark(close(simple, grads["x"], CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)),
        ],
        [
            "three paths vs autograd",
            sci(float(np.max(np.abs(paths - grads["x"])))),
            check_mark(close(paths, grads["x"], CLOSED_FORM_RTOL, CLOSED_FORM_ATOL)),
        ],
        ["column sums of dX", sci(float(np.max(np.abs(grads["x"].sum(axis=0))))), ""],
        ["column sums of dX · xhat", sci(float(np.max(np.abs((grads["x"] * mo.xhat).sum(axis=0))))), ""],
    ]
    return number_table(
        ["", "max |·|", ""],
        rows,
        title=f"dX for X [{x.shape[0]}, {x.shape[1]}], eps = {p.eps:g}",
        caption="Each column's gradient sums to zero and is (nearly, for eps > 0) orthogonal to its xhat: "
        "the LayerNorm projection, one column at a time.",
    )


@demo("bn_is_ln_transposed")
def bn_is_ln_transposed(p: LessonParams) -> Group:
    """BN(X) = LN(X^T)^T, forward and backward, for [N, D]; and per channel for [N, C, H, W]."""
    x, _, _, dy = _batch(p)
    bn = engine_forward("batchnorm", x, None, None, p.eps)
    ln_t = engine_forward("layernorm", x.T, None, None, p.eps).T
    dx_bn = autograd_dx("batchnorm", x, None, None, p.eps, dy)[0]["x"]
    dx_ln_t = autograd_dx("layernorm", x.T, None, None, p.eps, dy.T)[0]["x"].T
    x4 = rng_for(p.seed, 4).normal(1.0, 2.0, size=(2, 3, 2, 2))
    bn4 = engine_forward("batchnorm", x4, None, None, p.eps)
    rows_c = x4.transpose(1, 0, 2, 3).reshape(3, -1)  # [C, N*H*W]: one row per channel
    ln4 = engine_forward("layernorm", rows_c, None, None, p.eps).reshape(3, 2, 2, 2).transpose(1, 0, 2, 3)
    rows = [
        [f"BN(X) vs LN(Xᵀ)ᵀ, X [{x.shape[0]}, {x.shape[1]}]", sci(float(np.max(np.abs(bn - ln_t))))],
        ["dX: BN vs LN on Xᵀ with dyᵀ", sci(float(np.max(np.abs(dx_bn - dx_ln_t))))],
        ["BN [2,3,2,2] vs LN of [C, N·H·W] rows", sci(float(np.max(np.abs(bn4 - ln4))))],
    ]
    return number_table(
        ["comparison (engine, no affine)", "max |diff|"],
        rows,
        caption="gamma and beta are left out: BatchNorm has one per column (D of them), while LayerNorm "
        "on Xᵀ would have one per row of X (N of them). The normalization itself is the same.",
    )
