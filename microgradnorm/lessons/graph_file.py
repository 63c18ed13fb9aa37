"""Write the graph a lesson step shows to a file, for the runner's ``g`` key: an SVG drawn by Graphviz
with its step-through page beside it, or a figure that is already SVG; and what to tell the learner.

Drawing is a side show of a lesson: every failure here becomes a sentence, never the end of the lesson.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from microgradnorm.i18n import _

__all__ = ["default_graph_dir", "draw_graph", "one_line"]


def default_graph_dir() -> Path:
    """Where ``g`` writes without ``--graph-dir``: ``graphs/`` in the state folder (which may be unusable)."""
    from microgradnorm.store import state_dir

    return state_dir() / "graphs"


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message in the learner's language (its type's name if it has none)."""
    from microgradnorm.i18n.errors import localize

    text = localize(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def draw_graph(graph: Any, path: Path, **options: Any) -> str:
    """Draw ``graph`` to ``path`` with :func:`microgradnorm.output.draw`, and its step-through page beside it
    (``.html``); return what to tell the learner.

    ``options`` go to ``viz.to_dot``. Without the Graphviz ``dot`` program the
    DOT source is written instead (next to ``path``, ending in .dot) together
    with viz's one-line advice. A :class:`microgradnorm.drawing.figure.Figure` is
    already SVG and is written as it is.
    """
    try:
        from microgradnorm import output, viz
    except ImportError:
        return _("Drawing graphs needs microgradnorm.viz, which this installation does not have.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(getattr(graph, "svg", None)):  # a microgradnorm.drawing.figure.Figure: already SVG, no Graphviz needed
        from microgradnorm.store import atomic_write_text

        atomic_write_text(path.with_suffix(".svg"), graph.svg())
        return _("Figure written to {path}").format(path=path.with_suffix(".svg"))
    drawn = output.draw(graph, path, **options)
    if drawn.error is not None:
        return _("Wrote the graph's DOT source to {path} but could not render it: {error}").format(
            path=drawn.path, error=one_line(drawn.error)
        )
    try:
        page = output.render(graph, path.with_suffix(".html"), **options)
    except (viz.DrawingError, ValueError) as exc:  # the picture is there; the page is a bonus
        return _("Graph written to {path} (no step-through page: {error})").format(path=drawn.path, error=one_line(exc))
    return _("Graph written to {path}; to step through it, open {page} in a browser").format(path=drawn.path, page=page)
