"""Small helpers shared by the demos of lessons 02-13: random inputs, engine gradients, tables.

Nothing here computes a formula; the formulas live in :mod:`microgradnorm.formulas`
and the gradients come from the engine. These helpers only draw inputs from the
lesson's seed, run ``backward()`` and lay numbers out so that they fit 60 columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from microgradnorm.i18n.text import cjk_text
from microgradnorm.numfmt import fmt
from microgradnorm.registry import get_norm
from microgradnorm.verdicts import check_mark

__all__ = [
    "autograd_dx",
    "check_mark",
    "engine_forward",
    "fmt",
    "matrix_table",
    "number_table",
    "random_dy",
    "random_gamma",
    "random_vector",
    "ratio",
    "rng_for",
    "sci",
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


def sci(v: float, digits: int = 2) -> str:
    """A number in scientific notation, for errors and residuals (NaN as a dash)."""
    if v != v:
        return "—"
    return f"{v + 0.0:.{digits}e}"  # + 0.0 turns -0.0 into 0.0


def ratio(a: float, b: float) -> float:
    """a / b, or NaN when b is 0 (shown as a dash by :func:`sci` and :func:`fmt`)."""
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
        parts.append(cjk_text(caption, style="dim"))
    return Group(*parts)


def matrix_table(m: np.ndarray, *, title: str | None = None, digits: int = 3, row_label: str = "") -> Table | Group:
    """A small matrix as numbers, one column per matrix column (index headers)."""
    m = np.atleast_2d(np.asarray(m, dtype=np.float64))
    headers = [row_label] + [str(j) for j in range(m.shape[1])]
    rows = [[str(i)] + [fmt(v, digits) for v in row] for i, row in enumerate(m)]
    return number_table(headers, rows, title=title, padding=(0, 0, 0, 1))
