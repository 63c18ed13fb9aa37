"""The graph you can step through: one self-contained HTML page per graph.

:func:`page_html` makes a page showing Graphviz's drawing of a Value graph or a
built norm (:func:`microgradnorm.output.to_html` writes it to a file), with
controls to walk it: the forward pass node by node (or stage by stage), then
backward one contribution ``into.grad += local × grad``
at a time, in the order ``backward()`` makes them. Hovering a node shows its
numbers and its local derivatives with the numbers plugged in; the gradient
paths into an input x_i can be coloured, each stage folded. Every number is
computed in Python (:mod:`microgradnorm.page.data`); the page's script only
shows them. The page needs no server and fetches nothing.
"""

from __future__ import annotations

from microgradnorm.page.render import NOTEBOOK_LIMIT, page_html, repr_html

__all__ = ["NOTEBOOK_LIMIT", "page_html", "repr_html"]
