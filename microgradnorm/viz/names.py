"""How a node of the graph is written: its name, its op's symbol, the expression that made it, its local derivatives.

One place for the words the drawings use (:mod:`microgradnorm.viz`'s boxes and circles, the HTML page's lines
such as ``xhat[2] = xshift[2] × rstd`` and ``∂xhat[2]/∂rstd = xshift[2]``). A node is named by the built norm
(``xhat[2]``), else after the element of x it was made from (``xshift²[2]``), else by its label, else (a plain
Value graph) by its op and a count (``mul_2``). No numbers here: the drawings put them beside these words.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from microgradnorm.engine import Value
from microgradnorm.norms import GROUP_NODES, PARAM_NODES, NormGraph

__all__ = ["display_names", "expression", "local_symbol", "op_symbol", "split_index"]

_OP_SYMBOLS = {"+": "+", "-": "−", "*": "×", "sum": "Σ", "sqrt": "√", "**2": "x²", "**-1": "1/x"}


def split_index(name: str) -> tuple[str, str]:
    """``"xhat[1,2]"`` -> ``("xhat", "[1,2]")``; ``"rstd"`` -> ``("rstd", "")``."""
    base, bracket, rest = name.partition("[")
    return base, bracket + rest


def display_names(order: list[Value], graph: NormGraph | None) -> list[str]:
    """A name for every node: the norm's own (``xhat[2]``), else its label, indexed where it repeats.

    A node made from one element of x carries that element's index (``xshift²[2]``,
    ``gamma*xhat[2]``), a dy of the loss the index of the y it multiplies, and a
    node made once per row or column its number (``sum[1]``, when there are
    several). Without a built norm, nodes are named by their labels.
    """
    if graph is None:
        return _plain_names(order)
    names: list[str | None] = [graph.name_of(node) for node in order]
    position = {id(node): k for k, node in enumerate(order)}
    _name_elementwise(order, names, position)
    repeats = Counter((node.stage, node.label) for k, node in enumerate(order) if names[k] is None)
    seen: Counter[tuple[str | None, str | None]] = Counter()
    for k, node in enumerate(order):
        if names[k] is None:
            key = (node.stage, node.label)
            numbered = repeats[key] == len(graph.groups) > 1
            names[k] = _summed(node, names, position) + (f"[{seen[key]}]" if numbered else "")
            seen[key] += 1
    return names  # type: ignore[return-value]


# An unnamed node of a plain Value graph is called after its op and numbered: mul_1, add_2, leaf_1.
_OP_WORDS = {"+": "add", "-": "sub", "*": "mul", "**2": "sq", "**-1": "inv", "": "leaf"}


def _plain_names(order: list[Value]) -> list[str]:
    """A name for every node of a graph without a built norm: its label, else its op and a count (``mul_2``)."""
    seen: Counter[str] = Counter()
    names = []
    for node in order:
        if node.label:
            names.append(node.label)
            continue
        op = node.op if node.children else ""
        word = _OP_WORDS.get(op) or ("pow" if op.startswith("**") else re.sub(r"\W", "", op) or "op")
        seen[word] += 1
        names.append(f"{word}_{seen[word]}")
    return names


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
        if len(indices) == 1:
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


_MANY = 4  # inputs listed in full in a sum; more are shortened to "first, …, last"


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


def _listed(kids: Sequence[str], joiner: str) -> str:
    shown = kids if len(kids) <= _MANY else [kids[0], "…", kids[-1]]
    return joiner.join(shown)


def expression(node: Value, out: str, kids: Sequence[str]) -> str:
    """How ``node`` was computed, by name: ``xhat[2] = xshift[2] × rstd``; a leaf is just its name."""
    op, p = node.op, _power(node.op)
    if not kids:
        return out
    if op == "sum":
        return f"{out} = Σ({_listed(kids, ', ')})"
    if op == "dot":
        half = len(kids) // 2
        terms = [f"{a}·{b}" for a, b in zip(kids[:half], kids[half:])]
        return f"{out} = {_listed(terms, ' + ')}"
    if len(kids) == 2:
        return f"{out} = {kids[0]} {op_symbol(op)} {kids[1]}"
    if p == 2:
        return f"{out} = {kids[0]}²"
    if p == -1:
        return f"{out} = 1/{kids[0]}"
    if p is not None:
        return f"{out} = {kids[0]}^{p:g}"
    if op == "sqrt":
        return f"{out} = √{kids[0]}"
    return f"{out} = {op}({kids[0]})"
