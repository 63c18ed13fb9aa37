"""Demos of lesson 12: numerical traps in normalization layers.

Five ways a correct formula gives a wrong number, each shown live: the one-pass
variance E[x^2] - E[x]^2 cancelling; eps placed outside the square root; a test
loss sum(y) whose input gradient is zero; float32 against float64 (and what that
does to finite differences); dividing the variance by N or by N - 1.

Two graphs here are built by hand from :class:`~microgradnorm.engine.Value`
nodes because they are deliberately *not* what the package's norms build:
LayerNorm with eps outside the square root, and with the variance divided by
N - 1.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.engine import DomainError, Value
from microgradnorm.i18n import N_, _, pgettext
from microgradnorm.i18n.errors import localize
from microgradnorm.i18n.text import cjk_text
from microgradnorm.lessons.demo_tools import (
    agree,
    autograd_dx,
    check_mark,
    dim_note,
    engine_forward,
    fmt,
    number_table,
    random_dy,
    random_gamma,
    random_vector,
    rng_for,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.verdicts import Check, above, all_of, at_least, at_most, below, claim, close_to, differs

# Four numbers whose variance is far from zero: mean 10, squared deviations 36, 9, 9, 36.
CANCELLATION_X = (4.0, 7.0, 13.0, 16.0)
TRUE_VARIANCE = (36.0 + 9.0 + 9.0 + 36.0) / 4  # divided by N, as a normalization does


# ---- E[x^2] - E[x]^2 ----------------------------------------------------------------


@demo("variance_cancellation")
def variance_cancellation(
    p: LessonParams, offsets: tuple[float, ...] = (0.0, 1e3, 1e6, 1e7, 1e8, 1e9), offset: float = 1e9
) -> Group:
    """The naive and the two-pass variance of [4, 7, 13, 16] + offset in float64, and the engine's reaction."""
    base = np.array(CANCELLATION_X)
    rows, naive_err, two_pass_err = [], [], []
    for c in offsets:
        x = base + float(c)
        naive = float(formulas.naive_variance(x, (0,))[0])
        two_pass = float(formulas.variance(x - formulas.mean(x, (0,)), (0,))[0])
        naive_err.append(abs(naive - TRUE_VARIANCE) / TRUE_VARIANCE)
        two_pass_err.append(abs(two_pass - TRUE_VARIANCE) / TRUE_VARIANCE)
        rows.append([f"{float(c):g}", fmt(naive, 6), fmt(two_pass, 6)])
    # the table shows 6 significant digits: a relative error below SHOWN reads as the true variance
    shown = 5e-7
    return Group(
        number_table(
            [_("offset"), "E[x²] − E[x]²", "mean((x − mean)²)"],
            rows,
            title=_("variance of [4, 7, 13, 16] + offset, float64"),
        ),
        claim(
            at_most(max(two_pass_err), shown, "two-pass: largest relative error"),
            _("two-pass: {variance} at every offset").format(variance=fmt(TRUE_VARIANCE, 6)),
        ),
        claim(
            above(max(naive_err), shown, "one-pass: largest relative error"),
            _("one-pass: wrong once the offset is large"),
        ),
        cjk_text(
            _("layer_norm(x, variance='naive') at offset {offset}:").format(offset=f"{float(offset):g}"), style="bold"
        ),
        _naive_engine_reaction(base + float(offset), p.eps),
    )


def _naive_engine_reaction(x: np.ndarray, eps: float) -> RenderableType:
    """What the engine's LayerNorm with the one-pass variance does with ``x``: its DomainError, or a line saying
    it ran on a wrong (but positive) var + eps."""
    try:
        engine_forward("layernorm", x, None, None, eps, variance="naive")
    except DomainError as exc:
        return Text.assemble(("DomainError: ", "bold red"), localize(exc))
    naive = float(formulas.naive_variance(x, (0,))[0])
    return cjk_text(
        _(
            "no complaint: the naive var + eps came out as {naive}, positive but wrong (the true "
            "var + eps is {true}); a large eps hides the cancellation without curing it"
        ).format(naive=f"{naive + eps:g}", true=f"{TRUE_VARIANCE + eps:g}")
    )


# ---- eps inside or outside the square root ------------------------------------------


def layer_norm_eps_outside(xs: list[Value], eps: float) -> list[Value]:
    """xhat = (x - mean) / (sqrt(var) + eps): eps added after the square root (the trap)."""
    n = len(xs)
    mean = Value.sum(xs) * (1.0 / n)
    xshift = [x - mean for x in xs]
    var = Value.sum([s * s for s in xshift]) * (1.0 / n)
    std = var.sqrt() + eps
    return [s / std for s in xshift]


def eps_outside_grad(x: np.ndarray, dy: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(y, dL/dx) for loss = sum(y * dy) with eps outside the square root, from the engine."""
    xs = [Value(float(v)) for v in x]
    ys = layer_norm_eps_outside(xs, eps)
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    return np.array([y.data for y in ys]), np.array([v.grad for v in xs])


def placement_result(x: np.ndarray, dy: np.ndarray, eps: float, where: str) -> tuple[np.ndarray, np.ndarray] | str:
    """(y, dx) of LayerNorm with eps ``where`` = "inside" or "outside" the square root, or the engine's refusal."""
    try:
        if where == "inside":
            grads, graph = autograd_dx("layernorm", x, None, None, eps, dy)
            return np.array([v.data for v in graph["y"]]), grads["x"]
        return eps_outside_grad(x, dy, eps)
    except DomainError:
        return N_("forward divides by 0")  # a table cell: the caller translates it


def _placement_prediction(constant_outside: tuple[np.ndarray, np.ndarray] | str, eps: float) -> Prediction:
    choices = (_("a finite gradient"), "NaN", _("nothing: the forward pass already divides by zero"))
    refused = isinstance(constant_outside, str)
    nans = 0 if refused else int(np.isnan(constant_outside[1]).sum())
    what = "NaN entries in dx"
    evidence = (
        None if refused else at_most(nans, 0, what),
        None if refused else above(nans, 0, what),
        Check("the forward pass refused (1) or ran (0)", float(refused), ">=", 1.0),
    )
    if refused:
        answer = 2
        why = _("With eps = {eps} both placements are the same formula, and var = 0 makes the divisor 0.").format(
            eps=f"{eps:g}"
        )
    else:
        answer = 1 if nans else 0
        why = _(
            "The derivative of sqrt(var) at var = 0 is infinite, and the gradient arriving at it is 0 (the "
            "centered values are all 0): infinity times zero is NaN."
        )
    return Prediction(
        _("A constant input, eps = {eps} added outside the square root: what does backward give for dx?").format(
            eps=f"{eps:g}"
        ),
        choices,
        answer,
        why,
        evidence,
    )


@demo("eps_placement")
def eps_placement(p: LessonParams, constant: float = 3.0) -> DemoOutput:
    """A constant input: eps inside sqrt(var + eps) gives a finite gradient, outside gives NaN."""
    d, eps = p.dim, p.eps
    dy = random_dy(p.seed, d)
    rows, results = [], {}
    inputs = (
        ("constant", _("constant"), np.full(d, float(constant))),
        ("random", _("random"), random_vector(p.seed, d)),
    )
    for name, shown, x in inputs:
        for where, place in (
            ("inside", pgettext("eps placement", "inside")),
            ("outside", pgettext("eps placement", "outside")),
        ):
            results[name, where] = got = placement_result(x, dy, eps, where)
            label = shown if where == "inside" else ""
            if isinstance(got, str):
                rows.append([label, place, Text(_(got), style="bold"), "—"])
            else:
                rows.append([label, place, fmt(float(np.max(np.abs(got[0]))), 4), _nan_aware(got[1])])
    graph = None
    if not isinstance(results["constant", "inside"], str):
        graph = autograd_dx("layernorm", np.full(d, float(constant)), None, None, eps, dy)[1]
    if eps == 0:
        caption = _(
            "inside: `sqrt(var + eps)`, the package's norm. outside: `sqrt(var) + eps`, built by hand. "
            "At `eps = 0` the two are the same formula."
        )
    else:
        caption = _("inside: `sqrt(var + eps)`, the package's norm. outside: `sqrt(var) + eps`, built by hand.")
    caption = cjk_text(caption, "dim")  # the formulas are not broken at their spaces
    return DemoOutput(
        number_table(
            ["x", "eps", "max |y|", "max |dx|"],
            rows,
            title=_("LayerNorm, d = {d}, eps = {eps}, loss = sum(y · dy)").format(d=d, eps=f"{eps:g}"),
            caption=caption,
        ),
        graph=graph,
        prediction=_placement_prediction(results["constant", "outside"], eps),
    )


def _nan_aware(a: np.ndarray) -> str:
    if np.isnan(a).any():
        return _("nan ({k} of {n})").format(k=int(np.isnan(a).sum()), n=a.size)
    return fmt(float(np.max(np.abs(a))), 4)


# ---- loss = sum(y) --------------------------------------------------------------------


# Two broken backward passes: each forgets one of the paths into x (lesson 5).
BUGS = (("var", N_("no var path")), ("mean", N_("no mean path")))


@demo("sum_loss_hides_bugs")
def sum_loss_hides_bugs(p: LessonParams) -> DemoOutput:
    """loss = sum(y) at gamma = 1 gives dx = 0: it misses a backward that forgets the variance path, not the mean's."""
    x = random_vector(p.seed, p.dim)
    m = formulas.moments(x, (0,), p.eps)
    rows, caught = [], {}
    for gamma_name, gamma in (("1", None), ("random", random_gamma(p.seed, p.dim))):
        gamma_shown = "1" if gamma is None else _("random")
        for loss_name, dy in (("sum(y)", np.ones(p.dim)), ("sum(y·dy)", random_dy(p.seed, p.dim))):
            grads, _graph = autograd_dx("layernorm", x, gamma, None, p.eps, dy)
            gx = formulas.dxhat(dy, None if gamma is None else gamma)
            direct, via_mean, via_var = formulas.dx_paths(gx, m.xshift, m.std, m.rstd, (0,))
            cells = []
            for bug, buggy in (("var", direct + via_mean), ("mean", direct + via_var)):
                what = f"gamma {gamma_name}, {loss_name}, {bug}: the broken dx vs autograd"
                found = differs(buggy, grads["x"], tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL, what)
                caught[gamma_name, loss_name, bug] = found
                word = pgettext("bug test verdict", "caught") if found else pgettext("bug test verdict", "missed")
                cells.append(Text(f"{word} {sci(float(np.max(np.abs(buggy - grads['x']))), 0)}",
                                  style="bold" if found else ""))  # fmt: skip
            rows.append([gamma_shown, loss_name, sci(float(np.max(np.abs(grads["x"]))), 1), *cells])
    return DemoOutput(
        number_table(
            ["gamma", _("loss"), "max |dx|", *(_(name) for _bug, name in BUGS)],
            rows,
            title=_("autograd dx, and two backward passes that each forget one path"),
            caption=_(
                "caught: the broken gradient differs from autograd beyond the closed-form tolerance (its largest "
                "difference beside it)."
            ),
        ),
        prediction=_sum_loss_prediction(caught),
    )


def _sum_loss_prediction(caught: dict) -> Prediction:
    var, mean = caught["1", "sum(y)", "var"], caught["1", "sum(y)", "mean"]
    missed = {"var": ~var, "mean": ~mean}
    evidence = (
        all_of(missed["var"], missed["mean"]),
        all_of(missed["var"], mean),
        all_of(var, missed["mean"]),
        all_of(var, mean),
    )
    return Prediction(
        _(
            "gamma = 1, loss = sum(y). One broken backward forgets the variance path, another the mean path. "
            "Which does the test catch?"
        ),
        (
            pgettext("which bug is caught", "neither"),
            _("only the one without the mean path"),
            _("only the one without the variance path"),
            pgettext("which bug is caught", "both"),
        ),
        next(i for i, e in enumerate(evidence) if e),
        _(
            "With gamma = 1, sum(y) = sum(beta) whatever x is, so the right dx is 0. The variance path's share is "
            "−rstd · xhat · mean(xhat) = 0 here, so leaving it out changes nothing; the mean path's share, "
            "−rstd · mean(dy) = −rstd, cancels the direct path's rstd, and leaving it out leaves rstd behind."
        ),
        evidence,
    )


# ---- float32 and a large mean ------------------------------------------------------------

# float32's unit roundoff: a float32 number is within this fraction of itself of the real number it stores
FLOAT32_UNIT = float(np.finfo(np.float32).eps) / 2


def _torch_layer_norm(x: np.ndarray, eps: float) -> np.ndarray | None:
    """PyTorch's float32 layer_norm of x, or None when PyTorch is not installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch.nn.functional.layer_norm(torch.from_numpy(x), (x.shape[-1],), eps=eps).numpy()


def offset_width(dim: int) -> int:
    return max(dim, 4)


def mean_rounding_bound(n: int) -> float:
    """gamma_n = n u / (1 - n u): a float32 mean of n values of one sign is off by at most this fraction of itself.

    The n - 1 additions of its sum, in any order, are off by at most gamma_(n-1) of the sum of the
    magnitudes (Higham, Accuracy and Stability of Numerical Algorithms, 2002, section 4.2), which is the
    sum itself when every value has the same sign; the division by n rounds once more.
    """
    return n * FLOAT32_UNIT / (1.0 - n * FLOAT32_UNIT)


def y_error_bound(x: np.ndarray) -> tuple[float, float]:
    """(largest |mean| / spread of a row of x, a bound on the textbook float32 LayerNorm's relative error in y).

    A row's float32 mean is shifted by at most gamma_d of itself, and every x - mean carries that shift:
    xhat's error is the shift divided by the row's spread (its std without eps), relative to xhat's size.
    The later roundings (variance, sqrt, division, product) add a few u; the shifted centre adds the
    shift squared to the variance. Valid when every value of a row has the row mean's sign.
    """
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1)  # [rows]
    spreads = float(np.max(np.abs(mean) / x64.std(axis=-1)))
    shift = mean_rounding_bound(x.shape[-1]) * spreads
    return spreads, shift * (1.0 + shift) + (x.shape[-1] + 8) * FLOAT32_UNIT


def float32_offset_errors(
    seed: int, dim: int, eps: float, ratios: tuple[float, ...]
) -> tuple[dict[str, list[float]], list[tuple[float, float]]]:
    """Relative error of float32 LayerNorms against float64 on the same float32 input, per mean/spread ratio.

    Rows of spread about 1 around a mean of ``ratio``; the input is stored in float32 first, so that
    every error below is the computation's, not the input's. Keys: the package's default NumPy kernel,
    the textbook closed forms (the ``reference`` backend), and PyTorch (absent when it is not installed).
    Also, per ratio, :func:`y_error_bound` of the rows (the textbook's bound).
    """
    rng = rng_for(seed, 43)
    out: dict[str, list[float]] = {"package": [], "textbook": [], "torch": []}
    bounds: list[tuple[float, float]] = []
    for ratio in ratios:
        # at least 4 values a row: 2 values a spread of 1 apart can round to one float32 number at 1e6
        x = (rng.normal(0.0, 1.0, size=(64, offset_width(dim))) + float(ratio)).astype(np.float32)
        y64 = V.layer_norm_forward(x.astype(np.float64), None, None, eps, backend="numpy")[0]
        for key, backend in (("package", "numpy"), ("textbook", "reference")):
            out[key].append(tol.normwise_error(V.layer_norm_forward(x, None, None, eps, backend=backend)[0], y64)[1])
        yt = _torch_layer_norm(x, eps)
        if yt is not None:
            out["torch"].append(tol.normwise_error(yt, y64)[1])
        bounds.append(y_error_bound(x))
    if not out["torch"]:
        del out["torch"]
    return out, bounds


@demo("float32_offset")
def float32_offset(p: LessonParams, ratios: tuple[float, ...] = (1.0, 1e2, 1e4, 1e6), asked: float = 1e4) -> DemoOutput:
    """float32 LayerNorm of rows whose mean is many times their spread: the mean's rounding, and who repairs it."""
    if asked not in ratios:
        raise ValueError(f"asked: expected one of the ratios {ratios!r}, got {asked!r}")
    errors, bounds = float32_offset_errors(p.seed, p.dim, p.eps, tuple(ratios))
    names = {"package": _("this package"), "textbook": _("textbook"), "torch": "PyTorch"}
    rows = [[f"{r:g}", *(sci(errors[k][i], 1) for k in errors)] for i, r in enumerate(ratios)]
    table = number_table(
        [_("mean ÷ std"), *(names[k] for k in errors)],
        rows,
        title=_("float32 LayerNorm of 64 rows of d = {d}: relative error against float64 on the same input").format(
            d=offset_width(p.dim)
        ),
        caption=_(
            "this package: its NumPy kernel. textbook: mean, x − mean, centred variance, all in float32 (the "
            "reference backend)."
        ),
    )
    parts = [table]
    if "torch" not in errors:
        parts.append(cjk_text(_("PyTorch is not installed here, so its float32 layer_norm is not measured."), "dim"))
    ours = max(errors["package"])
    i = list(ratios).index(asked)
    parts += [
        claim(
            at_most(ours, 16 * FLOAT32_UNIT, "this package: largest float32 error at any ratio"),
            _("this package: rounding only at every ratio (at most {error})").format(error=sci(ours, 1)),
        ),
        claim(
            at_most(errors["textbook"][i], bounds[i][1], f"textbook float32 error at {asked:g}"),
            _("textbook: within the mean's rounding bound ({bound})").format(bound=sci(bounds[i][1], 1)),
        ),
    ]
    return DemoOutput(Group(*parts), prediction=_offset_prediction(errors, bounds, ratios, asked, offset_width(p.dim)))


def _offset_prediction(
    errors: dict[str, list[float]], bounds: list[tuple[float, float]], ratios: tuple[float, ...], asked: float, d: int
) -> Prediction:
    """The question before the table: how far is the textbook float32 LayerNorm off at mean ÷ spread = ``asked``?"""
    i = list(ratios).index(asked)
    err = errors["textbook"][i]
    # bands a decade or more from every error measured at seeds 0-5, every d and eps the lesson allows
    bands = (1e-5, 1e-2)
    what = f"textbook float32 error at mean ÷ spread = {asked:g}"
    evidence = (
        below(err, bands[0], what),
        all_of(at_least(err, bands[0], what), below(err, bands[1], what)),
        at_least(err, bands[1], what),
    )
    spreads, bound = bounds[i]
    return Prediction(
        _(
            "Rows whose mean is {ratio} times their std, stored in float32. The textbook LayerNorm (mean, "
            "then x − mean, then the centred variance) runs in float32. How far is its y from float64's?"
        ).format(ratio=f"{asked:g}"),
        (_("rounding: below 1e-5"), _("between 1e-5 and 1e-2"), _("1e-2 or more")),
        next(k for k, e in enumerate(evidence) if e),
        _(
            "Measured: {error}. The float32 mean is off by up to {gamma} of its size ({d} − 1 additions and a "
            "division, each rounding by up to u = {unit}). A row's mean here is up to {spreads} times its std, "
            "and every x − mean carries the mean's shift: y can be off by up to {bound}. Two passes do not save "
            "the textbook; the package's kernel takes the mean of x − mean again and folds it back (lesson 14)."
        ).format(
            error=sci(err, 1),
            d=d,
            gamma=sci(mean_rounding_bound(d), 1),
            unit=sci(FLOAT32_UNIT, 0),
            spreads=f"{spreads:.3g}",
            bound=sci(bound, 1),
        ),
        evidence,
    )


# ---- float32 vs float64 -----------------------------------------------------------------


def _ln_loss(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> float:
    y, _cache = V.layer_norm_forward(x, gamma, None, eps, backend="numpy")
    return float(np.sum(y * dy.astype(x.dtype), dtype=x.dtype))


def fd_errors(seed: int, dim: int, eps: float, steps: tuple[float, ...]) -> dict[str, list[float]]:
    """Relative error of a central finite difference dL/dx_0 at each step h, in float32 and float64.

    The reference is the closed-form gradient in float64. NaN marks a step so small
    that x + h rounds back to x in that precision.
    """
    x = random_vector(seed, dim)
    gamma = random_gamma(seed, dim)
    dy = random_dy(seed, dim)
    m = formulas.moments(x, (0,), eps)
    exact = float(formulas.dx_simplified(formulas.dxhat(dy, gamma), m.xhat, m.rstd, (0,))[0])
    out: dict[str, list[float]] = {"float32": [], "float64": []}
    for dtype in (np.float32, np.float64):
        xd, gd = x.astype(dtype), gamma.astype(dtype)
        for h in steps:
            plus, minus = xd.copy(), xd.copy()
            plus[0] += dtype(h)
            minus[0] -= dtype(h)
            step = float(plus[0]) - float(minus[0])  # the step actually taken, after rounding
            if step == 0.0:  # x + h rounded back to x: no step at all
                out[np.dtype(dtype).name].append(math.nan)
                continue
            fd = (_ln_loss(plus, gd, dy, eps) - _ln_loss(minus, gd, dy, eps)) / step
            out[np.dtype(dtype).name].append(abs(fd - exact) / abs(exact))
    return out


def _float32_errors(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> tuple[float, float]:
    """Normwise relative error of LayerNorm run in float32 against float64: (of y, of dx)."""
    y64, c64 = V.layer_norm_forward(x, gamma, None, eps, backend="numpy")
    dx64 = V.layer_norm_backward(dy, c64)[0]
    y32, c32 = V.layer_norm_forward(x.astype(np.float32), gamma.astype(np.float32), None, eps, backend="numpy")
    dx32 = V.layer_norm_backward(dy.astype(np.float32), c32)[0]
    return tol.normwise_error(y32, y64)[1], tol.normwise_error(dx32, dx64)[1]


def _raised_dim_note(dim: int, d: int) -> list[RenderableType]:
    """The line saying why the step runs at d = ``d`` instead of the learner's ``dim`` (none when they agree)."""
    if d == dim:
        return []
    return [
        dim_note(
            _(
                "At d = {dim} a LayerNorm gives ±1/sqrt(1 + eps/var) whatever the numbers, so dx carries a factor "
                "eps/(var + eps). At a small eps that is nearly zero, and a relative error against it measures "
                "nothing, so this step uses d = {d}."
            ).format(dim=dim, d=d)
        )
    ]


def _fd_table(steps: tuple[float, ...], fd: dict[str, list[float]]) -> RenderableType:
    """Finite-difference error per step h, float32 beside float64 (— where the step rounded away)."""
    return number_table(
        [_("step h"), "float32", "float64"],
        [[f"{h:g}", sci(a, 1), sci(b, 1)] for h, a, b in zip(steps, fd["float32"], fd["float64"])],
        title=_("central finite difference of dL/dx_0, relative error against the closed form"),
        caption=_(
            "— : x + h rounds back to x, no step is taken. The package checks gradients in float64 "
            "with h = {h} (FD_STEP) and accepts a relative error of {rtol} (FD_RTOL)."
        ).format(h=f"{tol.FD_STEP:g}", rtol=f"{tol.FD_RTOL:g}"),
    )


@demo("float_precision")
def float_precision(p: LessonParams, steps: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8)) -> Group:
    """LayerNorm in float32 against float64, and finite differences in both precisions."""
    rng = rng_for(p.seed, 40)
    # two numbers normalize to ±1/sqrt(1 + eps/var) whatever they are: at d = 2 dx carries a factor
    # eps/(var + eps), nearly zero at a small eps, and a relative error against it measures nothing.
    # The step runs at d = 3 then, and says so.
    d = max(p.dim, 3)
    x = rng.normal(0.5, 2.0, size=(64, d))
    gamma = rng.uniform(0.5, 1.5, size=x.shape[1])
    dy = rng.normal(size=x.shape)
    ey, edx = _float32_errors(x, gamma, dy, p.eps)
    fd = fd_errors(p.seed, d, p.eps, tuple(steps))
    best = {k: float(np.nanmin(v)) for k, v in fd.items()}
    return Group(
        *_raised_dim_note(p.dim, d),
        number_table(
            [_("float32 vs float64"), _("relative error"), pgettext("float32 check column", "within")],
            [
                ["y", sci(ey, 1), check_mark(at_most(ey, tol.FLOAT32_RTOL, "y: float32 vs float64"))],
                ["dx", sci(edx, 1), check_mark(at_most(edx, tol.FLOAT32_RTOL, "dx: float32 vs float64"))],
            ],
            title=_("LayerNorm of x [{rows}, {cols}] on the vectorized path").format(rows=x.shape[0], cols=x.shape[1]),
            caption=_("within: at most FLOAT32_RTOL = {rtol}, the package's tolerance for float32.").format(
                rtol=f"{tol.FLOAT32_RTOL:g}"
            ),
        ),
        Text(""),
        _fd_table(steps, fd),
        claim(
            above(best["float32"], 100 * best["float64"], "best finite-difference error, float32 vs 100 × float64"),
            _("float32's best step is {factor}× worse than float64's").format(
                factor=fmt(best["float32"] / best["float64"], 2)
            ),
        ),
    )


# ---- N or N - 1 --------------------------------------------------------------------------


def layer_norm_unbiased(xs: list[Value], eps: float) -> list[Value]:
    """LayerNorm with the variance divided by n - 1 (the sample variance), built from Values."""
    n = len(xs)
    mean = Value.sum(xs) * (1.0 / n)
    xshift = [x - mean for x in xs]
    var = Value.sum([s * s for s in xshift]) * (1.0 / (n - 1))
    rstd = (var + eps) ** -0.5
    return [s * rstd for s in xshift]


def batchnorm_both_ways(seed: int, dim: int, rows: int, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One training step of the package's BatchNorm layer with momentum 1: (x, y, running_var)."""
    x = rng_for(seed, 42).normal(0.5, 2.0, size=(rows, dim))
    layer = V.BatchNorm(dim, eps=eps, momentum=1.0, dtype=np.float64, backend="numpy")
    y = layer(x)
    return x, y, layer.running_var


def _sample_variances(rng: np.random.Generator, sizes: tuple[int, ...]) -> list[list[str]]:
    """Table rows: for one random sample of each size n, its variance ÷ n, ÷ (n − 1) and their ratio."""
    table = []
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"sizes: expected integers >= 2, got {n!r}")
        x = rng.normal(0.5, 2.0, size=n)
        v_n, v_n1 = float(np.var(x)), float(np.var(x, ddof=1))
        table.append([str(n), fmt(v_n, 4), fmt(v_n1, 4), fmt(v_n1 / v_n, 4)])
    return table


def _mixed_n_error(x: np.ndarray, dy: np.ndarray, eps: float) -> tuple[np.ndarray, float]:
    """A forward that divides by n - 1, checked against a backward formula that assumes n.

    Returns the forward's xhat and the normwise error of the ÷n formula's dx against the autograd dx.
    """
    xs = [Value(float(v)) for v in x]
    ys = layer_norm_unbiased(xs, eps)
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    auto = np.array([v.grad for v in xs])
    xhat = np.array([y.data for y in ys])
    rstd = float((np.var(x, ddof=1) + eps) ** -0.5)
    return xhat, tol.normwise_error(formulas.dx_simplified(dy, xhat, rstd, (0,)), auto)[1]


# below this, mean(xhat²) = var/(var + eps) is too far from 1 to call it "1 up to eps"
EPS_SMALL_MEAN_SQUARE = 0.99


def _mean_square_line(d: int, var_n: float, square_n: float, square_n1: float) -> str:
    """The mean(xhat²) claim's text: "1 up to eps" only while eps is small beside the row's variance."""
    values = {"d": d, "n": fmt(square_n, 4), "n1": fmt(square_n1, 4), "ratio": fmt((d - 1) / d, 4)}
    if square_n >= EPS_SMALL_MEAN_SQUARE:
        return _(
            "a row of d = {d}: mean(xhat²) is {n} with ÷n (up to eps), {n1} with ÷(n−1) "
            "(at eps = 0: (n − 1)/n = {ratio})"
        ).format(**values)
    return _(
        "a row of d = {d}: eps is not small beside its variance ({var}), so mean(xhat²) = var/(var + eps) "
        "is {n} with ÷n, {n1} with ÷(n−1); at eps = 0 it is 1 with ÷n and (n − 1)/n = {ratio} with ÷(n−1)"
    ).format(var=fmt(var_n, 3), **values)


@demo("n_or_n_minus_1")
def n_or_n_minus_1(p: LessonParams, sizes: tuple[int, ...] = (2, 4, 16, 256), rows: int = 4) -> Group:
    """Biased (÷n) and unbiased (÷(n−1)) variance: how far apart, where BatchNorm uses each, and mixing them."""
    table = _sample_variances(rng_for(p.seed, 41), sizes)
    xb, yb, running = batchnorm_both_ways(p.seed, max(p.dim, 1), rows, p.eps)
    by_n = (xb - xb.mean(axis=0)) / np.sqrt(xb.var(axis=0) + p.eps)
    x = random_vector(p.seed, p.dim)
    xhat = _mixed_n_error(x, random_dy(p.seed, p.dim), p.eps)[0]
    # at d = 2 the ÷(n−1) forward also gives ±1/sqrt(2(1 + eps/var)) whatever the numbers: its true dx is
    # nearly zero at a small eps and a relative error against it measures nothing; as float_precision does,
    # the dx comparison then runs on a row of d = 3 and says so.
    d_err = max(p.dim, 3)
    err = _mixed_n_error(random_vector(p.seed, d_err), random_dy(p.seed, d_err), p.eps)[1]
    if d_err == p.dim:
        mixed_line = _("forward ÷(n−1), ÷n backward: dx off by {error} (relative)").format(error=sci(err, 1))
    else:
        mixed_line = _(
            "forward ÷(n−1), ÷n backward, on a row of d = {d} (at d = {dim} the true dx carries "
            "a factor eps/(var + eps), as in the step before): dx off by {error} (relative)"
        ).format(d=d_err, dim=p.dim, error=sci(err, 1))
    # the prose's "with n the normalized vector has a mean square of exactly one (up to eps)", measured
    var_n, var_n1 = float(np.var(x)), float(np.var(x, ddof=1))
    square_n = float(np.mean(formulas.moments(x, (0,), p.eps).xhat ** 2))
    square_n1 = float(np.mean(xhat**2))
    return Group(
        number_table(["n", "var ÷ n", "var ÷ (n−1)", _("ratio")], table, title=_("one random sample per size")),
        claim(
            agree(yb, by_n, what="BatchNorm y vs the ÷N formula"),
            cjk_text(_("vectorized.BatchNorm, a batch of {rows}: it normalizes with `var ÷ N`").format(rows=rows)),
        ),
        claim(
            close_to(running, xb.var(axis=0, ddof=1), tol.CLOSED_FORM_RTOL, 0.0, "running_var vs var ÷ (N − 1)"),
            cjk_text(_("and its running_var (momentum 1) is `var ÷ (N − 1)`")),
        ),
        claim(
            close_to(square_n, var_n / (var_n + p.eps), tol.CLOSED_FORM_RTOL, 0.0, "mean(xhat²), ÷n")
            & close_to(square_n1, var_n / (var_n1 + p.eps), tol.CLOSED_FORM_RTOL, 0.0, "mean(xhat²), ÷(n−1)"),
            _mean_square_line(p.dim, var_n, square_n, square_n1),
        ),
        claim(above(err, tol.CLOSED_FORM_RTOL, "dx: ÷n formula vs the ÷(n−1) forward's autograd"), mixed_line),
    )
