"""Lesson 07's picture: LayerNorm at eps = 0 for d = 3, seen face-on.

At eps = 0, xhat = (x − mean)/std has mean 0 and squared length d: it lies on
the sphere of radius √d inside the hyperplane orthogonal to the ones vector.
For d = 3 that hyperplane is the plane x + y + z = 0 and the sphere is a circle.
The backward pass dx = rstd · (I − P) g removes from g = gamma·dy its part along
1 (out of that plane) and its part along xhat (radial), which leaves the part
tangent to the circle at xhat.

:func:`plane_geometry` computes the picture's vectors (pure data, tested against
an independent oracle); the demo draws them in the terminal (braille) and as an
SVG figure for the ``g`` key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm import formulas
from microgradnorm.drawing.braille import PlanePicture
from microgradnorm.drawing.figure import PALETTE, Figure
from microgradnorm.i18n import N_, _
from microgradnorm.lessons.demo_tools import autograd_dx, fmt, random_dy, random_gamma, random_vector, sci
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.verdicts import (
    at_most,
    claim,
    close_to,
    largest,
    within,
)

# An orthonormal basis of the plane x + y + z = 0 (both rows are orthogonal to 1 and to each other).
PLANE_BASIS = np.array([[1.0, -1.0, 0.0] / np.sqrt(2.0), [1.0, 1.0, -2.0] / np.sqrt(6.0)])
# How small a dot product must be, relative to the lengths multiplied, to count as zero (rounding).
ORTHOGONAL_RTOL = 1e-12


@dataclass(frozen=True)
class PlaneGeometry:
    """The vectors of the picture, in R³; :meth:`flat` gives their coordinates in the plane's basis."""

    x: np.ndarray  # the input
    xshift: np.ndarray  # x − mean: x moved into the plane (along 1)
    xhat: np.ndarray  # xshift / std: on the circle of radius √3
    g: np.ndarray  # gamma · dy, the gradient arriving at xhat
    g_plane: np.ndarray  # g − mean(g): its part in the plane
    tangent: np.ndarray  # (I − P) g: what the backward pass keeps
    rstd: float

    @staticmethod
    def flat(v: np.ndarray) -> tuple[float, float]:
        """Coordinates of a vector of the plane in PLANE_BASIS."""
        u, w = PLANE_BASIS @ v
        return float(u), float(w)


def plane_geometry(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray) -> PlaneGeometry:
    """The picture's vectors for LayerNorm of a 3-vector x at eps = 0."""
    m = formulas.moments(x, (0,), 0.0)
    g = formulas.dxhat(dy, gamma)
    tangent = g - formulas.projection(m.xhat) @ g
    return PlaneGeometry(x, m.xshift, m.xhat, g, g - g.mean(), tangent, float(m.rstd[0]))


def _problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x with a spread near 1.5 (so that x − mean lands near the circle, inside or out), gamma and dy."""
    return random_vector(seed, 3, scale=1.5), random_gamma(seed, 3), random_dy(seed, 3)


def _arrow_scale(geo: PlaneGeometry) -> float:
    """Gradients are drawn on one scale of their own: the in-plane part of g at 3/4 of the radius."""
    size = float(np.linalg.norm(geo.g_plane))
    return 0.75 * math.sqrt(3.0) / size if size > 0 else 1.0


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0


def terminal_picture(geo: PlaneGeometry) -> PlanePicture:
    """The plane face-on in braille: the circle, x − mean, xhat, and the gradient before and after I − P."""
    k = _arrow_scale(geo)
    h = np.array(geo.flat(geo.xhat))
    tips = {"g": h + k * np.array(geo.flat(geo.g_plane)), "t": h + k * np.array(geo.flat(geo.tangent))}
    xs = np.array(geo.flat(geo.xshift))
    extent = 1.1 * max(math.sqrt(3.0), float(np.linalg.norm(xs)), *(float(np.linalg.norm(v)) for v in tips.values()))
    pic = PlanePicture(extent, cols=26, rows=13, title=_("the plane x + y + z = 0, face-on (d = 3, eps = 0)"))
    pic.circle(math.sqrt(3.0), style="bright_black")
    pic.note("○", _("circle of radius √3"), "bright_black")
    pic.segment((0.0, 0.0), xs if np.linalg.norm(xs) > np.linalg.norm(h) else h, style="bright_black")
    pic.segment(h, tips["g"], style="yellow")
    pic.segment(h, tips["t"], style="green")
    pic.segment(tips["g"], tips["t"], style="red", dotted=True)
    pic.point((0.0, 0.0), "o", _("origin"), "bright_black")
    pic.point(xs, "x", "x − mean", "cyan")
    pic.point(h, "h", _("xhat, on the circle"), "magenta")
    pic.point(tips["g"], "g", _("γ·dy, its in-plane part"), "yellow")
    pic.point(tips["t"], "t", _("(I − P)·g: what is kept"), "green")
    pic.note("⋯", _("the part I − P drops"), "red")
    pic.note(" ", _("(g and t on one scale)"), None)
    return pic


# The letters of the picture and what they stand for, in the order of the legend (translated when drawn).
LEGEND = (
    ("o", N_("origin (the mean of x)")),
    ("x", N_("x − mean: x moved into the plane along 1")),
    ("h", N_("xhat = (x − mean)/std, on the circle of radius √3")),
    ("g", N_("g = γ·dy, its part in the plane (g − mean(g))")),
    ("t", N_("(I − P)·g: what backward keeps, tangent at h")),
)


def _outward(p: np.ndarray, px: float = 12.0) -> tuple[float, float]:
    """A pixel offset that moves a label away from the origin, so it clears the lines that meet at the point."""
    n = float(np.linalg.norm(p))
    return (px * p[0] / n, -px * p[1] / n) if n > 0 else (px, -px)


def svg_figure(geo: PlaneGeometry) -> Figure:
    """The same picture as an SVG figure, for the g key: letters at the points, words in the legend below."""
    k = _arrow_scale(geo)
    h = np.array(geo.flat(geo.xhat))
    xs = np.array(geo.flat(geo.xshift))
    g_tip, t_tip = h + k * np.array(geo.flat(geo.g_plane)), h + k * np.array(geo.flat(geo.tangent))
    r = 1.15 * max(math.sqrt(3.0), *(float(np.linalg.norm(v)) for v in (xs, g_tip, t_tip)))
    fig = Figure(width=520, height=670, xlim=(-r, r), ylim=(-r, r), margin=(50, 30, 160, 30))
    fig.title = _("LayerNorm at eps = 0, d = 3: the plane x + y + z = 0, face-on")
    angles = np.linspace(0.0, 2.0 * math.pi, 181)
    fig.polyline(list(math.sqrt(3.0) * np.cos(angles)), list(math.sqrt(3.0) * np.sin(angles)), colour="#888")
    fig.polyline([-r, r], [0.0, 0.0], colour="#ddd", width=1)
    fig.polyline([0.0, 0.0], [-r, r], colour="#ddd", width=1)
    # the axes are named below the plot, not at their ends, where a point's letter can land (issue 27, item 18)
    far = xs if np.linalg.norm(xs) > np.linalg.norm(h) else h
    fig.polyline([0.0, far[0]], [0.0, far[1]], colour="#888", dash="4 4", width=1)
    fig.polyline([g_tip[0], t_tip[0]], [g_tip[1], t_tip[1]], colour=PALETTE[1], dash="2 3", width=1.5)
    fig.arrow(tuple(h), tuple(g_tip), colour=PALETTE[4])
    fig.arrow(tuple(h), tuple(t_tip), colour=PALETTE[2])
    for at, letter, colour in (
        ((0.0, 0.0), "o", "#444"),
        (xs, "x", PALETTE[0]),
        (h, "h", PALETTE[3]),
        (g_tip, "g", PALETTE[4]),
        (t_tip, "t", PALETTE[2]),
    ):
        fig.dot(tuple(at), colour=colour, radius=4)
        away = np.asarray(at, dtype=float) - (h if letter in "gt" else 0.0)
        dx, dy = _outward(-away if letter == "h" else away)  # h inward, x outward: apart when they nearly meet
        fig.text(tuple(at), letter, colour=colour, dx=dx - 4, dy=dy + 5, size=16)
    for row, (letter, words) in enumerate(LEGEND):
        fig.text((-r, -r), f"{letter}   {_(words)}", colour="#222", dx=0, dy=34 + 20 * row, size=13)
    fig.text(
        (-r, -r),
        _("dotted, g to t: the radial part I − P removes; g and t share one scale"),
        dy=34 + 20 * len(LEGEND),
        size=12,
        colour="#444",
    )
    fig.text((-r, -r), AXES_NOTE, dy=54 + 20 * len(LEGEND), size=12, colour="#444")
    return fig


# The plane's two axes, named once in the legend (formulas: not translated).
AXES_NOTE = "→ e1 = (1, −1, 0)/√2,  ↑ e2 = (1, 1, −2)/√6"


def _checks(geo: PlaneGeometry, dx: np.ndarray) -> list[Text]:
    n_t = float(np.linalg.norm(geo.tangent))
    on_circle = within(float(np.linalg.norm(geo.xhat)), math.sqrt(3.0), ORTHOGONAL_RTOL, "|xhat| vs √3")
    in_plane = at_most(abs(float(np.sum(geo.xhat))), ORTHOGONAL_RTOL * math.sqrt(3.0), "|Σ xhat|")
    tangent = at_most(abs(_cosine(geo.tangent, geo.xhat)), ORTHOGONAL_RTOL, "|cos(t, xhat)|") & at_most(
        abs(_cosine(geo.tangent, np.ones(3))), ORTHOGONAL_RTOL, "|cos(t, 1)|"
    )
    same = close_to(dx, geo.rstd * geo.tangent, 1e-10, 1e-12 * max(n_t * geo.rstd, 1e-300), "dx vs rstd · t")
    return [
        claim(
            on_circle & in_plane,
            # Translators: a formula line; only the comma between its two facts is prose
            _("|xhat| = {norm} = √3, Σ xhat = {total}").format(
                norm=fmt(float(np.linalg.norm(geo.xhat)), 6), total=sci(float(np.sum(geo.xhat)), 1)
            ),
        ),
        claim(
            tangent,
            _("t is tangent: cos(t, xhat) = {along_xhat}, cos(t, 1) = {along_ones}").format(
                along_xhat=sci(_cosine(geo.tangent, geo.xhat), 1), along_ones=sci(_cosine(geo.tangent, np.ones(3)), 1)
            ),
        ),
        claim(same, _("autograd's dx is rstd · t")),
    ]


def directions(geo: PlaneGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit vectors at xhat: radial (along xhat), along the circle, and out of the plane (along 1)."""
    radial = geo.xhat / np.linalg.norm(geo.xhat)
    out = np.ones(3) / math.sqrt(3.0)
    return radial, np.cross(out, radial), out


def _direction_prediction(geo: PlaneGeometry) -> Prediction:
    parts = [float(geo.tangent @ u) for u in directions(geo)]
    evidence = largest(tuple(abs(v) for v in parts), ("along xhat", "along the circle", "along 1"), "|part of t|")
    why = _(
        "t's parts: {radial} along xhat, {along_circle} along the circle, {out_of_plane} "
        "out of the plane: I − P removed the parts along xhat and along 1."
    ).format(radial=sci(parts[0], 1), along_circle=sci(parts[1], 1), out_of_plane=sci(parts[2], 1))
    choices = (
        _("along xhat, straight out from the center"),
        _("along the circle, at right angles to xhat"),
        _("out of the plane, along 1"),
    )
    question = _("I − P acts on the gradient g = γ·dy. Seen from xhat, which way does t = (I − P)·g point?")
    return Prediction.from_evidence(question, choices, why, evidence)


@demo("layernorm_circle")
def layernorm_circle(p: LessonParams) -> DemoOutput:
    """d = 3 at eps = 0: x − mean, xhat on the circle of radius √3, and g before and after I − P, drawn."""
    x, gamma, dy = _problem(p.seed)
    geo = plane_geometry(x, gamma, dy)
    dx = autograd_dx("layernorm", x, gamma, None, 0.0, dy)[0]["x"]
    return DemoOutput(
        Group(terminal_picture(geo), *_checks(geo, dx)),
        graph=svg_figure(geo),
        prediction=_direction_prediction(geo),
    )
