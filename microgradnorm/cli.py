"""The ``microgradnorm`` command line: a thin dispatcher over :mod:`microgradnorm.commands`.

Nothing in the package imports this module. Errors from bad input are printed
as one line naming the argument, the expected and the given, with exit code 2;
set MICROGRADNORM_DEBUG=1 to see the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from microgradnorm import __version__
from microgradnorm.commands import UsageError, add_language_argument
from microgradnorm.i18n import LanguageError, _, cli_language, lazy_gettext
from microgradnorm.i18n.argparse_text import HelpFormatter, translated_argparse

# command name -> module in microgradnorm.commands, in the order --help lists them
COMMANDS = ("lesson", "check", "graph", "exercise", "bench", "lab")


DESCRIPTION = lazy_gettext("Build LayerNorm, BatchNorm and RMSNorm from scalar nodes and watch the gradients flow.")


def error_line(prog: str, message: object) -> str:
    """The one line every error of the CLI is printed as."""
    # Translators: {prog} is the command, e.g. "microgradnorm lesson"
    return _("{prog}: error: {message}").format(prog=prog, message=message)


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (with a pointer to --help), exit code 2, and help wraps Chinese."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # Translators: {prog} is the command, e.g. "microgradnorm lesson"; {message} is argparse's
        self.exit(2, _("{prog}: error: {message} (see {prog} --help)").format(prog=self.prog, message=message) + "\n")


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


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from microgradnorm.engine import DomainError

    try:
        from rich.console import Console

        return int(args._run(args, Console()) or 0)
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
