"""Demos of lesson 09: RMSNorm (Zhang and Sennrich, 2019).

RMSNorm divides by the root mean square and nothing else: no mean, no shift, no
beta. Its Jacobian is (1/rms) diag(gamma) (I - xhat xhat^T / d)
(:func:`microgradnorm.formulas.rms_jacobian`): only the radial half of
LayerNorm's projection. The last demo times LayerNorm and RMSNorm side by side
on several implementations (the package's NumPy path and fused kernels,
PyTorch), in one run, reports medians, and prints its own reading of them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.drawing.charts import heat_map
from microgradnorm.engine import topological_order
from microgradnorm.i18n import N_, _, pgettext
from microgradnorm.i18n.text import CJKText, cjk_text, separated
from microgradnorm.jacobian import autograd_jacobian
from microgradnorm.lessons.demo_tools import (
    agree,
    autograd_dx,
    dim_note,
    engine_forward,
    fmt,
    maxabs,
    number_table,
    random_dy,
    random_gamma,
    random_vector,
    rng_for,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_RTOL
from microgradnorm.verdicts import Check, above, cancels, claim, exactly, within


def _vector(p: LessonParams) -> np.ndarray:
    if p.dim < 2:
        raise ValueError(_("dim: this lesson needs at least 2 features, got {dim}").format(dim=p.dim))
    return random_vector(p.seed, p.dim, loc=1.5)


# how close to 1 a root mean square must be for "1 up to eps" to read true at the table's 6 digits
NEAR_ONE = 1e-3


@demo("rms_vs_ln_forward")
def rms_vs_ln_forward(p: LessonParams) -> Group:
    """LayerNorm and RMSNorm of the same vector, and of the same vector centered first."""
    x = _vector(p)
    ln = engine_forward("layernorm", x, None, None, p.eps)
    rms = engine_forward("rmsnorm", x, None, None, p.eps)
    rms_c = engine_forward("rmsnorm", x - x.mean(), None, None, p.eps)
    rows = [[str(i), fmt(x[i], 4), fmt(ln[i], 4), fmt(rms[i], 4)] for i in range(p.dim)]
    mean, root_ms = pgettext("demo table row", "mean"), pgettext("demo table row", "root mean sq")
    rows.append([Text(mean, style="bold"), fmt(x.mean(), 4), sci(ln.mean()), fmt(rms.mean(), 4)])
    root = [float(np.sqrt(np.mean(v * v))) for v in (x, ln, rms)]
    rows.append([Text(root_ms, style="bold"), fmt(root[0], 4), fmt(root[1], 6), fmt(root[2], 6)])
    ms = float(np.mean(x * x))
    return Group(
        cjk_text(_("one vector, d = {d}, eps = {eps}").format(d=p.dim, eps=f"{p.eps:g}"), style="italic"),
        number_table(["i", "x", "LN(x)", "RMS(x)"], rows),
        claim(
            cancels(ln.sum(), np.abs(ln).sum(), "Σ LN(x)")
            & above(float(rms.mean() * x.mean()), 0.0, "mean of RMS(x) × mean of x (same sign)"),
            _("LN(x) has mean 0; RMS(x) keeps the sign of x's mean"),
        ),
        claim(
            within(root[2], float(np.sqrt(ms / (ms + p.eps))), CLOSED_FORM_RTOL, "root mean square of RMS(x)"),
            _("RMS(x) has root mean square √(mean(x²)/(mean(x²) + eps)) = {value}").format(
                value=f"{root[2]:.7g}"  # one digit past the table, so 1 − eps/(2·mean(x²)) shows
            )
            + (_(", 1 up to eps") if abs(root[2] - 1) < NEAR_ONE else ""),
        ),
        claim(
            agree(rms_c, ln, what="RMS(x − mean(x)) vs LN(x)"),
            _("RMS(x − mean(x)) = LN(x): max |diff| {value}").format(value=maxabs(rms_c - ln)),
        ),
    )


def _sum_prediction(dx_rms: np.ndarray, dx_ln: np.ndarray) -> Prediction:
    """LayerNorm's dx sums to zero; does RMSNorm's? The answer the two gradients give."""
    zero = cancels(dx_rms.sum(), np.abs(dx_rms).sum(), "RMSNorm's Σ dx_i")
    sums = {"ln": sci(float(dx_ln.sum())), "rms": sci(float(dx_rms.sum()))}
    if zero:
        why = _(
            "Here 1 · dx is {rms} for RMSNorm: this x, gamma and dy happen to give no "
            "part along the ones vector, but nothing in RMSNorm forces it."
        ).format(**sums)
    else:
        # the reason (a shift of every input changes nothing) is the next step's question, not said here
        why = _("Here 1 · dx is {ln} for LayerNorm and {rms} for RMSNorm.").format(**sums)
    return Prediction(
        _("LayerNorm's dx always sums to zero. RMSNorm's dx, for the same x, gamma and dy:"),
        (_("sums to zero too"), _("does not sum to zero")),
        0 if zero else 1,
        why,
        (zero, ~zero),
    )


@demo("rms_gradient")
def rms_gradient(p: LessonParams, eps: float | None = None) -> DemoOutput:
    """The RMSNorm input gradient: autograd vs the closed form, and which directions it keeps."""
    e = p.eps if eps is None else eps
    x = _vector(p)
    g = random_gamma(p.seed, p.dim)
    dy = random_dy(p.seed, p.dim)
    rms_grads, graph = autograd_dx("rmsnorm", x, g, None, e, dy)
    ln_grads, _ln_graph = autograd_dx("layernorm", x, g, None, e, dy)
    m = formulas.rms_moments(x, (0,), e)
    closed = formulas.rms_dx(formulas.dxhat(dy, g), m.xhat, m.rrms, (0,))
    lm = formulas.moments(x, (0,), e)
    dx_r, dx_l = rms_grads["x"], ln_grads["x"]
    rows = [
        ["|dx|", fmt(float(np.linalg.norm(dx_l)), 4), fmt(float(np.linalg.norm(dx_r)), 4)],
        ["1 · dx", sci(float(dx_l.sum())), sci(float(dx_r.sum()))],
        [pgettext("demo table row", "own xhat · dx"), sci(float(lm.xhat @ dx_l)), sci(float(m.xhat @ dx_r))],
    ]
    # along its own xhat, what eps leaves: rrms · (g·xhat) · eps/(ms + eps), zero at eps = 0
    radial = float(m.rrms[0] * (formulas.dxhat(dy, g) @ m.xhat) * e / (float(np.mean(x * x)) + e))
    terms = float(np.abs(dx_r).sum() * np.abs(m.xhat).max())
    return DemoOutput(
        Group(
            cjk_text(_("same x, gamma, dy; d = {d}, eps = {eps}").format(d=p.dim, eps=f"{e:g}"), style="italic"),
            number_table([pgettext("demo table header", "autograd dx"), "LayerNorm", "RMSNorm"], rows),
            claim(
                agree(dx_r, closed, what="RMSNorm dx vs closed form"),
                _("RMSNorm dx = rrms·(g − xhat·mean(g·xhat)): max error {error}").format(error=maxabs(dx_r - closed)),
            ),
            claim(
                cancels(m.xhat @ dx_r - radial, terms, "xhat · dx − eps's prediction"),
                _("xhat · dx is rrms·(g·xhat)·eps/(mean(x²) + eps): zero at eps = 0"),
            ),
        ),
        graph=graph,
        prediction=_sum_prediction(dx_r, dx_l),
    )


def _shift_prediction(still: Check, j_rms: np.ndarray, j_ln: np.ndarray) -> Prediction:
    """Does RMSNorm's output move when every input shifts alike? ``still`` is the check that it does not."""
    ones = np.ones(len(j_rms))
    shift = (float(np.linalg.norm(j_rms @ ones)), float(np.linalg.norm(j_ln @ ones)))
    why = _("|J·1| = {rms} (RMS), {ln} (LN): with no mean subtracted, nothing cancels the shift.").format(
        rms=sci(shift[0]), ln=sci(shift[1])
    )
    return Prediction.from_evidence(
        _("Shift every input of RMSNorm by the same small amount. Does its output move?"),
        (_("no, just as LayerNorm's does not"), _("yes, it moves")),
        why,
        (still, ~still),
    )


def _stretch_claim(x: np.ndarray, lm: formulas.Moments, j_rms: np.ndarray, j_ln: np.ndarray, eps: float) -> CJKText:
    """A stretch of x: what eps leaves of it through each Jacobian (``lm``: LayerNorm's moments of x)."""
    ms, var = float(np.mean(x * x)), float(lm.var.reshape(-1)[0])
    # a stretch of x: J·x = x·eps/(ms + eps)^(3/2) (RMSNorm), xshift·eps/(var + eps)^(3/2) (LayerNorm)
    stretch_rms = np.linalg.norm(x) * eps / (ms + eps) ** 1.5
    stretch_ln = np.linalg.norm(lm.xshift) * eps / (var + eps) ** 1.5
    stretch = (np.linalg.norm(j_rms @ x), np.linalg.norm(j_ln @ x))
    size = np.abs(j_rms).sum() * np.abs(x).max()
    return claim(
        cancels(stretch[0] - stretch_rms, size, "|J·x| − eps's prediction (RMS)")
        & cancels(stretch[1] - stretch_ln, size, "|J·x| − eps's prediction (LN)"),
        (
            _("a stretch of x: |J·x| = {rms} (RMS), {ln} (LN), what eps leaves")
            if eps > 0
            else _("a stretch of x: |J·x| = {rms} (RMS), {ln} (LN), rounding (eps = 0)")
        ).format(rms=sci(float(stretch[0])), ln=sci(float(stretch[1]))),
    )


@demo("rms_jacobian_heatmap")
def rms_jacobian_heatmap(p: LessonParams) -> DemoOutput:
    """The RMSNorm Jacobian from autograd beside LayerNorm's, and the rank of what each removes."""
    x = _vector(p)
    j_rms = autograd_jacobian("rmsnorm", x.tolist(), None, None, p.eps)
    j_ln = autograd_jacobian("layernorm", x.tolist(), None, None, p.eps)
    m = formulas.rms_moments(x, (0,), p.eps)
    lm = formulas.moments(x, (0,), p.eps)
    closed = formulas.rms_jacobian(m.xhat, float(m.rrms[0]), None)
    ones = np.ones(p.dim)
    # what each Jacobian removes: I - J / (its 1/scale factor), a projection (or nearly, for eps > 0)
    rank_rms = np.linalg.matrix_rank(np.eye(p.dim) - j_rms / float(m.rrms[0]), tol=1e-6)
    rank_ln = np.linalg.matrix_rank(np.eye(p.dim) - j_ln / float(lm.rstd[0]), tol=1e-6)
    scale = float(max(np.max(np.abs(j_rms)), np.max(np.abs(j_ln))))
    # J·1 is judged against the terms that cancel in it (1/scale · (δ_ij, 1/d, xhat_i xhat_j/d) per row),
    # not against |J|, which is itself 0 for LayerNorm at d = 2 and eps = 0
    radial = np.abs(np.outer(lm.xhat, lm.xhat)) / p.dim
    terms_ln = float(lm.rstd[0]) * (1.0 + 1.0 / p.dim + radial.sum(axis=1))
    terms_rms = float(m.rrms[0]) * (1.0 + (np.abs(np.outer(m.xhat, m.xhat)) / p.dim).sum(axis=1))
    still = cancels(j_rms @ ones, terms_rms, "RMSNorm's J·1")
    shift = _("a shift of all inputs: |J·1| = {rms} (RMS), {ln} (LN)").format(
        rms=sci(float(np.linalg.norm(j_rms @ ones))), ln=sci(float(np.linalg.norm(j_ln @ ones)))
    )
    if p.dim == 2 and p.eps == 0:
        shift = _("{shift} (d = 2: LayerNorm's J is 0 here, the output is ±1 whatever x is)").format(shift=shift)
    return DemoOutput(
        Group(
            heat_map(j_rms, title=_("RMSNorm dy/dx (autograd)"), scale=scale, legend=False),
            heat_map(j_ln, title=_("LayerNorm dy/dx (autograd), same scale"), scale=scale),
            claim(
                agree(j_rms, closed, what="RMSNorm J vs closed form"),
                "RMSNorm J = (1/rms)(I − xhat xhatᵀ/d)",
            ),
            claim(
                exactly(rank_rms, 1, "rank of what RMSNorm removes") & exactly(rank_ln, 2, "rank of what LN removes"),
                _("what each removes has rank {rms} (RMS) and {ln} (LN)").format(rms=rank_rms, ln=rank_ln),
            ),
            claim(cancels(j_ln @ ones, terms_ln, "LayerNorm's J·1") & ~still, shift),
            _stretch_claim(x, lm, j_rms, j_ln, p.eps),
        ),
        prediction=_shift_prediction(still, j_rms, j_ln),
    )


# ---- the work per row: reductions, counted in the graphs ------------------------------------------


def row_reductions(norm: str, x: np.ndarray, eps: float) -> int:
    """How many nodes of ``norm``'s forward graph on one row add up the whole row (a sum over its d values)."""
    graph = get_norm(norm).build_graph(x.tolist(), None, None, eps)
    return sum(1 for v in topological_order(graph.roots()) if v.op == "sum" and len(v.children) == len(x))


@demo("row_reductions")
def row_reductions_demo(p: LessonParams) -> DemoOutput:
    """The sums over a whole row in LayerNorm's and RMSNorm's forward graphs, counted node by node."""
    x = _vector(p)
    counts = {norm: row_reductions(norm, x, p.eps) for norm in ("layernorm", "rmsnorm")}
    table = number_table(
        [pgettext("demo table header", "norm"), _("sums over the row")],
        [["LayerNorm", str(counts["layernorm"])], ["RMSNorm", str(counts["rmsnorm"])]],
    )
    evidence = tuple(exactly(counts["rmsnorm"], k, "row sums in RMSNorm's forward graph") for k in (0, 1, 2))
    why = _(
        "Counted in the forward graphs: RMSNorm {rms}, LayerNorm {ln} (the mean, then the centered squares)."
    ).format(rms=counts["rmsnorm"], ln=counts["layernorm"])
    prediction = Prediction.from_evidence(
        _("LayerNorm's forward graph adds up the whole row {ln} times. How many times does RMSNorm's?").format(
            ln=counts["layernorm"]
        ),
        ("0", "1", "2"),
        why,
        evidence,
    )
    return DemoOutput(table, prediction=prediction)


# ---- timing: the same two norms on several implementations -------------------------------------

# The calls timed for each implementation: forward alone, and forward + backward, of each norm.
CALLS = ("ln_f", "rms_f", "ln_b", "rms_b")
PATHS = ("numpy", "fused", "torch")
PATH_NAMES = {"numpy": "NumPy", "fused": N_("fused (numba)"), "torch": "PyTorch"}  # shown through path_name()
SAME = 0.05  # a ratio within 5% of 1 reads as "about the same" on a shared machine


@dataclass(frozen=True)
class SpeedProblem:
    """One float32 problem both norms run on: x [rows, features], gamma, beta and dy."""

    x: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    dy: np.ndarray
    eps: float


def speed_problem(seed: int, rows: int, features: int, eps: float) -> SpeedProblem:
    for name, v in (("rows", rows), ("features", features)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 2:
            raise ValueError(f"{name}: expected an integer >= 2, got {v!r}")
    rng = rng_for(seed, 7)
    f32 = np.float32
    x = rng.normal(size=(rows, features)).astype(f32)
    gamma, beta = rng.uniform(0.5, 1.5, size=features).astype(f32), rng.normal(size=features).astype(f32)
    return SpeedProblem(x, gamma, beta, rng.normal(size=(rows, features)).astype(f32), eps)


def package_calls(prob: SpeedProblem, backend: str) -> dict[str, Callable[[], object]]:
    """The package's vectorized path on ``backend`` ("numpy" or "fused")."""
    from microgradnorm import vectorized as V

    x, g, b, dy, eps = prob.x, prob.gamma, prob.beta, prob.dy, prob.eps

    def ln_b() -> object:
        return V.layer_norm_backward(dy, V.layer_norm_forward(x, g, b, eps, backend=backend)[1])

    def rms_b() -> object:
        return V.rms_norm_backward(dy, V.rms_norm_forward(x, g, eps=eps, backend=backend)[1])

    return {
        "ln_f": lambda: V.layer_norm_forward(x, g, b, eps, backend=backend),
        "rms_f": lambda: V.rms_norm_forward(x, g, eps=eps, backend=backend),
        "ln_b": ln_b,
        "rms_b": rms_b,
    }


def torch_calls(prob: SpeedProblem) -> dict[str, Callable[[], object]]:
    """torch.nn.functional's layer_norm and rms_norm on CPU; backward through autograd."""
    import torch
    import torch.nn.functional as F

    x, g, b, dy = (torch.from_numpy(a) for a in (prob.x, prob.gamma, prob.beta, prob.dy))
    shape, eps = (x.shape[-1],), prob.eps

    def leaves(*ts):  # fresh leaves each call, so gradients never accumulate across calls
        return [t.detach().requires_grad_(True) for t in ts]

    def ln_b() -> object:
        xl, gl, bl = leaves(x, g, b)
        return F.layer_norm(xl, shape, gl, bl, eps).backward(dy)

    def rms_b() -> object:
        xl, gl = leaves(x, g)
        return F.rms_norm(xl, shape, gl, eps).backward(dy)

    def no_grad(f):
        def run() -> object:
            with torch.no_grad():
                return f()

        return run

    return {
        "ln_f": no_grad(lambda: F.layer_norm(x, shape, g, b, eps)),
        "rms_f": no_grad(lambda: F.rms_norm(x, shape, g, eps)),
        "ln_b": ln_b,
        "rms_b": rms_b,
    }


def _fused_compiled() -> str:
    """ "" when the fused kernels can run without compiling first, else why they are not timed."""
    from microgradnorm import fused

    if not fused.AVAILABLE:
        return _("numba is not installed (pip install 'microgradnorm[fast]')")
    for name in (
        "layer_norm_forward_rows",
        "layer_norm_backward_rows",
        "rms_norm_forward_rows",
        "rms_norm_backward_rows",
    ):
        kernel = getattr(fused, name)
        if any("float32" in str(sig) for sig in kernel.signatures):
            continue
        try:  # numba's on-disk cache: an index of the signatures compiled before
            index = kernel._cache._cache_file._load_index()
        except Exception:
            index = {}
        if not any("float32" in str(key) for key in index):
            return _("not compiled yet: compiling takes seconds, once; run microgradnorm bench --quick")
    return ""


def torch_installed() -> bool:
    """Whether PyTorch can be imported here (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def speed_calls(prob: SpeedProblem, paths: tuple[str, ...]) -> dict[str, dict[str, Callable[[], object]] | str]:
    """For each path: its four calls, or the reason it is not timed here."""
    out: dict[str, dict[str, Callable[[], object]] | str] = {}
    for path in paths:
        if path not in PATHS:
            raise ValueError(f"paths: expected some of {', '.join(PATHS)}, got {path!r}")
        if path == "numpy":
            out[path] = package_calls(prob, "numpy")
        elif path == "fused":
            out[path] = _fused_compiled() or package_calls(prob, "fused")
        elif not torch_installed():
            out[path] = _("PyTorch is not installed")
        else:
            out[path] = torch_calls(prob)
    return out


def time_samples(calls: dict[str, dict[str, Callable[[], object]]], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Seconds of every call in every repeat, interleaved (each repeat runs every call once, in turn)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected a positive integer, got {repeats!r}")
    for fns in calls.values():  # warm up: first calls load kernels and allocate
        for f in fns.values():
            f()
    samples: dict[str, dict[str, list[float]]] = {path: {k: [] for k in fns} for path, fns in calls.items()}
    with _one_torch_thread():
        for _repeat in range(repeats):
            for path, fns in calls.items():
                next(iter(fns.values()))()  # discarded: the first call after another path's pays for the switch
                for k, f in fns.items():
                    t0 = time.perf_counter()
                    f()
                    samples[path][k].append(time.perf_counter() - t0)
    return samples


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """PyTorch on one thread while timing, as NumPy and the fused kernels are: on a shared machine its
    thread pool stalls and the table would time the machine, not the norms. Restored afterwards."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def paired_ratios(samples: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, list[float]]]:
    """RMSNorm's time over LayerNorm's in each repeat ("f" forward, "b" forward + backward): the noise to judge by.

    The two calls of a pair ran one right after the other, so a neighbour that slowed one slowed the other too.
    """
    return {
        path: {
            "f": [rms / ln for rms, ln in zip(ks["rms_f"], ks["ln_f"])],
            "b": [rms / ln for rms, ln in zip(ks["rms_b"], ks["ln_b"])],
        }
        for path, ks in samples.items()
    }


def verdict(ratio: float, repeats: Sequence[float] = ()) -> str:
    """RMSNorm's time as a fraction of LayerNorm's, as a key: "faster", "slower", "about the same" or "unclear".

    With the ratio of every repeat (``repeats``), a verdict is given only when every repeat says it: a
    direction that some repeats contradict is no stronger than the noise, and is "unclear".
    """
    if repeats:
        keys = {verdict(r) for r in repeats}
        return keys.pop() if len(keys) == 1 else "unclear"
    if ratio < 1 - SAME:
        return "faster"
    if ratio > 1 + SAME:
        return "slower"
    return "about the same"


def said(key: str) -> str:
    """A :func:`verdict` in the reader's language."""
    # Translators: RMSNorm's speed against LayerNorm's; each completes "RMSNorm is ..." and "NumPy: ...: faster."
    words = {
        "faster": pgettext("RMSNorm against LayerNorm", "faster"),
        "slower": pgettext("RMSNorm against LayerNorm", "slower"),
        "about the same": pgettext("RMSNorm against LayerNorm", "about the same"),
        "unclear": pgettext("RMSNorm against LayerNorm", "no verdict, the repeats disagree"),
    }
    return words[key]


def path_name(path: str) -> str:
    """An implementation's name (a key of :data:`PATH_NAMES`) in the reader's language."""
    return _(PATH_NAMES[path])


def _path_reading(name: str, med: dict[str, float], ratios: dict[str, list[float]] | None = None) -> str:
    """One implementation's line: RMSNorm's time as a share of LayerNorm's, forward and forward + backward."""
    fwd, both = med["rms_f"] / med["ln_f"], med["rms_b"] / med["ln_b"]
    shares = {"path": name, "forward": f"{fwd:.0%}", "both": f"{both:.0%}"}
    v_fwd = verdict(fwd, ratios["f"] if ratios else ())
    v_both = verdict(both, ratios["b"] if ratios else ())
    if v_fwd == v_both:
        # Translators: {forward} and {both} are percentages, e.g. 60%; {verdict} is "faster", "slower", ...
        return _(
            "{path}: RMSNorm took {forward} of LayerNorm's time forward, {both} forward + backward: {verdict}."
        ).format(verdict=said(v_both), **shares)
    return _(
        "{path}: RMSNorm took {forward} of LayerNorm's time forward ({verdict_forward}), "
        "{both} forward + backward ({verdict_both})."
    ).format(verdict_forward=said(v_fwd), verdict_both=said(v_both), **shares)


def only_noise(med: dict[str, float]) -> bool:
    """Whether forward + backward took less time than forward alone, for either norm: only noise can do that."""
    return med["ln_b"] < med["ln_f"] or med["rms_b"] < med["rms_f"]


def speed_reading(
    medians: dict[str, dict[str, float]], ratios: dict[str, dict[str, list[float]]] | None = None
) -> list[str]:
    """What the measured medians say, one line per implementation and one across them.

    The verdict across implementations is the forward + backward one. With the ratios of every repeat
    (:func:`paired_ratios`), a verdict the repeats contradict is not given ("unclear"), and only the
    implementations with a verdict are compared. A median of forward + backward below the same norm's
    forward alone can only be noise (a busy machine), and is said to be.
    """
    lines, verdicts, noisy = [], {}, []
    for path, med in medians.items():
        mine = ratios.get(path) if ratios else None
        verdicts[path] = verdict(med["rms_b"] / med["ln_b"], mine["b"] if mine else ())
        lines.append(_path_reading(path_name(path), med, mine))
        if only_noise(med):
            noisy.append(path_name(path))
    verdicts = {path: v for path, v in verdicts.items() if v != "unclear"}
    kinds = sorted(set(verdicts.values()))
    if len(kinds) > 1:
        lines.append(
            _("Same formulas, different verdicts ({named}): the implementation decides.").format(
                named=_verdicts_by_path(verdicts, kinds)
            )
        )
    elif len(verdicts) > 1:
        lines.append(
            _("Every implementation timed here agrees: RMSNorm is {verdict} (forward + backward).").format(
                verdict=said(kinds[0])
            )
        )
    elif verdicts and len(medians) == 1:
        lines.append(_("Only one implementation was timed here: no comparison between implementations."))
    elif verdicts:
        lines.append(
            _(
                "Only one implementation gave a forward + backward verdict this run: "
                "no comparison between implementations."
            )
        )
    if noisy:
        lines.append(
            _(
                "{paths}: forward + backward took less time than forward alone, which only noise can do: "
                "the machine was busy, so read these medians loosely and run the step again."
            ).format(paths=separated(noisy))
        )
    return lines


def _verdicts_by_path(verdicts: dict[str, str], kinds: list[str]) -> str:
    """ "faster on NumPy; slower on fused (numba), PyTorch": each verdict with the implementations that gave it."""
    parts = [
        # Translators: {verdict} is "faster", "slower" or "about the same"; {paths} e.g. "NumPy, PyTorch"
        _("{verdict} on {paths}").format(
            verdict=said(kind), paths=separated([path_name(p) for p in verdicts if verdicts[p] == kind])
        )
        for kind in kinds
    ]
    # Translators: the separator between two clauses of a list, as in "faster on NumPy; slower on PyTorch"
    return pgettext("clause separator", "; ").join(parts)


@demo("rms_speed")
def rms_speed(
    p: LessonParams, rows: int = 64, features: int = 1024, repeats: int = 5, paths: tuple[str, ...] = PATHS
) -> Group:
    """LayerNorm vs RMSNorm forward and backward, on NumPy, the fused kernels and PyTorch: medians, one run."""
    prob = speed_problem(p.seed, rows, features, p.eps)
    calls = speed_calls(prob, tuple(paths))
    samples = time_samples({k: v for k, v in calls.items() if not isinstance(v, str)}, repeats)
    medians = {path: {k: float(np.median(v)) for k, v in ks.items()} for path, ks in samples.items()}
    table = [[path_name(k), *(fmt(med[c] * 1e3, 3) for c in CALLS)] for k, med in medians.items()]
    skipped = [
        dim_note(_("{path}: not timed, {why}").format(path=path_name(k), why=why))
        for k, why in calls.items()
        if isinstance(why, str)
    ]
    header = [
        "ms",
        pgettext("demo table header", "LN fwd"),
        pgettext("demo table header", "RMS fwd"),
        pgettext("demo table header", "LN f+b"),
        pgettext("demo table header", "RMS f+b"),
    ]
    return Group(
        cjk_text(
            _("median of {repeats} interleaved runs, one thread each, x [{rows}, {features}] float32").format(
                repeats=repeats, rows=rows, features=features
            ),
            style="italic",
        ),
        number_table(header, table),
        *skipped,
        *(cjk_text(line) for line in speed_reading(medians, paired_ratios(samples))),
        # the line that names noise already says to run the step again
        *(
            ()
            if any(only_noise(med) for med in medians.values())
            else (dim_note(_("Measured just now on this machine; run the step again and the numbers move.")),)
        ),
    )
