"""Demos of lesson 1: small Value graphs, the chain rule, and how backward() visits and adds up.

Every number is computed here, live, from the engine (:mod:`microgradnorm.engine`) and checked against finite
differences; the lesson file only names the demos. :func:`backward_trace` replays ``Value.backward``
contribution by contribution (``child.grad += local × out.grad``, in reverse topological order) with
:func:`microgradnorm.trace.trace_backward`, the replay the LayerNorm lessons reuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from microgradnorm.engine import Value, local_grads, topological_order
from microgradnorm.finite_diff import central_difference, step_for
from microgradnorm.i18n import _, pgettext
from microgradnorm.lessons.demo_tools import agree, dim_note, fd_agree, num, plain_table, start_line, trace_table
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.source import backward_code, code_of, op_code
from microgradnorm.trace import trace_backward
from microgradnorm.verdicts import Check, Checks, above, all_of, at_most, claim, closest, exactly, first_holding


def _lesson1_numbers(seed: int) -> dict[str, float]:
    """a, b, c, f: one decimal each, between 0.5 and 3 in size, signs at random."""
    rng = np.random.default_rng(seed)
    mags = np.round(rng.uniform(0.5, 3.0, size=4), 1)
    signs = rng.choice([-1.0, 1.0], size=4)
    return {k: float(m * s) for k, m, s in zip("abcf", mags, signs)}


def _example(kind: str, v: dict[str, float]) -> tuple[Value, dict[str, Value]]:
    """A tiny graph with labelled nodes; returns the root and the leaves by label.

    chain:  e = a*b, d = e + c, L = d*f       (every node used once)
    shared: e = a*b, d = e + c, L = e*d       (e used twice: by d and by L)
    square: L = a*a                           (one leaf, both inputs of one node)
    """
    if kind == "square":
        a = Value(v["a"], label="a")
        L = a * a
        L.label = "L"
        return L, {"a": a}
    a, b, c = Value(v["a"], label="a"), Value(v["b"], label="b"), Value(v["c"], label="c")
    e = a * b
    e.label = "e"
    d = e + c
    d.label = "d"
    leaves = {"a": a, "b": b, "c": c}
    if kind == "chain":
        f = Value(v["f"], label="f")
        leaves["f"] = f
        L = d * f
    elif kind == "shared":
        L = e * d
    else:
        raise ValueError(f"example: expected 'chain', 'shared' or 'square', got {kind!r}")
    L.label = "L"
    return L, leaves


def _finite_difference(kind: str, v: dict[str, float], leaf: str) -> float:
    """dL/d(leaf) by a central difference (microgradnorm.finite_diff), rebuilding the graph with the leaf moved."""
    return central_difference(lambda delta: _example(kind, {**v, leaf: v[leaf] + delta})[0].data, step_for(v[leaf]))


def _label(node: Value) -> str:
    return node.label or f"#{node.id}"


def _created(root: Value) -> list[Value]:
    return sorted(topological_order(root), key=lambda n: n.id)


@demo("value_graph")
def value_graph(p: LessonParams, example: str = "chain") -> DemoOutput:
    """A small expression as Value nodes: each node's op, inputs and value."""
    v = _lesson1_numbers(p.seed)
    root, _leaves = _example(example, v)
    # Translators: "op", "data" and "grad" are the Value's attributes: keep them
    table = plain_table(_("node"), "op", _("inputs"), "data", "grad", right=("data", "grad"))
    for node in _created(root):
        table.add_row(
            _label(node),
            node.op or pgettext("op of a leaf node", "leaf"),
            ", ".join(_label(c) for c in node.children) or "—",
            num(node.data),
            num(node.grad),
        )
    return DemoOutput(table, graph=root)


def _paths(root: Value, target: Value) -> list[list[tuple[Value, Value, float]]]:
    """Every path from root down to target, as (out, child, local derivative) edges."""
    found: list[list[tuple[Value, Value, float]]] = []

    def walk(node: Value, trail: list[tuple[Value, Value, float]]) -> None:
        if node is target:
            found.append(list(trail))
            return
        for child, d in zip(node.children, local_grads(node)):
            trail.append((node, child, d))
            walk(child, trail)
            trail.pop()

    walk(root, [])
    return found


@demo("chain_rule")
def chain_rule(p: LessonParams, example: str = "chain") -> DemoOutput:
    """dL/d(leaf) as products of local derivatives along each path, against backward() and a finite difference."""
    v = _lesson1_numbers(p.seed)
    root, leaves = _example(example, v)
    root.backward()
    leaf_h, sum_h, fd_h = _("leaf"), _("sum of paths"), _("finite diff")
    table = plain_table(leaf_h, _("path"), _("local derivatives"), _("product"), right=(_("product"),))
    summary = plain_table(leaf_h, sum_h, "backward()", fd_h, right=(sum_h, "backward()", fd_h))
    checks: list[Check | Checks] = []
    for name, leaf in leaves.items():
        total = 0.0
        for trail in _paths(root, leaf):
            product = math.prod(d for _out, _child, d in trail)
            total += product
            path = "←".join([_label(root)] + [_label(c) for _out, c, _d in trail])
            table.add_row(name, path, " × ".join(num(d) for _out, _child, d in trail), num(product))
        fd = _finite_difference(example, v, name)
        checks += [agree(total, leaf.grad, what=f"{name}: sum over paths vs backward()"), fd_agree(leaf.grad, fd, name)]
        summary.add_row(name, num(total), num(leaf.grad), num(fd))
    verdict = claim(all_of(*checks), _("sum over paths = backward() = finite difference for every leaf"))
    return DemoOutput(Group(table, Text(""), summary, verdict), graph=root)


def _backward_in_order(root: Value, order: Sequence[Value], accumulate: bool = True) -> None:
    """Backpropagate visiting nodes in ``order``; ``accumulate=False`` assigns instead of adding."""
    for node in topological_order(root):
        node.grad = 0.0
    root.grad = 1.0
    for node in order:
        g = node.grad
        for child, d in zip(node.children, local_grads(node)):
            if accumulate:
                child.grad += d * g
            else:
                child.grad = d * g


def _first_reached(root: Value) -> list[Value]:
    """Depth-first pre-order: each node as soon as it is first reached from the root (too early)."""
    order: list[Value] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(reversed(node.children))
    return order


@demo("backward_trace")
def backward_trace(p: LessonParams, example: str = "shared") -> DemoOutput:
    """backward() replayed one contribution at a time on a small graph, with finite differences."""
    v = _lesson1_numbers(p.seed)
    root, leaves = _example(example, v)
    trace = trace_backward(root)
    start = start_line(_("{name}.grad = 1 (dL/dL)").format(name=_label(root)))
    table = trace_table(trace, _label)
    fd_h = _("finite diff")
    summary = plain_table(_("leaf"), "backward()", fd_h, right=("backward()", fd_h))
    checks = []
    for name, leaf in leaves.items():
        fd = _finite_difference(example, v, name)
        checks.append(fd_agree(leaf.grad, fd, name))
        summary.add_row(name, num(leaf.grad), num(fd))
    note = dim_note(_("k/m: the k-th of the m contributions the node receives."))
    verdict = claim(all_of(*checks), _("every leaf matches its finite difference"))
    shared = next(n for n in trace.order if n.label == "e")
    return DemoOutput(
        Group(start, table, note, Text(""), summary, verdict),
        graph=root,
        prediction=_contributions_prediction(trace.incoming.get(id(shared), 0)),
    )


def _contributions_prediction(count: int) -> Prediction:
    """How many contributions e collects before its gradient is final, counted in the trace."""
    choices = ("1", "2", "3")
    why = _(
        "The trace counts {count} for e: one from every node that uses e. backward() may pass e's "
        "gradient on to a and b only after the last of them."
    ).format(count=count)
    evidence = tuple(exactly(count, k, "contributions e collects") for k in (1, 2, 3))
    return Prediction.from_evidence(
        _("How many contributions will e.grad collect before it is final?"), choices, why, evidence
    )


@demo("accumulate")
def accumulate(p: LessonParams) -> DemoOutput:
    """A node used twice: += gives the right gradient, = keeps only the last contribution."""
    v = _lesson1_numbers(p.seed)
    # Translators: "grad of" heads the column of leaf names (a, b) whose gradient the row shows
    cols = (_("graph"), _("grad of"), _("with +="), _("with ="), _("finite diff"))
    table = plain_table(*cols, right=cols[2:])
    right_checks, wrong_gaps, square_wrong = [], [], math.nan
    for kind, desc, leaf_names in (("square", "L = a·a", ("a",)), ("shared", "L = e·d", ("a", "b"))):
        root, leaves = _example(kind, v)
        order = list(reversed(topological_order(root)))
        _backward_in_order(root, order, accumulate=True)
        right = {k: leaves[k].grad for k in leaf_names}
        _backward_in_order(root, order, accumulate=False)
        wrong = {k: leaves[k].grad for k in leaf_names}
        square_wrong = wrong["a"] if kind == "square" else square_wrong
        for i, k in enumerate(leaf_names):
            fd = _finite_difference(kind, v, k)
            right_checks.append(fd_agree(right[k], fd, f"{desc}, {k}.grad with +="))
            wrong_gaps.append(fd_agree(wrong[k], fd, f"{desc}, {k}.grad with =").measured)
            table.add_row(desc if i == 0 else "", k, num(right[k]), Text(num(wrong[k]), style="red"), num(fd))
    square, _square_leaves = _example(
        "square", v
    )  # the graph g draws: L = a·a, its two edges to a, and the grads of +=
    square.backward()
    checks = Group(
        claim(all_of(*right_checks), _("with += every gradient matches its finite difference")),
        claim(
            above(max(wrong_gaps), 1.0, "with =, the largest gap to the finite difference ÷ tolerance"),
            _("with = at least one gradient misses its finite difference"),
        ),
    )
    return DemoOutput(Group(table, checks), graph=square, prediction=_assign_prediction(v["a"], square_wrong))


def _assign_prediction(a: float, with_assign: float) -> Prediction:
    """What a.grad is for L = a·a when backward assigns instead of adding, read off the run."""
    evidence = closest(with_assign, (2 * a, a, 0.0), "a.grad with =")
    why = _(
        "a = {a}, and with = backward left a.grad = {grad}: each edge of a·a sets a.grad to "
        "a × L.grad = {a}, and the second setting replaces the first instead of adding to it."
    ).format(a=num(a), grad=num(with_assign))
    choices = (_("2a (the true derivative)"), _("a: one edge's share"), _("0: the shares cancel"))
    return Prediction.from_evidence(
        _("For L = a·a, with = in place of +=, what does a.grad end up as?"), choices, why, evidence
    )


@demo("topo_order")
def topo_order(p: LessonParams) -> DemoOutput:
    """Processing a node before all its users have sent their gradient gives wrong answers."""
    v = _lesson1_numbers(p.seed)
    root, leaves = _example("shared", v)
    good = list(reversed(topological_order(root)))
    naive = _first_reached(root)
    lines = Table.grid(padding=(0, 1))
    lines.add_column(style="bold", no_wrap=True)
    lines.add_column()
    lines.add_row(_("reverse topological:"), " → ".join(_label(n) for n in good))
    lines.add_row(_("first reached:"), " → ".join(_label(n) for n in naive))
    _backward_in_order(root, good)
    right = {k: leaf.grad for k, leaf in leaves.items()}
    _backward_in_order(root, naive)
    wrong = {k: leaf.grad for k, leaf in leaves.items()}
    numbers = (_("reverse topo"), pgettext("table header", "first reached"), _("finite diff"))
    table = plain_table(_("leaf"), *numbers, right=numbers)
    checks, missed, expected, gaps = [], [], [], {}
    for k in leaves:
        fd = _finite_difference("shared", v, k)
        checks.append(fd_agree(right[k], fd, f"{k}.grad in reverse topological order"))
        gap = gaps[k] = fd_agree(wrong[k], fd, f"{k}.grad in first-reached order")
        bad = not gap
        missed += [k] if bad else []
        # first reached processes e before L has sent it its share: a and b (below e) miss, c does not
        expected.append((above if k in ("a", "b") else at_most)(gap.measured, gap.bound, gap.what))
        table.add_row(k, num(right[k]), Text(num(wrong[k]), style="red" if bad else ""), num(fd))
    if missed:
        # Translators: {leaves} is a list of leaf names, "a and b"
        misses = _("first reached misses it for {leaves}").format(leaves=_names_and(missed))
    else:
        misses = _("first reached misses it for no leaf")
    return DemoOutput(
        Group(
            lines,
            Text(""),
            table,
            claim(all_of(*checks), _("the reverse topological order matches every finite difference")),
            claim(all_of(*expected), misses),
        ),
        graph=root,
        prediction=_missed_prediction(gaps),
    )


def _missed_prediction(gaps: dict[str, Check]) -> Prediction:
    """Which leaves the first-reached order leaves with a wrong gradient, from each leaf's gap to its fd."""

    def wrong(*names: str) -> Checks:  # exactly these leaves miss their finite difference
        return all_of(*(gap if k not in names else ~gap for k, gap in gaps.items()))

    evidence = (wrong("a", "b"), wrong("c"), wrong("a", "b", "c"), wrong())
    missed = [k for k, gap in gaps.items() if not gap]
    why = _(
        "First reached, e passes its gradient on to a and b as soon as L has sent its "
        "share; d's share arrives at e later and goes no further. c hangs below d alone and gets d's full gradient."
    )
    if not any(evidence):  # no choice names exactly the leaves that missed: name them (else the answer has)
        why = _("Missed here: {leaves}.").format(leaves=_names_and(missed) if missed else _("none")) + " " + why
    choices = (_("a and b"), _("c only"), _("all three"), _("none"))
    question = _("Backward in the first-reached order: which leaves end with a wrong gradient?")
    return Prediction(question, choices, first_holding(evidence, 3), why, evidence)


@demo("ops_code")
def ops_code(p: LessonParams, example: str = "chain") -> DemoOutput:
    """The engine's code for each op the example used: its forward and its local derivatives."""
    v = _lesson1_numbers(p.seed)
    root, _leaves = _example(example, v)
    ops: dict[str, Value] = {}
    for node in _created(root):
        if node.op:
            ops.setdefault(node.op, node)
    shown = [obj for node in ops.values() for obj in op_code(node)]
    d, f = root.children  # L = d·f: its second input, f, is the one step 2 did not name
    d_f = local_grads(root)[1]
    return DemoOutput(code_of(*shown), graph=root, prediction=_mul_prediction(d.data, f.data, d_f))


def _mul_prediction(d: float, f: float, d_f: float) -> Prediction:
    """What the multiply op's local derivative hands to its second input f in L = d·f, read off the engine."""
    evidence = closest(d_f, (d, f, 1.0, d * f), "dL/df")
    why = _(
        "The multiply's local derivative for f is d, the other input: the engine returned {grad} for "
        "L = d·f with d = {d}, f = {f}. The code is symmetric: each input gets the other's data."
    ).format(grad=num(d_f), d=num(d), f=num(f))
    choices = (_("d, the other input"), _("f itself"), "1", "d·f")
    return Prediction.from_evidence(
        _("For L = d·f, what is dL/df, the local derivative the code returns for f?"), choices, why, evidence
    )


@demo("backward_code")
def backward_code_demo(p: LessonParams) -> DemoOutput:
    """The engine's backward sweep, as the code that ran in this lesson's backward() calls."""
    root, _leaves = _example("shared", _lesson1_numbers(p.seed))
    return DemoOutput(code_of(*backward_code()), graph=root)


def _names_and(names: Sequence[str]) -> str:
    """'a and b' (Chinese: 'a 和 b'): a few names joined as one list."""
    # Translators: joins the names of a short list, "a and b"; keep the spaces where Chinese wants them
    return pgettext("joining names", " and ").join(names)
