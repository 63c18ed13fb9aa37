"""The core lessons' demos compute the right things, checked against independent oracles.

Oracles: finite differences, the closed forms in formulas.py, and PyTorch.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.engine import Value, topological_order
from microgradnorm.lessons import demos_core as core
from microgradnorm.lessons.demos import DEMOS, LessonParams, load_demos, run_demo
from microgradnorm.lessons.format import load_lessons
from microgradnorm.norms import batch_norm, rms_norm


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    """Never touch the learner's real state folder."""
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))


def _text(renderable, width: int = 100) -> str:
    console = Console(file=io.StringIO(), width=width, no_color=True, record=True)
    console.print(renderable)
    return console.export_text()


def _lesson(number: int):
    return next(lesson for lesson in load_lessons() if lesson.number == number)


# ---- the traced backward pass -------------------------------------------------------------


@given(st.integers(2, 7), st.integers(0, 10_000), st.sampled_from([0.0, 1e-5, 0.1]))
def test_traced_paths_into_x_match_the_closed_form_three_paths(dim, seed, eps):
    p = LessonParams(dim=dim, seed=seed, eps=eps)
    built, trace = core._traced(p)
    m = formulas.moments(built.x, (-1,), eps)
    g = formulas.dxhat(built.dy, built.gamma)
    direct, via_mean, via_var = formulas.dx_paths(g, m.xshift, m.std, m.rstd, (-1,))
    parts = [trace.parts_of(v) for v in built.graph["x"]]
    # dx (d = 2, eps = 0) or a path can be 0: then both sides are rounding of terms of size |g| * rstd
    at = max(tol.CLOSED_FORM_ATOL, tol.norm_dx_atol(built.x, built.gamma, built.dy, m.rstd))
    for key, ref in (("direct", direct), ("mean", via_mean), ("var", via_var)):
        got = np.array([pp.get(key, 0.0) for pp in parts])
        assert tol.close(got, ref, tol.CLOSED_FORM_RTOL, at), key
    assert all(set(pp) <= {"direct", "mean", "var"} for pp in parts)
    xgrad = np.array([v.grad for v in built.graph["x"]])
    assert tol.close(xgrad, formulas.dx_simplified(g, m.xhat, m.rstd, (-1,)), tol.CLOSED_FORM_RTOL, at)


def test_the_trace_records_every_contribution_and_counts_them():
    built, trace = core._traced(LessonParams(dim=4))
    order = topological_order(built.loss)
    edges = sum(len(n.children) for n in order)
    assert len(trace.contributions) == edges
    for node in order:
        into = [c for c in trace.contributions if c.child is node]
        assert [c.count for c in into] == list(range(1, len(into) + 1))
        if into:
            assert into[-1].total == node.grad
            assert math.isclose(sum(c.amount for c in into), node.grad, rel_tol=1e-12, abs_tol=1e-15)
    # every contribution is local × out.grad, with the local derivative of the engine
    assert all(c.amount == c.local * c.out_grad for c in trace.contributions)


@pytest.mark.parametrize("build", [lambda x: batch_norm([x, [v * 0.5 + 1 for v in x]]), lambda x: rms_norm(x)])
def test_trace_backward_equals_value_backward_on_other_norms(build):
    out = build([0.3, -1.2, 2.0, 0.7])
    graph = out.graph
    loss = graph.loss(np.ones(graph.shape).tolist())
    core.trace_backward(loss)  # raises if any node differs from Value.backward
    assert all(v.grad != 0.0 for v in graph["xhat"])


def test_the_shared_node_example_needs_both_accumulation_and_the_order():
    v = core._lesson1_numbers(3)
    root, leaves = core._example("shared", v)
    good = list(reversed(topological_order(root)))
    fd = {k: core._finite_difference("shared", v, k) for k in leaves}
    core._backward_in_order(root, good)
    assert all(math.isclose(leaves[k].grad, fd[k], rel_tol=tol.FD_RTOL, abs_tol=tol.FD_ATOL) for k in leaves)
    core._backward_in_order(root, core._first_reached(root))
    assert not math.isclose(leaves["a"].grad, fd["a"], rel_tol=tol.FD_RTOL, abs_tol=tol.FD_ATOL)
    core._backward_in_order(root, good, accumulate=False)
    assert not math.isclose(leaves["a"].grad, fd["a"], rel_tol=tol.FD_RTOL, abs_tol=tol.FD_ATOL)
    square, leaves_sq = core._example("square", v)
    square.backward()
    assert leaves_sq["a"].grad == pytest.approx(2 * v["a"])


@pytest.mark.parametrize("example", ["chain", "shared"])
def test_chain_rule_paths_sum_to_the_finite_difference(example):
    v = core._lesson1_numbers(11)
    root, leaves = core._example(example, v)
    for name, leaf in leaves.items():
        total = sum(math.prod(d for _, _, d in trail) for trail in core._paths(root, leaf))
        assert math.isclose(total, core._finite_difference(example, v, name), rel_tol=tol.FD_RTOL, abs_tol=tol.FD_ATOL)
    assert len(core._paths(root, leaves["a"])) == (2 if example == "shared" else 1)


def test_x_gradient_of_the_lesson_matches_pytorch():
    torch = pytest.importorskip("torch")
    p = LessonParams(dim=5, seed=4)
    built = core.build_ln(p)
    core._backprop(built)
    x = torch.tensor(built.x, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(built.gamma, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(built.beta, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, (p.dim,), w, b, p.eps)
    (y * torch.tensor(built.dy, dtype=torch.float64)).sum().backward()
    for name, t in (("x", x), ("gamma", w), ("beta", b)):
        ours = np.array([v.grad for v in built.graph[name]])
        assert tol.close(ours, t.grad.numpy(), tol.TORCH_F64_RTOL, tol.TORCH_F64_ATOL), name


# ---- names and coverage of the step-throughs ------------------------------------------------------


@pytest.mark.parametrize("rows", [None, 2])
def test_every_layernorm_node_gets_a_unique_readable_name(rows):
    built = core.build_ln(LessonParams(dim=4), rows)
    nodes = [n for n in topological_order(built.loss) if id(n) not in built.constants]
    names = [built.name(n) for n in nodes]
    assert len(set(names)) == len(names)
    assert not [n for n in names if "#" in n]


def _calls(number: int, demo_name: str):
    return [call for step in _lesson(number).steps for call in step.demos if call.name == demo_name]


def test_lesson_3_shows_every_forward_node_exactly_once():
    parts = [call.args.get("stages") for call in _calls(3, "ln_forward_steps")]
    shown = [s for part in parts for s in part]
    assert len(shown) == len(set(shown))
    built = core.build_ln(LessonParams(dim=4))
    assert set(shown) == {n.stage for n in topological_order(built.graph.roots())}


def test_lesson_4_shows_every_backward_contribution_exactly_once():
    parts = [call.args.get("stages") for call in _calls(4, "ln_backward_steps")]
    shown = [s for part in parts for s in part]
    assert len(shown) == len(set(shown))
    _, trace = core._traced(LessonParams(dim=4))
    assert set(shown) == {c.out.stage for c in trace.contributions}


def test_lesson_4_ends_with_the_check_table():
    last = _lesson(4).steps[-1]
    assert [c.name for c in last.demos] == ["ln_check_table"]


# ---- every core demo at other sizes: runs, fits, and its own checks pass ---------------------------

PARAMS = [
    LessonParams(),
    LessonParams(dim=2, seed=1),
    LessonParams(dim=2, seed=0, eps=0.0),
    LessonParams(dim=6, seed=5, eps=0.0),
    LessonParams(dim=12, seed=123, eps=0.1),
    LessonParams(dim=3, seed=9, batch=2),
]


def _check_every_core_demo(p: LessonParams) -> None:
    load_demos()
    for name, spec in sorted(DEMOS.items()):
        if spec.module != core.__name__:
            continue
        calls = [{}]
        if name == "ln_forward_steps":
            calls = [{"stages": ("input", "mean", "center")}, {"stages": ("affine",)}]
        if name == "ln_backward_steps":
            calls = [{"stages": ("loss",)}, {"stages": ("center", "mean")}]
        for args in calls:
            out = run_demo(name, p, args)
            for width in (60, 100):
                text = _text(out.renderable, width)
                assert text.strip(), name
                assert "✗" not in text, f"{name} {args} reports a failed check at {p}:\n{text}"


@pytest.mark.parametrize("p", PARAMS, ids=lambda p: f"d{p.dim}-s{p.seed}-e{p.eps:g}")
def test_every_core_demo_passes_its_own_checks_for_other_parameters(p):
    _check_every_core_demo(p)


@settings(max_examples=8)
@given(st.integers(2, 9), st.integers(0, 2**31), st.sampled_from([0.0, 1e-8, 1e-5, 0.5]))
def test_every_core_demo_passes_its_own_checks_for_random_parameters(dim, seed, eps):
    _check_every_core_demo(LessonParams(dim=dim, seed=seed, eps=eps))


def test_the_eps_demo_shows_the_cap_and_the_failure_without_eps():
    text = _text(run_demo("ln_eps", LessonParams(), {}).renderable)
    assert "1/0" in text and "error" in text
    assert f"{1 / math.sqrt(1e-5):.4g}" in text


def test_the_shapes_demo_reports_numpys_refusal_and_the_silent_wrong_broadcast():
    text = " ".join(_text(run_demo("ln_shapes", LessonParams(dim=4), {}).renderable).split())
    assert "[2, 3, 1]" in text and "could not be broadcast" in text
    x = np.random.default_rng(0).normal(0.5, 2.0, size=(4, 4))
    assert "Largest error" in text and not np.allclose(x - x.mean(-1), x - x.mean(-1, keepdims=True))


def test_value_graph_lists_nodes_in_creation_order():
    out = run_demo("value_graph", LessonParams(seed=2), {"example": "chain"})
    assert isinstance(out.graph, Value)
    text = _text(out.renderable)
    rows = [line.split()[0] for line in text.splitlines()[2:] if line.strip()]
    assert rows == ["a", "b", "c", "e", "d", "f", "L"]


def test_the_lesson_problem_never_has_a_constant_row(monkeypatch):
    def constant(spec, shape, seed):
        return np.full(shape, 0.5), np.ones(shape[-1]), np.zeros(shape[-1]), np.ones(shape)

    monkeypatch.setattr(core, "random_problem", constant)
    x = core.ln_problem(LessonParams(dim=3, eps=0.0), rows=2)[0]
    assert x.shape == (2, 3) and all(np.ptp(row) > 0 for row in x)
    built = core.build_ln(LessonParams(dim=3, eps=0.0))  # eps = 0 works: the row has a spread
    assert all(np.isfinite(v.data) for v in built.graph["y"])


@pytest.mark.parametrize("name", ["jacobian_heatmap", "scale_invariance"])
def test_jacobian_demos_handle_a_jacobian_that_is_exactly_zero(name):
    """d = 2 at eps = 0: y = ±1 whatever x is, so J = 0 (seed 5 gives exact zeros); no error, no warning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run_demo(name, LessonParams(dim=2, eps=0.0, seed=5))
    console = Console(file=io.StringIO(), width=100, record=True)
    console.print(out.renderable)
    assert console.export_text().strip()
