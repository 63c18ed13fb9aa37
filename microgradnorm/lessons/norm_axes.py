"""Which values share one mean and variance: the norms' pooling, computed and drawn.

Wu and He (2018, GroupNorm) drew the normalizations as a cube of activations
[N, C, H·W] with the values that share one statistic shaded. This module
computes that shading instead of typing it: each norm is run through the
package's registry entry on a *view* of the tensor (BatchNorm on [N, C, H, W]
as it is, LayerNorm on each example flattened to one row, GroupNorm as
LayerNorm on [N, G, C/G · H · W], and so on), and the registry's reduction axes
of that view say which values are pooled. A second, independent route checks
the first: change one input value of the package's vectorized forward pass and
see which outputs move (exactly the values of its group).

Drawn twice from the same group ids: a terminal grid (:func:`axes_panels`) and
an SVG of the cube (:func:`axes_figure`, what the lesson's ``g`` key writes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.table import Table
from rich.text import Text

from microgradnorm.drawing.figure import PALETTE, Figure
from microgradnorm.i18n import _, ngettext
from microgradnorm.i18n.text import CJKText
from microgradnorm.registry import get_norm
from microgradnorm.vectorized import public_pass

__all__ = [
    "LAYOUTS",
    "AxesFigure",
    "Layout",
    "Pooling",
    "axes_figure",
    "axes_panels",
    "group_ids",
    "moved_by_one",
    "pooled_axes",
    "poolings",
]


@dataclass(frozen=True)
class Layout:
    """A tensor layout: axis names, a small example shape, and how its values are laid out as a cube.

    ``rows`` is how many leading values the terminal grid puts one per line (the
    product of the axes before the channel axis); the channel axis runs across.
    ``cube`` names the cube's three edges (down, across, into the page) for the SVG.
    """

    name: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    norms: tuple[str, ...]
    cube: tuple[str, str, str]


LAYOUTS: dict[str, Layout] = {
    "images": Layout(
        "images", ("N", "C", "H", "W"), (3, 6, 2, 2), ("BatchNorm", "LayerNorm", "GroupNorm"), ("N", "C", "H·W")
    ),
    "tokens": Layout("tokens", ("B", "T", "C"), (2, 3, 6), ("BatchNorm", "LayerNorm", "RMSNorm"), ("T", "C", "B")),
}

GROUPS = 2  # GroupNorm's number of channel groups in the pictures


@dataclass(frozen=True)
class Pooling:
    """One norm on one layout: the registry entry it runs and the shape it runs it on."""

    label: str
    norm: str  # registry name
    view: tuple[int, ...]  # the shape the registry norm sees (a reshape of the layout's shape)
    note: str  # how the view comes about, in words


def poolings(layout: Layout, shape: tuple[int, ...] | None = None) -> list[Pooling]:
    """The norms of ``layout`` as registry entries on views of ``shape`` (default: the layout's own)."""
    shape = tuple(shape or layout.shape)
    out = []
    for label in layout.norms:
        if layout.name == "images":
            n, c, h, w = shape
            if label == "BatchNorm":
                out.append(Pooling(label, "batchnorm", shape, "BatchNorm on [N, C, H, W] as it is"))
            elif label == "LayerNorm":
                out.append(Pooling(label, "layernorm", (n, c * h * w), "LayerNorm of each example as one row"))
            else:
                if c % GROUPS:
                    raise ValueError(f"shape: GroupNorm needs C divisible by {GROUPS}, got C = {c}")
                view = (n, GROUPS, c // GROUPS * h * w)
                out.append(Pooling(label, "layernorm", view, f"LayerNorm on [N, {GROUPS}, C/{GROUPS}·H·W]"))
        else:
            b, t, c = shape
            if label == "BatchNorm":
                out.append(Pooling(label, "batchnorm", (b * t, c), "BatchNorm on [B·T, C]"))
            else:
                out.append(Pooling(label, label.lower(), shape, f"{label} on [B, T, C] as it is"))
    return out


def group_ids(pooling: Pooling, shape: tuple[int, ...]) -> np.ndarray:
    """An integer per value of ``shape``: the index of the statistic it is normalized with.

    From the registry: the view's reduced axes (``NormSpec.axes``) collapse to one
    statistic, the other axes index them.
    """
    axes = get_norm(pooling.norm).axes(pooling.view)
    stat_shape = tuple(1 if k in axes else s for k, s in enumerate(pooling.view))
    ids = np.arange(math.prod(stat_shape)).reshape(stat_shape)
    return np.broadcast_to(ids, pooling.view).reshape(shape)


def _forward(pooling: Pooling, x: np.ndarray) -> np.ndarray:
    spec = get_norm(pooling.norm)
    xv = x.reshape(pooling.view)
    y, _cache = public_pass(spec)[0](xv, None, None, 1e-5, backend="numpy")  # every norm: (x, gamma, beta, eps)
    return y.reshape(x.shape)


def moved_by_one(pooling: Pooling, x: np.ndarray) -> np.ndarray:
    """A boolean [size, size] matrix: entry (k, j) is True when changing input k moves output j.

    The package's vectorized forward pass, run once per input value with that
    value increased by one: an experiment that does not read the registry's axes.
    """
    base = _forward(pooling, x)
    flat = x.reshape(-1)
    moved = np.zeros((flat.size, flat.size), dtype=bool)
    for k in range(flat.size):
        nudged = flat.copy()
        nudged[k] += 1.0
        moved[k] = np.abs(_forward(pooling, nudged.reshape(x.shape)) - base).reshape(-1) > 1e-9
    return moved


def pooled_axes(ids: np.ndarray, names: Sequence[str]) -> str:
    """Which axes one statistic spans: 'N, H, W', or 'H, W, C/2' (each half of C: GroupNorm's groups)."""
    whole, part = [], []
    for axis, name in enumerate(names):
        line = np.moveaxis(ids, axis, -1).reshape(-1, ids.shape[axis])[0]  # the ids along this axis
        changes = line[1:] != line[:-1]
        if not changes.any():
            whole.append(name)
        elif not changes.all():
            part.append(f"{name}/{ids.shape[axis] // (int(np.argmax(changes)) + 1)}")
    return ", ".join(whole + part)


# ---- the terminal grid -----------------------------------------------------------------------


def _grid(ids: np.ndarray, layout: Layout) -> tuple[np.ndarray, bool]:
    """ids as [rows, C, rest]: the group of each grid cell, and whether every cell is one group."""
    c_axis = layout.axes.index("C")
    cells = ids.reshape(math.prod(ids.shape[:c_axis]), ids.shape[c_axis], -1)
    return cells[:, :, 0], bool((cells == cells[:, :, :1]).all())


def _over(ids: np.ndarray, layout: Layout) -> str:
    # Translators: {axes} are the axes one statistic is taken over, e.g. "N, H, W"
    return _("over {axes}").format(axes=pooled_axes(ids, layout.axes))


def _panel(label: str, ids: np.ndarray, layout: Layout) -> Text:
    grid, whole = _grid(ids, layout)
    shaded = grid == grid[0, 0]
    text = CJKText(label, style="bold")
    text.append(f"\n{_over(ids, layout)}\n", style="dim")
    for r in range(grid.shape[0]):
        text.append(_row_label(layout, r), style="dim")
        for on in shaded[r]:
            text.append(" ■" if on else " ·", style="bold" if on else "dim")
        text.append("\n")
    n_groups, size = len(np.unique(ids)), ids.size // len(np.unique(ids))
    text.append(
        ngettext("{groups} group of {size}", "{groups} groups of {size}", n_groups).format(groups=n_groups, size=size)
    )
    if not whole:
        text.append("\n" + _("(cells mix groups)"), style="bold")
    return text


def _row_label(layout: Layout, r: int) -> str:
    if layout.name == "images":
        return f"n{r}"
    t = layout.shape[1]
    return f"b{r // t}t{r % t}"


def axes_panels(layout: Layout) -> Table:
    """The norms of ``layout`` side by side: ■ marks the values that share the first value's statistic."""
    grid = Table.grid(padding=(0, 2))  # a column per panel: add_row adds them
    grid.add_row(*(_panel(pooling.label, group_ids(pooling, layout.shape), layout) for pooling in poolings(layout)))
    return grid


# ---- the SVG cube ----------------------------------------------------------------------------


class AxesFigure(Figure):
    """A :class:`~microgradnorm.drawing.figure.Figure` that can also fill polygons (the cube's cells)."""

    def polygon(self, points: Sequence[tuple[float, float]], fill: str, stroke: str = "#555") -> None:
        """A filled polygon through data points."""
        pts = " ".join(f"{px},{py}" for px, py in (self.to_px(x, y) for x, y in points))
        self._items.append(f'<polygon points="{pts}" fill="{fill}" stroke="{stroke}" stroke-width="0.8"/>')


def _cube_cells(ids: np.ndarray, layout: Layout) -> np.ndarray:
    """ids arranged as the cube [down, across, depth] that the SVG draws."""
    if layout.name == "images":
        n, c = ids.shape[:2]
        return ids.reshape(n, c, -1)
    return np.transpose(ids, (1, 2, 0))  # [T, C, B]: B runs into the page


def _draw_cube(fig: AxesFigure, cells: np.ndarray, origin: tuple[float, float], edges: tuple[str, str, str]) -> None:
    """One cube at ``origin`` (top-left of its front face, y down in px); shaded: the first value's group."""
    rows, cols, depth = cells.shape
    s, dk = 18.0, 12.0  # cell size; depth step (drawn up and to the right)
    ox, oy = origin
    height = fig.height

    def pt(r: float, c: float, k: float) -> tuple[float, float]:
        return ox + c * s + k * dk, height - (oy + r * s - k * dk)

    mark = cells.reshape(-1)[0]

    def colour(r: int, c: int, k: int) -> str:
        return PALETTE[0] if cells[r, c, k] == mark else "#f2f2f2"

    for k in reversed(range(depth)):  # top face, back to front
        for c in range(cols):
            fig.polygon([pt(0, c, k), pt(0, c + 1, k), pt(0, c + 1, k + 1), pt(0, c, k + 1)], colour(0, c, k))
    for r in range(rows):  # right face
        for k in reversed(range(depth)):
            fig.polygon(
                [pt(r, cols, k), pt(r, cols, k + 1), pt(r + 1, cols, k + 1), pt(r + 1, cols, k)], colour(r, cols - 1, k)
            )
    for r in range(rows):  # front face
        for c in range(cols):
            fig.polygon([pt(r, c, 0), pt(r, c + 1, 0), pt(r + 1, c + 1, 0), pt(r + 1, c, 0)], colour(r, c, 0))
    down, across, into = edges
    fig.text(pt(rows / 2, 0, 0), down, dx=-8, anchor="end", size=13)
    fig.text(pt(rows, cols / 2, 0), across, dy=16, anchor="middle", size=13)
    fig.text(pt(0, cols, depth / 2), into, dx=8, size=13)


def axes_figure(layout: Layout) -> AxesFigure:
    """The cube figure: one cube per norm, the values that share the first value's statistic shaded."""
    norms = poolings(layout)
    width = 40 + 220 * len(norms)
    height = 250
    fig = AxesFigure(width=width, height=height, xlim=(0, width), ylim=(0, height), margin=(0, 0, 0, 0))
    dims = ", ".join(f"{a}={s}" for a, s in zip(layout.axes, layout.shape))
    title = _("Which values share one mean and variance: [{dims}]").format(dims=dims)
    fig.text((width / 2, height - 26), title, anchor="middle", size=16)
    for k, pooling in enumerate(norms):
        ids = group_ids(pooling, layout.shape)
        left = 50 + 220 * k
        _draw_cube(fig, _cube_cells(ids, layout), (left, 90), layout.cube)
        fig.text((left + 60, height - 185), pooling.label, anchor="middle", size=15)
        fig.text((left + 60, height - 203), _over(ids, layout), anchor="middle", size=12)
    fig.text(
        (width / 2, 14),
        _("shaded: the values normalized with the same statistic as the first one"),
        anchor="middle",
        size=12,
    )
    return fig
