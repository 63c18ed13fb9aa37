"""How a node of the graph is written: its name, its op's symbol, the expression that made it, its local derivatives.

One place for the words every view uses: the drawings' boxes and circles (:mod:`microgradnorm.viz`), the
HTML page's lines (``xhat[2] = xshift[2]·rstd``, ``∂xhat[2]/∂rstd = xshift[2]``), the lessons' tables and
their text drawing of a graph (``mean ← sum(x[0..3])·1/n``). A node is named by the built norm (``xhat[2]``),
else after the element of x it was made from (``xshift²[2]``, ``γ·xhat[2]``), else by its label (``Σx``,
``var[0]+eps``), else (a plain Value graph) by its label or its op and a count (``mul_2``). No numbers here:
the views put them beside these words.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from microgradnorm.engine import Value
from microgradnorm.norms import GROUP_NODES, PARAM_NODES, NormGraph
from microgradnorm.numfmt import fmt

__all__ = ["display_names", "expression", "formula", "local_symbol", "op_symbol", "split_index"]

_OP_SYMBOLS = {"+": "+", "-": "−", "*": "×", "sum": "Σ", "sqrt": "√", "**2": "x²", "**-1": "1/x"}


_INDEX = re.compile(r"\[(\d+(?:,\d+)*)\]")  # an index in a name: [2], [1,0]


def split_index(name: str) -> tuple[str, str]:
    """A name without its index, and the index: ``"xhat[1,2]"`` -> ``("xhat", "[1,2]")``, ``"var[0]+eps"`` ->
    ``("var+eps", "[0]")``, ``"rstd"`` -> ``("rstd", "")``."""
    found = list(_INDEX.finditer(name))
    if not found:
        return name, ""
    start, stop = found[-1].span()
    return name[:start] + name[stop:], name[start:stop]


def display_names(order: list[Value], graph: NormGraph | None) -> list[str]:
    """A name for every node: the norm's own (``xhat[2]``), else its label, indexed where it repeats.

    A node made from one element of x carries that element's index (``xshift²[2]``,
    ``γ·xhat[2]``), a dy of the loss the index of the y it multiplies, and a node
    made once per row or column its number (``Σx[1]``, when there are several),
    written on the input its label starts with (``var[1]+eps``). Without a built
    norm, nodes are named by their labels (see :func:`_plain_names`).
    """
    if graph is None:
        return _plain_names(order)
    names: list[str | None] = [graph.name_of(node) for node in order]
    position = {id(node): k for k, node in enumerate(order)}
    _name_elementwise(order, names, position)
    plain = _plain_names(order)
    repeats = Counter((node.stage, node.label) for k, node in enumerate(order) if names[k] is None)
    seen: Counter[tuple[str | None, str | None]] = Counter()
    for k, node in enumerate(order):
        if names[k] is None:
            key = (node.stage, node.label)
            name = _summed(node, names, position) or plain[k]
            if repeats[key] == len(graph.groups) > 1:
                kids = [names[position[id(c)]] or "" for c in node.children]
                name = _numbered(name, f"[{seen[key]}]", kids)
            names[k] = name
            seen[key] += 1
    return names  # type: ignore[return-value]


# An unnamed node of a plain Value graph is called after its op and numbered: mul_1, add_2, leaf_1.
_OP_WORDS = {"+": "add", "-": "sub", "*": "mul", "**2": "sq", "**-1": "inv", "": "leaf"}


def _plain_names(order: list[Value]) -> list[str]:
    """A name for every node of a graph without a built norm: its label (``a#1``, ``a#2`` when several nodes
    share it), else its op and a count (``mul_2``)."""
    labels = Counter(node.label for node in order if node.label)
    seen: Counter[str] = Counter()
    names = []
    for node in order:
        op = node.op if node.children else ""
        word = node.label or _OP_WORDS.get(op) or ("pow" if op.startswith("**") else re.sub(r"\W", "", op) or "op")
        seen[word] += 1
        names.append(word if node.label and labels[word] == 1 else f"{word}{'#' if node.label else '_'}{seen[word]}")
    return names


def _numbered(name: str, index: str, kids: list[str]) -> str:
    """``name`` with a group's ``index``: on the input it starts with (``var[0]+eps``), else at its end."""
    for kid in kids:
        base, idx = split_index(kid)
        if idx == index and re.match(re.escape(base) + r"(?![A-Za-z0-9_(])", name):
            return base + index + name[len(base) :]
    return name + index


def _name_elementwise(order: list[Value], names: list[str | None], position: dict[int, int]) -> None:
    """Name the nodes made from one element of x alone, and the loss's dy, after that element."""
    element: dict[int, str] = {}  # id(node) -> "[i]" for a node made from x[i] alone
    for k, node in enumerate(order):
        name = names[k]
        if name is not None:
            base, idx = split_index(name)
            if idx and base not in GROUP_NODES and base not in PARAM_NODES:
                element[id(node)] = idx
            continue
        indices = {element[id(c)] for c in node.children if id(c) in element}
        if len(indices) == 1 and node.op != "sum":  # a sum is its group's, even over one value (Σx[0])
            element[id(node)] = indices.pop()
            names[k] = (node.label or "") + element[id(node)]
    for node in order:  # the loss sum(y * dy): its weights take the index of their y
        if node.op == "dot":
            half = len(node.children) // 2
            for y, w in zip(node.children[:half], node.children[half:]):
                if names[position[id(w)]] is None and id(y) in element:
                    names[position[id(w)]] = (w.label or "") + element[id(y)]


def _summed(node: Value, names: list[str | None], position: dict[int, int]) -> str:
    """``Σxshift²`` for a sum whose terms all share a name (as lesson 4's tables write it), else the label."""
    if node.op == "sum":
        bases = {split_index(names[position[id(c)]] or "")[0] for c in node.children}
        if len(bases) == 1 and "" not in bases:
            return "Σ" + bases.pop()
    return node.label or ""


def op_symbol(op: str) -> str:
    """How an op is written in its circle: ``×`` for ``*``, ``Σ`` for ``sum``, ``1/x`` for ``**-1``."""
    if op in _OP_SYMBOLS:
        return _OP_SYMBOLS[op]
    if op.startswith("**"):
        return "x^" + op[2:]
    return op


def _power(op: str) -> float | None:
    return float(op[2:]) if op.startswith("**") else None


def local_symbol(op: str, out: str, kids: Sequence[str], slot: int) -> str | None:
    """d out / d kids[slot] written with the names of the nodes (None: an op without a rule here)."""
    p = _power(op)
    if op in ("+", "sum"):
        return "1"
    if op == "-":
        return "1" if slot == 0 else "−1"
    if op == "*":
        return kids[1 - slot]
    if op == "dot":  # sum_i a_i * b_i: the partner of each term
        return kids[(slot + len(kids) // 2) % len(kids)]
    if p is not None:
        if p == 2:
            return f"2·{kids[0]}"
        if p == -1:
            return f"−1/{kids[0]}²"
        return f"{p:g}·{kids[0]}^{p - 1:g}"
    return {
        "sqrt": f"1/(2·{out})",
        "exp": out,
        "log": f"1/{kids[0]}",
        "tanh": f"1 − {out}²",
        "sigmoid": f"{out}·(1 − {out})",
        "relu": f"1 if {kids[0]} > 0, else 0",
    }.get(op)


# ---- what a node is computed from ------------------------------------------------------------------------

_SUPERSCRIPT = {2.0: "²", 3.0: "³", -2.0: "⁻²", 0.5: "^½"}
_MANY = 4  # inputs listed in full; more are shortened to "first, second, …, last"


def expression(node: Value, out: str, kids: Sequence[str]) -> str:
    """How ``node`` was computed, by name: ``xhat[2] = xshift[2]·rstd``; a leaf, or a node whose name already
    says it (``mean[0]²``), is just its name."""
    made = _applied(node.op, [(kid, False) for kid in kids]) if kids else out
    return out if made.replace(" ", "") == out.replace(" ", "") else f"{out} = {made}"


def formula(node: Value, names: Mapping[int, str]) -> str:
    """What ``node`` is computed from: its op over its inputs, each written by its name in ``names`` or, when it
    has none there, written out in turn (``sum(x[0..3])·1/n``); "" for a leaf."""
    return _written(node, names, top=True)[0] if node.children else ""


def _written(node: Value, names: Mapping[int, str], top: bool = False) -> tuple[str, bool]:
    """``node`` as text, and whether that text is a sum or difference (bracketed inside a product or power)."""
    if not top and id(node) in names:
        return names[id(node)], False
    if not node.children:
        return node.label or fmt(node.data, 4), False
    return _applied(node.op, [_written(c, names) for c in node.children]), node.op in ("+", "-")


def _applied(op: str, args: list[tuple[str, bool]]) -> str:
    """``op`` over its inputs ``args`` (each a text, and whether it is a sum or difference written out)."""
    texts = [text for text, _compound in args]
    tight = [f"({text})" if compound else text for text, compound in args]
    p = _power(op)
    if op in ("+", "-"):
        return f"{texts[0]} {'+' if op == '+' else '−'} {tight[1]}"
    if op == "*":
        return "·".join(tight)
    if p == -1:
        return f"1/{tight[0]}"
    if p is not None:
        return tight[0] + _SUPERSCRIPT.get(p, f"^{p:g}")
    if op == "sum":
        return f"sum({_ranges(texts)})"
    if op == "dot":  # sum_i a_i * b_i
        half = len(texts) // 2
        return _listed([f"{a}·{b}" for a, b in zip(texts[:half], texts[half:])], " + ")
    return f"{op}({', '.join(texts)})"


def _listed(items: Sequence[str], joiner: str = ", ") -> str:
    shown = items if len(items) <= _MANY else [items[0], items[1], "…", items[-1]]
    return joiner.join(shown)


def _ranges(args: list[str]) -> str:
    """``x[0], x[1], x[2]`` as ``x[0..2]``: inputs that differ only in one index, counting up by one."""
    shortened = _as_range(args) if len(args) >= 3 else None
    return shortened if shortened is not None else _listed(args)


def _as_range(args: list[str]) -> str | None:
    matches = [list(_INDEX.finditer(a)) for a in args]
    if not all(len(m) == 1 for m in matches):
        return None
    spans = [m[0].span() for m in matches]
    if len({a[:i] + a[j:] for a, (i, j) in zip(args, spans)}) != 1:  # the same text around the index
        return None
    indices = [tuple(int(k) for k in m[0].group(1).split(",")) for m in matches]
    if len({len(i) for i in indices}) != 1:
        return None
    varying = [k for k in range(len(indices[0])) if len({i[k] for i in indices}) > 1]
    if len(varying) != 1 or any(b[varying[0]] - a[varying[0]] != 1 for a, b in itertools.pairwise(indices)):
        return None
    k = varying[0]
    shown = [str(i) for i in indices[0]]
    shown[k] = f"{indices[0][k]}..{indices[-1][k]}"
    start, stop = spans[0]
    return f"{args[0][:start]}[{','.join(shown)}]{args[0][stop:]}"
