"""A scalar reverse-mode autograd engine, small enough to read in one sitting.

Every number is a :class:`Value`. An op (one small class below) makes a new
Value that remembers the op and its inputs, its ``children``. ``backward()``
visits the nodes from the output back to the inputs, applying the chain rule:

    child.grad += (d node / d child) * node.grad

Each op class holds its ``forward`` and its local derivatives side by side.
Ops made of other ops are one line over them: ``a / b`` is ``a * b ** -1``.
What differs from micrograd, and why:

* children are an ordered tuple, not a set, so ``x * x`` keeps both edges;
* the topological order is built with a stack, not recursion, so a graph a
  million nodes deep works;
* every node has an id in creation order, so drawings and tests are stable;
* ``Value.sum`` is one node with n children, so a mean over 768 numbers is one
  node, not a chain of 767 additions.

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from numbers import Real
from operator import attrgetter
from typing import Union

__all__ = ["DomainError", "Op", "Value", "cycle_collector_paused", "local_grads", "tags", "topological_order"]


class DomainError(ValueError):
    """An op was given a value outside its domain: log(0), sqrt(-1), 1/0. Besides the
    (English) message it carries ``op`` (the op's symbol), ``value`` (the bad input)
    and ``node`` (the Value that held it, when known)."""

    def __init__(self, message: str, *, op: str = "", value: float = math.nan, node: Value | None = None) -> None:
        super().__init__(message)
        self.op, self.value, self.node = op, value, node


# ---- the ops: each forward, and beside it the local derivatives d out / d input ------------


class Op:
    """``forward(*inputs)`` is the output's value; ``derivatives(out, *inputs)`` is
    d out / d input for each input, given the output's and the inputs' values."""

    __slots__ = ()
    symbol = "?"

    def forward(self, *xs: float) -> float:
        raise NotImplementedError

    def derivatives(self, out: float, *xs: float) -> tuple[float, ...]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.symbol


# fmt: off
class Add(Op):
    symbol = "+"
    def forward(self, a, b): return a + b
    def derivatives(self, out, a, b): return 1.0, 1.0

class Sub(Op):
    symbol = "-"
    def forward(self, a, b): return a - b
    def derivatives(self, out, a, b): return 1.0, -1.0

class Mul(Op):
    symbol = "*"
    def forward(self, a, b): return a * b
    def derivatives(self, out, a, b): return b, a

class Pow(Op):
    """a ** p, for a number p that the op carries."""
    __slots__ = ("p",)
    def __init__(self, p: float): self.p = p
    def forward(self, a): return _power(a, self.p)
    def derivatives(self, out, a):
        if a == 0.0 and self.p < 1.0:  # 0 ** (p - 1) would divide by 0
            return (0.0 if self.p == 0.0 else math.inf,)
        return (self.p * _power(a, self.p - 1.0),)
    symbol = property(lambda self: "**" + _shortest(self.p))

class Sqrt(Op):
    symbol = "sqrt"
    def forward(self, a): return math.sqrt(_checked(a, a >= 0.0 or a != a, "sqrt", ">= 0"))
    def derivatives(self, out, a): return (0.5 / out if out else math.inf,)

class Exp(Op):
    symbol = "exp"
    def forward(self, a):
        try:
            return math.exp(a)
        except OverflowError:  # NumPy's answer, not an error
            return math.inf
    def derivatives(self, out, a): return (out,)

class Log(Op):
    symbol = "log"
    def forward(self, a): return math.log(_checked(a, a > 0.0, "log", "> 0"))
    def derivatives(self, out, a): return (1.0 / a,)

class Tanh(Op):
    symbol = "tanh"
    def forward(self, a): return math.tanh(a)
    def derivatives(self, out, a): return (1.0 - out * out,)

class Relu(Op):
    symbol = "relu"
    def forward(self, a): return a if a > 0.0 else 0.0
    def derivatives(self, out, a): return (1.0 if a > 0.0 else 0.0,)

class Sigmoid(Op):
    symbol = "sigmoid"
    def forward(self, a):  # exp(-|a|) never overflows
        e = math.exp(-abs(a))
        return 1.0 / (1.0 + e) if a >= 0.0 else e / (1.0 + e)
    def derivatives(self, out, a): return (out * (1.0 - out),)

class Sum(Op):
    symbol = "sum"
    def forward(self, *xs):
        total = 0.0
        for x in xs:  # left to right, as NumPy adds a short row
            total += x
        return total
    def derivatives(self, out, *xs): return (1.0,) * len(xs)

class Dot(Op):
    """sum_i a_i * b_i; the inputs are a_1 .. a_n, then b_1 .. b_n."""
    symbol = "dot"
    def forward(self, *xs):
        n = len(xs) // 2
        return SUM.forward(*[a * b for a, b in zip(xs[:n], xs[n:])])
    def derivatives(self, out, *xs):
        n = len(xs) // 2
        return xs[n:] + xs[:n]  # d/da_i = b_i and d/db_i = a_i
# fmt: on


ADD, SUB, MUL, SQRT, EXP, LOG = Add(), Sub(), Mul(), Sqrt(), Exp(), Log()
TANH, RELU, SIGMOID, SUM, DOT = Tanh(), Relu(), Sigmoid(), Sum(), Dot()


# ---- tags: names for people, given to every node made inside a block -----------------------

_tags: tuple[str | None, str | None] = (None, None)


@contextmanager
def tags(stage: str | None, label: str | None = None) -> Iterator[None]:
    """Op results made inside the block get ``stage`` and ``label``, new leaves ``stage``.
    Tags change no number. Not meant for threads.

        with tags("center", "xshift"):
            xshift = [xi - mean for xi in x]
    """
    global _tags
    saved, _tags = _tags, (stage, label)
    try:
        yield
    finally:
        _tags = saved


# ---- the Value ------------------------------------------------------------------------------

Operand = Union["Value", int, float]
_next_id = itertools.count().__next__
_data = attrgetter("data")


class Value:
    """One scalar of a computation graph: ``data`` (its value), ``grad`` (d root / d this
    node, filled in by ``backward()``), the op that made it and its ``children``."""

    __slots__ = ("_children", "_id", "_op", "data", "grad", "label", "stage")

    def __init__(
        self,
        data: float,
        children: tuple[Value, ...] = (),
        op: Op | None = None,
        *,
        label: str | None = None,
        stage: str | None = None,
    ) -> None:
        self.data = data if type(data) is float else _number(data, "Value(data)")
        self.grad = 0.0
        self._children = children
        self._op = op
        self.stage = stage if stage is not None else _tags[0]
        self.label = label if label is not None or op is None else _tags[1]  # a leaf gets no label
        self._id = _next_id()

    children = property(lambda self: self._children, doc="The op's inputs, in argument order.")
    operation = property(lambda self: self._op, doc="The Op that made this node; None for a leaf.")
    op = property(lambda self: self._op.symbol if self._op else "", doc='"*", "**2", ...; "" for a leaf.')
    id = property(lambda self: self._id, doc="Unique, increasing in creation order.")

    def __repr__(self) -> str:
        shown = [f"data={self.data:.6g}", f"grad={self.grad:.6g}"]
        shown += [f"op={self.op!r}"] if self._op else []
        shown += [f"label={self.label!r}"] if self.label else []
        return f"Value({', '.join(shown)})"

    def __add__(self, other: Operand) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        return Value(ADD.forward(self.data, other.data), (self, other), ADD)

    def __sub__(self, other: Operand) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        return Value(SUB.forward(self.data, other.data), (self, other), SUB)

    def __mul__(self, other: Operand) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        return Value(MUL.forward(self.data, other.data), (self, other), MUL)

    def __pow__(self, p: int | float) -> Value:
        if isinstance(p, Value):
            raise TypeError(f"Value ** Value is not supported: the exponent must be a number, got a Value ({p!r})")
        return _apply(Pow(_number(p, "the exponent of **")), self)

    # fmt: off
    def sqrt(self) -> Value: return _apply(SQRT, self)
    def exp(self) -> Value: return _apply(EXP, self)
    def log(self) -> Value: return _apply(LOG, self)
    def tanh(self) -> Value: return _apply(TANH, self)
    def relu(self) -> Value: return _apply(RELU, self)
    def sigmoid(self) -> Value: return _apply(SIGMOID, self)

    # ops made of other ops
    def __neg__(self) -> Value: return self * -1.0
    def __radd__(self, other: Operand) -> Value: return _value(other) + self
    def __rsub__(self, other: Operand) -> Value: return _value(other) - self
    def __rmul__(self, other: Operand) -> Value: return _value(other) * self
    def __rtruediv__(self, other: Operand) -> Value: return _value(other) / self
    # fmt: on

    def __truediv__(self, other: Operand) -> Value:
        divisor = _value(other)
        if divisor.data == 0.0:  # say "/", not the "**" of the line below
            shown = _describe(other) if isinstance(other, Value) else repr(other)
            raise DomainError(f"'/': division by zero in {_describe(self)} / {shown}", op="/", value=0.0, node=divisor)
        return self * divisor**-1

    @staticmethod
    def sum(values: Iterable[Operand]) -> Value:
        """One node with n children: their sum."""
        children = [_value(v) for v in values]
        if not children:
            raise ValueError("Value.sum needs at least one value, got an empty sequence")
        return _apply(SUM, *children)

    @staticmethod
    def dot(values: Iterable[Operand], weights: Iterable[Operand]) -> Value:
        """One node: sum_i values[i] * weights[i] (a loss ``sum(y * dy)`` in one node)."""
        a, b = [_value(v) for v in values], [_value(w) for w in weights]
        if len(a) != len(b) or not a:
            raise ValueError(f"Value.dot needs two non-empty sequences of the same length, got {len(a)} and {len(b)}")
        return _apply(DOT, *a, *b)

    @staticmethod
    def mean(values: Iterable[Operand]) -> Value:
        """Two nodes: a sum, then a multiply by 1/n."""
        children = list(values)
        return Value.sum(children) * (1.0 / len(children))

    def backward(self, grad: float = 1.0) -> None:
        """Add d(self)/d(node) * ``grad`` to ``node.grad`` for every node of the graph.
        Gradients accumulate, as in PyTorch: a second call adds the same amounts again."""
        seed = _number(grad, "backward(grad)")
        order = topological_order(self)
        # A node may pass its gradient on only once it is complete, so gradients left by an
        # earlier backward() are set aside and added back at the end: a second call then adds
        # exactly its own amounts (micrograd's would pass the old ones on again).
        earlier = [node.grad for node in order]
        if any(earlier):
            for node in order:
                node.grad = 0.0
        self.grad = seed
        with cycle_collector_paused():
            for node in reversed(order):
                op, children, g = node._op, node._children, node.grad
                if op is None:
                    continue
                if len(children) == 2:  # most nodes: unpacked, backward takes a quarter less time
                    a, b = children
                    da, db = op.derivatives(node.data, a.data, b.data)
                    a.grad += da * g
                    b.grad += db * g
                else:
                    for child, d in zip(children, local_grads(node)):
                        child.grad += d * g
        if any(earlier):
            for node, before in zip(order, earlier):
                node.grad += before

    def zero_grad(self) -> None:
        """Set ``grad`` to 0 on this node and every node it depends on."""
        for node in topological_order(self):
            node.grad = 0.0


def _apply(op: Op, *children: Value) -> Value:
    """The node ``op(*children)``; a DomainError names the node that held the bad value."""
    try:
        return Value(op.forward(*map(_data, children)), children, op)
    except DomainError as e:
        where = f"{e}; {_describe(children[0])} has value {e.value!r}"
        raise DomainError(where, op=e.op, value=e.value, node=children[0]) from None


def local_grads(node: Value) -> tuple[float, ...]:
    """d node / d child for each child of ``node``, in order (``()`` for a leaf)."""
    if node._op is None:
        return ()
    return node._op.derivatives(node.data, *map(_data, node._children))


def topological_order(roots: Value | Iterable[Value]) -> list[Value]:
    """Every node the roots depend on, each after its children. A node is made after
    its inputs, so sorting the reachable nodes by id is a topological order."""
    stack = [roots] if isinstance(roots, Value) else list(roots)
    for root in stack:
        if not isinstance(root, Value):
            raise TypeError(f"topological_order expects Values, got {type(root).__name__}")
    seen = set(stack)
    while stack:  # a stack, not recursion: no depth limit
        for child in stack.pop()._children:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return sorted(seen, key=lambda node: node._id)


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for the block. A Value graph has no reference
    cycles, yet the collector rescans every node as a large one grows: pausing it is most
    of this engine's speed over micrograd (``microgradnorm bench --engine``)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---- small helpers ---------------------------------------------------------------------------


def _number(x: object, what: str) -> float:
    if isinstance(x, Real) and not isinstance(x, bool):  # True as an activation is a bug
        return float(x)
    raise TypeError(f"{what} must be a real number (int or float), got {type(x).__name__} ({x!r})")


def _value(x: Operand) -> Value:
    return x if isinstance(x, Value) else Value(x)


def _describe(node: Value) -> str:
    label = f" '{node.label}'" if node.label else ""
    stage = f" (stage {node.stage})" if node.stage else ""
    return f"node #{node.id}{label}{stage}"


def _power(a: float, p: float) -> float:
    """``a ** p`` for floats: a DomainError where it is not a real number, inf where it overflows."""
    if a == 0.0 and p < 0:
        raise DomainError(f"'**': 0 ** {p:g} is a division by zero", op="**", value=a)
    if a < 0.0 and not p.is_integer():
        raise DomainError(f"'**': a negative number to the power {p:g} is not real", op="**", value=a)
    try:
        return a**p
    except OverflowError:  # Python raises where NumPy, and every other op here, gives inf
        return -math.inf if a < 0.0 and p % 2 == 1 else math.inf


def _checked(a: float, ok: bool, op: str, rule: str) -> float:
    if not ok:
        raise DomainError(f"'{op}': the input must be {rule}", op=op, value=a)
    return a


def _shortest(p: float) -> str:
    """The fewest digits that name p exactly: "2", "-0.5", "1.0000001"."""
    return f"{p:g}" if float(f"{p:g}") == p else repr(p)
