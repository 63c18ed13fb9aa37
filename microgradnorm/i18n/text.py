"""Chinese text in the terminal: wrap between characters, keep punctuation where Chinese typesetting puts it.

rich wraps only at spaces. A Chinese sentence has none, so rich moves a whole
clause to the next line and leaves the current one half empty ("LayerNorm 之后的层会传回"
then 16 blank cells at 40 columns), and a clause longer than the line is cut at
any character, so a line may start with "，". Chinese text may break between any
two characters except where the line-breaking rules of Chinese typesetting forbid it
(the W3C's *Requirements for Chinese Text Layout*, and UAX #14 for Unicode):

- no line starts with closing or trailing punctuation (，。、；：！？）」』】》…);
- no line ends with opening punctuation (（「『【《“‘);
- a dash —— or an ellipsis …… is not split in two;
- Latin words, numbers and formulas written without spaces stay whole, as in English;
- a bracketed shape (``[N, C, H, W]``, ``[B, T, D]``) stays whole although it has spaces: a line
  that ends in "[N," reads as a broken sentence, not as a shape (the one place English text
  wraps differently from rich).

Where the standard library's Unicode data gives what these rules need (a
character's East Asian width), it is used; the two punctuation lists are the
rules' own. A full UAX #14 implementation (uniseg: an 8 MB wheel, about 0.4 ms
per character) or BudouX (phrase boundaries, which split Latin words and leave
ragged lines) cost more and give the same or worse lines for this text.
Translators can add a break opportunity where none would be by hand with a
zero-width space (U+200B).

English text breaks exactly where rich breaks it (the tests compare the two), so
the lesson renderer can use :func:`cjk_markdown` for every language.
"""

from __future__ import annotations

import contextvars
import re
import string
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions
from rich.containers import Lines
from rich.markdown import Heading, Markdown, MarkdownContext, MarkdownElement, Paragraph, TableDataElement
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

__all__ = [
    "NO_END",
    "NO_START",
    "SHAPE",
    "CJKText",
    "assemble",
    "break_opportunities",
    "cjk_markdown",
    "cjk_text",
    "divide_line",
    "joins_without_space",
    "sentences",
    "separated",
]

# Closing and trailing punctuation: never at the start of a line (full-width, then their ASCII forms,
# then Japanese small kana and the prolonged sound mark, which follow the same rule).
NO_START = frozenset(
    "，。、；：！？）］｝〕〉》」』】〙〗〟’”｠»…‥・·％‰℃、｡､"
    ",.;:!?)]}%"
    "ーぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶㇰㇱㇲㇳㇴㇵㇶㇷㇸㇹㇺㇻㇼㇽㇾㇿ々〻"
)
# Opening punctuation: never at the end of a line.
NO_END = frozenset("（［｛〔〈《「『【〘〖〝‘“｟«([{")
NO_SPLIT = frozenset("—…‥")  # two of these in a row are one mark (——, ……)
ZERO_WIDTH_SPACE = "\u200b"
_JOINERS = frozenset("\u200c\u200d\ufe0e\ufe0f\u2060")


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _may_break(before: str, after: str) -> bool:
    """Whether a line may start at ``after`` when ``before`` ends the previous one."""
    if after.isspace() or after == ZERO_WIDTH_SPACE:
        return False
    if before.isspace():  # rich's rule (after spaces), except before Chinese closing punctuation
        return not (after in NO_START and _wide(after))
    if before == ZERO_WIDTH_SPACE:
        return True
    if unicodedata.combining(after) or after in _JOINERS or before in _JOINERS:
        return False
    if before in NO_END or after in NO_START or (before == after and before in NO_SPLIT):
        return False
    return _wide(before) or _wide(after)


# A tensor's shape as the lessons write it: two or more short names or sizes, comma-separated, in brackets.
SHAPE = re.compile(r"\[\s*[\w.+*×-]{1,8}(?:\s*,\s*[\w.+*×-]{1,8})+\s*\]")


def break_opportunities(text: str, keep: frozenset[int] = frozenset()) -> list[int]:
    """The indices ``i`` at which a new line may start (``0 < i < len(text)``).

    Leading spaces stay with the first word, as in rich; a bracketed :data:`SHAPE` is one piece, and so
    is each index range in ``keep`` (the inside of an inline formula or command).
    """
    first = len(text) - len(text.lstrip())
    inside = {i for m in SHAPE.finditer(text) for i in range(m.start() + 1, m.end())} | keep
    return [i for i in range(first + 1, len(text)) if i not in inside and _may_break(text[i - 1], text[i])]


def _units(text: str, keep: frozenset[int] = frozenset()) -> Iterable[tuple[int, str]]:
    """The unbreakable pieces of ``text`` with their start indices; trailing spaces stay with their piece."""
    starts = [0, *break_opportunities(text, keep)]
    for start, end in zip(starts, [*starts[1:], len(text)]):
        yield start, text[start:end]


def divide_line(text: str, width: int, fold: bool = True, keep: frozenset[int] = frozenset()) -> list[int]:
    """The offsets at which to break ``text`` (one line, no newline) to fit ``width`` cells.

    The same greedy fill as rich's ``divide_line`` (a piece that does not fit
    starts the next line; a piece wider than a whole line is folded when
    ``fold``), over the pieces between :func:`break_opportunities` instead of
    between spaces.
    """
    offsets: list[int] = []
    column = 0
    for start, unit in _units(text, keep):
        need = cell_len(unit.rstrip())
        if width - column >= need:
            column += cell_len(unit)
        elif need > width:
            pieces = chop_cells(unit, width) if fold else [unit]
            for k, piece in enumerate(pieces):
                if start:
                    offsets.append(start)
                start += len(piece)
                if k == len(pieces) - 1:
                    column = cell_len(piece)
        elif column and start:
            offsets.append(start)
            column = cell_len(unit)
    return offsets


class CJKText(Text):
    """A rich :class:`~rich.text.Text` that wraps by :func:`divide_line` (Chinese-aware)."""

    def wrap(
        self,
        console: Console,
        width: int,
        *,
        justify: Any = None,
        overflow: Any = None,
        tab_size: int = 8,
        no_wrap: bool | None = None,
    ) -> Lines:
        justify = justify or self.justify or "default"
        overflow = overflow or self.overflow or "fold"
        no_wrap = bool(self.no_wrap if no_wrap is None else no_wrap) or overflow == "ignore"
        lines = Lines()
        for line in self.split(allow_blank=True):
            if "\t" in line:
                line.expand_tabs(tab_size)
            if no_wrap:
                pieces = Lines([line])
            else:
                keep = _inside_code(line, width)
                pieces = line.divide(divide_line(line.plain, width, fold=overflow == "fold", keep=keep))
                for piece in pieces:
                    _rstrip_cells(piece, width)
            if justify:
                pieces.justify(console, width, justify=justify, overflow=overflow)
            for piece in pieces:
                piece.truncate(width, overflow=overflow)
            lines.extend(pieces)
        return lines

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """Its widest line, and its widest unbreakable piece: the least width it wraps into without folding."""
        lines = self.plain.splitlines()
        widest = max((cell_len(line) for line in lines), default=0)
        pieces = [cell_len(unit.rstrip()) for line in lines for _start, unit in _units(line)]
        return Measurement(max(pieces, default=widest), widest)

    def __rich__(self) -> _Renderable:
        """``console.print`` merges the Text objects it is given into one plain Text, which would wrap the
        English way: hand rich a renderable that is not a Text instead (rich asks ``__rich__`` first)."""
        return _Renderable(self)

    def copy(self) -> CJKText:
        return _as_cjk(super().copy())

    def blank_copy(self, plain: str = "") -> CJKText:
        return _as_cjk(super().blank_copy(plain))


def _inside_code(line: Text, width: int) -> frozenset[int]:
    """The indices strictly inside the line's inline code (Markdown's backticks) that fits on a line: a
    formula such as ``y = beta`` or a command is not broken at its own spaces. Code wider than a line
    breaks at its spaces as prose does (folding it would cut a word, or start a line with a comma)."""
    text = line.plain
    return frozenset(
        i
        for span in line.spans
        if isinstance(span.style, Style)
        and span.style.meta.get("inline_code")
        and cell_len(text[span.start : span.end]) + 2 < width  # room for a closing mark after it
        for i in range(span.start + 1, span.end)
    )


class _Renderable:
    """A :class:`CJKText` as rich renders and measures it, in a wrapper that rich does not merge."""

    __slots__ = ("text",)

    def __init__(self, text: CJKText) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[Segment]:
        return self.text.__rich_console__(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return self.text.__rich_measure__(console, options)


def _rstrip_cells(line: Text, width: int) -> None:
    """Drop the spaces that end ``line`` beyond ``width`` cells (rich's ``rstrip_end`` counts characters,
    which leaves a line of wide characters one space too long, and then cut with an ellipsis)."""
    excess = cell_len(line.plain) - width
    trailing = len(line.plain) - len(line.plain.rstrip(" "))
    if excess > 0 and trailing > 0:  # right_crop(0) would empty the line
        line.right_crop(min(trailing, excess))


def _as_cjk(text: Text) -> CJKText:
    out = CJKText(
        text.plain,
        style=text.style,
        justify=text.justify,
        overflow=text.overflow,
        no_wrap=text.no_wrap,
        end=text.end,
        tab_size=text.tab_size,
    )
    out._spans[:] = text._spans
    return out


# the mark inline code carries (`...` in Markdown, a formula a demo prints): a line never breaks inside it
_CODE_MARK = Style(meta={"inline_code": True})


def cjk_text(text: str | Text, style: str = "") -> CJKText:
    """A one-off string or Text (a caption, a ✓ line, a table cell) that wraps the Chinese way, its
    formulas kept whole: a str's `backticked` parts (backticks dropped) and every spaced-operator chain
    are marked as inline code (:func:`keep_formulas`). A Text keeps its styles (``style`` is for a str).

    An unpaired backtick is kept as it is, so a translation that loses one shows it rather than
    swallowing the rest of the sentence.
    """
    if isinstance(text, Text):
        return keep_formulas(_as_cjk(text))
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: no pairs to trust
        return keep_formulas(CJKText(text, style=style))
    out = CJKText(style=style)
    for i, part in enumerate(parts):
        out.append(part, style=_CODE_MARK if i % 2 else None)
    return keep_formulas(out)


# A formula printed by a demo is a chain of terms joined by spaced operators ("x − mean = 0"); a term has
# no space and no full-width punctuation (which ends a Chinese clause, and may break after it).
_TERM = r"[^\s\u3000-\u303f\uff00-\uffef]+"
_CHAIN = re.compile(rf"{_TERM}(?: [=−+·×÷/<>≤≥≈→] {_TERM})+")
_FUNCTION = re.compile(r"(?<![\w])(?:ln|log) [\w.]+")  # "ln 3": a function with a space before its argument
_RELATION = re.compile(r" [=≈→≤≥<>] ")  # where a chain too long for one line may break, as typesetting does


def keep_formulas(text: Text) -> Text:
    """Mark, in place, every spaced-operator chain of ``text`` as inline code; returns ``text``.

    Each piece of a chain up to and including a relation (``a · b =``) is marked too: where the whole
    chain is wider than the line, it breaks after an ``=`` and nowhere else.
    """
    for match in _CHAIN.finditer(text.plain):
        text.stylize(_CODE_MARK, match.start(), match.end())
        start = match.start()
        for relation in _RELATION.finditer(match.group()):
            end = match.start() + relation.end() - 1  # the piece ends with the relation, before its space
            text.stylize(_CODE_MARK, start, end)
            start = end + 1
        text.stylize(_CODE_MARK, start, match.end())
    for match in _FUNCTION.finditer(text.plain):
        text.stylize(_CODE_MARK, match.start(), match.end())
    return text


# ---- Markdown ----------------------------------------------------------------------------------------------


# The inline code (`...`) of the Markdown being rendered: its text is marked, so that a formula or a
# command in backticks is never broken at its own spaces (:func:`_inside_code`).
_INLINE_CODE: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("inline_code", default=frozenset())


class _Paragraph(Paragraph):
    def on_enter(self, context: MarkdownContext) -> None:
        super().on_enter(context)
        self.text = CJKText(justify="left")

    def on_text(self, context: MarkdownContext, text: Any) -> None:
        if isinstance(text, str) and text in _INLINE_CODE.get():
            self.text.append(text, context.current_style + _CODE_MARK)
        else:
            super().on_text(context, text)


class _Heading(Heading):
    def on_enter(self, context: MarkdownContext) -> None:
        super().on_enter(context)
        self.text = CJKText()


class _TableData(TableDataElement):
    def __init__(self, justify: Any) -> None:
        super().__init__(justify)
        self.content = CJKText("", justify=justify)


class CJKMarkdown(Markdown):
    """rich's Markdown whose paragraphs, headings and table cells wrap the Chinese way.

    A line break inside a paragraph between two Chinese characters, or after or
    before full-width punctuation, is dropped rather than shown as a space (CSS's
    rule for East Asian text, extended to punctuation that carries its own space):
    translators may break their source lines anywhere.
    """

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "paragraph_open": _Paragraph,
        "heading_open": _Heading,
        "td_open": _TableData,
        "th_open": _TableData,
    }

    def __init__(self, markup: str, **options: Any) -> None:
        super().__init__(markup, **options)
        for token in self.parsed:
            if token.type == "inline" and token.children:
                _drop_cjk_softbreaks(token.children)
        self._code = frozenset(
            child.content for token in self.parsed for child in token.children or () if child.type == "code_inline"
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[Any]:
        mark = _INLINE_CODE.set(self._code)
        try:
            yield from super().__rich_console__(console, options)
        finally:
            _INLINE_CODE.reset(mark)


def _drop_cjk_softbreaks(children: list[Any]) -> None:
    for k, token in enumerate(children):
        if token.type != "softbreak" or k == 0 or k + 1 == len(children):
            continue
        before, after = children[k - 1].content, children[k + 1].content
        if before and after and joins_without_space(before[-1], after[0]):
            token.type, token.content = "text", ""


def joins_without_space(before: str, after: str) -> bool:
    """Whether a source line break between these two characters is no space: between two Chinese
    characters, and next to full-width punctuation, which carries its own space (the lessons' Markdown
    and the exercises' hints join their lines so)."""
    if _wide(before) and _wide(after):
        return True
    return any(_wide(c) and unicodedata.category(c).startswith("P") for c in (before, after))


def cjk_markdown(markup: str, **options: Any) -> Markdown:
    """Prose as rich Markdown that wraps Chinese between characters (English exactly as rich does).

    The lesson renderer's call: ``Markdown(block.text)`` becomes ``cjk_markdown(block.text)``.
    """
    return CJKMarkdown(markup, **options)


def assemble(template: str, style: str = "", **fields: str | Text) -> CJKText:
    """A translated sentence with ``{name}`` fields as a :class:`~rich.text.Text` that wraps the Chinese way.

    The template's own words get ``style``; a field given as ``str`` gets ``style`` too, one given as
    a ``Text`` keeps its own. Translators move the fields where their language puts them.
    """
    out = CJKText()
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        out.append(literal, style=style)
        if name is not None:
            value = fields[name]
            out.append(value, style=None if isinstance(value, Text) else style)
    return out


def sentences(parts: Iterable[str]) -> str:
    """Sentences one after another: a space after an English full stop, none after a full-width "。"."""
    text = ""
    for part in parts:
        if text and part:
            text += "" if _wide(text[-1]) else " "
        text += part
    return text


def separated(items: Sequence[str]) -> str:
    """``items`` as a list in the reader's language: "a, b, c" (Chinese: "a、b、c")."""
    # Translators: the separator between the items of a short list
    from microgradnorm.i18n import pgettext  # the package imports this module

    return pgettext("list separator", ", ").join(items)
