"""Computation-graph diagrams: a Value graph or a built norm as DOT (:mod:`.dot`) and through Graphviz (:mod:`.render`).

:func:`to_dot` is where to start reading. Writing files and notebook output sits above this package, in
:mod:`microgradnorm.output`.
"""

from microgradnorm.viz.dot import DOT_HEADER, FULL_VIEW_LIMIT, LARGE_GRAPH, LAYOUT_LIMIT, to_dot
from microgradnorm.viz.graph import Drawing, OptionError, drawing, graph_size
from microgradnorm.viz.paths import GradientPath, GradientPaths, gradient_paths, path_tagger
from microgradnorm.viz.render import INSTALL_HINT, DrawingError, GraphvizNotFoundError, RenderError, has_dot, pipe
from microgradnorm.viz.style import (
    FADED_TEXT,
    HIGHLIGHT,
    PATH_COLOURS,
    data_word,
    default_title,
    dot_id,
    grad_word,
    num,
    stage_formula,
    stage_order,
    stage_title,
)

__all__ = [
    "DOT_HEADER",
    "FADED_TEXT",
    "FULL_VIEW_LIMIT",
    "HIGHLIGHT",
    "INSTALL_HINT",
    "LARGE_GRAPH",
    "LAYOUT_LIMIT",
    "PATH_COLOURS",
    "Drawing",
    "DrawingError",
    "GradientPath",
    "GradientPaths",
    "GraphvizNotFoundError",
    "OptionError",
    "RenderError",
    "data_word",
    "default_title",
    "dot_id",
    "drawing",
    "grad_word",
    "gradient_paths",
    "graph_size",
    "has_dot",
    "num",
    "path_tagger",
    "pipe",
    "stage_formula",
    "stage_order",
    "stage_title",
    "to_dot",
]
