"""Helpers the test modules share: rendering a rich renderable to text, and running the CLI in-process."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from microgradnorm import cli
from microgradnorm.commands import exercise


def rendered(renderable: Any, width: int = 100) -> str:
    """``renderable`` as rich prints it to a plain terminal ``width`` cells wide, without colour."""
    console = Console(file=io.StringIO(), width=width, no_color=True, record=True)
    console.print(renderable)
    return console.export_text()


def flat(renderable: Any, width: int = 100) -> str:
    """:func:`rendered` with every run of whitespace (line breaks, table padding) made one space."""
    return " ".join(rendered(renderable, width).split())


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``microgradnorm *argv``; argparse's exits (--help, usage errors) too."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def run_exercise(*argv: str, stdin: str = "", width: int = 120, terminal: bool = False) -> tuple[int, str]:
    """(exit code, what it printed) of ``microgradnorm exercise *argv`` through the real parser, printing into a
    string ``width`` columns wide without colour and reading ``stdin``; usage errors raise as the command does."""
    args = cli.build_parser().parse_args(["exercise", *argv])
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=terminal or None)
    code = exercise.main(args, console, io.StringIO(stdin))
    return code, console.file.getvalue()
