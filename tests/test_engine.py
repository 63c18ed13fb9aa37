"""The Value engine: every op against finite differences, graph structure, backward semantics, errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import DomainError, Value, local_grads, topological_order
from microgradnorm import tolerances as tol
from tests.helpers import numeric_grad

reals = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False)
positives = st.floats(min_value=0.1, max_value=5.0, allow_nan=False)


def fd(f, *args: float) -> list[float]:
    """Central finite differences of a float function of floats, one per argument."""
    return list(numeric_grad(lambda a: f(*(float(v) for v in a)), args))


def assert_grads_match(build, *args: float) -> None:
    """The gradients backward gives the leaves of ``build(*leaves)``, against finite differences of its value."""
    leaves = [Value(a) for a in args]
    build(*leaves).backward()
    got = [v.grad for v in leaves]
    want = fd(lambda *a: build(*[Value(v) for v in a]).data, *args)
    assert tol.close(got, want, tol.FD_RTOL, tol.FD_ATOL), (got, want)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "radd": lambda a, b: 2.5 + a * b,
    "rsub": lambda a, b: 1.5 - a * b,
    "rmul": lambda a, b: 3.0 * a + b,
    "rdiv": lambda a, b: 2.0 / (a * a + b * b + 1.0),
    "square_self": lambda a, b: a * a + b,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(a=reals, b=positives)
def test_binary_ops_match_finite_differences(name, a, b):
    assert_grads_match(BINARY[name], a, b)


UNARY = {
    "neg": (lambda a: -a, reals),
    "pow2": (lambda a: a**2, reals),
    "pow3": (lambda a: a**3, reals),
    "pow_half": (lambda a: a**0.5, positives),
    "pow_minus1": (lambda a: a**-1, positives),
    "pow_minus_half": (lambda a: a**-0.5, positives),
    "exp": (lambda a: a.exp(), reals),
    "log": (lambda a: a.log(), positives),
    "sqrt": (lambda a: a.sqrt(), positives),
    "tanh": (lambda a: a.tanh(), reals),
    "sigmoid": (lambda a: a.sigmoid(), reals),
    "relu": (lambda a: a.relu(), reals.filter(lambda v: abs(v) > 1e-3)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_ops_match_finite_differences(name, data):
    build, values = UNARY[name]
    assert_grads_match(build, data.draw(values))


@given(st.lists(reals, min_size=1, max_size=12))
def test_sum_is_one_node_whose_local_derivatives_are_one(xs):
    leaves = [Value(x) for x in xs]
    total = Value.sum(leaves)
    assert total.children == tuple(leaves)
    assert local_grads(total) == (1.0,) * len(xs)
    assert total.data == pytest.approx(math.fsum(xs), abs=1e-12)
    (total * 2.0).backward()
    assert [v.grad for v in leaves] == [2.0] * len(xs)


def test_mean_is_a_sum_node_times_one_over_n():
    leaves = [Value(v) for v in (1.0, 2.0, 6.0)]
    m = Value.mean(leaves)
    assert m.data == pytest.approx(3.0)
    assert m.children[0].op == "sum"
    m.backward()
    assert [v.grad for v in leaves] == pytest.approx([1 / 3] * 3)


def test_local_grads_of_every_op_match_finite_differences():
    a, b = Value(1.3), Value(0.7)
    cases = [a + b, a - b, a * b, a**3, a.exp(), a.log(), a.sqrt(), a.tanh(), a.sigmoid(), a.relu()]
    forward = {
        "+": lambda u, v: u + v,
        "-": lambda u, v: u - v,
        "*": lambda u, v: u * v,
        "**3": lambda u: u**3,
        "exp": math.exp,
        "log": math.log,
        "sqrt": math.sqrt,
        "tanh": math.tanh,
        "sigmoid": lambda u: 1 / (1 + math.exp(-u)),
        "relu": lambda u: max(u, 0.0),
    }
    for node in cases:
        want = fd(forward[node.op], *[c.data for c in node.children])
        assert tol.close(local_grads(node), want, tol.FD_RTOL, tol.FD_ATOL), node.op
    assert local_grads(a) == ()


def test_children_are_ordered_and_keep_repeated_edges():
    x = Value(3.0)
    y = x * x
    assert y.children == (x, x)
    y.backward()
    assert x.grad == 6.0  # both edges contribute: d(x^2)/dx = 2x
    a, b = Value(1.0), Value(2.0)
    assert (a - b).children == (a, b)
    assert (b - a).children == (b, a)


def test_ids_increase_in_creation_order_and_are_unique():
    a = Value(1.0)
    b = Value(2.0)
    c = a + b
    assert a.id < b.id < c.id
    assert len({v.id for v in topological_order(c)}) == 3


def test_topological_order_puts_children_first_deterministically():
    a, b = Value(1.0, label="a"), Value(2.0, label="b")
    c = a * b
    d = c + a
    order = topological_order(d)
    assert order[-1] is d
    position = {id(v): i for i, v in enumerate(order)}
    for node in order:
        for child in node.children:
            assert position[id(child)] < position[id(node)]
    assert [v.label for v in order[:2]] == ["a", "b"]
    assert topological_order(d) == order
    assert topological_order([d, c]) == order  # several roots, shared nodes listed once


def test_backward_twice_accumulates_and_zero_grad_resets():
    x = Value(0.5)
    h = x.tanh()
    y = h * h
    y.backward()
    first = (x.grad, h.grad, y.grad)
    y.backward()
    assert (x.grad, h.grad, y.grad) == tuple(2 * g for g in first)  # exactly: the 2nd call adds only its own
    y.zero_grad()
    assert (x.grad, h.grad, y.grad) == (0.0, 0.0, 0.0)
    y.backward()
    assert (x.grad, h.grad, y.grad) == pytest.approx(first)


def test_two_losses_sharing_nodes_add_up_like_their_sum():
    a, b = Value(1.5), Value(-0.5)
    shared = a * b
    loss1 = shared.exp()
    loss2 = shared * a
    loss1.backward()
    loss2.backward()
    separately = (a.grad, b.grad, shared.grad)
    a2, b2 = Value(1.5), Value(-0.5)
    shared2 = a2 * b2
    (shared2.exp() + shared2 * a2).backward()
    assert separately == pytest.approx((a2.grad, b2.grad, shared2.grad))


def test_backward_seed_scales_every_gradient():
    x = Value(2.0)
    y = x**2
    y.backward(3.0)
    assert x.grad == 12.0


def test_a_chain_of_a_million_nodes_backpropagates_without_recursion():
    x = Value(1.0)
    v = x
    for _ in range(1_000_000):
        v = v + 1.0
    v.backward()
    assert x.grad == 1.0
    assert v.data == 1_000_001.0


def test_nodes_have_slots_and_no_dict():
    v = Value(1.0)
    assert not hasattr(v, "__dict__")
    with pytest.raises(AttributeError):
        v.something_else = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "label", "make", "words", "op"),
    [
        (0.0, "z", lambda v: v.log(), ["log", "'z'", "0.0"], "log"),
        (-2.0, None, lambda v: v.log(), ["log", "-2.0"], "log"),
        (-1.0, "v", lambda v: v.sqrt(), ["sqrt", "'v'", "-1.0"], "sqrt"),
        (0.0, "std", lambda v: Value(1.0) / v, ["division by zero", "'std'"], "/"),
        (0.0, "z", lambda v: v**-2, ["division by zero"], "**-2"),
        (-8.0, None, lambda v: v**0.5, ["not real", "-8.0"], "**0.5"),
    ],
)
def test_domain_errors_name_the_op_the_node_and_the_value(value, label, make, words, op):
    """The message says them, and the error carries them (the node the op could not take)."""
    node = Value(value, label=label)
    with pytest.raises(DomainError) as info:
        make(node)
    for word in words:
        assert word in str(info.value)
    assert isinstance(info.value, ValueError)
    assert (info.value.op, info.value.value, info.value.node) == (op, value, node)


def test_nan_passes_through_sqrt_and_log_as_in_numpy():
    for node in (Value(math.nan).sqrt(), Value(math.nan).log()):
        assert math.isnan(node.data)


@pytest.mark.parametrize("bad", ["1.0", None, 1 + 2j, True, [1.0]])
def test_non_numeric_data_is_a_type_error_naming_the_type(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        Value(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=type(bad).__name__):
        Value(1.0) + bad  # type: ignore[operator]


def test_value_exponent_is_rejected_with_a_clear_message():
    with pytest.raises(TypeError, match="exponent must be a number"):
        Value(2.0) ** Value(3.0)  # type: ignore[operator]


def test_numpy_scalars_are_accepted():
    np = pytest.importorskip("numpy")
    v = Value(np.float32(1.5)) * np.float64(2.0) + np.int64(1)
    assert v.data == 4.0 and type(v.data) is float


def test_exp_overflow_gives_inf_and_sigmoid_is_stable_at_extremes():
    assert Value(1000.0).exp().data == math.inf
    assert Value(-1000.0).sigmoid().data == 0.0
    assert Value(1000.0).sigmoid().data == 1.0


def test_repr_shows_data_grad_op_and_label():
    v = Value(2.0, label="w") * 3.0
    v.label = "out"
    text = repr(v)
    assert "data=6" in text and "op='*'" in text and "label='out'" in text


@given(st.lists(st.tuples(reals, reals), min_size=1, max_size=8))
def test_dot_is_one_node_whose_gradients_are_the_other_side(pairs):
    a = [Value(p) for p, _ in pairs]
    b = [Value(q) for _, q in pairs]
    out = Value.dot(a, b)
    assert out.op == "dot" and out.children == (*a, *b)
    assert out.data == pytest.approx(math.fsum(p * q for p, q in pairs), abs=1e-12)
    out.backward()
    assert [v.grad for v in a] == [q for _, q in pairs]
    assert [v.grad for v in b] == [p for p, _ in pairs]
    with pytest.raises(ValueError, match="same length"):
        Value.dot(a, b[:-1] if len(b) > 1 else [])


def test_tags_name_the_nodes_made_inside_the_block_and_are_restored():
    from microgradnorm import tags

    x = Value(2.0, label="x")
    with tags("center", "xshift"):
        shifted = x - 1.0
        constant = shifted.children[1]
    assert (shifted.stage, shifted.label) == ("center", "xshift")
    assert constant.stage == "center" and constant.label is None  # leaves take the stage only
    assert x.stage is None
    after = x * 2.0
    assert (after.stage, after.label) == (None, None)


def test_the_cycle_collector_is_restored_after_building_and_backward():
    import gc

    from microgradnorm import layer_norm

    assert gc.isenabled()
    y = layer_norm([1.0, 2.0, 4.0])
    y.graph.loss([1.0, -1.0, 0.5]).backward()
    assert gc.isenabled()
    gc.disable()
    try:
        layer_norm([1.0, 2.0])
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_a_power_too_large_for_a_float_is_an_infinity_not_an_error():
    """Python's float ** raises OverflowError; the engine gives inf, as its other ops and NumPy do."""
    a = Value(1e-200)
    y = a**-2  # 1e400
    assert y.data == math.inf
    y.backward()
    assert a.grad == -math.inf  # -2 * a ** -3
    assert (Value(-1e-200) ** -3).data == -math.inf  # an odd power keeps the sign
    assert (Value(-1e-200) ** -2).data == math.inf


def test_backward_is_the_plain_chain_rule_loop_to_the_last_bit():
    # the loop engine.backward runs is tuned for speed; it must do exactly what the plain loop does
    def graph():
        xs = [Value(v) for v in (0.3, -1.7, 2.2, 0.9)]
        m = Value.mean(xs)
        c = [x - m for x in xs]
        r = (Value.mean([v**2 for v in c]) + 1e-3) ** -0.5
        return Value.dot([(v * r).tanh() * x for v, x in zip(c, xs)], [0.5, -1.0, 2.0, 0.25]).exp() / 3.0

    tuned = graph()
    tuned.backward()
    plain = graph()
    order = topological_order(plain)
    plain.grad = 1.0
    for node in reversed(order):
        for child, d in zip(node.children, local_grads(node)):
            child.grad += d * node.grad
    assert [v.grad for v in topological_order(tuned)] == [v.grad for v in order]


def test_every_exponent_is_an_op_that_carries_it():
    a = Value(1.7)
    one, almost_one = a**1.0, a**1.0000001  # both print as "**1" to six digits
    assert one.op == "**1" and almost_one.op == "**1.0000001"
    for node, p in ((one, 1.0), (almost_one, 1.0000001), (a**-0.5, -0.5)):
        assert local_grads(node) == pytest.approx((p * 1.7 ** (p - 1),), rel=1e-15)


def test_a_nan_exponent_gives_a_nan_value_and_derivative():
    a = Value(2.0)
    power = a ** float("nan")
    assert power.op == "**nan" and math.isnan(power.data) and math.isnan(local_grads(power)[0])


@pytest.mark.parametrize("divisor", [0, 0.0, Value(0.0, label="std")])
def test_a_division_by_zero_names_the_division_not_the_power_it_is_made_of(divisor):
    with pytest.raises(DomainError) as info:
        Value(1.0, label="num") / divisor
    assert str(info.value).startswith("'/': division by zero") and "'num'" in str(info.value)
    assert info.value.op == "/" and "**" not in str(info.value)


def test_the_engine_code_lessons_show_fits_60_columns():
    """Lesson 1 shows each op's class and Value.backward, read live; 60 columns is the narrowest terminal."""
    from microgradnorm import engine
    from microgradnorm.lessons.source import source_of

    ops = [c for c in vars(engine).values() if isinstance(c, type) and issubclass(c, engine.Op) and c is not engine.Op]
    assert len(ops) >= 12
    for obj in [*ops, engine.Value.backward]:
        wide = [line for line in source_of(obj).splitlines() if len(line) > 60]
        assert not wide, (obj, wide)
