"""One self-contained HTML page per graph: Graphviz's SVG, the engine's numbers as JSON, a little script.

The page is a renderer like :mod:`microgradnorm.viz` and uses its layout: the
DOT of :func:`microgradnorm.viz.to_dot` (with ``ids=True``, so every node and
edge of the SVG is ``v12``, ``op12``, ``e12_0``...) drawn by Graphviz, inlined
twice (every node, and one box per stage). The numbers come from
:mod:`microgradnorm.page.data`; ``page.js`` and ``page.css`` (package data,
inlined too) only show them. Nothing is fetched: the page opens from file://,
and its Content-Security-Policy forbids any request.
"""

from __future__ import annotations

import base64
import html
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from microgradnorm import viz
from microgradnorm.engine import Value
from microgradnorm.i18n import _, current_language, use_language
from microgradnorm.i18n.text import sentences
from microgradnorm.norms import NormGraph
from microgradnorm.page.data import Subject, page_data, subject_of
from microgradnorm.page.text import html_lang, html_text, script_text
from microgradnorm.viz.names import op_symbol

__all__ = ["NOTEBOOK_LIMIT", "page_html", "repr_html"]

SVG_NS = "http://www.w3.org/2000/svg"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")

NOTEBOOK_LIMIT = viz.LARGE_GRAPH  # drawn nodes up to which a notebook shows the page (above: the SVG alone)


@dataclass(frozen=True)
class _View:
    """Which drawings the page carries and which it opens with, and why (said on the page)."""

    full: bool  # the drawing of every node is included
    start: str  # "full" or "stages"
    note: str


def _view(size: int, collapse: bool | None) -> _View:
    """The size rule of ``microgradnorm graph`` (``collapse`` None), for a page that can switch views;
    ``collapse=True`` opens with one box per stage, ``False`` with every node whatever the size."""
    if size > viz.LAYOUT_LIMIT:
        raise viz.OptionError(
            "obj",
            _("the page carries every node's numbers; expected at most {limit} nodes, got {size}").format(
                limit=viz.LAYOUT_LIMIT, size=size
            ),
        )
    if collapse:
        return _View(size <= viz.LARGE_GRAPH, "stages", "")
    if collapse is False or size <= viz.FULL_VIEW_LIMIT:
        return _View(True, "full", "")
    if size <= viz.LARGE_GRAPH:
        note = _(
            "The full graph has {size} nodes, more than {limit}, too many to read at once: the page opens with "
            "one box per stage. “Every node” shows them all."
        ).format(size=size, limit=viz.FULL_VIEW_LIMIT)
        return _View(True, "stages", note)
    note = _(
        "The full graph has {size} nodes, more than {limit}: this page shows one box per stage (made with "
        "--full, or collapse=False, it would carry every node as well)."
    ).format(size=size, limit=viz.LARGE_GRAPH)
    return _View(False, "stages", note)


def page_html(
    obj: Any,
    *,
    graph: NormGraph | None = None,
    title: str | None = None,
    grad: bool | None = None,
    collapse: bool | None = None,
    paths: bool = False,
    path_input: int | str = 0,
    lang: str | None = None,
    carry_full: bool = True,
    **dot_options: Any,
) -> str:
    """The page for ``obj`` (a Value, a list of Values, a built norm or its NormGraph) as one HTML string.

    ``grad=False`` shows the forward pass only; otherwise a graph with a scalar
    root, or a norm whose outputs hold gradients, is stepped backward too (see
    :func:`microgradnorm.page.data.subject_of`). ``collapse``: True opens with
    one box per stage, False with every node, None decides by size as the
    graph command does (and says so on the page). ``paths`` selects the
    gradient paths into ``path_input`` when the page opens. ``dot_options``
    (``rankdir``, ``edge_labels``, ``highlight``, ``highlight_mode``) go to
    :func:`microgradnorm.viz.to_dot`. ``carry_full=False`` leaves the drawing of every node out of a page
    that opens with one box per stage (a smaller file, for notebooks). ``lang`` (``en`` or ``zh-CN``) is the
    language of the page's words, by default the current one; its numbers and formulas are the same in both. Raises as
    ``to_dot`` and ``viz.pipe`` do.
    """
    with use_language(lang or current_language()):
        return _page_html(obj, graph, title, grad, collapse, paths, path_input, carry_full, dot_options)


def _page_html(
    obj: Any,
    graph: NormGraph | None,
    title: str | None,
    grad: bool | None,
    collapse: bool | None,
    paths: bool,
    path_input: int | str,
    carry_full: bool,
    dot_options: dict[str, Any],
) -> str:
    subject = subject_of(obj, graph)
    if grad is False:
        subject = Subject(obj, subject.graph, None)
    d = viz.drawing(subject.obj, subject.graph)
    # the norm's own size, as microgradnorm graph counts it (the loss the page steps back from is not counted)
    size = viz.graph_size(subject.graph) if subject.graph is not None else viz.graph_size(subject.obj)
    view = _view(size, collapse)
    if not carry_full and view.start == "stages" and view.full:
        view = _View(False, "stages", "")
    backward = subject.root is not None
    dot = {"graph": subject.graph, "title": "", "grad": backward, "ids": True, **dot_options}
    svg_full = _svg(viz.to_dot(subject.obj, **dot), "full", d) if view.full else ""
    svg_stages = _svg(viz.to_dot(subject.obj, **{**dot, "collapse": True}), "stages", d)
    data = page_data(subject, d)
    data["title"] = title or viz.default_title(d, None, backward) or _plain_title(subject)
    note = view.note
    if not backward:
        forward_only = _(
            "No gradients yet: this page steps through the forward pass only (microgradnorm graph --grad, "
            "or backward() before to_html, adds the backward pass)."
        )
        note = sentences([note or "", forward_only])
    data["view"] = {"start": view.start, "full": view.full, "note": note}
    data["pathStart"] = _path_start(d, path_input) if paths else None
    data["gradWord"] = viz.grad_word()
    data["dataWord"] = viz.data_word()
    grads = [abs(float(node["grad"])) for node in data["nodes"] if node["grad"] is not None]
    data["gradScale"] = max([g for g in grads if g == g and g != float("inf")], default=0.0)
    return _fill(data, svg_full, svg_stages)


def _plain_title(subject: Subject) -> str:
    if isinstance(subject.root, Value):
        if subject.root.label:
            return _("The graph of {name}: forward, then backward from {name}").format(name=subject.root.label)
        return _("The graph of the root: forward, then backward from the root")
    return _("A computation graph, forward")


def _path_start(d: viz.Drawing, which: int | str) -> int | None:
    """The drawn position of x_i for the paths shown when the page opens."""
    graph = d.graph
    if graph is None:
        raise ValueError("paths: the gradient paths need a built norm (what layer_norm returns, or its .graph)")
    return d.pos(graph["x"][viz.gradient_paths(d, which).index])


def _svg(dot: str, view: str, d: viz.Drawing) -> str:
    """Graphviz's SVG of ``dot``, made to live inside the page: sized by CSS, classed for the script and the
    style, with readable tooltips, and no id that the other drawing also has."""
    root = ET.fromstring(viz.pipe(dot, "svg"))
    for attr in ("width", "height"):
        root.attrib.pop(attr, None)
    root.set("id", f"svg-{view}")
    root.set("role", "img" if view == "full" else "group")  # the stage view's boxes are buttons (open a stage)
    label = _("the computation graph, every node") if view == "full" else _("the graph, one box per stage")
    root.set("aria-label", label)
    names = _names(d)
    for g in root.iter(f"{{{SVG_NS}}}g"):
        _dress(g, view, names)
    return ET.tostring(root, encoding="unicode")


def _names(d: viz.Drawing) -> dict[str, str]:
    """SVG node id -> the name the page shows in tooltips (``v12`` -> ``xhat[2]``)."""
    names = {f"v{k}": d.display_name(k) for k in range(len(d.order))}
    names.update({f"op{k}": f"{op_symbol(n.op)} → {names[f'v{k}']}" for k, n in enumerate(d.order) if n.children})
    return names


_ROLES = {"t_": "title", "s_": "stage"}  # SVG id prefix -> class: a stage's title, a stage's collapsed box


def _dress(g: ET.Element, view: str, names: dict[str, str]) -> None:
    """Class one SVG group for the style and the script, and give it a readable tooltip."""
    gid, kind = g.get("id", ""), g.get("class", "")
    title = g.find(f"{{{SVG_NS}}}title")
    if gid == "graph0":
        g.set("id", f"{view}-graph")
    elif kind == "node":
        role = "value" if re.fullmatch(r"v\d+", gid) else "op" if gid.startswith("op") else _ROLES.get(gid[:2], "")
        g.set("class", f"node {role}")
        for text in g.iter(f"{{{SVG_NS}}}text"):
            for prefix, cls in ((viz.grad_word() + " ", "grad"), (viz.data_word() + " ", "data")):
                if (text.text or "").startswith(prefix):
                    text.set("class", cls)
    elif kind == "edge" and title is not None:
        ends = (title.text or "").split("->")
        title.text = " → ".join(names.get(e, e) for e in ends)
        return
    if title is not None:
        title.text = names.get(gid, (title.text or "").removeprefix("cluster_").removeprefix("t_").removeprefix("s_"))


def _asset(name: str) -> str:
    return resources.files("microgradnorm.page").joinpath(name).read_text(encoding="utf-8")


def _fill(data: dict[str, Any], svg_full: str, svg_stages: str) -> str:
    """The template with the style, the script, the drawings and the data (safe inside <script>) filled in."""
    data["ui"] = script_text()
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return Template(_asset("page.html")).substitute(
        html_text(),
        lang=html_lang(),
        title=html.escape(data["title"]),
        note=html.escape(data["view"]["note"]),
        css=_asset("page.css"),
        js=_asset("page.js"),
        data=blob,
        svg_full=svg_full,
        svg_stages=svg_stages,
    )


def repr_html(obj: Any) -> str | None:
    """What Jupyter shows for a Value or a built norm: a still picture (one box per stage) with a one-line note,
    which a script replaces with the page (in an iframe of its own) where scripts run.

    A notebook that was sent to you, downloaded, or executed by nbclient or CI is
    untrusted: JupyterLab drops the script and the iframe, and the picture and the note
    stay. Above :data:`viz.FULL_VIEW_LIMIT` drawn nodes the page carries one box per
    stage only, to keep the notebook small. None (so Jupyter shows the text instead)
    for a single leaf, without Graphviz, or above :data:`NOTEBOOK_LIMIT` drawn nodes.
    """
    if (isinstance(obj, Value) and not obj.children) or not viz.has_dot():
        return None
    size = viz.graph_size(obj)
    if size > NOTEBOOK_LIMIT:
        return None
    collapse = size > viz.FULL_VIEW_LIMIT
    try:
        page = page_html(obj, collapse=True if collapse else None, carry_full=not collapse)
        still = viz.pipe(viz.to_dot(obj, collapse=True), "svg")  # one box per stage: small, and readable at any d
    except viz.DrawingError:
        return None
    picture = base64.b64encode(still).decode("ascii")
    note = _("A still picture: run this cell, or trust the notebook, to step through the graph.")
    name = html.escape(_("the graph, step by step"), quote=True)
    return (
        '<div class="microgradnorm-graph">'
        f'<div class="microgradnorm-still"><img src="data:image/svg+xml;base64,{picture}" alt="{name}" '
        'style="max-width: 100%; height: auto">'
        f'<p style="margin: 0.3em 0">{html.escape(note)}</p></div>'
        f'<iframe hidden srcdoc="{html.escape(page, quote=True)}" title="{name}" '
        'style="width: 100%; height: 600px; border: 1px solid #ccc"></iframe>'
        "<script>(function (s) { var box = s.parentNode; box.querySelector('iframe').hidden = false;"
        " box.removeChild(box.querySelector('.microgradnorm-still')); })(document.currentScript);</script>"
        "</div>"
    )
