"""``microgradnorm exercise grade`` and ``exercise gradescope``: the teacher's side of the exercises.

``grade SUBMISSIONS [--out DIR] [--jobs N]`` grades a whole class (:mod:`.exercises.classroom`);
``gradescope N [N ...] -o autograder.zip`` writes an autograder for Gradescope
(:mod:`.exercises.gradescope`). Both grade code written by someone else, which is
hostile to the machine that runs it: without bubblewrap (:mod:`.exercises.bubblewrap`)
``grade`` refuses unless the teacher says, by a flag named for what it means, that
they trust every submission.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from microgradnorm.commands import UsageError, positive_int
from microgradnorm.i18n import _

__all__ = ["ACTIONS", "HANDLERS", "TRUST_FLAG", "add_arguments"]

ACTIONS = ("grade", "gradescope")
TRUST_FLAG = "--no-sandbox-i-trust-this"


def _limits(p: argparse.ArgumentParser) -> None:
    """--timeout and --memory, per file, as ``exercise check`` takes them."""
    from microgradnorm.commands.limits import memory_mib as _memory
    from microgradnorm.commands.limits import timeout_seconds as _timeout

    p.add_argument(
        "--timeout", type=_timeout, default=10.0, metavar="S", help=_("wall-clock limit per file (10 s, at most 3600)")
    )
    p.add_argument(
        "--memory", type=_memory, default=1024, metavar="MB", help=_("memory limit (1024 MiB; 256 to 1048576)")
    )


def add_arguments(sub: Any) -> None:
    """The two actions on ``exercise``'s subparsers."""
    help_text = _(
        "grade a class: SUBMISSIONS holds a folder or a .zip per student with exercise files named like the "
        "scaffolds; each file is checked in its own sandbox, several at once"
    )
    p = sub.add_parser("grade", help=help_text, description=help_text)
    p.add_argument("submissions", metavar="SUBMISSIONS", help=_("the folder of the students' folders or zips"))
    p.add_argument(
        "--out", metavar="DIR", default=None, help=_("where the gradebook and the feedback go (default: none)")
    )
    p.add_argument(
        "--jobs", type=positive_int, default=None, metavar="N", help=_("files checked at once (default: the CPUs)")
    )
    p.add_argument(
        TRUST_FLAG,
        dest="trust",
        action="store_true",
        help=_("grade even where bubblewrap cannot isolate the code (only for code you trust)"),
    )
    _limits(p)
    help_text = _("write a Gradescope autograder (a zip) for exercises N ...")
    p = sub.add_parser("gradescope", help=help_text, description=help_text)
    p.add_argument("numbers", nargs="+", metavar="N", help=_("exercise numbers or names"))
    p.add_argument("-o", "--output", metavar="ZIP", default="autograder.zip", help=_("default: autograder.zip"))
    _limits(p)


def _grade(args: argparse.Namespace, console: Any, stdin: IO[str], progress: Any) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from microgradnorm.exercises import bubblewrap, classroom

    folder = Path(args.submissions)
    if not folder.is_dir():
        raise UsageError(_("SUBMISSIONS: expected a folder, got {path}").format(path=folder))
    out = Path(args.out) if args.out is not None else None
    if out is not None and (out.is_file() or (out.is_dir() and any(out.iterdir()))):
        raise UsageError(
            _("--out: expected a new or empty folder (nothing in it is overwritten), got {path}").format(path=out)
        )
    found = bubblewrap.available()
    if not found and not args.trust:
        console.print(
            _(
                "Not grading: {why}. Code written by someone else is hostile to this machine, and without "
                "bubblewrap only filters inside its own process stand in its way (see docs/grader.md). Install "
                "bubblewrap, or grade on a machine that has it; to grade anyway, code you trust only, add {flag}."
            ).format(why=found.why, flag=TRUST_FLAG),
            style="bold red",
            highlight=False,
            markup=False,
        )
        return 2
    if not found:
        console.print(
            _("Grading without bubblewrap ({why}): the code runs under filters only.").format(why=found.why),
            style="yellow",
            highlight=False,
            markup=False,
        )
    unpack = Path(tempfile.mkdtemp(prefix="microgradnorm-class-"))
    try:
        collected = classroom.collect(folder, unpack)
        for note in collected.notes:
            console.print(note, style="yellow", highlight=False, markup=False)
        if not collected.work:
            raise UsageError(_("SUBMISSIONS: no student's file to grade in {path}").format(path=folder))
        start = time.monotonic()
        bar = Progress(
            TextColumn(_("grading")), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        )
        with bar:
            task = bar.add_task("", total=len(collected.work))
            grades = classroom.grade_class(
                collected.work,
                jobs=args.jobs or os.cpu_count() or 1,
                timeout=args.timeout,
                memory_mb=args.memory,
                on_done=lambda g: bar.advance(task),
            )
        seconds = time.monotonic() - start
        if out is not None:
            written = classroom.write_gradebook(grades, out)
            console.print(
                _("Gradebook: {csv}, {json}; feedback for each student in {folder}").format(
                    csv=written[0], json=written[1], folder=out / "feedback"
                ),
                highlight=False,
                markup=False,
            )
        console.print(classroom.class_summary(grades, len(collected.students), seconds))
    finally:
        shutil.rmtree(unpack, ignore_errors=True)
    return 0


def _gradescope(args: argparse.Namespace, console: Any, stdin: IO[str], progress: Any) -> int:
    from microgradnorm.exercises import gradescope
    from microgradnorm.exercises.catalog import get_exercise

    try:
        chosen = [get_exercise(n) for n in args.numbers]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    path = gradescope.write_autograder(chosen, Path(args.output), timeout=args.timeout, memory_mb=args.memory)
    console.print(
        _("Wrote {path}: upload it as the autograder of a Gradescope programming assignment.").format(path=path),
        highlight=False,
        markup=False,
    )
    return 0


HANDLERS = {"grade": _grade, "gradescope": _gradescope}
