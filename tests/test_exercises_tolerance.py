"""The grader's float64 bound, on any input: sound right answers inside, estimates outside and named.

Run in this process, without the sandbox (the bound is arithmetic): each
exercise's reference solution and the independent answer of
tests/exercise_answers/ are called through the exercise's own driver on cases
drawn from Hypothesis's seeds, and every output must be within the bound of
:mod:`microgradnorm.exercises.rounding`. Finite-difference gradients must fall
outside it and be explained as estimates; streaming exercise 10 from kept
values must fail.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microgradnorm import engine
from microgradnorm.exercises import rounding
from microgradnorm.exercises.catalog import EXERCISES
from microgradnorm.exercises.drivers import DRIVERS
from microgradnorm.exercises.judge import explain_values
from microgradnorm.exercises.problems import get_problem
from microgradnorm.exercises.runner import read_only
from microgradnorm.exercises.selfcheck import numerical_gradient
from tests.grading import ANSWERS

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
EXAMPLES = 6  # per exercise: each case's bound costs a few hundred evaluations of its closed form


def _module(path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"answer_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODULES = {
    ex.name: (
        _module(ex.solution),
        _module(ANSWERS / ex.filename),
        *(_module(p) for p in sorted((ANSWERS / "variants").glob(f"{ex.number:02d}_*.py"))),
    )
    for ex in EXERCISES
}


def _call(name: str, module: ModuleType, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    outputs = DRIVERS[name](module, read_only(inputs), engine)
    return {k: np.asarray(v, dtype=np.float64) for k, v in outputs.items() if not k.startswith("_")}


@pytest.mark.parametrize("ex", EXERCISES, ids=[ex.name for ex in EXERCISES])
@settings(max_examples=EXAMPLES)
@given(seed=SEEDS)
def test_sound_answers_are_inside_the_bound_on_any_input(ex, seed):
    problem = get_problem(ex.name)
    rng = np.random.default_rng(seed)
    for second in (False, True):
        case = problem.make_case(rng, second)
        for module in MODULES[ex.name]:
            got = _call(ex.name, module, case.inputs)
            for o in problem.outputs:
                want, bound = case.expected[o.name], case.allowed[o.name]
                worst = float(np.max(np.abs(got[o.name] - want) / bound))
                assert rounding.within(got[o.name], want, bound), (module.__file__, o.name, worst)


def _estimated(name: str) -> ModuleType:
    """An answer that estimates gradients by central differences of the reference's own forward pass."""
    reference = MODULES[name][0]
    fake = ModuleType("estimate")
    if name == "01_local_derivatives":
        fake.mul_backward = lambda a, b, d: (
            numerical_gradient(lambda v: np.sum(v * b * d), a),
            numerical_gradient(lambda v: np.sum(a * v * d), b),
        )
        fake.pow_backward = lambda a, p, d: numerical_gradient(lambda v: np.sum(v**p * d), a)
        fake.sqrt_backward = lambda a, d: numerical_gradient(lambda v: np.sum(np.sqrt(v) * d), a)
        fake.div_backward = lambda a, b, d: (
            numerical_gradient(lambda v: np.sum(v / b * d), a),
            numerical_gradient(lambda v: np.sum(a / v * d), b),
        )
        return fake
    forward, backward = {"05_layernorm_backward": ("layernorm_forward", "layernorm_backward"),
                         "08_rmsnorm_backward": ("rmsnorm_forward", "rmsnorm_backward")}[name]  # fmt: skip
    run = getattr(reference, forward)

    def fwd(*args):
        return run(*args)[0], args

    def bwd(dy, args):
        grads = [numerical_gradient(lambda v, i=i: np.sum(run(*args[:i], v, *args[i + 1 :])[0] * dy), args[i])
                 for i in range(len(args) - 1)]  # fmt: skip
        return grads[0], *grads[1:]  # dx, dgamma (, dbeta): every array argument but eps

    setattr(fake, forward, fwd)
    setattr(fake, backward, bwd)
    return fake


def _case(name: str, seed: int, second: bool = False):
    """Exercise ``name``'s problem and the first input the grader draws on ``seed`` (or the second: eps = 0)."""
    problem = get_problem(name)
    rng = np.random.default_rng(seed)
    first = problem.make_case(rng, False)
    return problem, problem.make_case(rng, True) if second else first


@pytest.mark.parametrize("name", ["01_local_derivatives", "05_layernorm_backward", "08_rmsnorm_backward"])
@settings(max_examples=3)
@given(seed=SEEDS)
def test_finite_difference_estimates_fail_and_are_named(name, seed):
    problem, case = _case(name, seed)
    got = _call(name, _estimated(name), case.inputs)
    grads = [o.name for o in problem.outputs if o.name != "y"]
    failing = [g for g in grads if not rounding.within(got[g], case.expected[g], case.allowed[g])]
    assert failing, "an estimate passed"
    findings, _ = explain_values(problem, case, {failing[0]: got[failing[0]]}, failing[:1], first_ok=False)
    assert [f.key for f in findings] == ["estimate"], [f.title for f in findings]


@settings(max_examples=EXAMPLES)
@given(seed=SEEDS)
def test_streaming_from_kept_values_fails_on_a_mid_stream_start(seed):
    """np.var over the values the update saw misses the ones before the start: the start state was ignored."""
    name = "10_stable_variance"
    problem, case = _case(name, seed)
    start = int(case.inputs["count0"][0])
    seen: list[float] = []

    def welford_update(count, mean, m2, value):
        if count == start:  # a new row begins: keep its values from here
            seen.clear()
        seen.append(value)
        return count + 1, float(np.mean(seen)), float(np.var(seen) * len(seen))

    kept = ModuleType("kept")
    kept.welford_update = welford_update
    got = _call(name, kept, case.inputs)
    assert not rounding.within(got["var"], case.expected["var"], case.allowed["var"])
    findings, _ = explain_values(problem, case, {"mean": got["mean"]}, ["mean"], first_ok=False)
    assert findings[0].key == "welford_ignores_state"


@settings(max_examples=EXAMPLES)
@given(seed=SEEDS, scale=st.floats(min_value=1e-6, max_value=1e6))
def test_the_bound_scales_with_the_magnitudes(seed, scale):
    """Scaling the upstream gradient scales every gradient, and the bound with it (a fixed tolerance would not)."""
    problem, case = _case("01_local_derivatives", seed)
    scaled = {**case.inputs, "dout": case.inputs["dout"] * scale}
    allowed = rounding.tolerance(problem.solve, scaled)
    for name in ("mul_da", "div_db"):
        assert np.allclose(allowed[name], case.allowed[name] * scale, rtol=1e-3)


def test_a_gradient_that_cancels_to_zero_gets_the_size_of_its_terms():
    """A constant dxhat = gamma * dy makes LayerNorm's true dx zero; right answers are rounding noise of the terms'
    size, and the bound has that size, where an absolute tolerance on zero would be a coin toss."""
    name = "05_layernorm_backward"
    problem = get_problem(name)
    case = problem.make_case(np.random.default_rng(7), True)
    inputs = {**case.inputs, "dy": np.broadcast_to(3.0 / case.inputs["gamma"], case.inputs["dy"].shape).copy()}
    expected, allowed = problem.solve(inputs), rounding.tolerance(problem.solve, inputs)
    assert np.max(np.abs(expected["dx"])) < 1e-12 and np.min(allowed["dx"]) > 0
    for module in MODULES[name]:
        got = _call(name, module, inputs)["dx"]
        assert rounding.within(got, expected["dx"], allowed["dx"])
    assert not rounding.within(expected["dx"] + 1e-9, expected["dx"], allowed["dx"])


def test_a_jacobian_entry_that_cancels_where_xhat_saturates_gets_the_size_of_its_terms():
    """One x_i far from the rest: xhat_i^2 / D nears 1 - 1/D, J_ii = rstd gamma_i (1 - 1/D - xhat_i^2 / D) is a
    difference of constants no input scales, and a term-by-term Jacobian rounds it differently from the
    closed form (found by review: such a right answer was refused on one seed in forty)."""
    name = "09_layernorm_jacobian"
    problem = get_problem(name)
    x = np.array([4.23883602, -0.46672343, -0.53844561, -0.18264957, -0.52180487])
    gamma = np.array([-0.84406361, 1.27777152, -1.43387817, -1.05308128, -0.62581023])
    inputs = {"x": x, "gamma": gamma, "eps": np.float64(1e-3), "xhat": (x - x.mean()) / np.sqrt(x.var() + 1e-3)}
    expected, allowed = problem.solve(inputs), rounding.tolerance(problem.solve, inputs, terms=problem.terms(inputs))
    assert abs(expected["J"][0, 0]) < 0.01 * abs(gamma[0])  # the cancellation is there
    for module in MODULES[name]:
        got = _call(name, module, inputs)
        assert rounding.within(got["J"], expected["J"], allowed["J"]), module.__file__


GUARDED = ["03_layernorm_from_values", "05_layernorm_backward", "07_batchnorm_simplified", "08_rmsnorm_backward"]


@pytest.mark.parametrize("name", GUARDED)
@settings(max_examples=EXAMPLES)
@given(seed=SEEDS, guard=st.floats(min_value=1e-8, max_value=1e-3))
def test_a_guard_on_eps_zero_is_named_whatever_the_inputs(name, seed, guard):
    """``eps or guard``: right on the first input; on the second (eps = 0) every wrong output is named as that."""
    problem, case = _case(name, seed, second=True)
    assert case.info["eps"] == 0
    got = _call(name, MODULES[name][1], {**case.inputs, "eps": np.float64(guard)})  # the independent answer
    wrong = [
        o.name for o in problem.outputs if not rounding.within(got[o.name], case.expected[o.name], case.allowed[o.name])
    ]
    assert wrong, "a guard on eps changed no output"
    for output in wrong:
        findings, _ = explain_values(problem, case, {output: got[output]}, [output], first_ok=True)
        assert "eps_zero_changed" in [f.key for f in findings], (output, [f.title for f in findings])


@pytest.mark.parametrize("name", GUARDED)
@settings(max_examples=EXAMPLES)
@given(seed=SEEDS, factor=st.sampled_from([0.9, 0.99, 1.001, 1.05]))
def test_an_answer_off_by_a_factor_is_not_called_a_guard_on_eps(name, seed, factor):
    problem, case = _case(name, seed, second=True)
    for o in problem.outputs:
        findings, _ = explain_values(problem, case, {o.name: case.expected[o.name] * factor}, [o.name], first_ok=True)
        assert "eps_zero_changed" not in [f.key for f in findings], o.name
