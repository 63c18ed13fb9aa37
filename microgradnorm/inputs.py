"""Reading a norm's input: nested lists to flat Values, the groups a statistic is taken over, clear errors.

:mod:`microgradnorm.norms` is the maths; this module is everything before it.
A norm takes x as nested lists (or a NumPy array), gamma and beta as flat lists;
it needs x flat, in C order, with the flat indices of each normalization group
(a row, a column, a channel, a group of channels) and the parameter index of
each element. Each refusal is a typed error (:mod:`microgradnorm.errors`) that
names the argument, what was expected and what was given.

Which elements share a statistic is a :class:`Layout`: the statistics of x are
taken over ``axes`` of a C-order view of x (the view is x itself except for
GroupNorm, whose [N, C, ...] is seen as [N, G, C/G * ...]).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from microgradnorm.engine import Value, tags
from microgradnorm.errors import N_, InputError, InputTypeError, Phrase

__all__ = [
    "CHANNELS",
    "CHANNEL_GROUPS",
    "ROWS",
    "Inputs",
    "Layout",
    "check_eps",
    "check_int",
    "check_num_groups",
    "flatten",
    "read",
]

VARIANCE_FORMS = ("two_pass", "naive")


@dataclass(frozen=True)
class Layout:
    """Which elements of x share a statistic, and which axis gamma and beta run along.

    ``ranks`` maps each accepted rank of x to how it is written ("[N][D]");
    ``view(shape, groups)`` is (the C-order view of x the statistics are taken on,
    the axes of that view they reduce); ``param_word(ndim)`` says what one
    entry of gamma scales; ``param_axis(ndim)`` is the axis of x
    that gamma and beta run along; ``group_name(shape, r)`` names group r.
    """

    ranks: dict[int, str]
    view: Callable[[tuple[int, ...], int | None], tuple[tuple[int, ...], tuple[int, ...]]]
    param_axis: Callable[[int], int]
    group_name: Callable[[tuple[int, ...], int], Phrase]
    param_word: Callable[[int], Phrase]  # what one gamma scales, for errors: "feature", "channel"

    def groups(self, shape: tuple[int, ...], num_groups: int | None = None) -> list[list[int]]:
        """The flat (C-order) indices of x in each group, groups in C order of the kept axes."""
        vshape, axes = self.view(shape, num_groups)
        if axes == tuple(range(len(vshape) - len(axes), len(vshape))):  # trailing axes: contiguous runs
            n = math.prod(vshape[len(vshape) - len(axes) :])
            return [list(range(k, k + n)) for k in range(0, math.prod(vshape), n)]
        kept = [a for a in range(len(vshape)) if a not in axes]
        index: dict[tuple[int, ...], list[int]] = {}
        for k, idx in enumerate(itertools.product(*map(range, vshape))):
            index.setdefault(tuple(idx[a] for a in kept), []).append(k)
        return list(index.values())

    def param_of(self, shape: tuple[int, ...]) -> list[int]:
        """The index into gamma and beta of each element of x (flat, C order)."""
        axis = self.param_axis(len(shape))
        inner = math.prod(shape[axis + 1 :])
        return [(k // inner) % shape[axis] for k in range(math.prod(shape))]


def _rows_view(shape: tuple[int, ...], groups: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return shape, (len(shape) - 1,)


def _row_name(shape: tuple[int, ...], r: int) -> Phrase:
    # Translators: the group a statistic is taken over, shown as {group} in the errors of the sqrt stage
    return Phrase(N_("the input")) if len(shape) == 1 else Phrase(N_("row {r}"), r=r)


def _channels_view(shape: tuple[int, ...], groups: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return shape, (0,) if len(shape) == 2 else (0, *range(2, len(shape)))


def _channel_name(shape: tuple[int, ...], r: int) -> Phrase:
    return Phrase(N_("column {r}"), r=r) if len(shape) == 2 else Phrase(N_("channel {r}"), r=r)


def _channel_groups_view(shape: tuple[int, ...], groups: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    g = groups or 1
    return (shape[0], g, math.prod(shape[1:]) // g), (2,)


def _channel_group_name(shape: tuple[int, ...], r: int) -> Phrase:
    return Phrase(N_("group {r}"), r=r)


def _feature(ndim: int) -> Phrase:
    return Phrase(N_("feature"))


def _channel(ndim: int) -> Phrase:
    return Phrase(N_("channel")) if ndim > 2 else _feature(ndim)


# LayerNorm, RMSNorm: each row over its own features.
ROWS = Layout({1: "[D]", 2: "[N][D]"}, _rows_view, lambda ndim: ndim - 1, _row_name, _feature)
# BatchNorm: each column (or channel) over the batch (and H, W).
CHANNELS = Layout({2: "[N][D]", 4: "[N][C][H][W]"}, _channels_view, lambda ndim: 1, _channel_name, _channel)
# GroupNorm: each example's group of C/G channels (and their positions).
CHANNEL_GROUPS = Layout(
    {2: "[N][C]", 3: "[N][C][L]", 4: "[N][C][H][W]"},
    _channel_groups_view,
    lambda ndim: 1,
    _channel_group_name,
    lambda ndim: Phrase(N_("channel")),
)


@dataclass(frozen=True)
class Inputs:
    """A norm's checked inputs: x as flat Values, its groups, gamma and beta as leaves (or None)."""

    x: list[Value]
    shape: tuple[int, ...]
    groups: list[list[int]]  # the flat indices of x in each normalization group
    param_of: list[int]  # the index into gamma and beta of each element of x
    gamma: list[Value] | None
    beta: list[Value] | None
    eps: float
    function: str  # the public name, for errors: "layer_norm"
    layout: Layout
    num_groups: int | None = None

    @property
    def kind(self) -> str:
        """The registry's name of the norm: its function's name without the underscore ("layernorm")."""
        return self.function.replace("_", "")

    def group_name(self, r: int) -> Phrase:
        """How an error names group r: 'the input', 'row 2', 'column 1', 'channel 0'."""
        return self.layout.group_name(self.shape, r)

    def grouped(self, values: list[Value]) -> list[list[Value]]:
        """``values`` (one per element of x) as one list per group."""
        return [[values[k] for k in group] for group in self.groups]

    def ungrouped(self, grouped: list[list[Value]]) -> list[Value]:
        """The inverse of :meth:`grouped`: one flat list in the C order of x."""
        flat: list[Value] = [None] * len(self.x)  # type: ignore[list-item]
        for group, values in zip(self.groups, grouped):
            for k, v in zip(group, values):
                flat[k] = v
        return flat


def read(
    layout: Layout,
    function: str,
    x: Any,
    gamma: Any,
    beta: Any,
    eps: object,
    variance: str = "two_pass",
    num_groups: int | None = None,
    shift: bool = True,
) -> Inputs:
    """Check and flatten a norm's arguments (eps, variance, x, num_groups, gamma, beta, in that order).

    Inputs already read pass through as they are (BatchNorm and GroupNorm read
    theirs, then run LayerNorm's lines on them).
    """
    if isinstance(x, Inputs):
        return x
    eps = check_eps(eps)
    if variance not in VARIANCE_FORMS:
        raise InputError(
            N_("{argument}: expected one of {expected}, got {given}"),
            argument="variance",
            expected=", ".join(VARIANCE_FORMS),
            given=repr(variance),
        )
    flat, shape = flatten(x, "x")
    if len(shape) not in layout.ranks:
        wanted = " or ".join(f"{r}-D {s}" for r, s in layout.ranks.items())
        raise InputError(
            N_("{argument}: {function} expects a {expected} input, got {given}"),
            argument="x",
            function=function,
            expected=wanted,
            given=f"{len(shape)}-D with shape {list(shape)}",
        )
    if num_groups is not None:
        check_num_groups(num_groups, shape[1])
    what = layout.param_word(len(shape))
    size = shape[layout.param_axis(len(shape))]
    with tags("input"):  # leaves made here, so a caller's own Values stay as they are
        xs = [v if isinstance(v, Value) else Value(v, label="x") for v in flat]
    if not shift and beta is not None:
        raise InputError(
            N_("{argument}: {function} has no shift, so expected None, got {given}"),
            argument="beta",
            function=function,
            given=type(beta).__name__,
        )
    stage = "affine" if shift else "scale"  # the stage gamma and beta are leaves of
    gammas = _params(gamma, "gamma", size, what, stage)
    betas = _params(beta, "beta", size, what, stage)
    groups = layout.groups(shape, num_groups)
    return Inputs(xs, shape, groups, layout.param_of(shape), gammas, betas, eps, function, layout, num_groups)


def check_num_groups(num_groups: object, channels: int) -> None:
    """An error unless num_groups is a whole number >= 1 (a NumPy integer too) that divides ``channels``."""
    if isinstance(num_groups, bool) or not isinstance(num_groups, numbers.Integral) or num_groups < 1:
        raise InputTypeError(
            N_("{argument}: expected a whole number >= 1, got {given}"), argument="num_groups", given=repr(num_groups)
        )
    if channels % num_groups:
        raise InputError(
            N_("{argument}: expected a divisor of the {expected} channels of x, got {given}"),
            argument="num_groups",
            expected=channels,
            given=num_groups,
        )


def check_int(argument: str, value: object, low: int = 1) -> int:
    """``value`` as an int, or an error unless it is a whole number >= ``low`` (a NumPy integer too): the one
    check of a count (repeats, a size, a seed) given from Python."""
    wrong_type = isinstance(value, bool) or not isinstance(value, numbers.Integral)
    if wrong_type or value < low:
        raise (InputTypeError if wrong_type else InputError)(
            N_("{argument}: expected a whole number >= {expected}, got {given}"),
            argument=argument,
            expected=low,
            given=f"{type(value).__name__} ({value!r})" if wrong_type else repr(value),
        )
    return int(value)


def check_eps(eps: object) -> float:
    """eps as a float, or an error unless it is a finite number >= 0 (a NumPy scalar too): the one check of
    eps, for the scalar builders, the vectorized path and the lessons' parameters alike."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise InputTypeError(
            N_("{argument}: expected a number >= 0, got {given}"),
            argument="eps",
            given=f"{type(eps).__name__} ({eps!r})",
        )
    value = float(eps)
    if not (value >= 0.0 and math.isfinite(value)):
        raise InputError(
            N_("{argument}: expected a finite number >= 0, got {given}"), argument="eps", given=repr(value)
        )
    return value


def _params(p: Any, name: str, size: int, what: Phrase, stage: str) -> list[Value] | None:
    if p is None:
        return None
    flat, shape = flatten(p, name)
    if len(shape) != 1 or shape[0] != size:
        raise InputError(
            N_("{argument}: expected {expected} values (one per {what}), got shape {given}"),
            argument=name,
            expected=size,
            what=what,
            given=list(shape),
        )
    return [v if isinstance(v, Value) else Value(v, label=name, stage=stage) for v in flat]


# ---- nested sequences -------------------------------------------------------------------


def flatten(x: Any, name: str) -> tuple[list[Any], tuple[int, ...]]:
    """A nested sequence of numbers or Values, flat in C order, and its shape."""
    if hasattr(x, "tolist") and not isinstance(x, Value):
        x = x.tolist()  # NumPy arrays
    fast = _flat_floats(x)
    if fast is not None:
        return fast
    if not _is_sequence(x):
        _check_element(x, name, ())
        raise InputError(
            N_("{argument}: expected a sequence of numbers, got a single number ({given})"),
            argument=name,
            given=repr(x),
        )
    shape: list[int] = []
    level = x
    while _is_sequence(level):
        if len(level) == 0:
            raise InputError(
                N_("{argument}: expected a non-empty sequence, got an empty {given}"),
                argument=name,
                given=type(level).__name__,
            )
        shape.append(len(level))
        level = level[0]
    flat: list[Any] = []
    _walk(x, (), tuple(shape), name, flat)
    return flat, tuple(shape)


def _walk(node: Any, where: tuple[int, ...], shape: tuple[int, ...], name: str, flat: list[Any]) -> None:
    depth = len(where)
    here, first = name + _where(where), name + _where((0,) * depth)
    if depth == len(shape):
        if _is_sequence(node):
            raise _ragged(name, N_("{here} is a sequence, but {first} is a number"), here, first)
        flat.append(_check_element(node, name, where))
        return
    if not _is_sequence(node):
        _check_element(node, name, where)
        raise _ragged(name, N_("{here} is a number, but {first} is a sequence of {n}"), here, first, n=shape[depth])
    if len(node) != shape[depth]:
        template = N_("{here} has {given} entries, but {first} has {n}")
        raise _ragged(name, template, here, first, given=len(node), n=shape[depth])
    for i, child in enumerate(node):
        _walk(child, (*where, i), shape, name, flat)


def _ragged(name: str, detail: str, here: str, first: str, **fields: Any) -> InputError:
    return InputError(
        N_("{argument}: ragged input: {detail}"),
        argument=name,
        detail=Phrase(detail, here=here, first=first, **fields),
    )


def _flat_floats(x: Any) -> tuple[list[Any], tuple[int, ...]] | None:
    """The common case, quickly: a non-empty list of floats, or of equal-length lists of floats."""
    if type(x) is not list or not x:
        return None
    if all(type(v) is float for v in x):
        return x, (len(x),)
    if all(type(row) is list for row in x):
        d = len(x[0])
        if d and all(len(row) == d and all(type(v) is float for v in row) for row in x):
            return [v for row in x for v in row], (len(x), d)
    return None


def _is_sequence(v: Any) -> bool:
    t = type(v)
    if t is list or t is tuple:
        return True
    return t is not float and isinstance(v, Sequence) and not isinstance(v, (str, bytes))


def _check_element(v: Any, name: str, where: tuple[int, ...]) -> Any:
    t = type(v)
    if t is float or t is Value or (isinstance(v, (int, float, Value)) and t is not bool):
        return v
    raise InputTypeError(
        N_("{argument}: expected a number or a Value, got {given}"),
        argument=name + _where(where),
        given=f"{type(v).__name__} ({v!r})",
    )


def _where(idx: tuple[int, ...]) -> str:
    return "".join(f"[{i}]" for i in idx)


def unravel(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index in ``shape`` of flat (C-order) position k."""
    idx = []
    for s in reversed(shape):
        idx.append(k % s)
        k //= s
    return tuple(reversed(idx))


def nest(flat: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """A flat C-order list as nested lists of ``shape``."""
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]
