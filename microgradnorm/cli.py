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
from microgradnorm.i18n import LanguageError, cli_language

# command name -> module in microgradnorm.commands, in the order --help lists them
COMMANDS = ("lesson", "check", "graph", "exercise", "bench", "lab")


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (with a pointer to --help), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="microgradnorm",
        description="Build LayerNorm, BatchNorm and RMSNorm from scalar nodes and watch the gradients flow.",
    )
    parser.add_argument("--version", action="version", version=f"microgradnorm {__version__}")
    add_language_argument(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"microgradnorm.commands.{name}")
        cmd = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(cmd)
        add_language_argument(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        with cli_language(argv):  # chosen before the parser is built, so that --help is translated too
            return _main(argv)
    except LanguageError as exc:
        print(f"microgradnorm: error: {exc}", file=sys.stderr)
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
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"microgradnorm {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
