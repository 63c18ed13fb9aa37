"""Demos of lessons 13 and 14: from the scalar graph to the vectorized path to a fused kernel.

The course ends where a real library starts (lesson 13), and an optional
appendix (lesson 14) reads the fused kernel line by line. The demos here count the nodes the
scalar engine builds for one LayerNorm row, time it against the vectorized
NumPy path on the same input (side by side, interleaved, medians), show what
the NumPy path's ``NormCache`` holds and which fields the backward pass really
needs (found by filling each field with NaN and seeing whether the gradients
change), what ``recompute=True`` saves in bytes, the source of the fused numba
kernel, and how many times each path streams a whole array through memory.

Two rules of their own:

* No demo calls a fused kernel. Its first call compiles for several seconds;
  the kernels are shown and explained, and ``microgradnorm bench`` times them.
* The memory-pass counts are *counts of passes*, read off the code, not
  measurements. Each counted line is located in the current source by a
  verbatim fragment (:class:`Trip`), so a change to the code that the counts
  no longer describe makes the lesson fail loudly instead of going stale.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
import statistics
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text

from microgradnorm import textbook
from microgradnorm import tolerances as tol
from microgradnorm.engine import topological_order
from microgradnorm.i18n import N_, _, ngettext, pgettext
from microgradnorm.i18n.text import assemble, cjk_text, separated
from microgradnorm.lessons.demo_tools import autograd_dx, check_mark, dim_note, fmt, number_table, rng_for, sci
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.source import code_of
from microgradnorm.norms import NormGraph
from microgradnorm.numfmt import bracketed, nbytes_text
from microgradnorm.registry import get_norm
from microgradnorm.verdicts import Check, above, all_of, at_least, at_most, claim, exactly, first_holding, nearest
from microgradnorm.viz.style import stage_title

__all__ = [
    "CACHE_FIELDS",
    "KERNELS",
    "MODES",
    "PASSES",
    "EngineTiming",
    "PassGroup",
    "Trip",
    "backward_needs",
    "engine_vs_numpy",
    "gradient_agreement",
    "kernel_source_lines",
    "lesson_problem",
    "locate",
    "node_counts",
    "pass_totals",
    "row_graph",
]

SEQ = 3  # the lesson's input is [batch, seq, hidden] = [2, 3, d], a common tutorial size
DEFAULT_BATCH = 2
CACHE_FIELDS = ("x", "xhat", "xshift", "mean", "var", "rstd", "gamma")


# ---- the lesson's input -----------------------------------------------------------------------


def _check_dim(p: LessonParams) -> int:
    if p.dim < 2:
        raise ValueError(f"dim: this lesson needs at least 2 features per row, got {p.dim}")
    return p.dim


def lesson_problem(p: LessonParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x [B, T, d], gamma [d], beta [d], dy [B, T, d]) in float64, B = --batch or 2, T = 3."""
    d = _check_dim(p)
    shape = (p.batch or DEFAULT_BATCH, SEQ, d)
    rng = rng_for(p.seed, 12)
    x = rng.normal(0.5, 2.0, size=shape)
    gamma = rng.uniform(0.5, 1.5, size=d)
    beta = rng.normal(size=d)
    dy = rng.normal(size=shape)
    return x, gamma, beta, dy


def row_graph(p: LessonParams) -> NormGraph:
    """The scalar graph of one LayerNorm row of the lesson's dim (gamma and beta included)."""
    x, gamma, beta, _ = lesson_problem(p)
    return get_norm("layernorm").build_graph(x[0, 0].tolist(), gamma.tolist(), beta.tolist(), p.eps)


def node_counts(graph: NormGraph) -> dict[str, int]:
    """How many nodes of each stage the graph's outputs depend on, in forward order."""
    counts: dict[str, int] = {}
    for node in topological_order(graph.roots()):
        stage = node.stage or "other"
        counts[stage] = counts.get(stage, 0) + 1
    order = ("input", *graph.stages)
    return {s: counts[s] for s in (*order, *sorted(set(counts) - set(order))) if s in counts}


# ---- step 1: why leave the scalar graph --------------------------------------------------------


@dataclass(frozen=True)
class EngineTiming:
    """One input shape: its graph size and the median times of the two paths (seconds)."""

    shape: tuple[int, ...]
    nodes: int
    engine: float
    numpy: float

    @property
    def ratio(self) -> float:
        return self.engine / self.numpy if self.numpy > 0 else math.nan


def _interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, timed in turn so that a busy neighbour slows all alike."""
    for f in fns.values():  # warm up: first calls pay for imports and allocation
        f()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _repeat in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def engine_vs_numpy(p: LessonParams, hidden: Sequence[int] = (256,), repeats: int = 5) -> list[EngineTiming]:
    """Forward + backward of LayerNorm [B, T, d] on the scalar engine and on the NumPy path, side by side.

    The engine builds the graph, the loss sum(y * dy) and runs backward(); the
    NumPy path runs ``layer_norm_forward`` and ``layer_norm_backward``. The
    first shape uses the lesson's d, the others the widths in ``hidden``.
    """
    from microgradnorm import vectorized as V

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected a positive integer, got {repeats!r}")
    spec = get_norm("layernorm")
    results = []
    x0, g0, b0, dy0 = lesson_problem(p)
    problems = [(x0, g0, b0, dy0)]
    for k, d in enumerate(hidden):
        if isinstance(d, bool) or not isinstance(d, int) or d < 2:
            raise ValueError(f"hidden: expected widths >= 2, got {d!r}")
        rng = rng_for(p.seed, 20 + k)
        shape = (*x0.shape[:-1], d)
        problems.append(
            (rng.normal(0.5, 2.0, shape), rng.uniform(0.5, 1.5, d), rng.normal(size=d), rng.normal(size=shape))
        )
    for x, gamma, beta, dy in problems:
        rows = x.reshape(-1, x.shape[-1])
        xl, gl, bl, dyl = rows.tolist(), gamma.tolist(), beta.tolist(), dy.reshape(rows.shape).tolist()
        holder: list[Any] = []

        def engine(xl=xl, gl=gl, bl=bl, dyl=dyl, holder=holder):
            graph = spec.build_graph(xl, gl, bl, p.eps)
            loss = graph.loss(dyl)
            loss.backward()
            holder[:] = [loss]

        def vectorized(x=x, gamma=gamma, beta=beta, dy=dy):
            _, cache = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy")
            return V.layer_norm_backward(dy, cache)

        med = _interleaved_medians({"engine": engine, "numpy": vectorized}, repeats)
        nodes = len(topological_order(holder[0]))
        results.append(EngineTiming(x.shape, nodes, med["engine"], med["numpy"]))
    return results


def cancelling_scale(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> float:
    """max|rstd·gamma·dy|: the size of the terms that cancel in dx (rstd·g minus its two projections).

    dx itself can be 0 up to rounding (d = 2 at eps = 0), so a difference in dx is measured against
    these terms, not against |dx|.
    """
    var = np.var(x, axis=-1, keepdims=True)  # [..., 1]
    return float(np.max(np.abs(dy * gamma / np.sqrt(var + eps))))


def relative_gap(ours: np.ndarray, ref: np.ndarray, scale: float | None = None) -> tuple[float, float]:
    """(max|ours - ref|, that ÷ scale), scale max|ref| unless given (the terms that cancel, for dx)."""
    abs_err = float(np.max(np.abs(np.asarray(ours, dtype=np.float64) - ref))) if np.size(ref) else 0.0
    scale = float(np.max(np.abs(ref))) if scale is None else scale
    return abs_err, (abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else math.inf))


def gradient_agreement(p: LessonParams) -> dict[str, tuple[float, float, Check]]:
    """dx, dgamma, dbeta: NumPy path against the scalar graph -> (max abs error, relative error, within tolerance)."""
    from microgradnorm import vectorized as V

    x, gamma, beta, dy = lesson_problem(p)
    _, cache = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy")
    dx, dgamma, dbeta = V.layer_norm_backward(dy, cache)
    grads, _ = autograd_dx("layernorm", x.reshape(-1, x.shape[-1]), gamma, beta, p.eps, dy.reshape(-1, x.shape[-1]))
    dx_scale = cancelling_scale(x, gamma, dy, p.eps)
    out = {}
    for name, ours, ref, scale in (
        ("dx", dx, grads["x"].reshape(x.shape), dx_scale),
        ("dgamma", dgamma, grads["gamma"], None),
        ("dbeta", dbeta, grads["beta"], None),
    ):
        abs_err, rel_err = relative_gap(ours, ref, scale)
        within = at_most(rel_err, tol.VECTORIZED_F64_RTOL, f"{name}: NumPy vs the graph, relative difference")
        out[name] = (abs_err, rel_err, within)
    return out


def _check_positive_ints(name: str, values: Any) -> tuple[int, ...]:
    if not isinstance(values, (tuple, list)) or not values:
        raise ValueError(f"{name}: expected a non-empty tuple of positive integers, got {values!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected a non-empty tuple of positive integers, got {values!r}")
    return tuple(values)


NODE_FACTORS = (1, 3, 10, 30)  # the choices: about d, 3·d, 10·d, 30·d nodes (distinct for every d)


def _nodes_prediction(total: int, d: int) -> Prediction:
    sizes = tuple(k * d for k in NODE_FACTORS)
    evidence = nearest(total, sizes, "nodes of one row")
    answer = next(i for i, e in enumerate(evidence) if e)
    why = _(
        "{total} nodes for {d} numbers: every number of x gets its own centered value, square, xhat, "
        "scaled and shifted value, plus a node for each gamma and beta, plus a few shared ones (mean, var, "
        "sqrt, ...): {per:.3g} nodes per number, each a Python object."
    ).format(total=total, d=d, per=total / d)
    return Prediction(
        _("One LayerNorm row of d = {d} numbers, with gamma and beta: about how many scalar nodes?").format(d=d),
        # Translators: {factor} is empty or a multiplier such as "3·": "about 3·d = 12"
        tuple(_("about {factor}d = {n}").format(factor="" if k == 1 else f"{k}·", n=k * d) for k in NODE_FACTORS),
        answer,
        why,
        evidence,
    )


@demo("kernel_node_count")
def kernel_node_count(p: LessonParams) -> DemoOutput:
    """How many scalar nodes one LayerNorm row costs, by stage and per number of x."""
    graph = row_graph(p)
    counts = node_counts(graph)
    total = sum(counts.values())
    d = p.dim
    head = assemble(
        _("one row, d = {d}: {total} nodes, {per} per number of x"),
        d=Text(str(d), "bold"),
        total=Text(str(total), "bold"),
        per=Text(fmt(total / d, 3), "bold"),
    )
    # each "stage count" kept whole (backticks): a line breaks between stages, never inside a Chinese name
    stages = dim_note("  ·  ".join(f"`{stage_title(stage)} {n}`" for stage, n in counts.items()))
    return DemoOutput(Group(head, stages), graph=graph, prediction=_nodes_prediction(total, d))


@demo("kernel_engine_vs_numpy")
def kernel_engine_vs_numpy(p: LessonParams, hidden: tuple[int, ...] = (256,), repeats: int = 5) -> DemoOutput:
    """The scalar engine and the NumPy path on the same LayerNorm input: time (medians) and agreement."""
    hidden = _check_positive_ints("hidden", hidden)
    timings = engine_vs_numpy(p, hidden, repeats)
    rows = [
        [bracketed(t.shape), f"{t.nodes:,}", fmt(t.engine * 1e3, 3), fmt(t.numpy * 1e3, 3), fmt(t.ratio, 3)]
        for t in timings
    ]
    table = number_table(
        ["x", _("nodes"), _("engine ms"), "NumPy ms", _("engine/NumPy")],
        rows,
        title=_("forward + backward, float64, median of {repeats} interleaved runs").format(repeats=repeats),
        caption=_("measured just now on this machine; run it again and the numbers move"),
    )
    first, last = timings[0], timings[-1]
    reading = cjk_text(
        _("{first} → {last}: {factor}× the numbers; the engine took {engine}× the time, NumPy {numpy}×.").format(
            first=bracketed(first.shape),
            last=bracketed(last.shape),
            factor=fmt(math.prod(last.shape) / math.prod(first.shape), 3),
            engine=fmt(last.engine / first.engine, 3),
            numpy=fmt(last.numpy / first.numpy, 3),
        )
    )
    agree = gradient_agreement(p)
    x_shape = timings[0].shape
    checks = number_table(
        [
            _("gradient"),
            "max |Δ|",
            pgettext("gradient check column", "relative"),
            pgettext("gradient check column", "ok"),
        ],
        [[name, sci(a), sci(r), check_mark(ok)] for name, (a, r, ok) in agree.items()],
        title=_("x {shape}: NumPy path against the scalar graph's gradients").format(shape=bracketed(x_shape)),
        caption=_(
            "relative: max |Δ| ÷ max |rstd·gamma·dy| for dx (the terms that cancel in it; dx itself can be 0 "
            "up to rounding), ÷ max |gradient| for dgamma and dbeta. ok: at most VECTORIZED_F64_RTOL = {rtol} "
            "(tolerances.py)"
        ).format(rtol=f"{tol.VECTORIZED_F64_RTOL:g}"),
    )
    return DemoOutput(Group(table, reading, Text(""), checks), graph=row_graph(p))


# ---- the llm.c shape, the code itself ------------------------------------------------------------
#
# microgradnorm.textbook is the llm.c contract written as a textbook writes it, a shape
# comment on every line that makes an array. The demo runs it on the lesson's input and shows its live
# source (microgradnorm.lessons.source reads it from the functions that ran).


@demo("kernel_llmc_code")
def kernel_llmc_code(p: LessonParams) -> DemoOutput:
    """The llm.c-shaped LayerNorm forward and backward that ran on the lesson's input, and their agreement."""
    from microgradnorm import vectorized as V

    x, gamma, beta, dy = lesson_problem(p)
    forward, backward = textbook.layer_norm_forward, textbook.layer_norm_backward
    y, cache = forward(x, gamma, beta, p.eps)
    dx, dgamma, dbeta = backward(dy, cache)
    y_ref, c_ref = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy")
    refs = (y_ref, *V.layer_norm_backward(dy, c_ref))
    scales = (None, cancelling_scale(x, gamma, dy, p.eps), None, None)  # dx against the terms that cancel in it
    gaps = [relative_gap(a, b, s)[1] for a, b, s in zip((y, dx, dgamma, dbeta), refs, scales)]
    what = "{}: this code vs the package's vectorized path, relative difference"
    agree = all_of(
        *(at_most(g, tol.VECTORIZED_F64_RTOL, what.format(n)) for n, g in zip(("y", "dx", "dgamma", "dbeta"), gaps))
    )
    worst = max(gaps)
    code = code_of(forward, backward)
    note = _(
        "x {shape}: y, dx, dgamma and dbeta equal the package's vectorized path (worst relative difference "
        "{error}; for dx, relative to max |rstd·gamma·dy|)"
    )
    out = Group(code, claim(agree, note.format(shape=bracketed(x.shape), error=sci(worst, 1))))
    return DemoOutput(out, prediction=_cache_size_prediction(cache, x))


def _cache_size_prediction(cache: tuple, x: np.ndarray) -> Prediction:
    """How many numbers per row the llm.c cache keeps, counted from the arrays that ran (shared gamma aside)."""
    d, rows = x.shape[-1], x.size // x.shape[-1]
    per_row = sum(a.size for a in cache if np.ndim(a) == x.ndim) / rows  # the arrays with a row axis
    sizes = (d, d + 1, d + 3, 3 * d)  # distinct for every d >= 2
    evidence = tuple(exactly(per_row, n, "numbers per row in the cache") for n in sizes)
    return Prediction.from_evidence(
        _("Per row of d = {d} numbers, how many does this cache keep (gamma, shared by all rows, aside)?").format(d=d),
        (f"d = {d}", f"d + 1 = {d + 1}", f"d + 3 = {d + 3}", f"3·d = {3 * d}"),
        _("The cache holds xhat's d numbers and one rstd per row; with gamma, that is all backward reads."),
        evidence,
    )


# ---- step 2: the llm.c shape ---------------------------------------------------------------------


def backward_needs(cache: Any, dy: np.ndarray) -> dict[str, bool | None]:
    """For each cache field: True if layer_norm_backward's result depends on it, None if it is not kept.

    Found by experiment, not by reading the code: fill the field with NaN, run
    the backward pass again, and see whether dx, dgamma or dbeta changed.
    """
    from microgradnorm import vectorized as V

    base = V.layer_norm_backward(dy, cache)
    out: dict[str, bool | None] = {}
    for name in CACHE_FIELDS:
        value = getattr(cache, name)
        if value is None:
            out[name] = None
            continue
        poisoned = dataclasses.replace(cache, **{name: np.full(value.shape, np.nan, dtype=value.dtype)})
        with np.errstate(all="ignore"):
            again = V.layer_norm_backward(dy, poisoned)
        out[name] = any(
            not np.array_equal(a, b, equal_nan=True) for a, b in zip(base, again) if a is not None and b is not None
        )
    return out


@demo("kernel_cache_fields")
def kernel_cache_fields(p: LessonParams) -> DemoOutput:
    """What the vectorized LayerNorm's cache holds for x [B, T, d], in both modes, and what backward needs."""
    from microgradnorm import vectorized as V

    x, gamma, beta, dy = lesson_problem(p)
    modes = {}
    for recompute in (False, True):
        y, cache = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy", recompute=recompute)
        modes[recompute] = (cache, backward_needs(cache, dy))

    def cell(recompute: bool, name: str) -> Text:
        need = modes[recompute][1][name]
        if need is None:
            return Text(pgettext("cache field", "not kept"), style="dim")
        return (
            Text(pgettext("cache field", "needed"), style="bold")
            if need
            else Text(pgettext("cache field", "not needed"))
        )

    rows = []
    for name in CACHE_FIELDS:
        arr = next((getattr(c, name) for c, _ in modes.values() if getattr(c, name) is not None), None)
        rows.append([name, "—" if arr is None else bracketed(arr.shape), cell(False, name), cell(True, name)])
    keep = modes[False][0]
    table = number_table(
        [_("field"), _("shape"), pgettext("cache mode", "xhat kept"), pgettext("cache mode", "recompute")],
        rows,
        title=_("y, cache = layer_norm_forward(x, ...): x {x_shape} {dtype}, y {y_shape}; backend {backend}").format(
            x_shape=bracketed(x.shape), dtype=x.dtype, y_shape=bracketed(y.shape), backend=repr(keep.backend)
        ),
        caption=_(
            "needed: filling that field with NaN changes dx, dgamma or dbeta (tried just now, one field "
            "at a time). Default for the NumPy backend: xhat kept."
        ),
    )
    return DemoOutput(table)


# ---- step 3: memory for time -------------------------------------------------------------------------


@demo("kernel_cache_bytes")
def kernel_cache_bytes(p: LessonParams, shape: tuple[int, ...] = (32, 128, 768)) -> DemoOutput:
    """cache.nbytes() with xhat kept and with recompute=True, on a realistic float32 input."""
    from microgradnorm import vectorized as V

    shape = _check_positive_ints("shape", shape)
    rng = rng_for(p.seed, 30)
    x = rng.standard_normal(shape, dtype=np.float32)
    gamma = rng.uniform(0.5, 1.5, size=shape[-1]).astype(np.float32)
    beta = rng.normal(size=shape[-1]).astype(np.float32)
    caches = {}
    for recompute in (False, True):
        _y, caches[recompute] = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy", recompute=recompute)

    def cell(cache: Any, name: str) -> str:
        arr = getattr(cache, name)
        if arr is None:
            return "—"
        if any(np.shares_memory(arr, a) for a in (x, gamma, beta)):
            # Translators: a size in bytes of an array the cache shares with the caller: "12.0 MiB (yours)"
            return _("{size} (yours)").format(size=nbytes_text(arr.nbytes))
        return nbytes_text(arr.nbytes)

    rows = [[name, cell(caches[False], name), cell(caches[True], name)] for name in CACHE_FIELDS]
    sizes = {k: c.nbytes() for k, c in caches.items()}
    labels = {
        "kept": pgettext("cache bytes row", "kept"),
        "shared": pgettext("cache bytes row", "shared"),
        "saved": pgettext("cache bytes row", "saved"),
    }
    for part, label in labels.items():
        rows.append([Text(label, style="bold"), *(nbytes_text(getattr(sizes[k], part)) for k in (False, True))])
    return DemoOutput(
        number_table(
            [_("cache field"), pgettext("cache mode", "xhat kept"), pgettext("cache mode", "recompute")],
            rows,
            title=_("x {shape} float32, NumPy backend: cache.nbytes()").format(shape=bracketed(shape)),
            caption=_(
                "kept: allocated by the cache; shared: your own arrays it points to. recompute keeps "
                "{factor}× fewer bytes."
            ).format(factor=fmt(sizes[False].kept / sizes[True].kept, 3)),
        )
    )


# ---- step 4: the fused kernel -------------------------------------------------------------------------

KERNELS = ("layer_norm_forward_rows", "layer_norm_backward_rows", "rms_norm_forward_rows", "rms_norm_backward_rows")


def _resolve(ref: str) -> Any:
    """``"module:attr"`` -> the Python function (a numba dispatcher's ``py_func`` when compiled).

    When ``module`` is a package that does not export ``attr`` itself (a private
    helper), its submodules are searched, so a module split into a package keeps
    the lesson's references working.
    """
    module_name, _, attr = ref.partition(":")
    module = importlib.import_module(module_name)
    obj = getattr(module, attr, None)
    if obj is None and hasattr(module, "__path__"):
        for info in pkgutil.iter_modules(module.__path__, module_name + "."):
            obj = getattr(importlib.import_module(info.name), attr, None)
            if obj is not None:
                break
    if obj is None:
        raise LookupError(f"{ref}: no such function any more; the lesson's references must follow the code")
    return getattr(obj, "py_func", obj)


def kernel_source_lines(kernel: str) -> tuple[list[str], int, Path, tuple[int, int] | None]:
    """(source lines, first line number in its file, the file, docstring's (first, last) index or None)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    fn = _resolve(f"microgradnorm.fused:{kernel}")
    lines, first = inspect.getsourcelines(fn)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    func = tree.body[0]
    doc = None
    if (
        isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
        and func.body
        and isinstance(func.body[0], ast.Expr)
        and isinstance(func.body[0].value, ast.Constant)
        and isinstance(func.body[0].value.value, str)
    ):
        node = func.body[0]
        doc = (node.lineno - 1, node.end_lineno - 1)
    return [line.rstrip("\n") for line in lines], first, Path(inspect.getsourcefile(fn)), doc


def _syntax(lines: Sequence[str], start: int) -> Syntax:
    return Syntax(
        "\n".join(lines),
        "python",
        line_numbers=True,
        start_line=start,
        word_wrap=True,
        background_color="default",
        theme="ansi_dark",
    )


def locate_span(lines: Sequence[str], span: tuple[str, str]) -> tuple[int, int]:
    """(first, last) index of the lines from the one containing span[0] to the next containing span[1]."""
    start, end = span
    first = next((k for k, line in enumerate(lines) if start in line), None)
    last = None if first is None else next((k for k in range(first, len(lines)) if end in lines[k]), None)
    if first is None or last is None:
        missing = start if first is None else end
        raise LookupError(
            f"span: no line containing {missing!r} in the kernel; the code changed, so the lesson must too"
        )
    return first, last


@demo("kernel_source")
def kernel_source(
    p: LessonParams,
    kernel: str = "layer_norm_forward_rows",
    docstring: bool = False,
    span: tuple[str, str] | None = None,
    ask: str | None = None,
) -> DemoOutput:
    """The source of a fused kernel in microgradnorm/fused.py, with its line numbers (a span of it, or all of it).

    ``ask``: a question asked before the listing, "split" (how large the mean's float32 remainder is)
    or "recompute" (what rebuilding xhat costs the backward kernel in reads).
    """
    if ask not in (None, *_LISTING_QUESTIONS):
        raise ValueError(f"ask: expected None or one of {', '.join(_LISTING_QUESTIONS)}, got {ask!r}")
    lines, first, path, doc = kernel_source_lines(kernel)
    a, b = (0, len(lines) - 1) if span is None else locate_span(lines, tuple(span))
    parts: list[Any] = []
    if doc is not None and not docstring and a <= doc[0] and doc[1] <= b:  # fold the docstring away
        parts.append(_syntax(lines[a : doc[0]], first + a))
        folded = _("docstring, lines {first}–{last}").format(first=first + doc[0], last=first + doc[1])
        parts.append(Text("      ⋮  " + folded, style="dim"))
        if doc[1] < b:
            parts.append(_syntax(lines[doc[1] + 1 : b + 1], first + doc[1] + 1))
    else:
        parts.append(_syntax(lines[a : b + 1], first + a))
    where = _("microgradnorm/{file}, lines {first}–{last}").format(file=path.name, first=first + a, last=first + b)
    parts.append(Text(where, style="dim"))
    prediction = None if ask is None else _LISTING_QUESTIONS[ask](p)
    return DemoOutput(Group(*parts), prediction=prediction)


# A float32 row this far from zero: neighbouring float32 numbers are about 1 apart (2**23 < 1e7 < 2**24)
_FAR = 1e7


def _split_prediction(p: LessonParams) -> Prediction:
    """How large ``mu_lo`` is for a float32 row near _FAR: measured on a random row, against the float32 gap."""
    rng = rng_for(p.seed, 61)
    row = (_FAR + rng.normal(0.0, 100.0, size=4096)).astype(np.float32)  # d
    mean = float(np.sum(row, dtype=np.float64) / row.size)  # the kernel's float64 sum, then one division
    mu_hi = np.float32(mean)
    mu_lo = abs(mean - float(mu_hi))
    gap = float(np.spacing(mu_hi))  # from mu_hi to the next float32
    what = "|mu_lo| of a float32 row"
    evidence = (
        at_most(mu_lo, 0.0, what),
        above(mu_lo, 0.0, what) & at_most(mu_lo, gap / 2, f"{what} vs half the float32 gap"),
        above(mu_lo, gap / 2, f"{what} vs half the float32 gap"),
    )
    answer = first_holding(evidence, 2)
    return Prediction(
        _(
            "A float32 row of {n} values near {far:,.0f}, where neighboring float32 numbers are {gap:g} apart. "
            "The kernel sums it in float64 and splits the mean into mu_hi + mu_lo. How large is mu_lo?"
        ).format(n=row.size, far=_FAR, gap=gap),
        (
            _("0: the mean is a float32 number"),
            _("at most half the gap between neighboring float32 numbers"),
            _("more than that"),
        ),
        answer,
        _(
            "Here mu_lo = {lo:.3g}. mu_hi is the float32 nearest the float64 mean, so what is left is at most "
            "half the gap ({half:g}). Without it, every centered value of the row would be off by that much."
        ).format(lo=mu_lo, half=gap / 2),
        evidence,
    )


_LISTING_QUESTIONS: dict[str, Callable[[LessonParams], Prediction]] = {
    "split": _split_prediction,
}


# ---- steps 5 and 6: counting passes over memory ----------------------------------------------------


@dataclass(frozen=True)
class Trip:
    """One line of code and how many whole arrays it streams through memory.

    ``where`` names the function (``"module:name"``), ``find`` is a verbatim
    fragment of the line (the ``occurrence``-th line containing it). ``reads``
    and ``writes`` count arrays the size of x read from or written to main
    memory, assuming x is larger than the processor's caches; a read of a row
    that an earlier loop over the same row just brought in is a cache hit and
    counts 0.
    """

    where: str
    find: str
    reads: int
    writes: int
    occurrence: int = 0


def locate(trip: Trip) -> tuple[int, str]:
    """(line number in the file, the line's code without its comment) of a trip, from the live source."""
    fn = _resolve(trip.where)
    lines, first = inspect.getsourcelines(fn)
    hits = [k for k, line in enumerate(lines) if trip.find in line]
    if len(hits) <= trip.occurrence:
        raise LookupError(
            f"{trip.where}: no line #{trip.occurrence + 1} containing {trip.find!r}; the code changed, "
            "so the pass counts of lesson 13 need to be read off it again (demos_kernel.PASSES)"
        )
    k = hits[trip.occurrence]
    code = lines[k].split("  #")[0].strip()
    return first + k, code


_FWD = "microgradnorm.vectorized.numpy_path:_ln_forward_numpy"
_AFFINE = "microgradnorm.vectorized.numpy_path:_affine_rows"
_BWD = "microgradnorm.vectorized.numpy_path:_ln_backward_numpy"
_RECOMPUTE = "microgradnorm.vectorized.numpy_path:_recompute_xhat"
_KFWD = "microgradnorm.fused:layer_norm_forward_rows"
_KBWD = "microgradnorm.fused:layer_norm_backward_rows"


@dataclass(frozen=True)
class PassGroup:
    """Lines of one path ("numpy" or "kernel"); ``only``: None, or the one mode ("keep"/"recompute") they run in."""

    title: str
    path: str
    trips: tuple[Trip, ...]
    only: str | None = None


# LayerNorm with gamma and beta, read off vectorized/numpy_path.py and fused.py. Not counted (the
# captions say so): the lines of SOMETIMES and _recenter, which run only when the mean's rounding would
# show in xhat, and the per-row statistics and per-worker partial sums (arrays of R or
# [workers, d] numbers, not of R * d).
PASSES: dict[str, tuple[PassGroup, ...]] = {
    "forward": (
        PassGroup(
            N_("NumPy path, vectorized/numpy_path.py"),
            "numpy",
            (
                Trip(_FWD, 'mean0 = np.einsum("ij->i", x2)', 1, 0),  # read x
                Trip(_FWD, "xshift = np.subtract(x2, mean0[:, None])", 1, 1),  # read x, write xshift
                Trip(_FWD, 'resid = np.einsum("ij->i", xshift)', 1, 0),  # read xshift
                Trip(_FWD, 'sumsq = np.einsum("ij,ij->i", xshift, xshift)', 1, 0),  # one stream, used twice
                Trip(_FWD, "xhat = np.multiply(xshift, rstd", 1, 1),  # in place
                Trip(_AFFINE, "y = np.multiply(xhat, gamma", 1, 1),  # a new y (or in place when xhat is dropped)
                Trip(_AFFINE, "y += beta", 1, 1),
            ),
        ),
        PassGroup(
            N_("fused kernel, fused.py"),
            "kernel",
            (
                Trip(_KFWD, "s += x[i, j]", 1, 0),  # the row comes from memory
                Trip(_KFWD, "xs = _center(x[i, j], mu_hi, mu_lo)", 0, 0),  # the same row, still in the cache
                Trip(_KFWD, "xh = _center(x[i, j], mu_hi, mu_lo) * rs_t", 0, 0),  # and again
                Trip(_KFWD, "y[i, j] = xh * gamma[j] + beta[j]", 0, 1),  # the only write
            ),
        ),
        PassGroup(
            N_("fused kernel, only when xhat is kept"),
            "kernel",
            (Trip(_KFWD, "xhat[i, j] = xh", 0, 1),),
            only="keep",
        ),
    ),
    "backward": (
        PassGroup(
            N_("NumPy path, only in recompute mode"),
            "numpy",
            (
                Trip(_RECOMPUTE, "xhat = np.subtract(x, expand(hi))", 1, 1),
                Trip(_RECOMPUTE, "xhat *= expand(r)", 1, 1),
            ),
            only="recompute",
        ),
        PassGroup(
            N_("NumPy path, vectorized/numpy_path.py"),
            "numpy",
            (
                Trip(_BWD, 'dgamma = _sum_in_blocks("ij,ij->j", dy2, xhat2)', 2, 0),  # dy and xhat
                Trip(_BWD, 'dbeta = _sum_in_blocks("ij->j", dy2)', 1, 0),
                Trip(_BWD, "dx = np.multiply(dy2, gamma)", 1, 1),  # g = gamma * dy
                Trip(_BWD, 'mean_g = np.einsum("ij->i", dx)', 1, 0),
                Trip(_BWD, 'mean_gxhat = np.einsum("ij,ij->i", dx, xhat2)', 2, 0),
                Trip(_BWD, "dx -= mean_g[:, None]", 1, 1),
                # a temporary xhat * mean_gxhat (read xhat, write it), then dx -= it (read both, write dx)
                Trip(_BWD, "dx -= np.multiply(xhat2, mean_gxhat[:, None])", 3, 2),
                Trip(_BWD, "dx *= rstd[:, None]", 1, 1),
            ),
        ),
        PassGroup(
            N_("fused kernel, fused.py (src: xhat or x)"),
            "kernel",
            (
                # src is xhat when it was kept, x otherwise: the same number of bytes either way
                Trip(_KBWD, "xh = (src[i, j] if have_xhat else", 1, 0),
                Trip(_KBWD, "g = dy[i, j] * gamma[j]", 1, 0),
                Trip(_KBWD, "xh = (src[i, j] if have_xhat else", 0, 0, occurrence=1),
                Trip(_KBWD, "dx[i, j] = rs * (", 0, 1),
            ),
        ),
    ),
}

MODES = ("keep", "recompute")

# Lines left out of PASSES because they run only on some rows: when the mean's rounding would show in xhat
# (a large common offset against a small spread). The captions name them, read off the live source.
SOMETIMES: dict[str, Trip] = {
    "forward": Trip(_FWD, "xshift -= resid[:, None]", 1, 1),
    "backward": Trip(_RECOMPUTE, "xhat -= expand(lo)", 1, 1),
}


def _not_counted(direction: str) -> Text:
    """The caption naming the NumPy lines the counts leave out (they run only on some rows)."""
    line, _code = locate(SOMETIMES[direction])
    if direction == "forward":
        text = _(
            "not counted: NumPy's line {line} and the rounds of _recenter (vectorized/repairs.py), which run "
            "only when the mean's rounding would show in xhat; each adds whole-array passes"
        )
    else:
        text = _(
            "not counted: NumPy's line {line} (recompute mode), which runs only when the mean's rounding would "
            "show in xhat; it adds one read and one write"
        )
    return dim_note(text.format(line=line))


def pass_totals(direction: str, path: str, mode: str) -> tuple[int, int]:
    """(reads, writes) of whole arrays for ``direction`` on ``path`` ("numpy" or "kernel").

    ``mode`` is "keep" (xhat kept in the cache) or "recompute".
    """
    if direction not in PASSES:
        raise ValueError(f"direction: expected one of {', '.join(PASSES)}, got {direction!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    trips = [t for g in PASSES[direction] if g.path == path and g.only in (None, mode) for t in g.trips]
    return sum(t.reads for t in trips), sum(t.writes for t in trips)


CODE_CELL = 46  # characters of code per line in the pass listing: with its line number and R, W, 60 columns


def code_lines(code: str, width: int = CODE_CELL) -> list[str]:
    """``code`` (one line of Python) as lines of at most ``width`` characters that still read as Python.

    A line breaks after a ", " inside brackets (an implicit continuation) or before a top-level " if "
    or " else " with a backslash, at the outermost level that has a break that fits, there as late as
    possible; continuation lines are indented by four spaces. A piece with
    no such break stays whole (the table cuts it with "…").
    """
    lines: list[str] = []
    indent = ""
    while len(indent) + len(code) > width:
        depth, room, breaks = 0, width - len(indent), []
        for k, ch in enumerate(code):
            depth += ch in "([{"
            depth -= ch in ")]}"
            if depth > 0 and code.startswith(", ", k) and k + 1 <= room:
                breaks.append((depth, -k, k + 1, k + 2, ""))  # keep the comma, drop the space
            elif depth == 0 and code.startswith((" if ", " else "), k) and k + 2 <= room:
                breaks.append((depth, -k, k, k + 1, " \\"))
        if not breaks:
            break
        _depth, _k, cut, rest, mark = min(breaks)  # the outermost bracket level, then the latest break
        lines.append(indent + code[:cut] + mark)
        code, indent = code[rest:], "    "
    return [*lines, indent + code]


def _pass_listing(direction: str) -> Group:
    """Every counted line of ``direction``, found in the live source, with its whole-array reads and writes."""
    rows: list[list[Any]] = []
    for group in PASSES[direction]:
        rows.append([Text(_(group.title), style="bold"), "", ""])
        for trip in group.trips:
            line, code = locate(trip)
            cell = "\n".join(f"{line if k == 0 else '':>4}  {piece}" for k, piece in enumerate(code_lines(code)))
            rows.append([Text(cell, no_wrap=True, overflow="ellipsis"), str(trip.reads), str(trip.writes)])
    table = number_table([_("line  code"), "R", "W"], rows)
    table.columns[0].no_wrap = False  # on a narrow screen the code is cut (…), never the counts
    heading = {
        "forward": _("LayerNorm forward: whole arrays read (R) and written (W)"),
        "backward": _("LayerNorm backward: whole arrays read (R) and written (W)"),
    }[direction]
    return Group(cjk_text(heading, style="italic"), table, _not_counted(direction))


def _pass_totals(direction: str, shape: tuple[int, ...], source: str) -> Any:
    """Passes (and bytes) of each path in each cache mode, for float32 x of ``shape``."""
    array_bytes = math.prod(shape) * 4
    summary = []
    for mode, label in zip(MODES, (pgettext("cache mode", "xhat kept"), pgettext("cache mode", "recompute"))):
        cells = [label]
        for path in ("numpy", "kernel"):
            n = sum(pass_totals(direction, path, mode))
            cells.append(f"{n}  ({nbytes_text(n * array_bytes)})")
        summary.append(cells)
    passes = {"forward": _("forward passes"), "backward": _("backward passes")}[direction]
    return number_table(
        [passes, "NumPy", _("fused kernel")],
        summary,
        # Translators: {source} is "the code above" or "the code (lesson 14 lists each line)"
        caption=_(
            "counted from {source}, not measured. Bytes moved: passes × {array}, one float32 array of x "
            "{shape}; one row of it, {row}, stays in the cache between the kernel's loops over that row."
        ).format(source=source, array=nbytes_text(array_bytes), shape=bracketed(shape), row=nbytes_text(shape[-1] * 4)),
    )


def _trips_prediction(direction: str) -> Prediction:
    """Forward: the kernel's whole-array trips with xhat kept. Backward: what recompute adds to NumPy's trips.

    Neither is stated by the prose before it (the kernel's recompute-mode forward, x in and y out, is).
    """
    if direction == "forward":
        reads, writes = pass_totals("forward", "kernel", "keep")
        numpy = sum(pass_totals("forward", "numpy", "keep"))
        total = reads + writes
        evidence = (*(exactly(total, k, "whole-array trips of the kernel, xhat kept") for k in (1, 2, 3)),
                    exactly(total, numpy, "whole-array trips, kernel vs NumPy"))  # fmt: skip
        # Translators: {reads} is "1 read", {writes} "2 writes"
        why = _(
            "{reads} (x, in the first loop over each row) and {writes} (y and xhat, both in the last loop); "
            "the loops between find the row in the cache. NumPy's path makes {numpy}."
        ).format(
            reads=ngettext("{n} read", "{n} reads", reads).format(n=reads),
            writes=ngettext("{n} write", "{n} writes", writes).format(n=writes),
            numpy=numpy,
        )
        question = _(
            "LayerNorm forward with xhat kept: how many times does the fused kernel stream a whole array "
            "through memory (reads plus writes)?"
        )
        choices = ("1", "2", "3", _("as many as NumPy"))
        return Prediction(question, choices, first_holding(evidence, 3), why, evidence)
    keep = sum(pass_totals("backward", "numpy", "keep"))
    recompute = sum(pass_totals("backward", "numpy", "recompute"))
    more = recompute - keep
    options = (0, 2, 4, 8)
    evidence = tuple(exactly(more, k, "NumPy backward: extra whole-array passes in recompute mode") for k in options)
    kernel_keep = sum(pass_totals("backward", "kernel", "keep"))
    kernel_recompute = sum(pass_totals("backward", "kernel", "recompute"))
    # Translators: the answer ({recompute} - {keep}) is printed just before; the kernel's counts follow
    why = _(
        "{recompute} passes against {keep}; the extra lines rebuild xhat = (x − mean) · rstd, each streaming a "
        "whole array. The fused kernel: {kernel_keep} with xhat kept, {kernel_recompute} in recompute mode."
    ).format(recompute=recompute, keep=keep, kernel_keep=kernel_keep, kernel_recompute=kernel_recompute)
    question = _(
        "NumPy's backward in recompute mode: how many more whole-array passes through memory than with xhat kept?"
    )
    answer = next((i for i, e in enumerate(evidence) if e), None)
    if answer is None:
        raise LookupError(f"NumPy backward: {more} extra passes, none of the choices {options}; update the question")
    return Prediction(question, tuple(str(k) for k in options), answer, why, evidence)


@demo("kernel_memory_passes")
def kernel_memory_passes(
    p: LessonParams, direction: str = "forward", shape: tuple[int, ...] = (32, 128, 768), show: str = "both"
) -> DemoOutput:
    """Whole-array passes through memory: NumPy path vs fused kernel, line by line and/or in total (counts)."""
    if direction not in PASSES:
        raise ValueError(f"direction: expected one of {', '.join(PASSES)}, got {direction!r}")
    if show not in ("lines", "totals", "both"):
        raise ValueError(f"show: expected 'lines', 'totals' or 'both', got {show!r}")
    shape = _check_positive_ints("shape", shape)
    if show == "totals":
        return DemoOutput(
            Group(_pass_totals(direction, shape, _("the code (lesson 14 lists each line)")), _not_counted(direction)),
            prediction=_trips_prediction(direction),
        )
    parts: list[Any] = [_pass_listing(direction)]
    if show == "both":
        parts += [Text(""), _pass_totals(direction, shape, _("the code above"))]
    return DemoOutput(Group(*parts), prediction=_x_reads_prediction() if direction == "forward" else None)


def _x_reads_prediction() -> Prediction:
    """How many of NumPy's forward lines read x itself (the kernel: one loop does): the counted lines' answer."""
    numpy = [t for g in PASSES["forward"] if g.path == "numpy" for t in g.trips]
    # a line reads x itself when x2 (x as [rows, d]) is an argument on the right of its "="
    reading = [t for t in numpy if t.reads and re.search(r"\bx2\b", t.find.split("=", 1)[1])]
    n = sum(t.reads for t in reading)
    what = "NumPy forward: whole-array reads of x itself"
    evidence = (exactly(n, 1, what), exactly(n, 2, what), at_least(n, 3, what))
    lines = separated([str(locate(t)[0]) for t in reading])
    return Prediction(
        _("The kernel reads x from memory once, in its first loop. How many times does NumPy's forward read x itself?"),
        (_("once, as the kernel"), _("twice"), _("three times or more")),
        first_holding(evidence, 2),
        # Translators: {lines} is a list of line numbers such as "55, 57"
        _(
            "Lines {lines} read x; every later line reads an array NumPy wrote before it (xshift, then "
            "xhat, then y), each a whole trip of its own."
        ).format(lines=lines),
        evidence,
    )


# ---- the closing step: the shapes exercise 5 asks for -------------------------------------------------


@demo("kernel_exercise_shapes")
def kernel_exercise_shapes(p: LessonParams) -> DemoOutput:
    """The shapes of dx, dgamma and dbeta for x [B, T, d] (exercise 5's names), from step 4's llm.c-style backward."""
    x, gamma, beta, dy = lesson_problem(p)  # the input of step 4, so the shapes match the code shown there
    _y, cache = textbook.layer_norm_forward(x, gamma, beta, p.eps)
    dx, dgamma, dbeta = textbook.layer_norm_backward(dy, cache)
    rows = [
        # Translators: names of arrays, kept; only the list's commas are translated
        [pgettext("list of arrays", "x, dy, dx"), bracketed(dx.shape), _("one per input number")],
        [pgettext("list of arrays", "dgamma, dbeta"), bracketed(dgamma.shape), _("summed over B·T rows")],
    ]
    what = "the shape of dgamma, dbeta"
    same = exactly(float(dgamma.shape == x.shape and dbeta.shape == x.shape), 1.0, f"{what} equals x's")
    per_feature = exactly(float(dgamma.shape == (p.dim,) and dbeta.shape == (p.dim,)), 1.0, f"{what} is [d]")
    per_row = exactly(float(dgamma.shape == (*x.shape[:-1], 1)), 1.0, f"{what} is [B, T, 1]")
    prediction = Prediction(
        _("In exercise 5, x is [B, T, d]. Which shapes must your backward return?"),
        (
            _("dx, dgamma and dbeta all [B, T, d]"),
            _("dx [B, T, d]; dgamma and dbeta [d]"),
            _("dx [B, T, d]; dgamma and dbeta [B, T, 1]"),
        ),
        next((i for i, e in enumerate((same, per_feature, per_row)) if e), 1),
        _(
            "gamma and beta have one number per feature, shared by every row, so their gradients add up the "
            "contributions of all {rows} rows: [{d}] here, for x {shape}."
        ).format(rows=x.shape[0] * x.shape[1], d=p.dim, shape=list(x.shape)),
        (same, per_feature, per_row),
    )
    headers = [_("arrays"), _("shape"), ""]
    table = number_table(headers, rows, title=_("the backward of step 4 on x {shape}").format(shape=list(x.shape)))
    return DemoOutput(table, prediction=prediction)


# ---- step 7: try it, and the course in code ---------------------------------------------------------


@demo("kernel_backend")
def kernel_backend(p: LessonParams) -> DemoOutput:
    """Whether numba is installed here, which backend the vectorized path runs, and the threads it uses."""
    from microgradnorm import fused
    from microgradnorm import vectorized as V

    info = V.backend_info()
    rows = [
        [
            "numba",
            _("{version} installed").format(version=info.numba_version) if fused.AVAILABLE else _("not installed"),
        ],
        [_("backend setting"), info.setting],
        [
            pgettext("backend table row", "runs"),
            _("{backend}  ({reason})").format(backend=info.active, reason=info.reason),
        ],
    ]
    if fused.AVAILABLE:
        rows.append([_("kernel threads"), str(fused.num_workers())])
        rows.append([_("one thread below"), _("{n} numbers").format(n=f"{fused.SMALL:,}")])
    else:
        rows.append([_("fused kernels"), _("plain Python here: correct, but far too slow to use")])
    # labels whole, answers wrapped the Chinese way: the table states a reason (numba missing) in full at
    # 60 columns instead of cutting it
    table = number_table(["", _("on this machine")], [[cjk_text(a), cjk_text(b)] for a, b in rows])
    table.columns[0].no_wrap = True
    table.columns[1].no_wrap = False
    table.columns[1].justify = "left"
    return DemoOutput(Group(table, dim_note(_("nothing was compiled or run to find this out"))))


# The layers of the package, in the order the course met them.
COURSE_MAP = (
    ("engine.py", N_("Value, the chain rule, backward()")),
    ("norms.py", N_("LN, BN, RMSNorm from scalar nodes")),
    ("formulas.py", N_("every closed form, written once")),
    ("check.py", N_("autograd vs closed form vs FD")),
    ("vectorized.py", N_("forward with a cache, backward")),
    ("fused.py", N_("the kernel loops, one pass a row")),
)


@demo("kernel_course_map")
def kernel_course_map(p: LessonParams) -> DemoOutput:
    """The package's layers, what each holds, and its size (non-blank lines, counted live)."""
    package = Path(importlib.import_module("microgradnorm").__file__).parent
    rows = []
    for name, what in COURSE_MAP:
        path = package / name
        files = sorted(path.with_suffix("").glob("*.py")) if not path.exists() else [path]  # a module or a package
        lines = sum(1 for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip())
        rows.append([name if path.exists() else f"{path.stem}/", _(what), f"{lines:,}"])
    return DemoOutput(
        number_table(
            ["microgradnorm/", _("what it holds"), pgettext("course map column", "lines")],
            rows,
            caption=_("lines: non-blank lines of the file (or package), docstrings and comments included"),
        ),
        graph=row_graph(p),
    )
