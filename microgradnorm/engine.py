"""A scalar reverse-mode autograd engine, small enough to read in one sitting.

Every number in a computation is a :class:`Value`. An op makes a new Value that
remembers its inputs (``children``, an ordered tuple) and the op's name. Calling
``backward()`` on the final Value walks the graph from the output back to the
inputs and applies the chain rule at every node:

    child.grad += (d node / d child) * node.grad

The local derivative ``d node / d child`` of each op is written right under the
op's forward, so the two can be read together. Derived ops (``a - b`` aside,
which is kept primitive so that centering is one node per element) are one-line
combinations of primitives: ``a / b`` is ``a * b ** -1``.

Compared with micrograd, which this follows in spirit:

* children are an ordered tuple, not a set, so ``x * x`` keeps both edges and
  both contributions to ``x.grad``;
* ``backward`` uses an explicit stack, so graphs millions of nodes deep work;
* every node has an id in creation order, so drawings and tests are stable;
* ``Value.sum`` is one n-ary node, so a mean over 768 numbers is one node,
  not a chain of 767 additions;
* a node stores no closure, only its op name: nodes are small (``__slots__``)
  and hold no reference cycles, so the garbage collector never frees them late.

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from numbers import Real
from operator import attrgetter
from typing import Union

__all__ = ["DomainError", "Value", "local_grads", "tags", "topological_order"]


class DomainError(ValueError):
    """An op was asked for a value outside its domain: log(0), sqrt(-1), 1/0."""


Operand = Union["Value", int, float]

_next_id = itertools.count().__next__

# (stage, label) given to every node created while a `tags` block is open.
_tags: tuple[str | None, str | None] = (None, None)


@contextmanager
def tags(stage: str | None, label: str | None = None) -> Iterator[None]:
    """Tag every node created inside the block: op results get ``stage`` and ``label``,
    new leaves (constants included) get ``stage``.

        with tags("center", "xshift"):
            xshift = [xi - mean for xi in x]

    Tags are names for people (diagrams, lessons, error messages); they change no
    number. A module-level setting, so not meant for threads building graphs at once.
    """
    global _tags
    saved = _tags
    _tags = (stage, label)
    try:
        yield
    finally:
        _tags = saved


# op name -> function(node) returning d node / d child for each child, in order.
# Every op's is registered by @_derivative beside its forward; ``**``'s, once per exponent, by _power_op.
_LOCAL_GRADS: dict[str, Callable[[Value], tuple[float, ...]]] = {}


# ops whose every local derivative is 1: backward adds out.grad to each child directly
_UNIT_OPS: set[str] = set()


def _derivative(op: str, *, all_ones: bool = False):
    """Register the function below it as the local derivative of ``op``.

    ``all_ones=True`` declares that every local derivative is 1 (sum, +), which
    lets ``backward`` skip calling the function.
    """

    def register(fn: Callable[[Value], tuple[float, ...]]):
        _LOCAL_GRADS[op] = fn
        if all_ones:
            _UNIT_OPS.add(op)
        return staticmethod(fn)

    return register


def _check_number(x: object, what: str) -> float:
    # bool is an int in Python, but True as an activation is almost always a bug.
    if isinstance(x, Real) and not isinstance(x, bool):
        return float(x)
    raise TypeError(f"{what} must be a real number (int or float), got {type(x).__name__} ({x!r})")


def _describe(node: Value) -> str:
    name = f"node #{node._id}"
    if node.label:
        name += f" '{node.label}'"
    if node.stage:
        name += f" (stage {node.stage})"
    return name


class Value:
    """One scalar in a computation graph: its value, its gradient, how it was made.

    ``data`` is the forward value, ``grad`` is d(root)/d(this node) accumulated by
    ``backward()``. ``label`` and ``stage`` are free-form tags used by the norms,
    the check, the diagrams and the lessons; they do not affect any computation.
    """

    # Seven slots and no per-node closure keep a node under 200 bytes. ``_op`` is
    # the op's name, the key of its local derivative in _LOCAL_GRADS.
    __slots__ = ("_children", "_id", "_op", "data", "grad", "label", "stage")

    def __init__(
        self,
        data: float,
        *,
        label: str | None = None,
        stage: str | None = None,
    ) -> None:
        self.data = data if type(data) is float else _check_number(data, "Value(data)")  # floats: no call
        self.grad = 0.0
        self._children: tuple[Value, ...] = ()
        self._op = ""
        self.label = label
        self.stage = stage if stage is not None else _tags[0]
        self._id = _next_id()

    # ---- read access for renderers, checks and lessons -----------------------

    @property
    def children(self) -> tuple[Value, ...]:
        """The inputs of the op that made this node, in argument order."""
        return self._children

    @property
    def op(self) -> str:
        """The op that made this node (``""`` for a leaf; ``"**2"`` for a square)."""
        return self._op

    @property
    def id(self) -> int:
        """A number unique to this node, increasing in creation order."""
        return self._id

    def __repr__(self) -> str:
        parts = [f"data={self.data:.6g}", f"grad={self.grad:.6g}"]
        if self._op:
            parts.append(f"op={self.op!r}")
        if self.label:
            parts.append(f"label={self.label!r}")
        return f"Value({', '.join(parts)})"

    # ---- primitive ops, each followed by its local derivative ----------------

    def __add__(self, other: Operand) -> Value:
        if not isinstance(other, Value):
            other = Value(other)
        return _node(self.data + other.data, (self, other), "+")

    @_derivative("+", all_ones=True)
    def _add_grads(out: Value) -> tuple[float, ...]:
        return (1.0, 1.0)

    def __sub__(self, other: Operand) -> Value:
        if not isinstance(other, Value):
            other = Value(other)
        return _node(self.data - other.data, (self, other), "-")

    @_derivative("-")
    def _sub_grads(out: Value) -> tuple[float, ...]:
        return (1.0, -1.0)

    def __mul__(self, other: Operand) -> Value:
        if not isinstance(other, Value):
            other = Value(other)
        return _node(self.data * other.data, (self, other), "*")

    @_derivative("*")
    def _mul_grads(out: Value) -> tuple[float, ...]:
        a, b = out._children
        return (b.data, a.data)

    def __pow__(self, exponent: int | float) -> Value:
        if isinstance(exponent, Value):
            raise TypeError(
                f"Value ** Value is not supported: the exponent must be a number, got a Value ({exponent!r})"
            )
        p = _check_number(exponent, "the exponent of **")
        a = self.data
        if a == 0.0 and p < 0:
            raise DomainError(f"'**': 0 ** {p:g} is a division by zero; {_describe(self)} has value {a!r}")
        if a < 0.0 and not p.is_integer():
            raise DomainError(
                f"'**': a negative number to the power {p:g} is not real; {_describe(self)} has value {a!r}"
            )
        return _node(_power(a, p), (self,), _power_op(p))

    @staticmethod
    def _pow_grads(p: float) -> Callable[[Value], tuple[float, ...]]:
        """The local derivative of ``** p``, p * a ** (p - 1) (registered per exponent by _power_op)."""

        def grads(out: Value) -> tuple[float, ...]:
            (a,) = out._children
            if a.data == 0.0 and p < 1.0:  # 0 ** (p - 1) would divide by zero
                return (0.0 if p == 0.0 else math.inf,)
            return (p * _power(a.data, p - 1.0),)

        return grads

    def exp(self) -> Value:
        try:
            e = math.exp(self.data)
        except OverflowError:
            e = math.inf
        return _node(e, (self,), "exp")

    @_derivative("exp")
    def _exp_grads(out: Value) -> tuple[float, ...]:
        return (out.data,)

    def log(self) -> Value:
        if not self.data > 0.0:
            raise DomainError(f"'log': the input must be > 0; {_describe(self)} has value {self.data!r}")
        return _node(math.log(self.data), (self,), "log")

    @_derivative("log")
    def _log_grads(out: Value) -> tuple[float, ...]:
        return (1.0 / out._children[0].data,)

    def sqrt(self) -> Value:
        if self.data < 0.0:
            raise DomainError(f"'sqrt': the input must be >= 0; {_describe(self)} has value {self.data!r}")
        return _node(math.sqrt(self.data), (self,), "sqrt")

    @_derivative("sqrt")
    def _sqrt_grads(out: Value) -> tuple[float, ...]:
        return (0.5 / out.data if out.data != 0.0 else math.inf,)

    def tanh(self) -> Value:
        return _node(math.tanh(self.data), (self,), "tanh")

    @_derivative("tanh")
    def _tanh_grads(out: Value) -> tuple[float, ...]:
        return (1.0 - out.data * out.data,)

    def relu(self) -> Value:
        return _node(self.data if self.data > 0.0 else 0.0, (self,), "relu")

    @_derivative("relu")
    def _relu_grads(out: Value) -> tuple[float, ...]:
        return (1.0 if out._children[0].data > 0.0 else 0.0,)

    def sigmoid(self) -> Value:
        a = self.data  # written so that exp never overflows
        s = 1.0 / (1.0 + math.exp(-a)) if a >= 0.0 else math.exp(a) / (1.0 + math.exp(a))
        return _node(s, (self,), "sigmoid")

    @_derivative("sigmoid")
    def _sigmoid_grads(out: Value) -> tuple[float, ...]:
        return (out.data * (1.0 - out.data),)

    @staticmethod
    def sum(values: Iterable[Operand]) -> Value:
        """One n-ary node holding the sum of ``values`` (every local derivative is 1)."""
        children = tuple(_as_value(v) for v in values)
        if not children:
            raise ValueError("Value.sum needs at least one value, got an empty sequence")
        total = 0.0
        for c in children:  # left to right, as a plain loop (and NumPy on short rows) adds
            total += c.data
        return _node(total, children, "sum")

    @_derivative("sum", all_ones=True)
    def _sum_grads(out: Value) -> tuple[float, ...]:
        return (1.0,) * len(out._children)

    @staticmethod
    def dot(values: Iterable[Operand], weights: Iterable[Operand]) -> Value:
        """One n-ary node holding sum_i values[i] * weights[i].

        Its children are the values followed by the weights; the local derivative
        for values[i] is weights[i] and for weights[i] is values[i]. A loss
        ``sum(y * dy)`` is one such node instead of n products and a sum.
        """
        a = tuple(_as_value(v) for v in values)
        b = tuple(_as_value(w) for w in weights)
        if len(a) != len(b) or not a:
            raise ValueError(f"Value.dot needs two non-empty sequences of the same length, got {len(a)} and {len(b)}")
        total = 0.0
        for u, w in zip(a, b):
            total += u.data * w.data
        return _node(total, a + b, "dot")

    @_derivative("dot")
    def _dot_grads(out: Value) -> tuple[float, ...]:
        children = out._children
        n = len(children) // 2
        return tuple(c.data for c in children[n:]) + tuple(c.data for c in children[:n])

    # ---- derived ops: one line each over the primitives ----------------------

    def __neg__(self) -> Value:
        return self * -1.0

    def __truediv__(self, other: Operand) -> Value:
        if not isinstance(other, Value):
            d = _check_number(other, "the divisor")
            if d == 0.0:
                raise DomainError(f"'/': division by zero ({_describe(self)} / 0)")
            return self * (1.0 / d)
        return self * other**-1

    def __radd__(self, other: Operand) -> Value:
        return _as_value(other) + self

    def __rsub__(self, other: Operand) -> Value:
        return _as_value(other) - self

    def __rmul__(self, other: Operand) -> Value:
        return _as_value(other) * self

    def __rtruediv__(self, other: Operand) -> Value:
        return _as_value(other) * self**-1

    @staticmethod
    def mean(values: Iterable[Operand]) -> Value:
        """The mean as two nodes: one n-ary sum, then a multiply by 1/n."""
        children = tuple(values)
        return Value.sum(children) * (1.0 / len(children))  # Value.sum refuses an empty sequence

    # ---- backpropagation ------------------------------------------------------

    def backward(self, grad: float = 1.0) -> None:
        """Add d(self)/d(node) * ``grad`` to ``node.grad`` for every node of the graph.

        Gradients accumulate, as in PyTorch: a second call adds the same amounts
        again (so every grad doubles), and several losses that share nodes can be
        backpropagated one after the other. Call :meth:`zero_grad` to start over.
        Each pass propagates only its own contribution, so intermediate nodes stay
        consistent too (micrograd's second call would corrupt them).
        """
        seed = _check_number(grad, "backward(grad)")
        order = topological_order(self)  # every node after the nodes it was computed from
        with _earlier_gradients_set_aside(order):
            self.grad = seed
            _apply_chain_rule(order)

    def zero_grad(self) -> None:
        """Set ``grad`` to 0 on this node and every node it depends on."""
        for node in topological_order(self):
            node.grad = 0.0


def _apply_chain_rule(order: list[Value]) -> None:
    """``child.grad += local * node.grad`` at every node, from the last one computed back to the leaves.

    This is micrograd's ``for v in reversed(topo): v._backward()``, which in this
    engine's terms reads::

        for node in reversed(order):
            for child, d in zip(node.children, local_grads(node)):
                child.grad += d * node.grad

    The loop below does exactly that arithmetic, in the same order, written for
    speed (backward is most of the time of a large graph's check): the table of
    local derivatives and the set of unit ops are read through local names, not
    looked up as globals per node; ops whose local derivatives are all 1 (``+``,
    ``sum``) add the gradient to each child without calling anything; nodes with
    one or two children (almost all of them) unpack them instead of zipping; and
    Python's cycle collector is paused, since these graphs have no cycles for it
    to find (see :func:`cycle_collector_paused`).
    """
    local, unit = _LOCAL_GRADS, _UNIT_OPS
    with cycle_collector_paused():
        for node in reversed(order):
            children = node._children
            if children:
                g = node.grad
                op = node._op
                if op in unit:
                    for child in children:
                        child.grad += g
                elif len(children) == 2:
                    a, b = children
                    da, db = local[op](node)
                    a.grad += da * g
                    b.grad += db * g
                elif len(children) == 1:
                    (a,) = children
                    (da,) = local[op](node)
                    a.grad += da * g
                else:
                    for child, d in zip(children, local[op](node)):
                        child.grad += d * g


@contextmanager
def _earlier_gradients_set_aside(order: list[Value]) -> Iterator[None]:
    """Run the block on zeroed gradients, then add back what the nodes held before it.

    A backward pass must propagate only its own contribution: a node's gradient is
    complete (and may be passed on to its children) only once every node computed
    from it has added to it, so gradients left by an earlier pass would be passed on
    a second time. Setting them aside keeps accumulation exact, as in PyTorch.
    """
    earlier = [node.grad for node in order] if any(map(_grad_of, order)) else None
    if earlier is not None:
        for node in order:
            node.grad = 0.0
    yield
    if earlier is not None:
        for node, before in zip(order, earlier):
            node.grad += before


_POWER_OPS: dict[float, str] = {}


def _power_op(p: float) -> str:
    """The op name of ``** p`` ("**2", "**-1", "**0.5"), its local derivative registered on first use.

    Each exponent is an op of its own, whose name is the key of its derivative in
    _LOCAL_GRADS like any other op's (a node has no slot to keep the exponent in).
    Two exponents that print alike to 6 digits get names from their full repr.
    """
    if p != p:  # a NaN is not equal to itself: use the one math.nan, which a dict finds by identity
        p = math.nan
    name = _POWER_OPS.get(p)
    if name is None:
        name = f"**{p:g}"
        if name in _LOCAL_GRADS:
            name = f"**{p!r}"
        _LOCAL_GRADS[name] = Value._pow_grads(p)
        _POWER_OPS[p] = name
    return name


def _power(a: float, p: float) -> float:
    """``a ** p``, or an infinity of the right sign where the result is too large for a float.

    Python's float power raises OverflowError there (1e-200 ** -2), where every
    other op of the engine, like NumPy, gives inf.
    """
    try:
        return a**p
    except OverflowError:
        negative = a < 0.0 and p.is_integer() and int(p) % 2 == 1
        return -math.inf if negative else math.inf


_new = object.__new__


def _node(data: float, children: tuple[Value, ...], op: str | float) -> Value:
    """Create an op's output node. No input checking: ops pass floats they computed."""
    out = _new(Value)
    out.data = data
    out.grad = 0.0
    out._children = children
    out._op = op
    out.stage, out.label = _tags
    out._id = _next_id()
    return out


def _as_value(x: Operand) -> Value:
    return x if isinstance(x, Value) else Value(x)


def local_grads(node: Value) -> tuple[float, ...]:
    """d node / d child for each child of ``node``, in order (``()`` for a leaf)."""
    if not node._children:
        return ()
    return _LOCAL_GRADS[node._op](node)


def topological_order(roots: Value | Iterable[Value]) -> list[Value]:
    """Every node the roots depend on, each after all of its children.

    A node is always created after its children (they are its inputs), so the
    creation-order ids are already a topological order: collect every node
    reachable from the roots with an explicit stack (no recursion, so depth is
    limited only by memory), then sort by id. The result is deterministic and
    reads in the order the forward pass computed the nodes.
    """
    if isinstance(roots, Value):
        roots = (roots,)
    seen: set[Value] = set()
    stack: list[Value] = []
    for root in roots:
        if not isinstance(root, Value):
            raise TypeError(f"topological_order expects Values, got {type(root).__name__}")
        if root not in seen:
            seen.add(root)
            stack.append(root)
    add, push, pop = seen.add, stack.append, stack.pop
    while stack:
        for child in pop()._children:
            if child not in seen:
                add(child)
                push(child)
    return sorted(seen, key=_by_id)


_by_id = attrgetter("_id")
_grad_of = attrgetter("grad")


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for the block, then restore it as it was.

    Value graphs hold no reference cycles (children point back, never forward,
    and nodes keep no closures), so the collector can never free any of them,
    but while a large graph is being built it rescans every node each time the
    number of objects grows by a quarter. Pausing it makes building and
    backpropagating large graphs about 15% faster and changes nothing else.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
