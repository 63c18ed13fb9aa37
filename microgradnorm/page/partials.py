"""Each op written out by name, for the HTML page: how a node was computed and its local derivatives.

The page shows, for xhat[2] = xshift[2] × rstd, the line
``∂xhat[2]/∂rstd = xshift[2] = 0.9114``: the symbol comes from here, the number
from the engine (:func:`microgradnorm.local_grads`), so what a learner reads
is the derivative backward() really used. One rule per op, as the engine
registers one derivative per op.
"""

from __future__ import annotations

from collections.abc import Sequence

from microgradnorm.engine import Value, local_grads
from microgradnorm.viz import num, op_symbol

__all__ = ["derivative_lines", "forward_line"]

_MANY = 4  # inputs listed in full in a sum; more are shortened to "first, …, last"


def _power(op: str) -> float | None:
    return float(op[2:]) if op.startswith("**") else None


def _local_symbol(op: str, out: str, kids: Sequence[str], slot: int) -> str | None:
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


def derivative_lines(node: Value, out: str, kids: Sequence[str]) -> list[tuple[str, float]]:
    """One ``∂out/∂kid = symbol = number`` line per input of ``node``, with the engine's number."""
    lines = []
    for slot, (kid, d) in enumerate(zip(kids, local_grads(node))):
        symbol = _local_symbol(node.op, out, kids, slot)
        head = f"∂{out}/∂{kid}"
        if symbol is None or symbol in ("1", "−1"):
            lines.append((f"{head} = {symbol or num(d)}", d))
        else:
            lines.append((f"{head} = {symbol} = {num(d)}", d))
    return lines


def _listed(kids: Sequence[str], joiner: str) -> str:
    shown = kids if len(kids) <= _MANY else [kids[0], "…", kids[-1]]
    return joiner.join(shown)


def forward_line(node: Value, out: str, kids: Sequence[str]) -> str:
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
