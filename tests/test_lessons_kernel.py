"""The claims of lesson 13 (graph -> vectorized path -> fused kernel) and its appendix, lesson 14, against oracles.

Oracles: node counts derived by hand from the stages of norms.py; the closed
forms of formulas.py for the vectorized gradients; the LayerNorm formula for
which cache fields backward can need; byte counts from shapes and dtypes; the
text of fused.py read as a file for the shown source; the kernels' own Python
functions run on arrays that count every element read and write; and the
pass counts, derived by hand from the code in the comments below, with a check
that no whole-array line of the NumPy path is left out of the lesson's list.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import re
import shlex
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from microgradnorm import cli, formulas, fused, textbook
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.lessons import demos_kernel as K
from microgradnorm.lessons.demo_tools import autograd_dx
from microgradnorm.lessons.demos import DemoOutput, LessonParams, load_demos, run_demo
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from microgradnorm.lessons.source import source_of
from microgradnorm.numfmt import fmt
from microgradnorm.vectorized import numpy_path
from tests.helpers import assert_close, assert_demo_passes, flat, rendered

LESSON = lessons_dir() / "13-graph-to-kernel.md"
APPENDIX = lessons_dir() / "14-fused-kernel-line-by-line.md"
MY_DEMOS = sorted(name for name, spec in load_demos().items() if spec.module == K.__name__)


# ``a`` is ``b`` (a closed form) to CLOSED_FORM_RTOL and CLOSED_FORM_ATOL
assert_closed_form = partial(assert_close, rtol=tol.CLOSED_FORM_RTOL, atol=tol.CLOSED_FORM_ATOL)


# ---- step 1: nodes, timing, agreement ----------------------------------------------------------


def test_one_row_at_dim_3_has_34_nodes_counted_by_hand():
    # One LayerNorm row of d = 3 with gamma and beta (norms.py, two-pass variance):
    #   input : x0 x1 x2                                   3
    #   mean  : 1/n, sum(x), mean = sum * 1/n              3
    #   center: xshift_i = x_i - mean                      3
    #   var   : 1/n, xshift_i ** 2 (3), sum, var           6
    #   sqrt  : eps, var + eps, std                        3
    #   divide: rstd = std ** -1, xhat_i = xshift_i * rstd 4
    #   affine: gamma (3), γ·xhat (3), beta (3), y (3) 12
    # total 34 = 8 d + 10.
    by_stage = {"input": 3, "mean": 3, "center": 3, "var": 6, "sqrt": 3, "divide": 4, "affine": 12}
    assert K.node_counts(K.row_graph(LessonParams(dim=3))) == by_stage
    text = rendered(run_demo("kernel_node_count", LessonParams(dim=3)).renderable, 200)
    assert "34 nodes" in text and f"{fmt(34 / 3, 3)} per number" in text


def test_engine_vs_numpy_times_both_paths_on_the_graph_the_hand_count_predicts():
    p = LessonParams(dim=3, seed=4, batch=1)
    timings = K.engine_vs_numpy(p, hidden=(5,), repeats=2)
    assert [t.shape for t in timings] == [(1, K.SEQ, 3), (1, K.SEQ, 5)]
    for t in timings:
        rows, d = math.prod(t.shape[:-1]), t.shape[-1]
        # per row 6D + 7 (everything above but the shared 1/n, 1/n, eps, gamma, beta),
        # shared 2D + 3, and the loss: one dy leaf per number and the dot node
        assert t.nodes == rows * (6 * d + 7) + (2 * d + 3) + (rows * d + 1)
        assert t.engine > 0 and t.numpy > 0 and math.isfinite(t.ratio)


@pytest.mark.parametrize(
    "p", [LessonParams(), LessonParams(dim=6, seed=3, eps=0.0), LessonParams(dim=2, seed=9, batch=1)]
)
def test_vectorized_gradients_equal_the_closed_form_and_the_graph(p):
    x, gamma, beta, dy = K.lesson_problem(p)
    _, cache = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy")
    dx, dgamma, dbeta = V.layer_norm_backward(dy, cache)
    m = formulas.moments(x, (-1,), p.eps)
    assert_closed_form(dx, formulas.dx_simplified(formulas.dxhat(dy, gamma), m.xhat, m.rstd, (-1,)))
    assert_closed_form(dgamma, (dy * m.xhat).sum(axis=(0, 1)))
    assert_closed_form(dbeta, dy.sum(axis=(0, 1)))
    # the graph agrees with the same closed form, so the demo's "agree" is right
    grads, _ = autograd_dx("layernorm", x.reshape(-1, p.dim), gamma, beta, p.eps, dy.reshape(-1, p.dim))
    assert tol.close(grads["x"].reshape(x.shape), dx, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)
    agreement = K.gradient_agreement(p)
    assert set(agreement) == {"dx", "dgamma", "dbeta"}
    assert all(ok for _, _, ok in agreement.values())


def test_dx_is_judged_against_the_terms_that_cancel_so_d_2_at_eps_0_still_catches_an_error():
    """At d = 2, eps = 0 dx is 0 up to rounding: a relative error against |dx| is noise, one against rstd·|g| is not."""
    p = LessonParams(dim=2, eps=0.0)
    x, gamma, beta, dy = K.lesson_problem(p)
    scale = K.cancelling_scale(x, gamma, dy, p.eps)
    m = formulas.moments(x, (-1,), p.eps)
    assert scale == pytest.approx(float(np.max(np.abs(dy * gamma * m.rstd))), rel=1e-12)
    _, cache = V.layer_norm_forward(x, gamma, beta, p.eps, backend="numpy")
    dx = V.layer_norm_backward(dy, cache)[0]
    assert np.max(np.abs(dx)) < 1e-12 * scale  # the premise: dx is rounding noise here
    off = dx + 1e-9 * scale  # an error a thousand times the tolerance, in units of the cancelling terms
    assert K.relative_gap(off, dx, scale)[1] > tol.VECTORIZED_F64_RTOL
    assert K.relative_gap(dx, dx, scale)[1] == 0.0
    assert all(ok for _, _, ok in K.gradient_agreement(p).values())


def test_the_timing_demo_shows_every_gradient_agreeing_and_names_the_tolerance():
    out = run_demo("kernel_engine_vs_numpy", LessonParams(dim=3), {"hidden": (8,), "repeats": 1})
    text = rendered(out.renderable, 100)
    assert text.count("✓") == 3 and "✗" not in text
    assert "VECTORIZED_F64_RTOL" in text and f"{tol.VECTORIZED_F64_RTOL:g}" in text
    assert out.graph is not None and len(out.graph["x"]) == 3


# ---- step 2: what backward needs -------------------------------------------------------------------


def test_backward_needs_exactly_what_the_formula_reads():
    # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gamma * dy; dgamma = sum dy * xhat;
    # dbeta = sum dy. So with xhat kept: xhat, rstd, gamma. In recompute mode xhat is rebuilt
    # as (x - mean) * rstd: x, mean, rstd, gamma. var never enters; xshift is never kept.
    x, gamma, beta, dy = K.lesson_problem(LessonParams(dim=5, seed=2))
    _, keep = V.layer_norm_forward(x, gamma, beta, 1e-5, backend="numpy", recompute=False)
    _, rec = V.layer_norm_forward(x, gamma, beta, 1e-5, backend="numpy", recompute=True)
    needs_keep = K.backward_needs(keep, dy)
    needs_rec = K.backward_needs(rec, dy)
    assert {k for k, v in needs_keep.items() if v} == {"xhat", "rstd", "gamma"}
    assert {k for k, v in needs_keep.items() if v is None} == {"x", "xshift"}
    assert {k for k, v in needs_rec.items() if v} == {"x", "mean", "rstd", "gamma"}
    assert {k for k, v in needs_rec.items() if v is None} == {"xhat", "xshift"}
    assert needs_keep["var"] is False and needs_rec["var"] is False
    # the statistics keep the reduced axis, [B, T, 1]
    assert keep.mean.shape == keep.var.shape == keep.rstd.shape == (*x.shape[:-1], 1)


def test_the_cache_table_shows_the_shapes():
    p = LessonParams(dim=5, batch=4)
    text = rendered(run_demo("kernel_cache_fields", p).renderable, 200)
    assert f"[4, {K.SEQ}, 5]" in text and f"[4, {K.SEQ}, 1]" in text
    assert re.search(r"xhat\s+\[4, 3, 5\]\s+needed\s+not kept", text)
    assert re.search(r"var\s+\[4, 3, 1\]\s+not needed\s+not needed", text)


# ---- step 3: bytes ---------------------------------------------------------------------------------


def test_recompute_keeps_the_statistics_and_points_at_x():
    shape = (4, 8, 16)
    rows = 4 * 8
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    gamma = np.ones(16, np.float32)
    _, keep = V.layer_norm_forward(x, gamma, None, backend="numpy", recompute=False)
    _, rec = V.layer_norm_forward(x, gamma, None, backend="numpy", recompute=True)
    stats = 3 * rows * 8  # mean, var, rstd: one float64 per row each
    assert keep.xhat is not None and keep.x is None
    assert rec.xhat is None and np.shares_memory(rec.x, x)
    assert keep.nbytes().kept == math.prod(shape) * 4 + stats
    assert rec.nbytes().kept == stats
    assert rec.nbytes().shared == math.prod(shape) * 4 + 16 * 4  # x and gamma are the caller's
    assert rec.nbytes().saved == math.prod(shape) * 4 and keep.nbytes().saved == 0


def test_the_bytes_demo_at_the_lesson_size_shows_12_mb_and_the_ratio():
    text = rendered(run_demo("kernel_cache_bytes", LessonParams()).renderable, 200)
    # 32 * 128 * 768 float32 = 12 MiB; statistics 3 * 32 * 128 float64 = 96 KiB
    assert re.search(r"xhat\s+12\.0 MiB\s+—", text)
    assert re.search(r"x\s+—\s+12\.0 MiB \(yours\)", text)
    assert re.search(r"kept\s+12\.1 MiB\s+96\.0 KiB", text)
    ratio = (32 * 128 * 768 * 4 + 3 * 32 * 128 * 8) / (3 * 32 * 128 * 8)
    assert f"{fmt(ratio, 3)}× fewer bytes" in " ".join(text.split())


# ---- step 4: the kernel's source ---------------------------------------------------------------------


def _file_lines(name: str) -> tuple[list[str], int, int, range]:
    """fused.py as plain text (no inspect involved), the index of ``def name(`` in it, the index just past the
    function, and the indices of its docstring."""
    lines = (Path(K.__file__).resolve().parents[1] / "fused.py").read_text(encoding="utf-8").splitlines()
    (k,) = [i for i, line in enumerate(lines) if line.startswith(f"def {name}(")]
    end = next(i for i in range(k + 1, len(lines)) if lines[i] and not lines[i].startswith((" ", "\t")))
    doc_start = next(i for i in range(k + 1, end) if lines[i].strip().startswith('"""'))  # after the signature
    doc_end = next(i for i in range(doc_start, end) if lines[i].rstrip().endswith('"""'))
    return lines, k, end, range(doc_start, doc_end + 1)


@pytest.mark.parametrize("kernel", ["layer_norm_forward_rows", "layer_norm_backward_rows"])
@pytest.mark.parametrize("docstring", [False, True])
def test_the_shown_source_is_the_kernels_source_with_its_line_numbers(kernel, docstring):
    lines, k, end, doc = _file_lines(kernel)
    assert lines[k - 1].startswith("@njit")
    body = lines[k - 1 : end]
    while not body[-1].strip():
        body.pop()
    text = rendered(
        run_demo("kernel_source", LessonParams(), {"kernel": kernel, "docstring": docstring}).renderable, 200
    )
    shown = [re.sub(r"\s+$", "", line) for line in text.splitlines()]
    for i, line in enumerate(body, start=k - 1):
        in_doc = i in doc
        pattern = rf"\s*{i + 1}" + (f" {re.escape(line)}" if line.strip() else "")  # blank lines: the number
        present = any(re.fullmatch(pattern, s) for s in shown)
        assert present == (docstring or not in_doc), f"line {i + 1}: {line!r}"
    assert f"lines {k}–{k + len(body) - 1}" in text


class Counting:
    """An array that counts reads and writes of each element (for a kernel's py_func)."""

    def __init__(self, a: np.ndarray):
        self.a = a
        self.shape, self.dtype = a.shape, a.dtype
        self.reads = np.zeros(a.shape, dtype=int)
        self.writes = np.zeros(a.shape, dtype=int)

    def __getitem__(self, idx):
        self.reads[idx] += 1
        return self.a[idx]

    def __setitem__(self, idx, v):
        self.writes[idx] += 1
        self.a[idx] = v


def _py(name: str):
    fn = getattr(fused, name)
    return getattr(fn, "py_func", fn)


def test_the_forward_kernel_walks_each_row_three_times_and_writes_y_once():
    rng = np.random.default_rng(5)
    rows, d = 3, 5
    x = Counting(rng.normal(size=(rows, d)))
    gamma, beta = rng.uniform(0.5, 1.5, d), rng.normal(size=d)
    y = Counting(np.zeros((rows, d)))
    xhat = Counting(np.zeros((1, 1)))
    mean, var, rstd = np.zeros(rows), np.zeros(rows), np.zeros(rows)
    _py("layer_norm_forward_rows")(x, gamma, beta, 1e-5, y, mean, var, rstd, xhat, False)
    assert (x.reads == 3).all() and (x.writes == 0).all()  # the three j loops over one row
    assert (y.writes == 1).all() and (y.reads == 0).all()  # written once, never read back
    assert not xhat.writes.any()  # recompute mode: no xhat array at all
    mu = x.a.mean(axis=1, keepdims=True)
    assert_closed_form(y.a, (x.a - mu) / np.sqrt(((x.a - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5) * gamma + beta)


def test_the_backward_kernel_reads_x_instead_of_xhat_and_writes_dx_once():
    rng = np.random.default_rng(6)
    rows, d, eps = 4, 6, 1e-5
    x = rng.normal(size=(rows, d))
    gamma, dy_a = rng.uniform(0.5, 1.5, d), rng.normal(size=(rows, d))
    m = formulas.moments(x, (-1,), eps)
    src, dy, dx = Counting(x.copy()), Counting(dy_a.copy()), Counting(np.zeros((rows, d)))
    dgamma_part, dbeta_part = np.zeros((1, d)), np.zeros((1, d))
    _py("layer_norm_backward_rows")(dy, src, m.mean[:, 0], m.rstd[:, 0], gamma, dx, dgamma_part, dbeta_part, False)
    assert (src.reads == 2).all() and (dx.writes == 1).all() and (dx.reads == 0).all()
    assert_closed_form(dx.a, formulas.dx_simplified(dy_a * gamma, m.xhat, m.rstd, (-1,)))
    assert_closed_form(dgamma_part[0], (dy_a * m.xhat).sum(axis=0))


# ---- steps 5 and 6: passes over memory ----------------------------------------------------------------


# Lines of the NumPy path that touch a whole array (an einsum, a blocked sum, or a "# R,D" shape comment)
# and are deliberately not counted, with the reason.
NOT_COUNTED = {
    "y = _affine_rows(xhat, gamma, beta, in_place=not keep_xhat)",  # a call: its lines are counted
    "xshift -= resid[:, None]",  # only when the mean's rounding would show in xhat
    "return np.add(xhat, beta, out=xhat if in_place else None)",  # beta without gamma
    "xhat -= expand(lo)",  # only when the mean's rounding would show in xhat
}


@pytest.mark.parametrize("function", ["_ln_forward_numpy", "_affine_rows", "_ln_backward_numpy", "_recompute_xhat"])
def test_no_whole_array_line_of_the_numpy_path_is_left_out(function):
    where = f"microgradnorm.vectorized.numpy_path:{function}"
    markers = ("einsum(", "_sum_in_blocks(", "# R,D")
    source = inspect.getsource(K._resolve(where)).splitlines()
    whole = {line.split("  #")[0].strip() for line in source if any(marker in line for marker in markers)}
    trips = [t for groups in K.PASSES.values() for g in groups for t in g.trips if t.where == where]
    assert whole - NOT_COUNTED == {K.locate(t)[1] for t in trips}


def test_pass_totals_match_the_counts_derived_by_hand():
    # NumPy forward (vectorized/numpy_path.py): einsum(x) R; subtract R W; einsum(xshift) R; einsum(xshift, xshift)
    # R (one stream); multiply in place R W; * gamma R W; += beta R W  ->  7 reads, 4 writes.
    assert K.pass_totals("forward", "numpy", "keep") == (7, 4)
    assert K.pass_totals("forward", "numpy", "recompute") == (7, 4)
    # kernel forward: x read in the first loop, y written in the last (+ xhat when kept).
    assert K.pass_totals("forward", "kernel", "recompute") == (1, 1)
    assert K.pass_totals("forward", "kernel", "keep") == (1, 2)
    # NumPy backward: einsum(dy, xhat) 2R; einsum(dy) R; dy * gamma R W; einsum(dx) R;
    # einsum(dx, xhat) 2R; -= mean_g R W; xhat * m (R W) then -= (2R W); *= rstd R W -> 12 R, 5 W;
    # recompute adds subtract (R W) and multiply in place (R W).
    assert K.pass_totals("backward", "numpy", "keep") == (12, 5)
    assert K.pass_totals("backward", "numpy", "recompute") == (14, 7)
    # kernel backward: dy and src (x or xhat) read in the first loop, dx written in the second.
    assert K.pass_totals("backward", "kernel", "keep") == K.pass_totals("backward", "kernel", "recompute") == (2, 1)


def test_every_full_array_write_of_the_kernels_is_counted():
    for name, direction in (("layer_norm_forward_rows", "forward"), ("layer_norm_backward_rows", "backward")):
        source = inspect.getsource(_py(name)).splitlines()
        writes = {line.strip() for line in source if re.match(r"\s*(y|xhat|dx)\[i, j\] =", line)}
        counted = {K.locate(t)[1] for g in K.PASSES[direction] for t in g.trips if t.writes}
        assert writes and writes <= counted


def test_the_pass_demo_shows_the_totals_and_the_bytes():
    text = flat(run_demo("kernel_memory_passes", LessonParams(), {"direction": "forward"}).renderable, 200)
    # 11 passes of a 12 MiB array = 132 MiB; the kernel: 2 passes = 24 MiB (recompute), 3 = 36 MiB (xhat kept)
    assert "xhat kept 11 (132.0 MiB) 3 (36.0 MiB)" in text
    assert "recompute 11 (132.0 MiB) 2 (24.0 MiB)" in text
    with pytest.raises(ValueError, match="direction: expected one of forward, backward, got 'sideways'"):
        run_demo("kernel_memory_passes", LessonParams(), {"direction": "sideways"})


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_every_listed_line_is_in_the_current_source_fits_its_cell_and_still_parses_as_the_same_python(direction):
    for group in K.PASSES[direction]:
        for trip in group.trips:
            line, code = K.locate(trip)
            assert trip.find in code and line > 0
            pieces = K.code_lines(code)
            assert all(len(piece) <= K.CODE_CELL for piece in pieces), pieces
            if len(pieces) > 1:  # broken only inside brackets or after a backslash: the same statement
                joined = "\n".join(pieces)
                assert ast.dump(ast.parse(joined)) == ast.dump(ast.parse(code)), pieces


def test_a_line_with_no_break_that_fits_stays_whole():
    assert K.code_lines("abcdefgh(ijklmnop)", width=8) == ["abcdefgh(ijklmnop)"]
    assert K.code_lines("f(a, b)", width=80) == ["f(a, b)"]


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_the_caption_names_the_uncounted_line_by_its_live_number(direction):
    trip = K.SOMETIMES[direction]
    line = K.locate(trip)[0]
    source = inspect.getsource(numpy_path).splitlines()
    assert trip.find in source[line - 1]  # the number printed is the line that holds the correction
    assert not any(K.locate(t) == K.locate(trip) for g in K.PASSES[direction] for t in g.trips)  # not counted
    text = flat(K._not_counted(direction), 200)
    assert re.search(rf"\b{line}\b", text)  # the caption names the line that holds the correction


# ---- the demos as a whole --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [LESSON, APPENDIX], ids=["lesson13", "lesson14"])
def test_no_demo_runs_a_fused_kernel(path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a lesson-13 or -14 demo ran a fused kernel")

    for name in ("layer_norm_forward", "layer_norm_backward", "rms_norm_forward", "rms_norm_backward", "_launch"):
        monkeypatch.setattr(fused, name, refuse)
    monkeypatch.setenv("MICROGRADNORM_BACKEND", "auto")
    lesson = parse_lesson(path)
    params = lesson.params()
    for step in lesson.steps:
        for call in step.demos:
            assert isinstance(run_demo(call.name, params, call.args), DemoOutput)


@pytest.mark.parametrize(
    "p",
    [LessonParams(dim=2, seed=1, eps=0.0, batch=1), LessonParams(dim=16, seed=7, eps=1e-3, batch=3)],
    ids=["dim2-eps0-batch1", "dim16-batch3"],
)
def test_every_demo_renders_at_other_parameters_in_60_columns(p):
    assert MY_DEMOS
    smaller = {"kernel_engine_vs_numpy": {"repeats": 1, "hidden": (4,)}, "kernel_cache_bytes": {"shape": (2, 3, 8)}}
    for name in MY_DEMOS:
        assert_demo_passes(name, p, smaller.get(name, {}), widths=(60,))


def test_the_timing_table_keeps_every_header_whole_at_60_columns_for_a_large_batch():
    out = run_demo("kernel_engine_vs_numpy", LessonParams(batch=16), {"repeats": 1})
    text = rendered(out.renderable, 60)
    assert "…" not in text and "engine/NumPy" in text


SPAN_GONE = "span: no line containing 'nope' in the kernel; the code changed"
REFUSED = [  # (demo, options, arguments, the error, its message)
    ("kernel_source", {}, {"kernel": "layer_norm"}, ValueError, r"kernel: expected one of .*got 'layer_norm'"),
    ("kernel_node_count", {"dim": 1}, {}, ValueError, "dim: this lesson needs at least 2 features per row, got 1"),
    ("kernel_source", {}, {"span": ("nope", "mu = s / d")}, LookupError, SPAN_GONE),  # a span the code lost
]


@pytest.mark.parametrize(("demo", "params", "args", "kind", "says"), REFUSED, ids=["kernel", "dim-1", "span"])
def test_a_demo_refuses_what_it_cannot_show_with_a_message_naming_it(demo, params, args, kind, says):
    with pytest.raises(kind, match=says):
        run_demo(demo, LessonParams(**params), args)


# ---- the command ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("number", "path"), [("13", LESSON), ("14", APPENDIX)], ids=["lesson13", "lesson14"])
def test_lessons_13_and_14_auto_from_the_command_line(tmp_path, number, path):
    env = dict(os.environ, NO_COLOR="1", COLUMNS="60", MICROGRADNORM_HOME=str(tmp_path / "home"))
    env.pop("MICROGRADNORM_DEBUG", None)
    argv = [sys.executable, "-m", "microgradnorm", "lesson", number, "--auto"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    steps = len(parse_lesson(path).steps)
    assert f"Step {steps} of {steps}" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 60


@pytest.mark.parametrize("path", [LESSON, lessons_dir() / "zh-CN" / LESSON.name], ids=["en", "zh"])
def test_the_graph_command_lesson_13_prints_runs_as_printed(path, tmp_path, monkeypatch, capsys):
    """Each `microgradnorm graph ...` line of the lesson's command blocks, run through the real CLI as printed."""
    blocks = re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.startswith("microgradnorm graph ")]
    commands = [shlex.split(line.split("  #")[0])[1:] for line in lines]
    assert commands, f"{path.name}: no `microgradnorm graph` command left to check"
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        code = cli.main(argv)
        assert code == 0, (argv, capsys.readouterr())
        written = argv[argv.index("-o") + 1]
        assert (tmp_path / written).stat().st_size > 0


# ---- the split: lesson 13 for everyone, lesson 14 the optional appendix ----------------------------------


def test_the_core_lesson_shows_no_kernel_listing_and_points_to_the_appendix():
    lesson = parse_lesson(LESSON)
    calls = [call for step in lesson.steps for call in step.demos]
    assert "kernel_source" not in [call.name for call in calls]
    assert all(call.args.get("show") == "totals" for call in calls if call.name == "kernel_memory_passes")
    assert "lesson 14" in LESSON.read_text(encoding="utf-8")
    appendix = parse_lesson(APPENDIX)
    assert appendix.title.startswith("Optional:") and appendix.options == ()


@pytest.mark.parametrize("kernel", ["layer_norm_forward_rows", "layer_norm_backward_rows"])
def test_the_appendix_shows_every_line_of_each_kernel_exactly_once(kernel):
    lines, k, end, doc = _file_lines(kernel)
    wanted = [i + 1 for i in range(k, end) if lines[i].strip() and i not in doc]  # 1-based
    shown: list[int] = []
    for step in parse_lesson(APPENDIX).steps:
        for call in step.demos:
            if call.name == "kernel_source" and call.args.get("kernel", "layer_norm_forward_rows") == kernel:
                text = rendered(run_demo(call.name, LessonParams(), call.args).renderable, 200)
                shown += [int(m) for m in re.findall(r"^\s*(\d+)\s+\S", text, flags=re.M)]
    assert sorted(shown) == wanted


def test_the_appendix_listings_fit_60_columns_without_wrapping_a_line_of_code():
    """At the narrowest width a lesson supports, no listed line of fused.py continues on a second screen line
    (a continuation is a line that starts in the number gutter's blank)."""
    for step in parse_lesson(APPENDIX).steps:
        for call in step.demos:
            if call.name == "kernel_source":
                text = rendered(run_demo(call.name, LessonParams(), call.args).renderable, 60)
                numbered = [line for line in text.splitlines() if re.match(r"^\s*\d+ ", line)]
                wrapped = [line for line in text.splitlines() if re.match(r"^ {6}(?!⋮)\S", line)]
                assert numbered and not wrapped, (call.args, wrapped)


@pytest.mark.parametrize("dim", range(2, 17))
def test_the_node_prediction_follows_the_hand_count(dim):
    """Every --dim the command accepts: distinct choices (2·d and d² once coincided at d = 2, 8·d and d² at 8)."""
    out = run_demo("kernel_node_count", LessonParams(dim=dim))
    total = 8 * dim + 10  # counted by hand above
    assert sum(K.node_counts(K.row_graph(LessonParams(dim=dim))).values()) == total
    assert len(set(out.prediction.choices)) == len(out.prediction.choices)
    # 8d + 10 nodes is between 8.6 and 13 per number for d in 2..16: about 10 per number
    assert out.prediction.choices[out.prediction.answer] == f"about 10·d = {10 * dim}"
    assert 8 < total / dim <= 13
    assert f"{total} nodes for {dim} numbers" in out.prediction.why


def test_the_trip_predictions_follow_the_counts_derived_by_hand():
    # by hand (see test_pass_totals_match_the_counts_derived_by_hand): the kernel with xhat kept reads x and
    # writes y and xhat forward (3 trips); NumPy's backward makes 17 passes with xhat kept, 21 in recompute
    # mode (4 more), the kernel's 3 in either mode
    fwd = run_demo("kernel_memory_passes", LessonParams(), {"direction": "forward", "show": "totals"})
    bwd = run_demo("kernel_memory_passes", LessonParams(), {"direction": "backward", "show": "totals"})
    assert "xhat kept" in fwd.prediction.question and "recompute" not in fwd.prediction.question
    assert fwd.prediction.choices[fwd.prediction.answer] == "3"
    assert bwd.prediction.choices[bwd.prediction.answer] == "4"
    assert "NumPy's path makes 11" in fwd.prediction.why
    assert bwd.prediction.why.startswith("21 passes against 17") and "3 with xhat kept, 3 in" in bwd.prediction.why


def test_the_appendix_asks_how_often_numpy_reads_x_and_names_its_lines():
    out = run_demo("kernel_memory_passes", LessonParams(), {"direction": "forward", "show": "lines"})
    # independently: the lines of NumPy's forward whose right-hand side names x2, x as [rows, d]
    lines, first = inspect.getsourcelines(numpy_path._ln_forward_numpy)
    # a NumPy call that takes x2 itself as an argument streams it (x2.shape and x2.dtype read no data)
    reading = [first + k for k, line in enumerate(lines) if re.search(r"np\.\w+\([^)]*\bx2\b(?![.\[])", line)]
    expected = {1: "once, as the kernel", 2: "twice"}.get(len(reading), "three times or more")
    assert out.prediction.choices[out.prediction.answer] == expected
    assert f"Lines {', '.join(map(str, reading))} read x" in out.prediction.why


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_split_question_measures_mu_lo_against_the_float32_gap(seed):
    span = ("# the variance, centered", "rs = 1.0")
    q = run_demo("kernel_source", LessonParams(seed=seed), {"span": span, "ask": "split"}).prediction
    assert q.answer == 1  # at most half the gap between neighboring float32 numbers
    assert "1 apart" in q.question  # the gap it names: 2**23 < 1e7 < 2**24
    lo = float(re.search(r"mu_lo = ([0-9.e+-]+?)\.? ", q.why).group(1))
    assert 0 < lo <= 0.5


@pytest.mark.parametrize("dim", [2, 4, 7])
def test_the_exercise_shapes_question_follows_the_package_backward(dim):
    x = np.random.default_rng(dim).normal(size=(2, 3, dim))
    _, cache = V.layer_norm_forward(x, np.ones(dim), np.zeros(dim), 1e-5, backend="numpy")
    _, dgamma, dbeta = V.layer_norm_backward(np.ones_like(x), cache)
    assert dgamma.shape == dbeta.shape == (dim,)
    q = run_demo("kernel_exercise_shapes", LessonParams(dim=dim)).prediction
    assert q.choices[q.answer] == "dx [B, T, d]; dgamma and dbeta [d]"
    assert f"[{dim}] here" in q.why


def test_the_timing_demo_reads_how_each_time_grew():
    text = flat(run_demo("kernel_engine_vs_numpy", LessonParams(dim=3), {"hidden": (6,), "repeats": 1}).renderable, 200)
    assert re.search(
        r"\[2, 3, 3\] → \[2, 3, 6\]: 2× the numbers; the engine took [\d.e+-]+× the time, NumPy [\d.e+-]+×", text
    )


# "full precision" for float32 results of size 1: a few units in the last place
FLOAT32_FEW_ULPS = 8 * np.finfo(np.float32).eps


def test_the_appendix_claim_a_float32_row_near_1e7_centers_to_full_precision():
    """Lesson 14: near 1e7 float32 numbers are 1 apart, yet the forward kernel's xhat is float32-accurate.

    The oracle standardizes the very same float32 values in float64 here. The kernel runs as plain
    Python (its py_func), so nothing is compiled for a whole kernel.
    """
    assert np.spacing(np.float32(1e7)) == 1.0
    rng = np.random.default_rng(3)
    x = (1e7 + rng.normal(0.0, 3.0, size=(3, 32))).astype(np.float32)
    rows, d = x.shape
    y, xhat = np.empty_like(x), np.empty_like(x)
    mean, var, rstd = np.empty(rows), np.empty(rows), np.empty(rows)
    ones, zeros = np.ones(d, np.float32), np.zeros(d, np.float32)
    _py("layer_norm_forward_rows")(x, ones, zeros, 1e-5, y, mean, var, rstd, xhat, True)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(axis=1, keepdims=True)) / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5)
    assert np.max(np.abs(xhat - ref)) <= FLOAT32_FEW_ULPS * np.max(np.abs(ref))
    # what a plain float32 centering gives: off by a sizeable fraction of the spread (3.0)
    naive = x - x.mean(axis=1, keepdims=True, dtype=np.float32)
    assert np.max(np.abs(naive - (x64 - x64.mean(axis=1, keepdims=True)))) > 1000 * FLOAT32_FEW_ULPS


# ---- the llm.c pair the lesson shows -------------------------------------------------------------


def test_the_shown_llmc_code_is_the_live_source_of_the_functions_that_ran():
    out = run_demo("kernel_llmc_code", LessonParams())
    shown = rendered(out.renderable, 200)
    for fn in (textbook.layer_norm_forward, textbook.layer_norm_backward):
        live = textwrap.dedent(inspect.getsource(fn))
        body = source_of(fn).rstrip()  # the live source without its docstring, as the lesson shows it
        assert body in shown and body.splitlines()[0] in live, fn.__name__
        assert all(line in live for line in body.splitlines())
    assert "✓" in shown and "✗" not in shown


@pytest.mark.parametrize(("seed", "eps"), [(0, 1e-5), (3, 0.5)])
def test_the_llmc_pair_matches_the_scalar_engine(seed, eps):
    """Oracle: the engine's autograd on the same LayerNorm, row by row."""
    rng = np.random.default_rng(seed)
    x, dy = rng.normal(0.5, 2.0, (2, 3, 5)), rng.normal(size=(2, 3, 5))
    gamma, beta = rng.uniform(0.5, 1.5, 5), rng.normal(size=5)
    y, cache = textbook.layer_norm_forward(x, gamma, beta, eps)
    dx, dgamma, dbeta = textbook.layer_norm_backward(dy, cache)
    grads, graph = autograd_dx("layernorm", x.reshape(-1, 5), gamma, beta, eps, dy.reshape(-1, 5))
    assert np.allclose(y.reshape(-1), [v.data for v in graph["y"]], rtol=1e-12, atol=1e-12)
    for ours, ref in ((dx, grads["x"].reshape(x.shape)), (dgamma, grads["gamma"]), (dbeta, grads["beta"])):
        assert np.allclose(ours, ref, rtol=1e-10, atol=1e-12)
