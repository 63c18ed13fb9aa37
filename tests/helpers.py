"""Helpers the test modules share: rendering a rich renderable to text, and running the CLI in-process."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from microgradnorm import cli


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
