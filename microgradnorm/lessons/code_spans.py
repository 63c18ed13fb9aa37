"""A demo's sentence whose formulas never break at their own spaces.

A lesson's Markdown marks a formula or a command as inline code (`` `y = beta` ``) and the
renderer keeps it on one line (:mod:`microgradnorm.i18n.text`). A demo's caption, ✓ line or answer
is a translated string, not Markdown: :func:`marked` gives the same inline-code mark to

- each `backticked` part (the backticks are dropped, as in the prose), and
- each chain of terms joined by a spaced operator (``sqrt(var) + eps``, ``dx = rstd · g``,
  ``var ÷ (N − 1)``, ``搬运的字节数 = 遍数 × 12.0``), so that a translation need not mark them.

so a caption such as "sqrt(var) + eps, built by hand" never starts a line with ``+ eps``, in either
language. The mark changes no colour: it only tells the wrapping where not to break. A formula wider
than the line still breaks at its spaces (see ``i18n.text._inside_code``).

The demos of lessons 10-18 take :func:`cjk_text`, :func:`claims` and :func:`number_table` from here:
the same calls as :mod:`~microgradnorm.i18n.text`'s, :mod:`~microgradnorm.lessons.claims`' and
:mod:`~microgradnorm.lessons.demo_tools`', with the formulas marked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text

from microgradnorm.i18n import text as _text
from microgradnorm.i18n.text import CJKText
from microgradnorm.lessons import claims as _claims
from microgradnorm.lessons import demo_tools as _tools

# the mark the Markdown renderer gives inline code (i18n.text reads it when it wraps a line)
_CODE = Style(meta={"inline_code": True})

# a term: no space and no full-width punctuation (which ends a Chinese clause, and may break after it)
_TERM = r"[^\s\u3000-\u303f\uff00-\uffef]+"
_OPERATOR = r"[=−+·×÷/<>≤≥≈→]"
_CHAIN = re.compile(rf"{_TERM}(?: {_OPERATOR} {_TERM})+")
# a function written with a space before its argument: "ln 3", "log 2"
_FUNCTION = re.compile(r"(?<![\w])(?:ln|log) [\w.]+")


# where a chain too long for one line may break: after a relation, as typesetting does
_RELATION = re.compile(r" [=≈→] ")


def keep_formulas(text: Text) -> Text:
    """Mark, in place, every spaced-operator chain of ``text`` as inline code; returns ``text``.

    Each piece of a chain up to and including a relation (``a · b =``) is marked too: where the whole
    chain is wider than the line, it breaks after an ``=`` and nowhere else.
    """
    for match in _CHAIN.finditer(text.plain):
        text.stylize(_CODE, match.start(), match.end())
        start = match.start()
        for relation in _RELATION.finditer(match.group()):
            end = match.start() + relation.end() - 1  # the piece ends with the relation, before its space
            text.stylize(_CODE, start, end)
            start = end + 1
        text.stylize(_CODE, start, match.end())
    for match in _FUNCTION.finditer(text.plain):
        text.stylize(_CODE, match.start(), match.end())
    return text


def marked(text: str | Text, style: str = "") -> CJKText:
    """``text`` (already translated) with its formulas marked as inline code: its `backticked` parts
    (backticks dropped) and its spaced-operator chains. A Text keeps its own styles (``style`` is for a str).

    An unpaired backtick is kept as it is, so a translation that loses one shows it rather than
    swallowing the rest of the sentence.
    """
    if isinstance(text, Text):
        return keep_formulas(_text.cjk_text(text))
    parts = text.split("`")
    out = Text(style=style)
    if len(parts) % 2 == 0:  # an odd number of backticks: no pairs to trust
        out.append(text)
    else:
        for i, part in enumerate(parts):
            out.append(part, style=_CODE if i % 2 else None)
    return keep_formulas(_text.cjk_text(out))


def cjk_text(text: str | Text, style: str = "") -> CJKText:
    """:func:`microgradnorm.i18n.text.cjk_text` with the formulas kept whole (see :func:`marked`)."""
    return marked(text, style)


def claims(lines: Iterable[tuple[object, str | Text]]) -> Group:
    """:func:`microgradnorm.lessons.claims.claims` with each line's formulas kept whole."""
    return _claims.claims((ok, marked(text)) for ok, text in lines)


def number_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], **options: Any) -> Table | Group:
    """:func:`microgradnorm.lessons.demo_tools.number_table` whose title and caption keep their formulas whole."""
    for key, style in (("title", "italic"), ("caption", "dim")):
        if isinstance(options.get(key), str):
            options[key] = marked(options[key], style)
    return _tools.number_table(headers, rows, **options)
