"""The ``microgradnorm`` command line: a thin dispatcher over :mod:`microgradnorm.commands`.

Nothing in the package imports this module. Errors from bad input are printed
as one line naming the argument, the expected and the given, with exit code 2;
set MICROGRADNORM_DEBUG=1 to see the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys

from microgradnorm import __version__
from microgradnorm.commands import Parser, UsageError, add_language_argument
from microgradnorm.i18n import LanguageError, _, cli_language, lazy_gettext
from microgradnorm.i18n.argparse_text import translated_argparse

# command name -> module in microgradnorm.commands, in the order --help lists them
COMMANDS = ("lesson", "check", "graph", "exercise", "bench", "lab")


DESCRIPTION = lazy_gettext("Build LayerNorm, BatchNorm and RMSNorm from scalar nodes and watch the gradients flow.")


def error_line(prog: str, message: object) -> str:
    """The one line every error of the CLI is printed as."""
    # Translators: {prog} is the command, e.g. "microgradnorm lesson"
    return _("{prog}: error: {message}").format(prog=prog, message=message)


# What argparse must read as a (negative) value, not as an option: its own pattern knows -1 and -.5 but not
# -1e-5 or -inf, which then got "expected one argument" instead of the option's own clear message.
_NEGATIVE_NUMBER = re.compile(r"^-(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?|inf(?:inity)?|nan)$", re.IGNORECASE)


class _Parser(Parser):
    """The commands' Parser, and every negative number (``--eps -1e-5``) is a value that the option's own
    check can refuse clearly."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER


def build_parser() -> argparse.ArgumentParser:
    """The parser, in the current language: build it after the language is chosen (``main`` does)."""
    parser = _Parser(prog="microgradnorm", description=_(DESCRIPTION))
    parser.add_argument(
        "--version",
        action="version",
        version=f"microgradnorm {__version__}",
        help=_("show program's version number and exit"),
    )
    add_language_argument(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"microgradnorm.commands.{name}")
        description = getattr(module, "DESCRIPTION", module.HELP)
        cmd = sub.add_parser(name, help=_(module.HELP), description=_(description))
        module.add_arguments(cmd)
        add_language_argument(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        # the language is chosen before the parser is built, so that --help and argparse's words are translated too
        with cli_language(argv), translated_argparse():
            return _main(argv)
    except LanguageError as exc:
        print(error_line("microgradnorm", exc), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _reader_gone()


# Characters every command prints (marks, arrows, the middle dot of titles) and Chinese text.
_SYMBOLS = "✓✗·→‖√Σ中文"


def _narrow_encoding() -> str | None:
    """The encoding of stdout or stderr when it cannot show :data:`_SYMBOLS` (``PYTHONIOENCODING=ascii``,
    a Latin-1 terminal), else None: a command would otherwise fail halfway with a codec error."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if not isinstance(encoding, str):
            continue
        try:
            _SYMBOLS.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            return encoding
    return None


def _advise_utf8(encoding: str) -> int:
    """One line of advice, written as UTF-8 bytes whatever the declared encoding (most terminals show UTF-8
    anyway), so that a Chinese message is readable, not escaped."""
    line = error_line(
        "microgradnorm",
        _(
            "the output encoding is {encoding}, which cannot show this program's symbols or Chinese text; "
            "use a UTF-8 locale (LANG=C.UTF-8) or set PYTHONIOENCODING=utf-8"
        ).format(encoding=encoding),
    )
    buffer = getattr(sys.stderr, "buffer", None)
    if buffer is not None:
        buffer.write((line + "\n").encode("utf-8"))
        buffer.flush()
    else:
        sys.stderr.write(line.encode("ascii", "backslashreplace").decode("ascii") + "\n")
    return 2


def _reader_gone() -> int:
    """The exit of a command whose reader closed the pipe (``lesson 3 --auto | head -1``): no message, and
    stdout pointed at /dev/null so that Python's last flush does not complain either. Exit status 1, as rich
    gives when the pipe breaks inside its own printing (``Console.on_broken_pipe``), so every command agrees."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1


def _main(argv: list[str]) -> int:
    encoding = _narrow_encoding()
    if encoding is not None:
        return _advise_utf8(encoding)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from microgradnorm.engine import DomainError

    try:
        from rich.console import Console

        return int(args._run(args, Console()) or 0)
    except BrokenPipeError:
        raise  # the reader went away (| head): main stops quietly
    except (UsageError, ValueError, TypeError, DomainError, OSError) as exc:
        if os.environ.get("MICROGRADNORM_DEBUG"):
            raise
        from microgradnorm.i18n.errors import localize

        text = localize(exc)
        message = text.splitlines()[0] if text else type(exc).__name__
        print(error_line(f"microgradnorm {args.command}", message), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
