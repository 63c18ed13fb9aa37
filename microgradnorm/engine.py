"""A scalar reverse-mode autograd engine, small enough to read in one sitting.

Each op is a small class, its forward beside its local derivatives. A Value
remembers the op that made it and its inputs, its ``children``; ``backward()``
applies the chain rule from the output back. Unlike micrograd, children are an
ordered tuple (``x * x`` keeps both edges), the topological order needs no
recursion, and ``Value.sum`` is one node. It imports nothing from the package.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from numbers import Real
from operator import attrgetter, mul

__all__ = ["DomainError", "Op", "Value", "cycle_collector_paused", "local_grads", "tags", "topological_order"]


class DomainError(ValueError):
    """An input outside an op's domain (log(0), 1/0): ``op``, ``value`` and ``node`` say which."""

    def __init__(self, message: str, *, op: str = "", value: float = math.nan, node: Value | None = None) -> None:
        super().__init__(message)
        self.op, self.value, self.node = op, value, node


# fmt: off
class Op:
    """forward(*xs) is the op's output; derivatives(out, *xs) is d out / d x for each input x."""
    __slots__ = ()
    symbol, domain = "?", ""  # domain: the inputs allowed, if not all

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
    def __init__(self, p): self.p = p
    @property
    def symbol(self):  # "**2", "**-0.5"
        return f"**{self.p!r}".removesuffix(".0")
    def forward(self, a): return _power(a, self.p)
    def derivatives(self, out, a):
        if a == 0.0 and self.p < 1.0:  # 0 ** (p - 1) is 1/0
            return (0.0 if self.p == 0.0 else math.inf,)
        return (self.p * _power(a, self.p - 1.0),)
class Sqrt(Op):
    symbol, domain = "sqrt", "the input must be >= 0"
    def forward(self, a): return math.sqrt(a)
    def derivatives(self, out, a):
        return (0.5 / out if out else math.inf,)

class Log(Op):
    symbol, domain = "log", "the input must be > 0"
    def forward(self, a): return math.log(a)
    def derivatives(self, out, a): return (1.0 / a,)
class Exp(Op):
    symbol = "exp"
    def forward(self, a):
        try:
            return math.exp(a)
        except OverflowError:  # NumPy's inf, not an error
            return math.inf
    def derivatives(self, out, a): return (out,)

class Tanh(Op):
    symbol = "tanh"
    def forward(self, a): return math.tanh(a)
    def derivatives(self, out, a): return (1.0 - out * out,)
class Relu(Op):
    symbol = "relu"
    def forward(self, a): return a if a > 0.0 else 0.0
    def derivatives(self, out, a): return (float(a > 0.0),)
class Sigmoid(Op):
    symbol = "sigmoid"
    def forward(self, a):  # exp(-|a|) cannot overflow
        e = math.exp(-abs(a))
        return (1.0 if a >= 0.0 else e) / (1.0 + e)
    def derivatives(self, out, a): return (out * (1 - out),)

class Sum(Op):
    symbol = "sum"
    def forward(self, *xs):
        total = 0.0
        for x in xs:  # in order, as NumPy adds a short row
            total += x
        return total
    def derivatives(self, out, *xs): return (1.0,) * len(xs)
class Dot(Op):
    """sum_i a_i * b_i of the inputs a_1..a_n, b_1..b_n."""
    symbol = "dot"
    def forward(self, *xs):
        n = len(xs) // 2
        return SUM.forward(*map(mul, xs[:n], xs[n:]))
    def derivatives(self, out, *xs):
        n = len(xs) // 2
        return xs[n:] + xs[:n]  # d/da_i = b_i, d/db_i = a_i
# fmt: on


ADD, SUB, MUL, SQRT, EXP, LOG = Add(), Sub(), Mul(), Sqrt(), Exp(), Log()
TANH, RELU, SIGMOID, SUM, DOT = Tanh(), Relu(), Sigmoid(), Sum(), Dot()
_tags: tuple[str | None, str | None] = (None, None)  # (stage, label), set by tags()
_next_id = itertools.count().__next__
_data = attrgetter("data")


@contextmanager
def tags(stage: str | None, label: str | None = None) -> Iterator[None]:
    """Nodes made inside the block get ``stage``, op results also ``label``: names, not numbers."""
    global _tags
    saved, _tags = _tags, (stage, label)
    try:
        yield
    finally:
        _tags = saved


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause the cycle collector, which would rescan every node as a graph grows."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Value:
    """One scalar of a graph: ``data``, ``grad`` (d root / d it), its ``operation`` and ``children``."""

    __slots__ = ("children", "data", "grad", "id", "label", "operation", "stage")

    def __init__(
        self, data: float, children=(), op: Op | None = None, label: str | None = None, stage: str | None = None
    ) -> None:
        self.data = data if type(data) is float else _number(data, "Value(data)")  # type() first: 25% faster
        self.grad, self.children, self.operation = 0.0, children, op
        self.stage = stage if stage is not None else _tags[0]
        self.label = label if label is not None or op is None else _tags[1]  # not on leaves
        self.id = _next_id()  # unique, increasing in creation order

    op = property(lambda self: self.operation.symbol if self.operation else "", doc='"*", "**2"; "" for a leaf.')

    def __repr__(self) -> str:
        more = (f", op={self.op!r}" if self.operation else "") + (f", label={self.label!r}" if self.label else "")
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g}{more})"

    # fmt: off
    def __add__(self, other: Value | float) -> Value: return _binary(ADD, self, other)
    def __sub__(self, other: Value | float) -> Value: return _binary(SUB, self, other)
    def __mul__(self, other: Value | float) -> Value: return _binary(MUL, self, other)
    def __pow__(self, p: float) -> Value: return _apply(Pow(_number(p, "the exponent")), self)
    def sqrt(self) -> Value: return _apply(SQRT, self)
    def exp(self) -> Value: return _apply(EXP, self)
    def log(self) -> Value: return _apply(LOG, self)
    def tanh(self) -> Value: return _apply(TANH, self)
    def relu(self) -> Value: return _apply(RELU, self)
    def sigmoid(self) -> Value: return _apply(SIGMOID, self)
    def __neg__(self) -> Value: return self * -1.0  # these are made of other ops
    def __radd__(self, other: float) -> Value: return _value(other) + self
    def __rsub__(self, other: float) -> Value: return _value(other) - self
    def __rmul__(self, other: float) -> Value: return _value(other) * self
    def __rtruediv__(self, other: float) -> Value: return _value(other) / self
    # fmt: on

    def __truediv__(self, other: Value | float) -> Value:
        divisor = _value(other)
        if divisor.data == 0.0:  # name the "/", not the "**" below
            where = f"{_describe(self)} / {_describe(divisor)}"
            raise DomainError(f"'/': division by zero in {where}", op="/", value=0.0, node=divisor)
        return self * divisor**-1  # made of other ops

    @staticmethod
    def sum(values: Iterable[Value | float]) -> Value:
        """One node with n children: their sum."""
        children = [_value(v) for v in values]
        if not children:
            raise ValueError("Value.sum needs at least one value, got an empty sequence")
        return _apply(SUM, *children)

    @staticmethod
    def dot(values: Iterable[Value | float], weights: Iterable[Value | float]) -> Value:
        """One node: sum_i values[i] * weights[i] (a loss ``sum(y * dy)`` in one node)."""
        a, b = [_value(v) for v in values], [_value(w) for w in weights]
        if len(a) != len(b) or not a:
            raise ValueError(f"Value.dot needs two non-empty sequences of the same length, got {len(a)} and {len(b)}")
        return _apply(DOT, *a, *b)

    @staticmethod
    def mean(values: Iterable[Value | float]) -> Value:
        """Two nodes: a sum, then a multiply by 1/n."""
        children = list(values)
        return Value.sum(children) * (1.0 / len(children))

    @cycle_collector_paused()
    def backward(self, grad: float = 1.0) -> None:
        """Add d self / d node * ``grad`` to every node's ``grad``."""
        order = topological_order(self)
        # An earlier call's grads are set aside and added back
        # after: a node must pass on this call's grad alone.
        earlier = [node.grad for node in order]
        for node in order:
            node.grad = 0.0
        self.grad = _number(grad, "backward(grad)")
        for node in reversed(order):
            op, out, g = node.operation, node.data, node.grad
            kids = node.children
            if len(kids) == 2:  # a binary op, unpacked
                a, b = kids
                da, db = op.derivatives(out, a.data, b.data)
                a.grad += da * g
                b.grad += db * g
            elif kids:  # a leaf has none
                for kid, d in zip(kids, local_grads(node)):
                    kid.grad += d * g
        for node, before in zip(order, earlier):
            node.grad += before

    def zero_grad(self) -> None:
        """Set ``grad`` to 0 on this node and every node it depends on."""
        for node in topological_order(self):
            node.grad = 0.0


def _binary(op: Op, a: Value, b: Value | float) -> Value:
    """The node ``op(a, b)``: _apply unrolled for +, - and *, which makes build+backward 10% faster."""
    b = b if isinstance(b, Value) else Value(b)
    return Value(op.forward(a.data, b.data), (a, b), op)


def _apply(op: Op, *children: Value) -> Value:
    """The node ``op(*children)``; a DomainError if the input is outside op's domain."""
    try:
        return Value(op.forward(*map(_data, children)), children, op)
    except ValueError as e:  # from math.log(0.0), math.sqrt(-1.0) or _power
        bad = children[0]
        message = f"'{op.symbol}': {op.domain or e}; {_describe(bad)} has value {bad.data!r}"
        raise DomainError(message, op=op.symbol, value=bad.data, node=bad) from None


def local_grads(node: Value) -> tuple[float, ...]:
    """d node / d child for each child of ``node``, in order (``()`` for a leaf)."""
    return node.operation.derivatives(node.data, *map(_data, node.children)) if node.operation else ()


def topological_order(roots: Value | Iterable[Value]) -> list[Value]:
    """Every node the roots depend on, each after its children: a node is made after them."""
    stack = [roots] if isinstance(roots, Value) else list(roots)
    seen = set(stack)
    while stack:  # a stack, not recursion: no depth limit
        for child in stack.pop().children:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return sorted(seen, key=attrgetter("id"))


def _number(x: object, what: str) -> float:
    if isinstance(x, Real) and not isinstance(x, bool):  # True as an activation is a bug
        return float(x)
    raise TypeError(f"{what} must be a number (int or float), got {type(x).__name__} ({x!r})")


def _value(x: Value | float) -> Value:
    return x if isinstance(x, Value) else Value(x)


def _describe(node: Value) -> str:
    label = f" '{node.label}'" if node.label else ""
    return f"node #{node.id}{label}" + (f" (stage {node.stage})" if node.stage else "")


def _power(a: float, p: float) -> float:
    if a == 0.0 and p < 0:
        raise ValueError(f"0 ** {p:g} is a division by zero")
    if a < 0.0 and not p.is_integer():
        raise ValueError(f"a negative number to the power {p:g} is not real")
    try:
        return a**p
    except OverflowError:  # Python raises where NumPy and the other ops give inf
        return -math.inf if a < 0.0 and p % 2 == 1 else math.inf
