"""Small helpers shared by the demos of every lesson: random inputs, engine gradients, numbers, tables, verdicts.

Nothing here computes a formula; the formulas live in :mod:`microgradnorm.formulas`
and the gradients come from the engine. These helpers only draw inputs from the
lesson's seed, run ``backward()``, lay numbers out so that they fit 60 columns
(the backward trace's table among them), name the three paths into x, and say how
close two results are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.engine import Value
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import CJKText, assemble, cjk_text
from microgradnorm.numfmt import err, fmt, sci
from microgradnorm.present import shown_error
from microgradnorm.registry import get_norm
from microgradnorm.trace import Contribution, Trace
from microgradnorm.verdicts import Check, check_mark, close_to

__all__ = [
    "PATHS",
    "PATH_STYLE",
    "agree",
    "autograd_dx",
    "check_mark",
    "closed_paths",
    "difference",
    "dim_note",
    "engine_forward",
    "fd_agree",
    "fmt",
    "index_rows",
    "index_table",
    "matrix_table",
    "max_rel",
    "maxabs",
    "num",
    "number_table",
    "path_label",
    "path_tag",
    "plain_table",
    "random_dy",
    "random_gamma",
    "random_vector",
    "ratio",
    "rng_for",
    "sci",
    "shown_difference",
    "start_line",
    "trace_table",
    "vec",
]


def rng_for(seed: int, salt: int = 0) -> np.random.Generator:
    """The lesson's random generator; ``salt`` gives independent streams within one demo.

    The entropy ends in a fixed nonzero word on purpose: NumPy treats ``[seed, 0]``
    like ``seed``, so without it the x of a demo could be the very stream another
    module draws dy from (and dy an affine function of x has a zero LayerNorm gradient).
    """
    return np.random.default_rng([seed, salt, 0x4C6E])


def random_vector(seed: int, d: int, *, loc: float = 0.5, scale: float = 2.0, salt: int = 0) -> np.ndarray:
    """A float64 vector of length d with a nonzero mean and a spread that is not 1."""
    return rng_for(seed, salt).normal(loc, scale, size=d)


def random_dy(seed: int, shape: int | tuple[int, ...], *, salt: int = 2) -> np.ndarray:
    """A random upstream gradient dy (never all ones: see :mod:`microgradnorm.check`)."""
    return rng_for(seed, salt).normal(size=shape)


def random_gamma(seed: int, d: int, *, salt: int = 1) -> np.ndarray:
    """gamma around 1 but not 1 (so that forgetting diag(gamma) would show)."""
    return rng_for(seed, salt).uniform(0.5, 1.5, size=d)


def ratio(a: float, b: float) -> float:
    """a / b, or NaN when b is 0 (shown as a dash by :func:`sci` and :func:`fmt`, from :mod:`microgradnorm.numfmt`)."""
    return a / b if b != 0 else math.nan


def engine_forward(norm: str, x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5, **kw: Any) -> np.ndarray:
    """y from the scalar graph, as a float64 array shaped like x."""
    graph = get_norm(norm).build_graph(np.asarray(x, dtype=np.float64).tolist(), gamma, beta, eps, **kw)
    return np.array([v.data for v in graph["y"]], dtype=np.float64).reshape(graph.shape)


def autograd_dx(
    norm: str, x: Any, gamma: Any, beta: Any, eps: float, dy: Any, **kw: Any
) -> tuple[dict[str, np.ndarray], Any]:
    """Build ``norm`` on x, backpropagate loss = sum(y * dy), return every named node's grad and the graph.

    The dict maps node names (x, mean, var, xhat, gamma, ...) to float64 arrays;
    per-element nodes are shaped like x.
    """
    spec = get_norm(norm)
    graph = spec.build_graph(_tolist(x), _tolist(gamma), _tolist(beta), eps, **kw)
    loss = graph.loss(np.asarray(dy, dtype=np.float64).tolist())
    loss.backward()
    grads = {}
    for name, nodes in graph.nodes.items():
        arr = np.array([v.grad for v in nodes], dtype=np.float64)
        grads[name] = arr.reshape(graph.shape) if arr.size == int(np.prod(graph.shape)) else arr
    return grads, graph


def closed_paths(
    x: np.ndarray, gamma: Any, dy: np.ndarray, eps: float, axes: tuple[int, ...] = (-1,)
) -> tuple[formulas.Moments, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The closed forms' side of dx: x's moments, g = dL/dxhat and the three paths into x (formulas.dx_paths)."""
    m = formulas.moments(x, axes, eps)
    g = formulas.dxhat(dy, gamma)
    return m, g, formulas.dx_paths(g, m.xshift, m.std, m.rstd, axes)


def _tolist(a: Any) -> Any:
    return None if a is None else np.asarray(a, dtype=np.float64).tolist()


def number_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    caption: str | None = None,
    justify_first: str = "left",
    padding: tuple[int, int, int, int] = (0, 1, 0, 1),
) -> Table | Group:
    """A compact table (no outer border) whose cells are strings or rich Text.

    ``title`` is printed above and ``caption`` under the table, at full width.
    """
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=padding,
        header_style="bold",
    )
    for k, h in enumerate(headers):
        # no_wrap everywhere: a table too wide for the console shortens cells with an
        # ellipsis rather than squeezing a column (the row labels) down to nothing
        header = Text(h, style="bold")  # Text, so that "E[x²]" is not read as markup
        table.add_column(header, justify=justify_first if k == 0 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*[c if isinstance(c, Text) else str(c) for c in row])
    if title is None and caption is None:
        return table
    # title and caption as full-width Text lines (as Table title/caption they would be cut or
    # wrapped to the table's own width), and as Text, so that "[i, 0]" is not read as markup
    # cjk_text: a translated title or caption wraps between Chinese characters (English wraps as before)
    parts: list[Any] = [] if title is None else [cjk_text(title, style="italic")]
    parts.append(table)
    if caption:
        parts.append(dim_note(caption))
    return Group(*parts)


def matrix_table(m: np.ndarray, *, title: str | None = None, digits: int = 3, row_label: str = "") -> Table | Group:
    """A small matrix as numbers, one column per matrix column (index headers)."""
    m = np.atleast_2d(np.asarray(m, dtype=np.float64))
    headers = [row_label] + [str(j) for j in range(m.shape[1])]
    rows = [[str(i)] + [fmt(v, digits) for v in row] for i, row in enumerate(m)]
    return number_table(headers, rows, title=title, padding=(0, 0, 0, 1))


# ---- the three paths into x ------------------------------------------------------------------

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
    """A number for a narrow table: ``digits`` significant digits, never '-0' (:func:`microgradnorm.numfmt.fmt`)."""
    return fmt(float(v), digits)


def vec(values: Iterable[float], digits: int = 4) -> str:
    return "[" + ", ".join(num(v, digits) for v in values) + "]"


def plain_table(*columns: str | Text, title: str | None = None, right: Sequence[str | Text] = ()) -> Table:
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
        header = c if isinstance(c, Text) else Text(c)
        table.add_column(header, justify="right" if c in right else "left", no_wrap=c in right)
    return table


def index_rows(*columns: Iterable[Any], digits: int = 4) -> list[list[Any]]:
    """One row per index i: i, then the i-th entry of each column (a number as :func:`num`, text as it is)."""
    return [
        [str(i), *(c if isinstance(c, (str, Text)) else num(c, digits) for c in row)]
        for i, row in enumerate(zip(*columns))
    ]


def index_table(headers: Sequence[str | Text], *columns: Iterable[Any], digits: int = 4) -> Table:
    """The lessons' vector table: the index under ``headers[0]``, then one right-justified column per vector."""
    table = plain_table(*headers, right=headers)
    for row in index_rows(*columns, digits=digits):
        table.add_row(*row)
    return table


def dim_note(text: str) -> CJKText:
    """A dim line under a table, in the reader's language; wraps the Chinese way."""
    return cjk_text(text, style="dim")


def max_rel(a: Any, b: Any) -> float:
    """Normwise relative difference max|a - b| / max|b| (for display)."""
    return tol.normwise_error(np.ravel(a), np.ravel(b))[1]


def maxabs(a: float | np.ndarray) -> str:
    """The largest magnitude in ``a``, in scientific notation (for error and residual lines)."""
    return sci(float(np.max(np.abs(a))))


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


# ---- the backward trace table (lessons 1, 4 and 5) ------------------------------------------


def trace_table(
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


def start_line(formula: str) -> CJKText:
    """'start: L.grad = 1': where backward() begins, the word bold, the formula plain."""
    return assemble(_("start: {formula}"), "bold", formula=Text(formula))
