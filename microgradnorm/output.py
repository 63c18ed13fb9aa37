"""Writing a graph to a file or a notebook: the one module that knows both the drawing and the page.

:mod:`microgradnorm.viz` makes DOT text (and runs Graphviz on it);
:mod:`microgradnorm.page` makes the step-through HTML page from viz's drawing.
This module sits above both: it picks the format from the file's extension,
writes the file atomically, falls back to the DOT source when Graphviz cannot
draw, and gives Jupyter what to show. Neither viz nor page imports it, so the
three never import each other in a circle.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from microgradnorm import viz
from microgradnorm.engine import Value
from microgradnorm.i18n import ENGLISH, _, current_language, pgettext, use_language
from microgradnorm.page import page_html, repr_html
from microgradnorm.store import atomic_write_bytes
from microgradnorm.viz import DOT_HEADER, FULL_VIEW_LIMIT, INSTALL_HINT, DrawingError, OptionError, graph_size, to_dot

__all__ = [
    "FORMATS",
    "Drawn",
    "check_output_path",
    "dot_fallback_path",
    "draw",
    "drawing_language",
    "mimebundle",
    "output_extensions",
    "output_format",
    "render",
    "to_html",
]

# file extension -> Graphviz output format
FORMATS: dict[str, str] = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".html": "html"}


def output_format(path: str | os.PathLike[str]) -> str:
    """The Graphviz format for ``path``'s extension, or a ValueError naming the allowed ones."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        allowed = ", ".join(FORMATS)
        if suffix:
            message = _("expected a file name ending in {allowed}, got {path!r} ({suffix!r})")
        else:
            message = _("expected a file name ending in {allowed}, got {path!r} (no extension)")
        raise OptionError("output", message.format(allowed=allowed, path=str(path), suffix=suffix))
    return FORMATS[suffix]


def output_extensions() -> str:
    """The output extensions as prose: ".svg, .png, .pdf or .dot"."""
    *most, last = FORMATS
    # the same joiner as the CLI's lists of alternatives ("2-D or 4-D")
    return ", ".join(most) + pgettext("alternatives", " or ") + last


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """Fail early, with the path in the message, if ``path`` cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise OptionError(
            "output",
            _("{path!r} is a directory; expected a file name ending in {endings}").format(
                path=str(path), endings=output_extensions()
            ),
        )
    output_format(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        message = _("cannot write {path!r}: the directory {parent!r} does not exist")
        raise OptionError("output", message.format(path=str(path), parent=str(parent)))
    if not os.access(parent, os.W_OK | os.X_OK):
        message = _("cannot write {path!r}: the directory {parent!r} is not writable")
        raise OptionError("output", message.format(path=str(path), parent=str(parent)))
    if path.exists() and not os.access(path, os.W_OK):
        raise OptionError("output", _("cannot write {path!r}: the file is read-only").format(path=str(path)))
    return path


def dot_fallback_path(path: str | os.PathLike[str]) -> Path:
    """Where to put the DOT source when ``path`` cannot be drawn: ``path`` with a .dot extension.

    A .dot file of that name that this package did not write is never overwritten;
    the next free ``name.1.dot``, ``name.2.dot``, ... is used instead.
    """
    path = Path(path)
    header = DOT_HEADER.encode("utf-8")
    for k in range(100):
        candidate = path.with_suffix(".dot" if k == 0 else f".{k}.dot")
        if not candidate.exists():
            return candidate
        try:
            with candidate.open("rb") as f:
                if f.read(len(header)) == header:
                    return candidate
        except OSError:
            continue
    raise OptionError(
        "output",
        _("no free .dot file name next to {path!r} (tried {stem}.dot to .99.dot)").format(
            path=str(path), stem=path.stem
        ),
    )


def render(obj: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """Draw ``obj`` into ``path``; the format comes from the extension (.svg .png .pdf .dot .html).

    ``options`` are those of :func:`to_dot` (for .html, of :func:`microgradnorm.page.page_html`,
    the step-through page, where ``collapse=None`` decides by size). Raises ValueError for an unknown
    extension or an unwritable path, :class:`OptionError` for an option the graph
    cannot honour, :class:`GraphvizNotFoundError` when ``dot`` is missing (a .dot
    file needs no Graphviz), :class:`RenderError` when it fails.
    """
    target = check_output_path(path)
    fmt = output_format(target)
    if fmt == "html":  # the step-through page: the drawing, the engine's numbers and a script to step them
        return atomic_write_bytes(target, page_html(obj, **options).encode("utf-8"))
    with drawing_language(fmt):
        source = to_dot(obj, **options)
    data = source.encode("utf-8") if fmt == "dot" else viz.pipe(source, fmt)
    return atomic_write_bytes(target, data)


def drawing_language(fmt: str) -> contextlib.AbstractContextManager[Any]:
    """The language of a drawing's words: the current one, except in a PNG or PDF on a machine without a
    Simplified Chinese font, where Graphviz itself draws the letters and would draw empty boxes. An SVG's
    letters are drawn by whatever shows it (a browser falls back to a font it has)."""
    if fmt in ("png", "pdf") and current_language() != ENGLISH and not _has_chinese_font():
        return use_language(ENGLISH)
    return contextlib.nullcontext()


@functools.cache
def _has_chinese_font() -> bool:
    try:
        found = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return found.returncode == 0 and bool(found.stdout.strip())


@dataclass(frozen=True)
class Drawn:
    """What :func:`draw` wrote: the picture, or (``error`` set) the DOT source in its place."""

    path: Path
    error: DrawingError | None = None


def draw(obj: Any, path: str | os.PathLike[str], **options: Any) -> Drawn:
    """:func:`render`, and when the picture cannot be made, the DOT source next to ``path`` instead.

    The command line and the lessons' ``g`` key both draw this way: without
    Graphviz (or when ``dot`` fails) the learner still gets the graph as text,
    in a .dot file that :func:`dot_fallback_path` picks so that no file of
    theirs is overwritten. Every other error (a bad path or option) is raised.
    """
    try:
        return Drawn(render(obj, path, **options))
    except DrawingError as exc:
        fallback = dot_fallback_path(path)
        atomic_write_bytes(fallback, to_dot(obj, **options).encode("utf-8"))
        return Drawn(fallback, exc)


def mimebundle(obj: Any, include: Any = None, exclude: Any = None) -> dict[str, str]:
    """What Jupyter shows for a Value or a built norm: the step-through page with a still picture that stays
    where scripts do not run (:func:`microgradnorm.page.repr_html`), and text.

    One drawing per output: the page's HTML carries its own picture, so no separate SVG is stored. Where the page
    cannot be made (above :data:`microgradnorm.page.NOTEBOOK_LIMIT` drawn nodes, or HTML not wanted), an SVG of
    the graph (collapsed above :data:`FULL_VIEW_LIMIT` nodes). Without ``dot``, or for a single leaf, only text.
    """
    text = repr(obj)
    wanted = lambda kind: (include is None or kind in include) and not (exclude and kind in exclude)  # noqa: E731
    if isinstance(obj, Value) and not obj.children:
        return {"text/plain": text}
    if not viz.has_dot():
        return {"text/plain": text + "\n" + _("(to see the graph drawn, {hint})").format(hint=INSTALL_HINT)}
    if wanted("text/html"):
        page = repr_html(obj)
        if page is not None:
            return {"text/html": page, "text/plain": text}
    if not wanted("image/svg+xml"):
        return {"text/plain": text}
    collapse = graph_size(obj) > FULL_VIEW_LIMIT
    try:
        svg = viz.pipe(to_dot(obj, collapse=collapse), "svg").decode("utf-8")
    except DrawingError as exc:
        return {"text/plain": f"{text}\n({exc})"}
    return {"image/svg+xml": svg, "text/plain": text}


def to_html(obj: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """Write the step-through page of ``obj`` to ``path`` (ending in .html); options as
    :func:`microgradnorm.page.page_html`.

    Raises ValueError for another extension or an unwritable path, and
    :class:`microgradnorm.viz.GraphvizNotFoundError` without Graphviz.
    """
    if Path(path).suffix.lower() != ".html":
        raise OptionError("output", _("expected a file name ending in .html, got {path!r}").format(path=str(path)))
    return render(obj, path, **options)
