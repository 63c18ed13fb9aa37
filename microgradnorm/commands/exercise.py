"""``microgradnorm exercise ...``: write the backward passes yourself, and get told what is wrong.

Subcommands, in the spirit of rustlings: ``list`` (with progress), ``init [DIR]``
(copies the scaffolds; never overwrites a file you edited), ``check [NAME]``
(grades one, or the next unsolved), ``watch [NAME]`` (re-checks a file when
you save it; moves on only when you say so), ``hint NAME`` (one more hint each time),
``solution NAME`` (after you pass, or with ``--force``), ``reset NAME`` (asks
first; keeps a backup). NAME is an exercise number or name.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import IO, Any, NoReturn

from microgradnorm.commands import UsageError, positive_int, seed_int

HELP = "exercises: write the backward pass yourself; a grader says what is wrong"
DESCRIPTION = (
    "Exercises in order of difficulty, from the local derivatives of the primitives to the gradient through a "
    "pre-LN residual block. `init [DIR]` copies the scaffolds into a workspace (remembered, so the other "
    "commands work from anywhere); edit a file where it says so; `check` grades it in a separate process on "
    "random inputs and names the mistake; `watch` re-checks on every save. Progress is kept."
)

ACTIONS = ("list", "init", "check", "watch", "hint", "solution", "reset")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


MAX_TIMEOUT = 3600.0  # seconds: a check that needs more is stuck
MEMORY_RANGE = (256, 1 << 20)  # MiB: Python with NumPy needs about 128 to start; 1 TiB is more than any machine here


def _timeout(text: str) -> float:
    value = positive_float(text)
    if value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TIMEOUT:g} seconds, got {text}")
    return value


def _memory(text: str) -> int:
    value = positive_int(text)
    low, high = MEMORY_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"expected MiB from {low} to {high}, got {value}")
    return value


class _ActionParser(argparse.ArgumentParser):
    """The parser of one action: its usage errors are one line that points to that action's own help.

    Arguments it does not know are its error too (argparse would leave them to the
    top-level parser, whose message points to the top-level help).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=_ActionParser)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != "init":
            p.add_argument(
                "--dir", metavar="DIR", default=None, help="the exercise workspace (default: the one init made)"
            )
        return p

    add("list", "every exercise with your progress")
    p = add("init", "copy the exercise scaffolds into DIR (never overwrites a file you edited)")
    p.add_argument("directory", nargs="?", metavar="DIR", default=None, help="default: ./microgradnorm-exercises")
    for name, text in (
        ("check", "grade one exercise (default: the next unsolved)"),
        ("watch", "re-check an exercise whenever its file is saved (default: start with the next unsolved)"),
    ):
        p = add(name, text)
        p.add_argument("name", nargs="?", metavar="NAME", default=None, help="exercise number or name")
        if name == "check":
            p.add_argument("--seed", type=seed_int, default=None, help="grade on the inputs of this seed")
        else:
            p.add_argument(
                "--interval", type=positive_float, default=0.5, metavar="S", help="seconds between looks (0.5)"
            )
        p.add_argument(
            "--timeout",
            type=_timeout,
            default=10.0,
            metavar="S",
            help="wall-clock limit per check (10 s, at most 3600)",
        )
        p.add_argument(
            "--memory", type=_memory, default=1024, metavar="MB", help="memory limit (1024 MiB; 256 to 1048576)"
        )
    p = add("hint", "show the next hint for NAME")
    p.add_argument("name", metavar="NAME", help="exercise number or name")
    p = add("solution", "show the reference solution of NAME (after you pass it)")
    p.add_argument("name", metavar="NAME", help="exercise number or name")
    p.add_argument("--force", action="store_true", help="show it even though you have not passed yet")
    p = add("reset", "put the scaffold of NAME back (your file is backed up first)")
    p.add_argument("name", metavar="NAME", help="exercise number or name")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace, console: Any) -> int:
    return main(args, console, sys.stdin)


def main(args: argparse.Namespace, console: Any, stdin: IO[str]) -> int:
    """Dispatch one exercise action. ``stdin`` answers reset's question and carries watch's commands."""
    from microgradnorm.exercises import workspace as ws

    action = getattr(args, "action", None) or "list"
    progress = ws.load_progress()
    if progress.warning:
        console.print(f"[yellow]warning:[/yellow] {progress.warning}", highlight=False)
    handler = {
        "list": _list,
        "init": _init,
        "check": _check,
        "watch": _watch,
        "hint": _hint,
        "solution": _solution,
        "reset": _reset,
    }[action]
    return handler(args, console, stdin, progress)


def _exercise(name: str):
    from microgradnorm.exercises.catalog import get_exercise

    try:
        return get_exercise(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _list(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.catalog import EXERCISES
    from microgradnorm.exercises.render import exercise_list

    folder = None
    try:
        folder = ws.resolve_workspace(getattr(args, "dir", None), progress)
    except ValueError:
        if getattr(args, "dir", None) is not None:
            raise
    edited = {ex.name: folder is not None and ws.is_edited(folder, ex) for ex in EXERCISES}
    exists = {ex.name: folder is None or ws.learner_file(folder, ex).is_file() for ex in EXERCISES}
    console.print(exercise_list(progress, folder, edited, exists))
    return 0


def _init(args, console, stdin, progress) -> int:
    from pathlib import Path

    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.render import init_report

    report = ws.init_workspace(Path(args.directory or ws.DEFAULT_WORKSPACE))
    console.print(init_report(report, ws.next_unsolved(progress)))
    return 0


def _grade_and_record(ex, folder, args):
    """Grade ``ex``, then record the grader's own verdict; a progress file changed meanwhile is put back."""
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.grader import grade
    from microgradnorm.exercises.messages import say

    path = ws.learner_file(folder, ex)
    seed = getattr(args, "seed", None)
    with ws.progress_guard() as guard:
        result = grade(ex, path, seed=seed, timeout=args.timeout, memory_mb=args.memory)
    if guard.tampered:
        result.passed, result.status, result.summary = False, "error", say("progress_tampered")
        return result, ws.load_progress()
    if seed is not None:  # inputs known in advance: their answers could be, too
        result.recorded = False
        result.notes.append(say("seed_not_recorded", seed=seed, number=ex.number))
        return result, ws.load_progress()
    return result, ws.record_result(ex, result.status)


def _check(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.render import grade_report

    folder = ws.resolve_workspace(args.dir, progress)
    ex = _exercise(args.name) if args.name is not None else ws.next_unsolved(progress)  # "" is a bad name, not none
    if ex is None:
        console.print("[bold green]Every exercise is done.[/bold green] `microgradnorm exercise list` shows them.")
        return 0
    result, progress = _grade_and_record(ex, folder, args)
    nxt = ws.next_unsolved(progress) if result.passed else None
    console.print(grade_report(result, next_exercise=nxt))
    return 0 if result.passed else 1


def _hint(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.catalog import hints
    from microgradnorm.exercises.render import hint_view

    ex = _exercise(args.name)
    all_hints = hints(ex)
    shown = ws.record_hint(ex, len(all_hints)) if all_hints else 0
    console.print(hint_view(ex, all_hints, shown))
    return 0


def _solution(args, console, stdin, progress) -> int:
    from microgradnorm.exercises.render import solution_view

    ex = _exercise(args.name)
    if not (progress.passed(ex) or args.force):
        console.print(
            f"[yellow]{ex.name} is not passed yet.[/yellow] Pass it first (`microgradnorm exercise check "
            f"{ex.number}`), or look anyway with `microgradnorm exercise solution {ex.number} --force`.",
            highlight=False,
        )
        return 1
    source = ex.solution.read_text(encoding="utf-8")
    if not console.is_terminal:  # into a file or a pipe: the file itself, runnable, not its framed view
        console.file.write(source)
        return 0
    console.print(solution_view(ex, source))
    return 0


def _reset(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import workspace as ws

    ex = _exercise(args.name)
    folder = ws.resolve_workspace(args.dir, progress)
    path = ws.learner_file(folder, ex)
    if not args.yes:
        console.print(
            f"Reset {path} to the scaffold? Your version is backed up first; your progress is kept. [y/N] ",
            end="",
            highlight=False,
            markup=False,  # "[y/N]" is the question's answer key, not a style
        )
        answer = stdin.readline()
        if not _is_tty(stdin):
            console.print()  # the answer was not echoed: end the prompt's line
        if answer.strip().lower() not in ("y", "yes"):
            console.print("Not reset.", highlight=False)
            return 1
    backup = ws.reset_file(folder, ex)
    kept = f" Your previous version is in {backup}." if backup else ""
    console.print(f"{ex.filename} is the scaffold again.{kept}", highlight=False)
    return 0


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# ---- watch ----------------------------------------------------------------------------------


def _watch(args, console, stdin, progress, *, sleep: Callable[[float], None] = time.sleep) -> int:
    from microgradnorm.exercises import watch
    from microgradnorm.exercises import workspace as ws

    folder = ws.resolve_workspace(args.dir, progress)
    first = _exercise(args.name) if args.name is not None else ws.next_unsolved(progress)
    if first is None:
        console.print("[bold green]Every exercise is done.[/bold green] Nothing to watch.")
        return 0
    watcher = watch.Watcher(folder, console, watch.WatchState(first), lambda ex: _grade_and_record(ex, folder, args))
    return watch.run(watcher, watch.Keys(stdin), watch.Files(folder), args.interval, sleep)
