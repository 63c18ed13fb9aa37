"""argparse's own words (usage:, options:, error messages) in the learner's language, and help that wraps Chinese.

argparse translates its messages with ``gettext.gettext``, that is, in the
process-wide default domain, whose language comes from the locale variables
only. Binding that domain to our catalog (``gettext.textdomain``) would redirect
every other library's messages too and would still ignore ``--lang`` and
``MICROGRADNORM_LANG``. Instead, for the duration of one CLI command,
:func:`translated_argparse` points the two names argparse calls, ``argparse._``
and ``argparse.ngettext``, at our catalog (:func:`microgradnorm.i18n._`), and
puts them back afterwards. argparse's messages are then ordinary entries of our
catalog: :data:`MESSAGES` marks each one for extraction, with the exact
``msgid`` argparse uses (several Python versions' wordings), and
``tests/test_i18n_argparse.py`` reads the running Python's argparse and fails if
it has a message that is in neither :data:`MESSAGES` nor :data:`NOT_SHOWN`.

argparse wraps help with :mod:`textwrap`, which counts characters, not terminal
cells, and breaks only at spaces: a Chinese sentence would overflow the screen.
:class:`HelpFormatter` wraps text that contains wide characters with
:func:`microgradnorm.i18n.text.divide_line` instead (English help is wrapped
exactly as argparse wraps it).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import unicodedata
from collections.abc import Iterator

from microgradnorm.i18n import N_, _, ngettext

__all__ = ["MESSAGES", "NOT_SHOWN", "HelpFormatter", "translated_argparse"]

# Every message argparse shows a learner, exactly as argparse spells it (Python 3.10 to 3.14).
# Translators: these are argparse's; keep every %(name)s and %s / %r.
MESSAGES = (
    N_("usage: "),
    N_("%(heading)s:"),
    N_("positional arguments"),
    N_("options"),
    N_("subcommands"),
    N_("show this help message and exit"),
    N_("show program's version number and exit"),
    N_("argument %(argument_name)s: %(message)s"),
    N_("unrecognized arguments: %s"),
    N_("not allowed with argument %s"),
    N_("ignored explicit argument %r"),
    N_("the following arguments are required: %s"),
    N_("one of the arguments %s is required"),
    N_("expected one argument"),
    N_("expected at most one argument"),
    N_("expected at least one argument"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
    N_("invalid %(type)s value: %(value)r"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid choice: %(value)r, maybe you meant %(closest)r? (choose from %(choices)s)"),
    N_("unknown parser %(parser_name)r (choices: %(choices)s)"),
    N_("can't open '%(filename)s': %(error)s"),
    N_("%(prog)s: warning: %(message)s\n"),
    N_("option '%(option)s' is deprecated"),
    N_("argument '%(argument_name)s' is deprecated"),
    N_("command '%(parser_name)s' is deprecated"),
)

# argparse messages a learner never sees: errors in the program's own parser definition,
# a formatter the CLI does not use, and the error line the CLI's parser writes itself.
NOT_SHOWN = frozenset(
    {
        ".__call__() not defined",
        "conflicting subparser: %s",
        "conflicting subparser alias: %s",
        'argument "-" with mode %r',
        "cannot merge actions - two groups are named %r",
        "'required' is an invalid argument for positionals",
        "invalid option string %(option)r: must start with a character %(prefix_chars)r",
        "dest= is required for options like %r",
        "invalid conflict_resolution value: %r",
        "conflicting option string: %s",
        "conflicting option strings: %s",
        "mutually exclusive arguments must be optional",
        "cannot have multiple subparser arguments",
        "%r is not callable",
        "unexpected option string: %s",
        " (default: %(default)s)",
        "%(prog)s: error: %(message)s\n",
    }
)


def _plural_message(n: int) -> str:
    """Never called: marks argparse's one plural message, so that the catalog has both its forms."""
    return ngettext("expected %s argument", "expected %s arguments", n)


@contextlib.contextmanager
def translated_argparse() -> Iterator[None]:
    """Inside the block, argparse speaks the current language (see the module docstring)."""
    saved = argparse.__dict__.get("_"), argparse.__dict__.get("ngettext")
    argparse._, argparse.ngettext = _, ngettext  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved  # type: ignore[attr-defined]


_WIDE_HEADING = re.compile(r"^(\s*\S.*[^\x00-\x7f]):$", re.MULTILINE)


def _cells(text: str) -> int:
    """Terminal cells of ``text``: two for a wide (Chinese) character, none for a combining mark.

    The standard library's Unicode data, so that ``microgradnorm --help`` does not import rich."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in text)


def _is_wide(text: str) -> bool:
    return any(unicodedata.east_asian_width(c) in "WF" for c in text)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, with Chinese text wrapped between characters and measured in terminal cells."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        if not _is_wide(text):
            return super()._split_lines(text, width)
        from microgradnorm.i18n.text import divide_line  # rich, imported only for help in Chinese

        text = " ".join(text.split())
        cuts = [0, *divide_line(text, width), len(text)]
        return [text[a:b].strip() for a, b in itertools.pairwise(cuts) if text[a:b].strip()]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if not _is_wide(text):
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in self._split_lines(text, width))

    def _format_usage(self, usage, actions, groups, prefix) -> str:  # type: ignore[no-untyped-def]
        """The usage lines, their continuation indented under the first by cells, not characters."""
        prefix = argparse._("usage: ") if prefix is None else prefix  # type: ignore[attr-defined]
        extra = _cells(prefix) - len(prefix)
        self._width -= extra
        try:
            text = super()._format_usage(usage, actions, groups, prefix)
        finally:
            self._width += extra
        first, *rest = text.split("\n")
        return "\n".join([first, *((" " * extra + line) if line.strip() else line for line in rest)])

    def format_help(self) -> str:
        # before Python 3.13 argparse writes a section heading as "title:" without asking the catalog
        return _WIDE_HEADING.sub(lambda m: m.group(1) + "：", super().format_help())
