"""Show the package code that ran: a function's or class's live source, highlighted.

A lesson that builds or differentiates something shows the code that did it.
The code is never copied into a lesson: :func:`code_of` reads it from the very
object the demo called, at run time, with :func:`inspect.getsource`, so what the
learner reads is what ran, whatever the module holds today::

    from microgradnorm.lessons.source import code_of, source_of

    y = layer_norm(x, gamma, beta, eps)
    return Group(code_of(layer_norm), table)   # a demo shows the function it called

Objects are found by reference (``engine.Value.backward``, the class of a node's
op), never by file and line numbers. :func:`source_of` returns the text that
:func:`code_of` shows, so a test can compare the two.

Comments meant for tools (``# fmt: off``, ``# readable-core: ...``, ``# noqa``) are
left out, and a trailing comment of a few words or more that would push its line past
:data:`WIDTH` columns goes on lines of its own above it.

Pure: no printing; the renderable soft-wraps long lines at the console's width
(60 columns is the narrowest a lesson supports), and without colour it is plain
text, readable with ``NO_COLOR``.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

from microgradnorm import engine

__all__ = ["WIDTH", "backward_code", "code_of", "location_of", "op_code", "source_of"]

WIDTH = 60  # the narrowest console a lesson supports: shown code stays within it where a comment is the cause
SHORT_NOTE_WORDS = 3  # "#" and at most two words: a label for its line, kept beside it whatever the width
# a comment addressed to a tool (formatter, linter, type checker, coverage, the readable-core check), not a reader
TOOL_MARKER = re.compile(r"#\s*(fmt:|readable-core:|noqa\b|type:\s*ignore|pragma:)")


def source_of(obj: Any, *, docstrings: bool = False) -> str:
    """The source of a function, method or class, dedented, without trailing blank lines.

    Decorators are part of a function's source, as they are in the file. Docstrings
    are left out unless ``docstrings`` is true: the lesson's prose is the
    explanation, and the code is shown for its lines. Properties and
    staticmethods/classmethods taken from a class ``__dict__`` are unwrapped to the
    function they hold.
    """
    text = textwrap.dedent(inspect.getsource(_unwrap(obj)))
    if not docstrings:
        text = _without_docstrings(text)
    return _tidy_comments(text).rstrip() + "\n"


def location_of(obj: Any) -> str:
    """Where the object lives, for the caption: ``microgradnorm/norms.py · layer_norm``."""
    target = _unwrap(obj)
    module = inspect.getmodule(target)
    path = (module.__name__ if module else "?").replace(".", "/") + ".py"
    name = getattr(target, "__qualname__", getattr(target, "__name__", ""))
    return f"{path} · {name}" if name and not inspect.ismodule(target) else path


def code_of(*objects: Any, caption: bool = True, docstrings: bool = False) -> RenderableType:
    """The live source of each object, highlighted as Python, each under a one-line caption.

    Long lines soft-wrap at the console's width instead of being cut. With
    ``caption`` each block is headed by :func:`location_of` (a file path and a name,
    not translated: it is the package's own code). The text is :func:`source_of`'s.
    """
    if not objects:
        raise ValueError("code_of needs at least one object to show")
    parts: list[RenderableType] = []
    for obj in objects:
        if caption:
            parts.append(Text(location_of(obj), style="dim"))
        parts.append(
            Syntax(
                source_of(obj, docstrings=docstrings).rstrip("\n"),
                "python",
                theme="ansi_dark",
                word_wrap=True,
                background_color="default",
            )
        )
    return Group(*parts)


# ---- the engine's code for a node ------------------------------------------------


def op_code(node: engine.Value) -> tuple[Any, ...]:
    """The class of the op that made ``node``: its forward and its local derivatives, side by side.

    Taken from the node itself, so a demo shows the code of the op that built the node it shows.
    """
    if node.operation is None:
        raise ValueError(f"a leaf has no op, so no code computes it: {node!r}")
    return (type(node.operation),)


def backward_code() -> tuple[Any, ...]:
    """The engine's backward sweep: ``Value.backward``."""
    return (engine.Value.backward,)


def _unwrap(obj: Any) -> Any:
    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    if isinstance(obj, property):
        return obj.fget
    return obj


def _without_docstrings(text: str) -> str:
    """``text`` without the lines of any def's or class's docstring (found with ast, not by pattern)."""
    drop: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and len(node.body) > 1  # a body that is only a docstring keeps it, or it would not parse
            ):
                drop.update(range(first.lineno, first.end_lineno + 1))
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True), start=1) if i not in drop)


def _tidy_comments(text: str) -> str:
    """``text`` without tool-marker comments, and with trailing comments past :data:`WIDTH` moved above their line.

    Comments are found with :mod:`tokenize`, so a ``#`` inside a string is never touched.
    """
    lines = text.splitlines(keepends=True)
    comments = {
        tok.start[0]: tok.start[1]
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    }
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        if number not in comments:
            out.append(line)
            continue
        col = comments[number]
        code, comment = line[:col].rstrip(), line[col:].rstrip("\r\n")
        if TOOL_MARKER.match(comment):
            if code:
                out.append(code + "\n")
            continue  # a whole-line marker goes with its line
        # a short note (a shape comment, "# D") stays beside its line: above it, it would lose what it labels
        if not code or len(line.rstrip("\r\n")) <= WIDTH or len(comment.split()) <= SHORT_NOTE_WORDS:
            out.append(line)
            continue
        indent = code[: len(code) - len(code.lstrip())]
        out.extend(_wrapped(indent, comment))
        out.append(code + "\n")
    return "".join(_rewrap_long_comment_blocks(out))


def _wrapped(indent: str, comment: str) -> list[str]:
    """A comment's words as comment lines at ``indent``, within :data:`WIDTH` columns."""
    words = comment.lstrip("#").strip()
    return [f"{indent}# {part}\n" for part in textwrap.wrap(words, max(WIDTH - len(indent) - 2, 20))]


def _rewrap_long_comment_blocks(lines: list[str]) -> list[str]:
    """Each block of whole-line comments (same indent) with a line past :data:`WIDTH`, rewrapped as one paragraph."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith("#"):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(stripped)]
        j = i
        while j < len(lines) and lines[j].startswith(indent + "#"):
            j += 1
        block = lines[i:j]
        if any(len(line.rstrip("\r\n")) > WIDTH for line in block):
            block = _wrapped(indent, " ".join(line.strip().lstrip("#").strip() for line in block))
        out.extend(block)
        i = j
    return out
