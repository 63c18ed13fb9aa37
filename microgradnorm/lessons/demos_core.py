"""Demos of the core lessons: the Value engine (1), LayerNorm forward (3) and backward (4, 5), its forms (6).

Every number is computed here, live, from the engine (:mod:`microgradnorm.engine`),
the scalar norms, the closed forms of :mod:`microgradnorm.formulas` and the
check of :mod:`microgradnorm.check`; the lesson files only name the demos.

Two step-throughs do the heavy lifting and are written once:

* :func:`forward_rows` lists the nodes of a graph in the order they were
  created -- always a topological order, since a node can only be made from
  nodes that exist -- with op, inputs, stage and value;
* :func:`trace_backward` replays ``Value.backward`` contribution by
  contribution (``child.grad += local × out.grad``, in reverse topological
  order), checks that it ends with exactly the gradients ``backward()`` gives,
  and can tag each contribution with the path it took into x (direct, via the
  mean, via the variance: the three terms of the chain rule written out by hand,
  :func:`microgradnorm.formulas.dx_paths`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.check import check_norm, random_problem
from microgradnorm.drawing.charts import heat_map
from microgradnorm.engine import DomainError, Value, local_grads, topological_order
from microgradnorm.finite_diff import central_difference, step_for
from microgradnorm.i18n import _, ngettext, pgettext
from microgradnorm.i18n.text import CJKText, assemble, cjk_text, sentences, separated
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.source import backward_code, code_of, op_code
from microgradnorm.lessons.textgraph import text_graph
from microgradnorm.norms import NormGraph, layer_norm
from microgradnorm.numfmt import err, fmt, nbytes_text
from microgradnorm.present import check_table, shown_error
from microgradnorm.registry import get_norm
from microgradnorm.trace import Contribution, EdgeTagger, Trace, trace_backward
from microgradnorm.verdicts import (
    Check,
    Checks,
    above,
    all_of,
    at_least,
    at_most,
    below,
    cancels,
    claim,
    close_to,
    closest,
    equal,
    exactly,
    first_holding,
    largest,
    mark,
    within,
)

# The three paths from x_i to the loss, their colours and their names (the
# names are printed too, so that NO_COLOR loses nothing).
PATHS = ("direct", "mean", "var")
PATH_STYLE = {"direct": "green", "mean": "cyan", "var": "magenta"}
# A path's name is path_label(k) (direct, via mean, via var); in the narrow trace table, its short
# tag path_tag(k) (direct, mean, var): both in the reader's language.


def _path_names() -> dict[str, tuple[str, str]]:
    """Each path's name (a table header, the legend) and short tag (the k/m column), in the reader's language."""
    return {
        "direct": (pgettext("path into x", "direct"), pgettext("short path tag", "direct")),
        "mean": (pgettext("path into x", "via mean"), pgettext("short path tag", "mean")),
        "var": (pgettext("path into x", "via var"), pgettext("short path tag", "var")),
    }


def path_label(path: str) -> str:
    """A path's name in a table header or a legend: direct, via mean, via var."""
    return _path_names()[path][0]


def path_tag(path: str) -> str:
    """A path's short tag in the k/m column of the backward tables: direct, mean, var."""
    return _path_names()[path][1]


# ---- formatting ---------------------------------------------------------------------


def num(v: float, digits: int = 4) -> str:
    """A number for a narrow table: ``digits`` significant digits, never '-0'."""
    s = fmt(float(v), digits)
    return "0" if s in ("-0", "0") else s


def vec(values: Iterable[float], digits: int = 4) -> str:
    return "[" + ", ".join(num(v, digits) for v in values) + "]"


def plain_table(*columns: str, title: str | None = None, right: Sequence[str] = ()) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        padding=(0, 1, 0, 0),
    )
    for c in columns:  # headers as Text, so that "W.grad[i,0]" is not read as markup
        table.add_column(Text(c), justify="right" if c in right else "left", no_wrap=c in right)
    return table


def dim_note(text: str) -> CJKText:
    """A dim line under a table, in the reader's language; wraps the Chinese way."""
    return cjk_text(text, style="dim")


def _max_rel(a: Any, b: Any) -> float:
    """Normwise relative difference max|a - b| / max|b| (for display)."""
    return tol.normwise_error(np.ravel(a), np.ravel(b))[1]


def shown_difference(
    a: Any, b: Any, rtol: float = tol.CLOSED_FORM_RTOL, atol: float = tol.CLOSED_FORM_ATOL
) -> tuple[bool, str]:
    """(is it absolute, the difference as text): the relative difference, or the absolute one where b is about 0."""
    abs_err, rel_err = tol.normwise_error(np.ravel(a), np.ravel(b))
    value, absolute = shown_error(abs_err, rel_err, float(np.max(np.abs(b), initial=0.0)), rtol, atol)
    return absolute, err(value)


def difference(a: Any, b: Any, rtol: float = tol.CLOSED_FORM_RTOL, atol: float = tol.CLOSED_FORM_ATOL) -> str:
    """'relative difference 1.2e-16', or the absolute difference where b is about 0 (see present.shown_error)."""
    absolute, value = shown_difference(a, b, rtol, atol)
    if absolute:
        return _("absolute difference {value}").format(value=value)
    return _("relative difference {value}").format(value=value)


def agree(
    a: Any, b: Any, rtol: float = tol.CLOSED_FORM_RTOL, atol: float = tol.CLOSED_FORM_ATOL, what: str = "a vs b"
) -> Check:
    """Normwise agreement max|a - b| <= atol + rtol * max|b| (also right when b is exactly 0), as a Check."""
    return close_to(np.ravel(a), np.ravel(b), rtol, atol, what)


def fd_agree(value: Any, fd: Any, what: str) -> Check:
    """``value`` agrees with its finite difference ``fd`` within the finite-difference tolerances."""
    return close_to(np.ravel(value), np.ravel(fd), tol.FD_RTOL, tol.FD_ATOL, what + " vs finite difference")


def nearest(value: float, candidates: Sequence[float]) -> int:
    """The index of the candidate closest to ``value`` (the first, on a tie): how a question's answer is read off."""
    return min(range(len(candidates)), key=lambda k: abs(value - candidates[k]))


def nearest_factor(factor: float, targets: Sequence[float]) -> int:
    """The index of the positive target closest to ``factor`` on a log scale; 0 when ``factor`` is not positive."""
    if not factor > 0:
        return 0
    return nearest(math.log(factor), [math.log(t) for t in targets])


# ---- lesson 1: small Value graphs -------------------------------------------------------


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


def _trace_table(
    trace: Trace,
    names: Callable[[Value], str],
    keep: Callable[[Contribution], bool] = lambda c: True,
    hidden: frozenset[int] = frozenset(),
) -> Table:
    """One row per contribution: into.grad += local × out.grad, the running total, k/m and the path."""
    # Translators: the headers of the backward tables; the lessons' formula names the first and third
    # "into" and "from" (into.grad += local derivative × from.grad)
    total = _("total")
    table = plain_table(_("into"), _("+= local × grad"), _("from"), total, "k/m", right=(total,))
    for column in table.columns[:4]:
        column.no_wrap = True
    for c in trace.contributions:
        if id(c.child) in hidden or not keep(c):
            continue
        m = trace.incoming.get(id(c.child), 1)
        style = PATH_STYLE.get(c.tag or "", "")
        count = Text(f"{c.count}/{m}", style="" if c.count < m else "bold")
        if c.tag:
            count.append(f" {path_tag(c.tag)}", style=style)
        table.add_row(
            Text(names(c.child), style=style),
            Text(f"{num(c.local)} × {num(c.out_grad)}", style=style),
            names(c.out),
            Text(num(c.total), style=style),
            count,
        )
    return table


@demo("backward_trace")
def backward_trace(p: LessonParams, example: str = "shared") -> DemoOutput:
    """backward() replayed one contribution at a time on a small graph, with finite differences."""
    v = _lesson1_numbers(p.seed)
    root, leaves = _example(example, v)
    trace = trace_backward(root)
    start = _start_line(_("{name}.grad = 1 (dL/dL)").format(name=_label(root)))
    table = _trace_table(trace, _label)
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
    return Prediction(
        _("How many contributions will e.grad collect before it is final?"),
        choices,
        first_holding(evidence),
        why,
        evidence,
    )


def _start_line(formula: str) -> CJKText:
    """'start: L.grad = 1': where backward() begins, the word bold, the formula plain."""
    return assemble(_("start: {formula}"), "bold", formula=Text(formula))


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
    answer = first_holding(evidence)
    why = _(
        "a = {a}, and with = backward left a.grad = {grad}: each edge of a·a sets a.grad to "
        "a × L.grad = {a}, and the second setting replaces the first instead of adding to it."
    ).format(a=num(a), grad=num(with_assign))
    choices = (_("2a (the true derivative)"), _("a: one edge's share"), _("0: the shares cancel"))
    return Prediction(
        _("For L = a·a, with = in place of +=, what does a.grad end up as?"), choices, answer, why, evidence
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
    answer = first_holding(evidence)
    why = _(
        "The multiply's local derivative for f is d, the other input: the engine returned {grad} for "
        "L = d·f with d = {d}, f = {f}. The code is symmetric: each input gets the other's data."
    ).format(grad=num(d_f), d=num(d), f=num(f))
    choices = (_("d, the other input"), _("f itself"), "1", "d·f")
    return Prediction(
        _("For L = d·f, what is dL/df, the local derivative the code returns for f?"), choices, answer, why, evidence
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


# ---- LayerNorm problems, names and paths ------------------------------------------------


def ln_problem(p: LessonParams, rows: int | None = None) -> tuple[np.ndarray, ...]:
    """x, gamma, beta, dy for the lesson: :func:`check.random_problem` rounded to 2 decimals.

    Rounding keeps the inputs readable; everything downstream is computed from
    the rounded numbers, so nothing is lost.
    """
    spec = get_norm("layernorm")
    shape = (p.dim,) if rows is None else (rows, p.dim)
    x, gamma, beta, dy = (np.round(a, 2) for a in random_problem(spec, shape, p.seed))
    # A row that rounding made constant has no spread (LayerNorm of it is 0/0 at
    # eps = 0): give it a small ramp instead, so every seed teaches something.
    flat = x.reshape(-1, p.dim)
    for row in flat:
        if p.dim > 1 and np.ptp(row) == 0.0:
            row += np.round(0.01 * np.arange(p.dim), 2)
    return flat.reshape(shape), gamma, beta, dy


@dataclass
class LNBuilt:
    """A LayerNorm built on the lesson's problem, its loss, and names for every node."""

    x: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    dy: np.ndarray
    graph: NormGraph
    loss: Value
    names: dict[int, str]
    constants: frozenset[int]

    def name(self, node: Value) -> str:
        return self.names.get(id(node), f"#{node.id}")


def build_ln(p: LessonParams, rows: int | None = None) -> LNBuilt:
    x, gamma, beta, dy = ln_problem(p, rows)
    graph = layer_norm(x.tolist(), gamma.tolist(), beta.tolist(), p.eps).graph
    loss = graph.loss(dy.tolist())
    names = ln_names(graph, loss)
    constants = frozenset(id(n) for n in topological_order(loss) if not n.children and n.label in ("1/n", "eps", "dy"))
    return LNBuilt(x, gamma, beta, dy, graph, loss, names, constants)


def _split_name(name: str) -> tuple[str, tuple[str, ...]]:
    if name.endswith("]") and "[" in name:
        base, _bracket, idx = name[:-1].partition("[")
        return base, tuple(idx.split(","))
    return name, ()


def ln_names(graph: NormGraph, root: Value) -> dict[int, str]:
    """A short readable name for every node: the graph's names (``xhat[2]``), and for the rest
    names derived from their inputs (``Σx``, ``xshift[2]²``, ``γ·xhat[2]``, ``var+eps``)."""
    names: dict[int, str] = {}
    order = topological_order(root)
    for node in order:
        name = graph.name_of(node)
        if name is None:
            name = _derived_name(node, names)
        names[id(node)] = name
    for node in order:  # dy leaves take the index of the y they multiply
        if node.stage == "loss" and node.op == "*" and len(node.children) == 2:
            y, d = node.children
            _base, idx = _split_name(names[id(y)])
            suffix = f"[{','.join(idx)}]" if idx else ""
            names[id(d)] = f"dy{suffix}"
            names[id(node)] = f"y{suffix}·dy"
    return names


def _derived_name(node: Value, names: dict[int, str]) -> str:
    label = node.label or ""
    kids = [names.get(id(c), "?") for c in node.children]
    if label == "loss":
        return "loss"
    if not node.children:
        return label or num(node.data)
    if node.op == "sum":
        bases = {_split_name(k)[0] for k in kids}
        idxs = [_split_name(k)[1] for k in kids]
        if len(bases) == 1:
            base = bases.pop()
            prefix = idxs[0][:-1] if idxs[0] else ()
            if all(i[:-1] == prefix for i in idxs):
                return f"Σ{base}" + (f"[{','.join(prefix)}]" if prefix else "")
            return f"Σ{base}"
    if node.op == "**2":
        base, idx = _split_name(kids[0])
        return f"{base}²" + (f"[{','.join(idx)}]" if idx else "")
    if label == "gamma*xhat":
        return f"γ·{kids[1]}"
    if label == "var+eps":
        return f"{kids[0]}+eps"
    return f"{label or node.op}#{node.id}"


def ln_path_tagger(graph: NormGraph) -> EdgeTagger:
    """Tag the edges where a gradient enters one of the three paths into x (two-pass graph).

    direct: xhat_i -> xshift_i (the numerator of xhat);
    var:    xshift_i² -> xshift_i (the variance's use of xshift);
    mean:   the mean's sum -> x_i.
    Everything upstream of a tagged edge keeps its tag, so x's gradient ends
    split into exactly the three terms of :func:`formulas.dx_paths`.
    """
    xhat = {id(v) for v in graph["xhat"]}
    xshift = {id(v) for v in graph["xshift"]}
    xs = {id(v) for v in graph["x"]}
    mean_sums = {id(m.children[0]) for m in graph["mean"]}

    def tag(out: Value, child: Value) -> str | None:
        if id(child) in xshift:
            if id(out) in xhat:
                return "direct"
            if out.stage == "var":
                return "var"
        if id(child) in xs and id(out) in mean_sums:
            return "mean"
        return None

    return tag


def _axes(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (len(shape) - 1,)


def _closed(built: LNBuilt, eps: float) -> dict[str, np.ndarray]:
    """The closed forms on the lesson's numbers (NumPy, from the inputs alone)."""
    return get_norm("layernorm").node_grads(built.x, built.gamma, built.beta, eps, built.dy)


def node_values(built: LNBuilt, name: str, attr: str = "data") -> np.ndarray:
    return np.array([getattr(v, attr) for v in built.graph[name]], dtype=np.float64)


# ---- lesson 3: LayerNorm forward ---------------------------------------------------------


@demo("ln_problem_table")
def ln_problem_table(p: LessonParams, show_dy: bool = False) -> DemoOutput:
    """The lesson's input x with gamma and beta (and dy), drawn from the seed."""
    x, gamma, beta, dy = ln_problem(p)
    cols = ["i", "x", "gamma", "beta"] + (["dy"] if show_dy else [])
    table = plain_table(*cols, right=cols)
    for i in range(p.dim):
        row = [str(i), num(x[i]), num(gamma[i]), num(beta[i])] + ([num(dy[i])] if show_dy else [])
        table.add_row(*row)
    return DemoOutput(table)


def forward_rows(graph_root: Value | Sequence[Value], names: Callable[[Value], str], stages: Sequence[str]) -> Table:
    """Nodes in creation order (a topological order), those of ``stages`` only, numbered in the whole order.

    Each stage starts with a bold row naming it.
    """
    nodes = sorted(topological_order(graph_root), key=lambda n: n.id)
    value = pgettext("table header", "value")
    table = plain_table("#", _("node"), "op", _("inputs"), value, right=("#", value))
    # what the op column says for a leaf: an input, a parameter (gamma, beta) or a constant (1/n, eps)
    kind = {"input": pgettext("op of a leaf node", "input"), "affine": pgettext("op of a leaf node", "param")}
    current = None
    for k, node in enumerate(nodes, 1):
        stage = node.stage or ""
        if stage not in stages:
            continue
        if stage != current:
            # Translators: {stage} is the stage's name in the code (mean, center, var, sqrt, divide, affine)
            table.add_row("", Text(_("{stage} stage").format(stage=stage), style="bold"), "", "", "")
            current = stage
        kids = [names(c) for c in node.children]
        inputs = ", ".join(kids) if len(kids) <= 2 else f"{kids[0]} … {kids[-1]}"
        const = pgettext("op of a leaf node", "const")
        op = node.op or (kind.get(stage, const) if not node.children else "")
        table.add_row(str(k), names(node), op, inputs or "—", num(node.data))
    return table


@demo("ln_forward_steps")
def ln_forward_steps(
    p: LessonParams, stages: tuple[str, ...] = ("input", "mean", "center"), ask: bool = False
) -> DemoOutput:
    """LayerNorm's nodes in the order they are built, with op, inputs, stage and value.

    ``ask`` first asks what the mean square of xhat comes out as (1 only at eps = 0), read off the nodes.
    """
    built = build_ln(p)
    roots = built.graph.roots()
    table = forward_rows(roots, built.name, stages)
    total = len(topological_order(roots))
    # Translators: {stages} is a list of stage names, "input, mean, center"
    note = ngettext(
        "The nodes of stage {stages}, of the {total} nodes of LayerNorm at d = {dim}.",
        "The nodes of stages {stages}, of the {total} nodes of LayerNorm at d = {dim}.",
        len(stages),
    )
    return DemoOutput(
        Group(table, dim_note(note.format(stages=separated(stages), total=total, dim=p.dim))),
        graph=built.graph,
        prediction=_mean_square_prediction(built, p.eps) if ask else None,
    )


def _mean_square_prediction(built: LNBuilt, eps: float) -> Prediction:
    """mean(xhat²) from the xhat nodes: var / (var + eps), so 1 only at eps = 0 (up to rounding)."""
    xhat = node_values(built, "xhat")
    ms = float(np.mean(xhat**2))
    var = float(built.graph["var"][0].data)
    rounding = tol.cancellation_atol(1.0, len(xhat))
    what = "mean(xhat²) − 1"
    evidence = (
        at_most(abs(ms - 1.0), rounding, "|mean(xhat²) − 1|"),
        below(ms - 1.0, -rounding, what),
        above(ms - 1.0, rounding, what),
    )
    answer = first_holding(evidence)
    why = _("mean(xhat²) = var/(var + eps) = {ms} (var = {var}, eps = {eps}): 1 only at eps = 0.").format(
        ms=num(ms, 8), var=num(var), eps=f"{eps:g}"
    )
    choices = (_("1, up to rounding"), _("below 1"), _("above 1"))
    return Prediction(_("What will the mean of xhat² be?"), choices, answer, why, evidence)


@demo("ln_stage_summary")
def ln_stage_summary(p: LessonParams) -> DemoOutput:
    """Each stage's result from the scalar graph, next to the NumPy formulas of formulas.moments."""
    built = build_ln(p)
    g = built.graph
    m = formulas.moments(built.x, (-1,), p.eps)
    y_np = formulas.affine(m.xhat, built.gamma, built.beta)
    rows = [
        ("mean", "mean = Σx / n", node_values(built, "mean"), m.mean),
        ("center", "xshift = x − mean", node_values(built, "xshift"), m.xshift),
        ("var", "var = Σxshift² / n", node_values(built, "var"), m.var),
        ("sqrt", "std = √(var + eps)", node_values(built, "std"), m.std),
        ("divide", "rstd = 1 / std", node_values(built, "rstd"), m.rstd),
        ("divide", "xhat = xshift · rstd", node_values(built, "xhat"), m.xhat),
        ("affine", "y = gamma·xhat + beta", node_values(built, "y"), y_np),
    ]
    table = plain_table(_("stage"), _("computes"), _("value (scalar graph)"))
    worst = 0.0
    for stage, what, got, ref in rows:
        worst = max(worst, _max_rel(got, ref))
        table.add_row(stage, what, num(got[0]) if got.size == 1 else vec(got, 3))
    ok = all_of(
        *(agree(got, ref, tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL, what) for _stage, what, got, ref in rows)
    )
    same = _("formulas.moments (NumPy) gives the same, largest relative difference {error}").format(error=err(worst))
    xshift = node_values(built, "xshift")
    total = float(np.sum(xshift))
    zero = tol.cancellation_atol(float(np.sum(np.abs(built.x))), p.dim)
    sum_x = float(np.sum(built.x))
    what = "|Σ xshift|"
    # the other two choices are the same number (n · mean = Σx): each holds when Σ xshift is not 0 and is nearer to Σx
    off_sum = abs(total - sum_x)
    evidence = (
        at_most(abs(total), zero, what),
        above(abs(total), zero, what) & below(off_sum, abs(total), "|Σ xshift − Σx| vs |Σ xshift|"),
        above(abs(total), zero, what) & below(off_sum, abs(total), "|Σ xshift − n·mean| vs |Σ xshift|"),
    )
    why = _("Σ xshift = {total} on the graph's numbers: subtracting the mean leaves values that sum to 0.").format(
        total=num(total)
    )
    prediction = Prediction(
        _("What will the centered values xshift add up to?"),
        (_("0, up to rounding"), _("the sum of x"), _("n times the mean")),
        first_holding(evidence),
        why,
        evidence,
    )
    return DemoOutput(Group(table, claim(ok, same)), graph=g, prediction=prediction)


@demo("ln_shapes")
def ln_shapes(p: LessonParams, batch: int = 2, seq: int = 3) -> DemoOutput:
    """Shapes of every stage for x of shape [batch, seq, hidden], with and without keepdims."""
    rng = np.random.default_rng(p.seed)
    d = p.dim
    x = rng.normal(0.5, 2.0, size=(batch, seq, d))
    m = formulas.moments(x, (-1,), p.eps)
    table = _shapes_table(x.shape, m, (d,))
    flat_mean = x.mean(axis=-1)
    try:
        x - flat_mean
        outcome = cjk_text(_("x − mean without keepdims: no error (shapes happened to line up)."))
    except ValueError as exc:
        refusal = assemble(_("NumPy refuses: {message}"), "red", message=Text(str(exc)))
        outcome = assemble(_("x − mean without keepdims: {outcome}"), "bold", outcome=refusal)
    # The quiet failure: one sentence [seq, hidden] with seq == hidden. The flat
    # mean [seq] lines up with the hidden axis and is subtracted along the wrong one.
    sq = rng.normal(0.5, 2.0, size=(d, d))
    flat = sq.mean(axis=-1)
    wrong = sq - flat
    right = sq - sq.mean(axis=-1, keepdims=True)
    what = _(
        "one sentence of shape {shape} (seq = hidden = {d}) minus a mean of shape {mean_shape} raises nothing, "
        "but subtracts token j's mean from feature j of every token."
    ).format(shape=list(sq.shape), d=d, mean_shape=list(flat.shape))
    quiet = assemble(_("The quiet version: {what}"), "bold", what=Text(what))
    worst = float(np.abs(wrong - right).max())
    wrong_by = _("same shape, no error, wrong by up to {error}").format(error=num(worst))
    verdict = claim(
        exactly(wrong.size, right.size, "entries of x − mean, with and without keepdims")
        & above(worst, 0.0, "largest |wrong − right|"),
        wrong_by,
    )
    return DemoOutput(
        Group(table, Text(""), outcome, Text(""), quiet, verdict),
        prediction=_keepdims_prediction(batch, seq, d, _broadcast_error(x, flat_mean, m.xshift)),
    )


def _broadcast_error(x: np.ndarray, mean: np.ndarray, xshift: np.ndarray) -> float:
    """max |(x − mean) − xshift| for a mean without keepdims; NaN when NumPy refuses to broadcast."""
    try:
        return float(np.max(np.abs((x - mean) - xshift)))
    except ValueError:
        return math.nan


def _keepdims_prediction(batch: int, seq: int, d: int, error: float) -> Prediction:
    """What x − mean does without keepdims, as NumPy answered it just now (``error`` NaN: it refused)."""
    refused = error != error
    count = exactly(1.0 if refused else 0.0, 1.0, "NumPy's refusals")
    ran = exactly(0.0 if refused else 1.0, 1.0, "runs without an error")
    gap = math.inf if refused else error
    evidence = (count, ran & at_most(gap, 0.0, "largest error"), ran & above(gap, 0.0, "largest error"))
    shape, mean_shape = [batch, seq, d], [batch, seq]
    if refused:
        why = _("Matched from the last axis, {shape} and {mean_shape} do not fit: NumPy refuses.")
    else:
        why = _("Matched from the last axis, {shape} and {mean_shape} fit: each mean goes along the wrong axis.")
    question = _("Here x is {shape} and a mean without keepdims is {mean_shape}: which happens?")
    return Prediction(
        question.format(shape=shape, mean_shape=mean_shape),
        (_("NumPy raises an error"), _("it runs and is right"), _("it runs and is wrong")),
        first_holding(evidence),
        why.format(shape=shape, mean_shape=mean_shape),
        evidence,
    )


def _shapes_table(shape_x: tuple[int, ...], m: formulas.Moments, shape_gamma: tuple[int, ...]) -> Table:
    """Each quantity of LayerNorm forward with its shape, for x of ``shape_x``."""
    per_token = _("one per token")
    table = plain_table(_("quantity"), _("shape"), _("note"))
    table.add_row("x", str(list(shape_x)), "[batch, seq, hidden]")
    table.add_row("mean", str(list(m.mean.shape)), _("one per token, axis kept"))
    table.add_row("xshift", str(list(m.xshift.shape)), _("x − mean broadcasts"))
    table.add_row("var", str(list(m.var.shape)), per_token)
    table.add_row("rstd", str(list(m.rstd.shape)), "")
    table.add_row("xhat", str(list(m.xhat.shape)), "")
    table.add_row("gamma, beta", str(list(shape_gamma)), _("one per feature"))
    table.add_row("y", str(list(np.broadcast_shapes(shape_gamma, m.xhat.shape))), "")  # gamma · xhat
    return table


@demo("ln_cache")
def ln_cache(p: LessonParams, batch: int = 8, seq: int = 1024, hidden: int = 768) -> DemoOutput:
    """What a forward pass keeps for backward, its size, and that xhat and rstd are enough for dx."""
    shape_x = (batch, seq, hidden)
    shape_s = (batch, seq, 1)
    n_x, n_s = math.prod(shape_x), math.prod(shape_s)
    table = plain_table(_("cached"), _("shape"), "float32", _("backward uses it for"), right=("float32",))
    for name, shape, count, use in (
        ("xhat", shape_x, n_x, "dgamma, dx"),
        ("rstd", shape_s, n_s, _("dx (the 1/std factor)")),
        ("mean", shape_s, n_s, _("recomputing xhat from x")),
        ("xshift", shape_x, n_x, _("three-path form only")),
    ):
        table.add_row(name, str(list(shape)), nbytes_text(4 * count), use)
    built = build_ln(p)
    m = formulas.moments(built.x, (-1,), p.eps)
    g = formulas.dxhat(built.dy, built.gamma)
    from_cache = formulas.dx_simplified(g, m.xhat, m.rstd, (-1,))
    three = formulas.dx_three_path(g, m.xshift, m.std, m.rstd, (-1,))
    backprop(built)
    autograd = node_values(built, "x", "grad")
    ok = agree(from_cache, autograd, what="dx from (xhat, rstd) vs autograd") & agree(
        three, autograd, what="three-path dx vs autograd"
    )
    line = _(
        "on your numbers, dx from (xhat, rstd) alone matches autograd ({difference}), "
        "and so does the three-path form that needs xshift and std"
    ).format(difference=difference(from_cache, autograd))
    return DemoOutput(Group(table, Text(""), claim(ok, line)))


def backprop(built: LNBuilt) -> None:
    """Run the engine's backward() on the lesson's loss (from zero)."""
    built.loss.zero_grad()
    built.loss.backward()


PYTORCH_EPS = 1e-5  # torch.nn.LayerNorm's default


def _exact_constant(near: float, dim: int) -> float:
    """A value c near ``near`` whose row [c] * dim the engine centers to exactly 0.

    The engine's mean is sum(x) · (1/n), rounded twice: for some c and n it misses c by one
    rounding step, and at eps = 0 LayerNorm then blows that rounding error up to xhat = ±1
    instead of dividing 0 by 0. The question is about the exact arithmetic, so such a c is
    replaced by a rounder one (0 always works).
    """
    for c in (near, round(near, 1), float(round(near)), 1.0, 0.0):
        try:
            layer_norm([c] * dim, None, None, 0.0)
        except DomainError:  # std exactly 0: the mean came out exactly c
            return c
    return 0.0


def _eps_rows(p: LessonParams, eps: float) -> list[tuple[str, list[float]]]:
    """The three rows of the eps demo, by key: the lesson's x, a constant row, and that row plus tiny noise."""
    x = ln_problem(p)[0]
    c = _exact_constant(float(x[0]), p.dim)
    noise = np.random.default_rng(p.seed + 1).normal(size=p.dim)
    return [("your x", x.tolist()), ("constant", [c] * p.dim), ("nearly const.", (c + 1e-4 * noise).tolist())]


def _eps_row_name(key: str) -> str:
    """How the eps table names a row of :func:`_eps_rows`, in the reader's language."""
    names = {
        "your x": _("your x"),
        "constant": pgettext("row of the eps table", "constant"),
        "nearly const.": pgettext("row of the eps table", "nearly const."),
    }
    return names[key]


def _ln_stats(row: list[float], eps: float) -> tuple[float, float, float, float] | None:
    """std, rstd, the spread of xhat and its largest |xhat_i| for LayerNorm of ``row``; None if it divides by 0."""
    try:
        g = layer_norm(row, None, None, eps).graph
    except DomainError:
        return None
    xhat = np.array([v.data for v in g["xhat"]])
    return g["std"][0].data, g["rstd"][0].data, float(np.std(xhat)), float(np.max(np.abs(xhat)))


@demo("ln_eps")
def ln_eps(p: LessonParams) -> DemoOutput:
    """What eps does: a constant row, a nearly constant row, and a normal row, with and without it."""
    eps = p.eps if p.eps > 0 else PYTORCH_EPS
    spread = _("std of xhat")
    table = plain_table(_("row"), "eps", "std", "rstd", spread, right=("eps", "std", "rstd", spread))
    stats: dict[tuple[str, float], tuple[float, float, float, float] | None] = {}
    for key, row in _eps_rows(p, eps):
        for e in (0.0, eps):
            stats[key, e] = got = _ln_stats(row, e)
            refused = ["0", Text("1/0", style="red"), Text(pgettext("table cell", "error"), style="red")]
            cells = refused if got is None else [num(got[0]), num(got[1]), num(got[2], 6)]
            table.add_row(_eps_row_name(key) if e == 0.0 else "", num(e), *cells)
    parts: list[RenderableType] = [table]
    if p.eps == 0:
        parts.append(
            dim_note(_("You ran with --eps 0: the rows with eps use PyTorch's default {eps}.").format(eps=f"{eps:g}"))
        )
    parts += _eps_claims(stats, eps, float(np.var(ln_problem(p)[0])))
    return DemoOutput(Group(*parts), prediction=_constant_row_prediction(stats["constant", 0.0]))


def _eps_claims(stats: dict[tuple[str, float], Any], eps: float, var: float) -> list[CJKText]:
    """The eps demo's three checked claims, from its rows' ``stats`` (keyed by row and eps)."""
    capped = all_of(
        *(
            at_most(v[1], 1 / math.sqrt(eps), f"{row}: rstd with eps")
            for (row, e), v in stats.items()
            if e > 0 and v is not None
        )
    )
    near_with, near_without = stats["nearly const.", eps][2], stats["nearly const.", 0.0][2]
    yours = stats["your x", eps][2]
    return [
        claim(capped, _("with eps, rstd never exceeds 1/√eps = {cap}").format(cap=num(1.0 / math.sqrt(eps)))),
        claim(
            below(near_with, near_without, "nearly const.: xhat's spread with vs without eps"),
            _("nearly const.: xhat's spread {with_eps} with eps, {without} without").format(
                with_eps=num(near_with, 3), without=num(near_without, 3)
            ),
        ),
        claim(
            within(yours, math.sqrt(var / (var + eps)), tol.CLOSED_FORM_RTOL, "your x: xhat's spread"),
            _("your x: xhat's spread is √(var/(var + eps)) = {spread}").format(spread=num(yours, 6)),
        ),
    ]


def _constant_row_prediction(at_zero: tuple[float, float, float, float] | None) -> Prediction:
    """The answer from what the engine did with a constant row at eps = 0 (its ``_ln_stats``)."""
    choices = (_("every xhat_i is 0"), _("every xhat_i is 1"), _("no number at all: 0/0"))
    largest = math.inf if at_zero is None else at_zero[3]  # the largest |xhat_i|
    evidence = (
        exactly(largest, 0.0, "largest |xhat_i|"),
        exactly(largest, 1.0, "largest |xhat_i|"),
        exactly(1.0 if at_zero is None else 0.0, 1.0, "the engine's refusals to divide"),
    )
    answer = first_holding(evidence)
    why = (
        _("xshift = 0 and std = 0, so xhat = 0/0: the engine refuses to divide (1/0 below).")
        if answer == 2
        else _("The engine computed a number for it (see the table).")
    )
    question = _("A token whose d features are all equal: what is xhat at eps = 0?")
    return Prediction(question, choices, answer, why, evidence)


# ---- the subgraph a step talks about, drawn as text (lessons 3 to 5) ------------------------------

# Above this many features the drawing would crowd a screen: the step says the g key draws the graph.
SUBGRAPH_MAX_DIM = 4


@demo("ln_subgraph")
def ln_subgraph(p: LessonParams, stages: tuple[str, ...] = ("mean",), grads: bool = True) -> DemoOutput:
    """The named nodes of ``stages`` as text: each value, what it is computed from, and (``grads``) its gradient.

    The gradients are those of the whole backward sweep; a step shows the stages whose nodes are
    complete at that point of the sweep (a node is complete once it passes its gradient on).
    """
    built = build_ln(p)
    if grads:
        backprop(built)
    if p.dim > SUBGRAPH_MAX_DIM:
        note = _(
            "At d = {dim} this drawing would crowd the screen: press g to draw the graph, "
            "or run with --dim {max_dim} to see it here."
        ).format(dim=p.dim, max_dim=SUBGRAPH_MAX_DIM)
        return DemoOutput(dim_note(note), graph=built.graph)
    # Translators: the key under the text drawing of a graph; "node", "value" and "grad" are its column heads
    key = _("node = value ← computed from; right: its grad, dL/d(node)") if grads else _("node = value ← computed from")
    return DemoOutput(Group(text_graph(built.graph, stages=stages, grads=grads), dim_note(key)), graph=built.graph)


# ---- lessons 4 and 5: LayerNorm backward-----------------------------------------------------


def traced(p: LessonParams, rows: int | None = None) -> tuple[LNBuilt, Trace]:
    built = build_ln(p, rows)
    return built, trace_backward(built.loss, ln_path_tagger(built.graph))


@demo("ln_loss_setup")
def ln_loss_setup(p: LessonParams) -> DemoOutput:
    """The forward output y, a random upstream gradient dy and the loss sum(y · dy)."""
    built = build_ln(p)
    backprop(built)
    y = node_values(built, "y")
    ygrad = node_values(built, "y", "grad")
    table = plain_table("i", "y", "dy", "y.grad", right=("i", "y", "dy", "y.grad"))
    for i in range(p.dim):
        table.add_row(str(i), num(y[i]), num(built.dy[i]), num(ygrad[i]))
    ok = equal(ygrad, built.dy, "y.grad vs dy")
    loss = Text.assemble(("loss = Σ y·dy = ", "bold"), num(built.loss.data))
    return DemoOutput(Group(table, loss, claim(ok, _("after backward(), y.grad is exactly dy"))), graph=built.graph)


@demo("ln_backward_steps")
def ln_backward_steps(p: LessonParams, stages: tuple[str, ...] = ("loss", "affine"), ask: str = "") -> DemoOutput:
    """Backward through the given stages of LayerNorm, one contribution at a time.

    ``ask`` puts a question first: "y_count" (how many contributions y_0 receives), "rstd_count"
    (how many rstd collects), "dvar_sign" (the sign of dL/dvar) or "x_count" (how many x_0 receives),
    each answered from the traced run.
    """
    built, trace = traced(p)

    def keep(c: Contribution) -> bool:
        return (c.out.stage or "") in stages

    table = _trace_table(trace, built.name, keep, built.constants)
    parts: list[RenderableType] = [_start_line("loss.grad = 1")] if "loss" in stages else []
    parts.append(table)
    if any(c.tag for c in trace.contributions if keep(c)):
        parts.append(path_legend())
    parts.append(dim_note(_("k/m: the k-th of m contributions; constants not shown")))
    questions = {
        "": None,
        "rstd_count": _rstd_count_prediction,
        "dvar_sign": _dvar_sign_prediction,
        "x_count": _x_count_prediction,
        "y_count": _y_count_prediction,
    }
    if ask not in questions:
        raise ValueError(f"ask: expected one of {sorted(questions)}, got {ask!r}")
    prediction = questions[ask](built, trace) if ask else None
    return DemoOutput(Group(*parts), graph=built.graph, prediction=prediction)


def _y_count_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """How many contributions y_0 receives, counted in the trace."""
    count = trace.incoming.get(id(built.graph["y"][0]), 0)
    d = len(built.graph["x"])
    counts = (1, 2, d) if d != 2 else (1, d)  # at d = 2 the choice "2" would be "d = 2" again
    evidence = tuple(exactly(count, k, "contributions y_0 receives") for k in counts)
    why = _("The trace counts {count}: y_0 is used once, by its own term y_0·dy_0 of the loss.").format(count=count)
    return Prediction(
        _("How many contributions will y_0 receive?"),
        (*(str(k) for k in counts[:-1]), f"d = {d}"),
        first_holding(evidence),
        why,
        evidence,
    )


@demo("ln_siblings")
def ln_siblings(p: LessonParams) -> DemoOutput:
    """Where xhat's gradient comes from: the product node γ·xhat, beside gamma's and beta's, not through them."""
    built, trace = traced(p)
    dxhat, dgamma = node_values(built, "xhat", "grad"), node_values(built, "gamma", "grad")
    cols = ("i", "dy_i", "gamma_i", "xhat.grad", "gamma.grad")
    table = plain_table(*cols, right=cols)
    for i in range(p.dim):
        table.add_row(str(i), num(built.dy[i]), num(built.gamma[i]), num(dxhat[i]), num(dgamma[i]))
    return DemoOutput(
        Group(table, _siblings_line(built, trace)),
        graph=built.graph,
        prediction=_via_params_prediction(built, trace),
    )


def _from_params(built: LNBuilt, trace: Trace) -> tuple[int, int]:
    """How many contributions of the sweep leave a gamma node and a beta node (leaves: they have no inputs)."""
    gammas = {id(v) for v in built.graph["gamma"]}
    betas = {id(v) for v in built.graph["beta"]}
    return (
        sum(id(c.out) in gammas for c in trace.contributions),
        sum(id(c.out) in betas for c in trace.contributions),
    )


def _siblings_line(built: LNBuilt, trace: Trace) -> CJKText:
    """The checked line: dxhat = gamma · dy, and no contribution leaves gamma or beta (their gradients go nowhere)."""
    from_gamma, from_beta = _from_params(built, trace)
    dxhat, expected = node_values(built, "xhat", "grad"), built.gamma * built.dy
    ok = (
        equal(dxhat, expected, "xhat.grad vs gamma · dy")
        & exactly(from_gamma, 0, "contributions leaving gamma")
        & exactly(from_beta, 0, "contributions leaving beta")
    )
    return claim(
        ok,
        _(
            "dxhat = gamma · dy exactly, and {count} contributions leave gamma or beta: their gradients "
            "are siblings of xhat's, not steps on its path"
        ).format(count=from_gamma + from_beta),
    )


def _via_params_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """Does the gradient reach xhat through dgamma and dbeta? Counted in the trace."""
    from_gamma, from_beta = _from_params(built, trace)
    evidence = (
        exactly(from_beta, 0, "contributions leaving beta") & at_least(from_gamma, 1, "contributions leaving gamma"),
        at_least(from_gamma, 1, "contributions leaving gamma") & at_least(from_beta, 1, "contributions leaving beta"),
        exactly(from_gamma + from_beta, 0, "contributions leaving gamma or beta"),
    )
    why = _(
        "The trace has {count} contributions leaving gamma or beta: they are leaves, so their gradients stop "
        "there. xhat gets its share from the product node γ·xhat, as gamma_i × the product's gradient dy_i."
    ).format(count=from_gamma + from_beta)
    return Prediction(
        _("Does the gradient reach xhat_i by way of dgamma_i and dbeta_i?"),
        (_("yes, through dgamma_i"), _("yes, through both"), _("no: it comes from the product node, beside them")),
        first_holding(evidence),
        why,
        evidence,
    )


def _rstd_count_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """How many contributions rstd collects, counted in the trace."""
    rstd = built.graph["rstd"][0]
    count = trace.incoming.get(id(rstd), 0)
    d = len(built.graph["x"])
    choices = (_("1: it is one node"), _("d = {d}: one from every xhat_i").format(d=d), f"2·d = {2 * d}")
    why = _(
        "The trace counts {count}: every xhat_i = xshift_i · rstd uses rstd once, and the row has {d} of them."
    ).format(count=count, d=d)
    evidence = tuple(exactly(count, k, "contributions rstd collects") for k in (1, d, 2 * d))
    return Prediction(_("How many contributions will rstd collect?"), choices, first_holding(evidence), why, evidence)


def _x_count_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """How many contributions x_0 receives in all, counted in the trace (2, though three paths reach it)."""
    count = trace.incoming.get(id(built.graph["x"][0]), 0)
    choices = ("1", "2", _("3: one per path"))
    why = _(
        "The trace counts {count} for x_0: one from xshift_0, which already carries the direct and the "
        "variance paths added together, and one from the mean's sum. Three paths, {count} edges."
    ).format(count=count)
    evidence = tuple(exactly(count, k, "contributions x_0 receives") for k in (1, 2, 3))
    return Prediction(
        _("How many contributions will x_0 receive in all?"), choices, first_holding(evidence), why, evidence
    )


def _dvar_sign_prediction(built: LNBuilt, trace: Trace) -> Prediction:
    """The sign of dL/dvar, read off the var node after backward."""
    var = built.graph["var"][0]
    xshift = node_values(built, "xshift")
    dxhat = node_values(built, "xhat", "grad")
    total = float(np.sum(dxhat * xshift))
    # Σ dxhat·xshift is 0 up to the rounding of its terms: then so is dL/dvar, whatever its printed sign
    rounding = tol.cancellation_atol(float(np.sum(np.abs(dxhat * xshift))), len(xshift))
    what = "Σ dxhat·xshift (dL/dvar has the opposite sign)"
    evidence = (
        below(total, -rounding, what),
        above(total, rounding, what),
        at_most(abs(total), rounding, "|" + what + "|"),
    )
    answer = first_holding(evidence)
    choices = (_("positive"), _("negative"), _("zero"))
    why = _(
        "dL/dvar = {dvar}: −½ (var + eps)^(−3/2) is negative, so dL/dvar has the opposite sign of "
        "Σ dxhat·xshift = {total}."
    ).format(dvar=num(var.grad), total=num(total))
    return Prediction(_("What sign will dL/dvar have on this run?"), choices, answer, why, evidence)


def path_legend() -> CJKText:
    """'paths into x: direct  via mean  via var', each name in its path's colour (the words carry it without)."""
    names = Text()
    for k in PATHS:
        names.append(f"{path_label(k)}  ", style=PATH_STYLE[k])
    return assemble(_("paths into x: {paths}"), "dim", paths=names)


@demo("ln_param_grads")
def ln_param_grads(p: LessonParams, rows: int = 2) -> DemoOutput:
    """dgamma and dbeta: autograd against the closed forms, summed over the rows that share them."""
    built = build_ln(p, rows)
    backprop(built)
    m = formulas.moments(built.x, (-1,), p.eps)
    dgamma = formulas.dgamma(built.dy, m.xhat, (0,))
    dbeta = formulas.dbeta(built.dy, (0,))
    auto_g = node_values(built, "gamma", "grad")
    auto_b = node_values(built, "beta", "grad")
    table = plain_table(
        "j", "Σ dy·xhat", "gamma.grad", "Σ dy", "beta.grad", right=("j", "Σ dy·xhat", "gamma.grad", "Σ dy", "beta.grad")
    )
    for j in range(p.dim):
        table.add_row(str(j), num(dgamma[j]), num(auto_g[j]), num(dbeta[j]), num(auto_b[j]))
    ok = agree(auto_g, dgamma, what="gamma.grad vs Σ dy·xhat") & agree(auto_b, dbeta, what="beta.grad vs Σ dy")
    note = dim_note(_("x has {rows} rows here, so each sum runs over {rows} rows.").format(rows=rows))
    return DemoOutput(Group(table, note, claim(ok, _("autograd = closed form for gamma and beta"))), graph=built.graph)


@demo("ln_node_grads")
def ln_node_grads(p: LessonParams, nodes: tuple[str, ...] = ("xhat",)) -> DemoOutput:
    """Named nodes' gradients: autograd against the closed forms of formulas.py."""
    built = build_ln(p)
    backprop(built)
    closed = _closed(built, p.eps)
    autograd_h, closed_h = _("autograd"), _("closed form")
    table = plain_table(_("node"), autograd_h, closed_h, right=(autograd_h, closed_h))
    checks = []
    for name in nodes:
        auto = node_values(built, name, "grad")
        cf = np.ravel(closed[name])
        checks.append(agree(auto, cf, what=f"{name}: autograd vs closed form"))
        for k in range(len(auto)):
            table.add_row(built.graph.index_label(name, k), num(auto[k]), num(cf[k]))
    return DemoOutput(Group(table, claim(all_of(*checks), _("autograd = closed form"))), graph=built.graph)


@demo("ln_dvar_dmean")
def ln_dvar_dmean(p: LessonParams) -> DemoOutput:
    """Why the variance sends (almost) nothing into the mean: dvar/dmean = -(2/n) Σ xshift = 0."""
    built, trace = traced(p)
    xshift = node_values(built, "xshift")
    n = p.dim
    dvar_dmean = -2.0 / n * float(np.sum(xshift))
    mean = built.graph["mean"][0]
    parts = trace.parts_of(mean)
    value = pgettext("table header", "value")
    table = plain_table(_("quantity"), value, right=(value,))
    table.add_row(_("Σ xshift (should be 0)"), num(float(np.sum(xshift))))
    table.add_row("dvar/dmean = −(2/n) Σ xshift", num(dvar_dmean))
    direct, via_var = _("mean.grad, part from xhat (direct)"), _("mean.grad, part via the variance")
    table.add_row(Text(direct, style=PATH_STYLE["direct"]), num(parts.get("direct", 0.0)))
    table.add_row(Text(via_var, style=PATH_STYLE["var"]), num(parts.get("var", 0.0)))
    table.add_row(_("mean.grad (autograd, total)"), num(mean.grad))
    table.add_row(_("−rstd · Σ dxhat (closed form)"), num(float(np.ravel(_closed(built, p.eps)["mean"])[0])))
    scale = max(abs(mean.grad), 1.0)
    share = parts.get("var", 0.0)
    bound = 1e3 * np.finfo(float).eps * scale * n  # rounding of n terms of mean.grad's size, with room
    ok = at_most(abs(share), bound, "|mean.grad's share via the variance|")
    rounding = _("the variance's share of mean.grad is rounding error: 0 in exact arithmetic")
    what = "mean.grad's share via the variance"
    evidence = (ok, above(share, bound, what), below(share, -bound, what))
    answer = first_holding(evidence)
    why = (
        _(
            "The engine's share of mean.grad via the variance is {share}, rounding error next to mean.grad = "
            "{grad}: dvar/dmean = −(2/n) Σ xshift, and values centered on their mean sum to zero."
        )
        if share != 0.0
        else _(
            "The engine's share of mean.grad via the variance is exactly 0 (mean.grad = {grad}): "
            "dvar/dmean = −(2/n) Σ xshift, and values centered on their mean sum to zero."
        )
    ).format(share=num(share), grad=num(mean.grad))
    prediction = Prediction(
        _("What does the variance path add to dL/dmean?"),
        (_("nothing: it is 0"), _("a positive amount"), _("a negative amount")),
        answer,
        why,
        evidence,
    )
    return DemoOutput(Group(table, claim(ok, rounding)), graph=built.graph, prediction=prediction)


@demo("ln_x_paths")
def ln_x_paths(p: LessonParams) -> DemoOutput:
    """x's gradient split into its three paths by the traced backward, against formulas.dx_paths."""
    built, trace = traced(p)
    m = formulas.moments(built.x, (-1,), p.eps)
    g = formulas.dxhat(built.dy, built.gamma)
    direct, via_mean, via_var = formulas.dx_paths(g, m.xshift, m.std, m.rstd, (-1,))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    table.add_column("i", justify="right")
    for k in PATHS:
        table.add_column(Text(path_label(k), style=PATH_STYLE[k]), justify="right", no_wrap=True)
    table.add_column("x.grad", justify="right", no_wrap=True)
    auto = {k: np.zeros(p.dim) for k in PATHS}
    for i, node in enumerate(built.graph["x"]):
        parts = trace.parts_of(node)
        for k in PATHS:
            auto[k][i] = parts.get(k, 0.0)
        table.add_row(str(i), *[Text(num(auto[k][i]), style=PATH_STYLE[k]) for k in PATHS], num(node.grad))
    ok = all_of(
        *(agree(auto[k], ref, what=f"{k} path vs dx_paths") for k, ref in zip(PATHS, (direct, via_mean, via_var)))
    )
    total_ok = agree(
        auto["direct"] + auto["mean"] + auto["var"],
        node_values(built, "x", "grad"),
        1e-12,
        1e-14,
        "sum of paths vs x.grad",
    )
    return DemoOutput(
        Group(
            table,
            claim(ok, _("each path matches its closed form in formulas.dx_paths")),
            claim(total_ok, _("the three paths add up to x.grad")),
        ),
        graph=built.graph,
        graph_options={"paths": True, "path_input": 0},
        prediction=path_prediction(trace.parts_of(built.graph["x"][0]), built.graph),
    )


@demo("ln_paths_code")
def ln_paths_code(p: LessonParams) -> DemoOutput:
    """formulas.dx_paths, the closed form of the three paths in NumPy, beside the traced contributions into x[0]."""
    built, trace = traced(p)
    m = formulas.moments(built.x, (-1,), p.eps)
    g = formulas.dxhat(built.dy, built.gamma)
    closed = formulas.dx_paths(g, m.xshift, m.std, m.rstd, (-1,))
    parts = trace.parts_of(built.graph["x"][0])
    # Translators: the headers of a table comparing, per path into x[0], the NumPy closed form with the sum of
    # the traced contributions
    numpy_h, traced_h = _("these lines"), _("traced")
    table = plain_table(_("path into x[0]"), numpy_h, traced_h, right=(numpy_h, traced_h))
    checks = []
    for k, ref in zip(PATHS, closed):
        got = parts.get(k, 0.0)
        checks.append(agree(got, ref[0], what=f"{k} path into x[0]: traced vs these lines"))
        table.add_row(Text(path_label(k), style=PATH_STYLE[k]), num(float(ref[0])), num(got))
    dvar = float(np.ravel(formulas.dvar(g, m.xshift, m.std, (-1,)))[0])
    prediction = _via_var_sum_prediction(np.ravel(closed[2]), dvar)
    return DemoOutput(
        Group(code_of(formulas.dx_paths), table, claim(all_of(*checks), _("each path: these lines = the traced sum"))),
        graph=built.graph,
        graph_options={"paths": True, "path_input": 0},
        prediction=prediction,
    )


def _via_var_sum_prediction(via_var: np.ndarray, dvar: float) -> Prediction:
    """Add the via-variance path up over every x_i: 0 (the centered values sum to 0), measured."""
    total = float(np.sum(via_var))
    zero = cancels(total, float(np.sum(np.abs(via_var))), "sum over i of the via-variance path", len(via_var))
    is_dvar = within(total, dvar, 1e-6, "sum over i of the via-variance path vs dL/dvar")
    evidence = (zero, all_of(~zero, is_dvar), all_of(~zero, ~is_dvar))
    why = _(
        "The sum is {total}: each term is dL/dvar · 2·xshift_i / n, and the centered values xshift_i sum to 0."
    ).format(total=err(total))
    return Prediction(
        _("Add up the via-variance path over every x_i. What is the total?"),
        (_("0, up to rounding"), _("the same as dL/dvar"), _("some other number")),
        first_holding(evidence),
        why,
        evidence,
    )


@demo("norm_code")
def norm_code(p: LessonParams, norm: str = "layernorm") -> DemoOutput:
    """The package function that builds a norm's graph, as its live source, and the call this demo made."""
    spec = get_norm(norm)
    shape = spec.default_shape(p.dim, p.batch)
    x, gamma, beta, _dy = (None if a is None else np.round(a, 2) for a in random_problem(spec, shape, p.seed))
    args = [x.tolist(), gamma.tolist()] + ([beta.tolist()] if spec.has_beta else [])
    y = spec.builder(*args, eps=p.eps)
    call = "{name}(x, gamma{beta}, eps={eps})".format(
        name=spec.builder.__name__, beta=", beta" if spec.has_beta else "", eps=f"{p.eps:g}"
    )
    shape_text = "[" + ", ".join(map(str, shape)) + "]"
    # Translators: {call} is a Python call such as layer_norm(x, gamma, beta, eps=1e-05); {shape} is like [4]
    ran = _("called here as {call}, x of shape {shape}, {count} output Values").format(
        call=call, shape=shape_text, count=math.prod(shape)
    )
    return DemoOutput(Group(code_of(spec.builder), dim_note(ran)), graph=y.graph)


def path_prediction(parts: dict[str, float], graph: NormGraph | None = None) -> Prediction:
    """Which of the three paths into x[0] is largest in size, answered from the traced split ``parts``.

    With the ``graph`` (after backward), ``why`` writes each path out as its factors, read off the nodes.
    """
    sizes = tuple(abs(parts.get(k, 0.0)) for k in PATHS)
    evidence = largest(sizes, PATHS, "size of the path into x[0]")
    answer = first_holding(evidence)
    # Translators: one path's share, e.g. "via mean 1.627"
    shares = separated([_("{path} {share}").format(path=path_label(k), share=num(parts.get(k, 0.0))) for k in PATHS])
    why = _("For x[0]: {shares}.").format(shares=shares)
    if graph is not None:
        n = len(graph["x"])
        rstd, dxhat0 = graph["rstd"][0].data, graph["xhat"][0].grad
        dmean, dvar, xshift0 = graph["mean"][0].grad, graph["var"][0].grad, graph["xshift"][0].data
        d, m, v = (num(parts.get(k, 0.0)) for k in PATHS)
        why = _(
            "direct = rstd·dxhat_0 = {rstd} × {dxhat0} = {direct}; via mean = dL/dmean / n = "
            "{dmean} / {n} = {via_mean}; via var = dL/dvar · 2·xshift_0 / n = {dvar} × 2 × {xshift0} / {n} = "
            "{via_var}."
        ).format(
            rstd=num(rstd),
            dxhat0=num(dxhat0),
            direct=d,
            dmean=num(dmean),
            n=n,
            via_mean=m,
            dvar=num(dvar),
            xshift0=num(xshift0),
            via_var=v,
        )
    return Prediction(
        _("Which of the three paths carries the most gradient into x[0] (largest in size)?"),
        (pgettext("choice", "direct"), _("via the mean"), _("via the variance")),
        answer,
        why,
        evidence,
    )


@demo("ln_simplified")
def ln_simplified(p: LessonParams) -> DemoOutput:
    """The simplified formula rstd · (g − mean(g) − xhat · mean(g · xhat)), term by term, against autograd."""
    built = build_ln(p)
    backprop(built)
    m = formulas.moments(built.x, (-1,), p.eps)
    g = formulas.dxhat(built.dy, built.gamma)
    m1 = float(np.mean(g))
    m2 = float(np.mean(g * m.xhat))
    dx = formulas.dx_simplified(g, m.xhat, m.rstd, (-1,))
    auto = node_values(built, "x", "grad")
    head = Text.assemble(
        ("mean(g) = ", "bold"),
        num(m1),
        ("   mean(g·xhat) = ", "bold"),
        num(m2),
        ("   rstd = ", "bold"),
        num(float(m.rstd.ravel()[0])),
    )
    cols = ("i", "g", "xhat", _("formula"), _("autograd"))
    table = plain_table(*cols, right=cols)
    for i in range(p.dim):
        table.add_row(str(i), num(g[i]), num(m.xhat[i]), num(dx[i]), num(auto[i]))
    same = _("formula = autograd ({difference})").format(difference=difference(auto, dx))
    return DemoOutput(
        Group(head, table, claim(agree(auto, dx, what="autograd vs formula"), same)),
        graph=built.graph,
        prediction=_shift_g_prediction(g, m),
    )


SHIFT_G = 3.0  # added to every g_i in lesson 5's question on the simplified formula


def _shift_g_prediction(g: np.ndarray, m: formulas.Moments) -> Prediction:
    """Add the same number to every g_i: what happens to dx? Measured with the formula itself."""
    rstd = float(m.rstd.ravel()[0])
    moved = formulas.dx_simplified(g + SHIFT_G, m.xhat, m.rstd, (-1,)) - formulas.dx_simplified(
        g, m.xhat, m.rstd, (-1,)
    )
    gap = float(np.max(np.abs(moved)))
    size = rstd * (float(np.max(np.abs(g))) + SHIFT_G) * (1.0 + float(np.max(m.xhat**2)))
    bound = tol.cancellation_atol(size, len(g))  # what rounding leaves of terms that cancel
    evidence = (
        at_most(gap, bound, "max |dx(g + c) − dx(g)|"),
        close_to(moved, np.full_like(moved, rstd * SHIFT_G), 1e-6, 0.0, "dx(g + c) − dx(g) vs rstd·c"),
        close_to(moved, np.full_like(moved, SHIFT_G), 1e-6, 0.0, "dx(g + c) − dx(g) vs c"),
    )
    why = _(
        "dx moved by at most {gap}: rounding. The mean path subtracts mean(g), which took the {c} with it, "
        "and mean(g·xhat) gains {c}·mean(xhat) = 0."
    ).format(gap=err(gap), c=f"{SHIFT_G:g}")
    c = f"{SHIFT_G:g}"
    return Prediction(
        _("Add {c} to every g_i. What happens to dx?").format(c=c),
        (_("nothing"), _("every dx_i grows by rstd·{c}").format(c=c), _("every dx_i grows by {c}").format(c=c)),
        first_holding(evidence),
        why,
        evidence,
    )


@demo("ln_check_table")
def ln_check_table(p: LessonParams, rows: int | None = None) -> DemoOutput:
    """The per-node three-way check (autograd, closed form, finite difference) on the lesson's numbers."""
    x, gamma, beta, dy = ln_problem(p, rows)
    report = check_norm("layernorm", x, gamma, beta, p.eps, dy)
    for node in report.nodes:  # the table's ✓/✗ per node, with what decided it
        agreeing = node.entry_ok if node.entry_ok is not None else np.array([node.passed])
        mark(at_most(int(np.sum(~agreeing)), 0, f"{node.name}: entries where autograd, closed form and fd disagree"))
    built = build_ln(p, rows)
    backprop(built)
    return DemoOutput(check_table(report), graph=built.graph)


# ---- lesson 6: one formula, several forms ----------------------------------------------------


def _forms(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    """dL/dx of one vector by each closed form in formulas.py."""
    m = formulas.moments(x, (-1,), eps)
    g = formulas.dxhat(dy, gamma)
    return {
        "three-path": formulas.dx_three_path(g, m.xshift, m.std, m.rstd, (-1,)),
        "simplified": formulas.dx_simplified(g, m.xhat, m.rstd, (-1,)),
        "projection": formulas.dx_projection(dy, gamma, m.xhat, float(m.rstd.ravel()[0])),
    }


def form_name(form: str) -> str:
    """The name of a form of dx (a key of :func:`_forms`) in the reader's language."""
    names = {
        "three-path": pgettext("form of dx", "three-path"),
        "simplified": pgettext("form of dx", "simplified"),
        "projection": pgettext("form of dx", "projection"),
    }
    return names[form]


def _agreement_text(auto: np.ndarray) -> str:
    """Which tolerance the forms of dx agree within, and why that one (it depends on how small dx is)."""
    largest = float(np.max(np.abs(auto)))
    if tol.CLOSED_FORM_RTOL * largest < tol.CLOSED_FORM_ATOL < largest:
        # dx is small but not 0 (a large eps, for one): the absolute allowance is the larger of the two
        return _(
            "all agree within {atol} absolute (tolerances.CLOSED_FORM_ATOL): autograd's dx is small here "
            "(largest |dx_i| = {largest}), so the absolute allowance is the larger one"
        ).format(atol=f"{tol.CLOSED_FORM_ATOL:.0e}", largest=err(largest))
    if tol.CLOSED_FORM_RTOL * largest < tol.CLOSED_FORM_ATOL:
        # dx is 0 up to rounding (d = 2 with eps = 0 makes y independent of x): a relative difference
        # would divide by about 0, so the verdict and the differences are absolute
        return _(
            "all agree within {atol} absolute (tolerances.CLOSED_FORM_ATOL): "
            "autograd's dx is 0 up to rounding here, so a relative difference would divide by about 0"
        ).format(atol=f"{tol.CLOSED_FORM_ATOL:.0e}")
    return _("all agree within {rtol} relative (tolerances.CLOSED_FORM_RTOL)").format(
        rtol=f"{tol.CLOSED_FORM_RTOL:.0e}"
    )


@demo("forms_agree")
def forms_agree(p: LessonParams) -> DemoOutput:
    """dx by autograd and by the three-path, simplified and projection forms, side by side."""
    built = build_ln(p)
    backprop(built)
    auto = node_values(built, "x", "grad")
    forms = _forms(built.x, built.gamma, built.dy, p.eps)
    cols = ["i", _("autograd"), *map(form_name, forms)]
    table = plain_table(*cols, right=cols)
    for i in range(p.dim):
        table.add_row(str(i), num(auto[i], 5), *[num(f[i], 5) for f in forms.values()])
    diffs = Table.grid(padding=(0, 1))
    diffs.add_column()
    diffs.add_column(justify="right")
    checks = []
    for name, f in forms.items():
        checks.append(agree(f, auto, what=f"{name} vs autograd"))
        absolute, value = shown_difference(f, auto)
        # Translators: {form} is the name of a form of dx (three-path, simplified, projection)
        largest = (
            _("{form} vs autograd, largest absolute difference:")
            if absolute
            else _("{form} vs autograd, largest relative difference:")
        )
        diffs.add_row(cjk_text(largest.format(form=form_name(name))), value)
    ok = all_of(*checks)
    verdict = claim(ok, _agreement_text(auto))
    prediction = _double_dy_prediction(built.x, built.gamma, built.dy, p.eps, forms)
    return DemoOutput(Group(table, Text(""), diffs, verdict), graph=built.graph, prediction=prediction)


SCALE_DY = 2.0  # the factor on dy in lesson 6's question on the forms


def _double_dy_prediction(
    x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float, forms: dict[str, np.ndarray]
) -> Prediction:
    """Multiply dy by SCALE_DY: what happens to dx? Measured with all three forms."""
    k = f"{SCALE_DY:g}"
    before = np.concatenate(list(forms.values()))
    after = np.concatenate(list(_forms(x, gamma, SCALE_DY * dy, eps).values()))
    same = close_to(after, before, 1e-6, 0.0, "dx(k·dy) vs dx(dy), every form")
    scaled = close_to(after, SCALE_DY * before, 1e-6, 0.0, "dx(k·dy) vs k·dx(dy), every form")
    evidence = (same, all_of(~same, scaled), all_of(~same, ~scaled))
    ratio = float(np.max(np.abs(after)) / np.max(np.abs(before)))
    why = _(
        "In every form, largest |dx| grew {ratio} times: each form is linear in g = gamma·dy. LayerNorm "
        "ignores the scale of x, not the scale of the gradient that comes back."
    ).format(ratio=num(ratio))
    if float(np.max(np.abs(before))) <= tol.CLOSED_FORM_ATOL:  # dx is 0 up to rounding: the ratio is of roundings
        zero = (
            _(
                "Here dx is 0 (d = 2, eps = 0: the output is ±1 whatever x), so it stays 0; "
                "rerun with --dim 3 to see it double."
            )
            if x.shape[-1] == 2 and eps == 0
            else _("Here dx is 0 up to rounding, so it stays 0; rerun with other options to see it double.")
        )
        why = sentences([why, zero])
    return Prediction(
        _("Multiply every dy_i by {k}. What happens to dx?").format(k=k),
        (
            _("nothing"),
            _("every dx_i is multiplied by {k}").format(k=k),
            _("it changes some other way"),
        ),
        first_holding(evidence),
        why,
        evidence,
    )


@demo("three_path_terms")
def three_path_terms(p: LessonParams) -> DemoOutput:
    """The three paths rewritten with xhat: each term of formulas.dx_paths against its simplified shape."""
    x, gamma, _beta, dy = ln_problem(p)
    m = formulas.moments(x, (-1,), p.eps)
    g = formulas.dxhat(dy, gamma)
    direct, via_mean, via_var = formulas.dx_paths(g, m.xshift, m.std, m.rstd, (-1,))
    rstd = float(m.rstd.ravel()[0])
    n = p.dim
    mean_term = -rstd * np.mean(g) * np.ones(n)
    var_term = -rstd * m.xhat * np.mean(g * m.xhat)
    m1, m2 = float(np.mean(g)), float(np.mean(g * m.xhat))
    head = Text.assemble(("m1 = mean(g) = ", "bold"), num(m1), ("   m2 = mean(g·xhat) = ", "bold"), num(m2))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    table.add_column("i", justify="right")
    table.add_column(Text(path_label("mean"), style=PATH_STYLE["mean"]), justify="right")
    table.add_column("−rstd·m1", justify="right")
    table.add_column(Text(path_label("var"), style=PATH_STYLE["var"]), justify="right")
    table.add_column("−rstd·xhat·m2", justify="right")
    for i in range(n):
        table.add_row(str(i), num(via_mean[i]), num(mean_term[i]), num(via_var[i]), num(var_term[i]))
    ok = agree(via_mean, mean_term, what="via mean vs −rstd·m1") & agree(
        via_var, var_term, what="via var vs −rstd·xhat·m2"
    )
    direct_ok = agree(direct, rstd * g, what="direct vs rstd·g")
    return DemoOutput(
        Group(
            head,
            table,
            claim(direct_ok, _("and the direct path is rstd · g")),
            claim(ok, _("each path equals its rewritten shape, so their sum is the simplified form")),
        )
    )


@demo("projection_form")
def projection_form(p: LessonParams, part: int = 1) -> DemoOutput:
    """P = (1/d)(1 1ᵀ + xhat xhatᵀ) on your numbers: part 1 its entries and facts, part 2 dx = rstd · (g − P g)."""
    if part not in (1, 2):
        raise ValueError(f"part: expected 1 (the matrix) or 2 (applied to g), got {part!r}")
    x, gamma, _beta, dy = ln_problem(p)
    m = formulas.moments(x, (-1,), p.eps)
    P = formulas.projection(m.xhat)
    if part == 1:
        # above 6 columns the numbers no longer fit 60 columns: the matrix is drawn as a heat map instead
        shown = _matrix_of(P) if p.dim <= 6 else heat_map(P, title=_("P for d = {d}").format(d=p.dim))
        return DemoOutput(Group(shown, Text(""), *_projection_facts(x, P, m, p)))
    g = formulas.dxhat(dy, gamma)
    rstd = float(m.rstd.ravel()[0])
    pg = P @ g
    dx = rstd * (g - pg)
    cols = ("i", "g", "P·g", "g − P·g", "× rstd")
    steps = plain_table(*cols, right=cols)
    for i in range(p.dim):
        steps.add_row(str(i), num(g[i]), num(pg[i]), num(g[i] - pg[i]), num(dx[i]))
    ref = formulas.dx_simplified(g, m.xhat, m.rstd, (-1,))
    return DemoOutput(
        Group(
            steps,
            claim(
                agree(dx, ref, what="rstd·(g − P·g) vs simplified form"),
                _("equals the simplified form ({difference})").format(difference=difference(dx, ref)),
            ),
        ),
        prediction=_sum_prediction(dx, g, rstd),
    )


def _matrix_of(P: np.ndarray) -> Table:
    cols = [str(j) for j in range(P.shape[0])]
    mat = plain_table("P", *cols, right=cols)
    for i, row in enumerate(P):
        mat.add_row(str(i), *[num(v, 3) for v in row])
    return mat


def _projection_facts(x: np.ndarray, P: np.ndarray, m: formulas.Moments, p: LessonParams) -> list[Text]:
    """Symmetric, rank 2, and P·P = P at eps = 0; at eps > 0 off by exactly −(shrink/n) xhat xhatᵀ."""
    n = p.dim
    rounding = 64 * np.finfo(float).eps * n  # the entries of P are at most 1 in size
    P0 = formulas.projection(formulas.moments(x, (-1,), 0.0).xhat)
    rank = int(np.linalg.matrix_rank(P))
    idempotent = float(np.abs(P0 @ P0 - P0).max())
    lines = [
        claim(at_most(float(np.abs(P - P.T).max()), rounding, "largest |P − Pᵀ|"), _("P is symmetric")),
        claim(exactly(rank, 2, "rank of P"), _("rank of P: {rank}").format(rank=rank)),
        claim(
            at_most(idempotent, rounding, "at eps = 0, largest |P·P − P|"),
            _("at eps = 0, largest |P·P − P| = {error}: rounding").format(error=err(idempotent)),
        ),
    ]
    if p.eps > 0:
        shrink = p.eps / (float(m.var.ravel()[0]) + p.eps)
        predicted = -(shrink / n) * np.outer(m.xhat, m.xhat)
        off = _(
            "at eps = {eps}, largest |P·P − P| = {error}, exactly −(shrink/n)·xhat xhatᵀ with shrink = eps/(var + eps)"
        ).format(eps=f"{p.eps:g}", error=err(float(np.abs(P @ P - P).max())))
        lines.append(
            claim(agree(P @ P - P, predicted, tol.CLOSED_FORM_RTOL, rounding, "P·P − P vs −(shrink/n)·xhat xhatᵀ"), off)
        )
    return lines


def _sum_prediction(dx: np.ndarray, g: np.ndarray, rstd: float) -> Prediction:
    total = float(np.sum(dx))
    candidates = (0.0, rstd * float(np.sum(g)), float(np.sum(g)))
    # "0, up to rounding": the rounding of rstd·Σ|g_i|; the other two by plain distance
    zero = tol.cancellation_atol(rstd * float(np.sum(np.abs(g))), len(g))
    near = closest(total, candidates, "Σ dx_i")
    evidence = (
        at_most(abs(total), zero, "|Σ dx_i|"),
        above(abs(total), zero, "|Σ dx_i|") & near[1],
        above(abs(total), zero, "|Σ dx_i|") & near[2],
    )
    answer = first_holding(evidence)
    why = _(
        "Σ dx_i = {total}. P·1 = 1 (xhat sums to 0) and P is symmetric, so 1·(P·g) = (P·1)·g = 1·g: "
        "g − P·g sums to 0, at any eps. (rstd · Σ g_i would have been {other}.)"
    ).format(total=err(total), other=num(candidates[1]))
    choices = (_("0, up to rounding"), "rstd · Σ g_i", "Σ g_i")
    return Prediction(_("dx = rstd · (g − P·g): what do the dx_i add up to?"), choices, answer, why, evidence)
