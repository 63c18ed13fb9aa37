"""How a drawing looks: colours, fonts, the words beside the numbers, each stage's title and formula.

Shared by both DOT views (:mod:`.full`, :mod:`.collapsed`) and the HTML page (:mod:`microgradnorm.page`),
so a stage is called and coloured the same wherever it is drawn. The stage titles and the words ``data``
and ``grad`` are in the reader's language; the formulas use the symbols of the field and stay as they are.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from microgradnorm.i18n import _, pgettext
from microgradnorm.numfmt import plain
from microgradnorm.registry import spec_for
from microgradnorm.viz.graph import Drawing
from microgradnorm.viz.paths import GradientPaths

# a CSS-style list: SVGs in browsers fall back in order, to a Simplified Chinese face for a Chinese drawing
FONT = "Helvetica,Arial,Noto Sans CJK SC,Source Han Sans SC,PingFang SC,Microsoft YaHei,sans-serif"

# pale fills for the stage clusters, a darker outline of the same hue
_STAGE_COLOURS: dict[str, tuple[str, str]] = {
    "input": ("#f4f4f4", "#9a9a9a"),
    "mean": ("#e6f0fa", "#6f9fd8"),
    "center": ("#e8f5e6", "#6dae62"),
    "var": ("#fdf0e0", "#e0a050"),
    "meansq": ("#fdf0e0", "#e0a050"),
    "sqrt": ("#f5e9f7", "#b07cc0"),
    "divide": ("#fdf8d8", "#c8b040"),
    "affine": ("#e4f4f2", "#55a89c"),
    "scale": ("#e4f4f2", "#55a89c"),
    "loss": ("#f4f4f4", "#9a9a9a"),
}
_OTHER_COLOURS = (("#eef0f4", "#8890a0"), ("#f6eeee", "#a08888"), ("#eef6ee", "#88a088"))

# the gradient paths (ColorBrewer Dark2: distinguishable in colour-blind vision and in grey)
PATH_COLOURS = {"direct": "#1b9e77", "mean": "#d95f02", "var": "#7570b3"}
HIGHLIGHT = "#e7298a"
FADED_TEXT = "#b0b0b0"
FADED_LINE = "#d8d8d8"
EDGE = "#606060"
GRAD_TEXT = "#b2182b"

# What each stage computes, shown under the cluster's title; ("rms", stage) first for a norm
# that subtracts no mean, then stage. The affine and scale stages' formula is written by stage_formula,
# from the parameters the graph has.
_FORMULAS: dict[tuple[str, str] | str, str] = {
    "input": "x",
    "mean": "mean = Σ x / n",
    "center": "xshift = x − mean",
    "var": "var = Σ xshift² / n",
    ("naive", "var"): "var = Σ x² / n − mean²",
    "sqrt": "std = √(var + eps)",
    ("rms", "sqrt"): "rms = √(ms + eps)",
    "divide": "rstd = 1 / std,   xhat = xshift · rstd",
    ("rms", "divide"): "rrms = 1 / rms,   xhat = x · rrms",
    "meansq": "ms = Σ x² / n",
    "loss": "L = Σ y · dy",
}


def num(v: float) -> str:
    """A compact number: 4 significant digits, no exponent for ordinary magnitudes, nan and inf spelled out."""
    return plain(v, 4)


def esc(text: str) -> str:
    return html.escape(text, quote=False)


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_id(name: str) -> str:
    """``name`` as a DOT (and SVG) identifier: every character that is not a letter, digit or _ becomes _."""
    return re.sub(r"\W", "_", name, flags=re.ASCII)


def stage_order(d: Drawing) -> list[str]:
    """Stages in the order of the norm (input first, loss last), then any others as met."""
    present = list(dict.fromkeys(node.stage for node in d.order if node.stage is not None))
    known = ["input", *(d.graph.stages if d.graph is not None else ()), "loss"]
    first = [s for s in known if s in present]
    return first + [s for s in present if s not in first]


def stage_colours(stage: str, position: int) -> tuple[str, str]:
    return _STAGE_COLOURS.get(stage) or _OTHER_COLOURS[position % len(_OTHER_COLOURS)]


def stage_formula(d: Drawing, stage: str) -> str:
    graph = d.graph
    if graph is None:
        return ""
    if stage == "var" and graph.variance == "naive":
        return _FORMULAS[("naive", "var")]
    if stage in ("affine", "scale"):
        if "gamma" not in graph and "beta" not in graph:
            return ""
        scaled = "gamma · xhat" if "gamma" in graph else "xhat"
        return f"y = {scaled} + beta" if "beta" in graph else f"y = {scaled}"
    own = None if spec_for(graph).centered else _FORMULAS.get(("rms", stage))
    return own or _FORMULAS.get(stage, "")  # type: ignore[return-value]


def stage_title(stage: str) -> str:
    """A stage's name as the drawing and the page show it, in the current language (``var`` stays ``var`` in
    English)."""
    titles = {
        "input": pgettext("norm stage", "input"),
        "mean": pgettext("norm stage", "mean"),
        "center": pgettext("norm stage", "center"),
        "var": pgettext("norm stage", "var"),
        "meansq": pgettext("norm stage", "meansq"),
        "sqrt": pgettext("norm stage", "sqrt"),
        "divide": pgettext("norm stage", "divide"),
        "affine": pgettext("norm stage", "affine"),
        "scale": pgettext("norm stage", "scale"),
        "loss": pgettext("norm stage", "loss"),
    }
    return titles.get(stage, stage)


def default_title(d: Drawing, title: str | None, grad: bool) -> str | None:
    if title is not None:
        return title
    graph = d.graph
    if graph is None:
        return None
    what = spec_for(graph).title
    shape = "×".join(map(str, graph.shape))
    # Translators: the title of a drawing, e.g. "LayerNorm of x (2×4), eps = 1e-05"; (2×4) is x's shape
    text = _("{norm} of x ({shape}), eps = {eps}").format(norm=what, shape=shape, eps=f"{graph.eps:g}")
    if graph.variance != "two_pass":
        text = _("{title}, {variance} variance").format(title=text, variance=graph.variance)
    if grad:
        text = _("{title} · grad = dL/d(node) after backward()").format(title=text)
    return text


def data_word() -> str:
    """The word before a node's value in the drawing."""
    # Translators: the word before a node's value in the drawing, e.g. "data 0.5"; keep it short
    return pgettext("graph drawing", "data")


def grad_word() -> str:
    """The word before a node's gradient in the drawing."""
    # Translators: the word before a node's gradient in the drawing, e.g. "grad -0.25"; keep it short
    return pgettext("graph drawing", "grad")


def edge_attrs(colours: list[str], *, faded: bool, strong: bool, extra: Sequence[str] = ()) -> str:
    attrs = []
    if colours:
        attrs.append(f'color="{":".join(colours)}", penwidth=2')
    elif strong:
        attrs.append(f'color="{HIGHLIGHT}", penwidth=1.6')
    elif faded:
        attrs.append(f'color="{FADED_LINE}"')
    attrs += extra
    return f" [{', '.join(attrs)}]" if attrs else ""


def id_attr(ids: bool, name: str) -> str:
    """The DOT ``id`` attribute (kept in the SVG, where the HTML page's script finds it), if asked for."""
    return f", id={dot_id(name)}" if ids else ""


def path_colours(info: GradientPaths | None) -> dict[tuple[int, int], list[str]]:
    """The colours of the paths each edge (child position, parent position) is on."""
    colours: dict[tuple[int, int], list[str]] = {}
    for p in info.paths if info is not None else ():
        for e in sorted(p.edges):
            colours.setdefault(e, []).append(PATH_COLOURS[p.key])
    return colours
