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
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from microgradnorm.commands import Parser, UsageError, seed_int
from microgradnorm.commands.limits import memory_mib as _memory
from microgradnorm.commands.limits import positive_float
from microgradnorm.commands.limits import timeout_seconds as _timeout
from microgradnorm.i18n import _, lazy_gettext

HELP = lazy_gettext("exercises: write the backward pass yourself; a grader says what is wrong")
DESCRIPTION = lazy_gettext(
    "Exercises in order of difficulty, from the local derivatives of the primitives to the gradient through a "
    "pre-LN residual block. `init [DIR]` copies the scaffolds into a workspace (remembered, so the other "
    "commands work from anywhere); edit a file where it says so; `check` grades it in a separate process on "
    "random inputs and names the mistake; `watch` re-checks on every save. Progress is kept, and is the same "
    "in every language; `init` in another language gives the files you have not started in that language."
)

ACTIONS = ("list", "init", "check", "watch", "hint", "solution", "reset", "grade", "gradescope")


class _ActionParser(Parser):
    """The parser of one action: its usage errors are one line that points to that action's own help.

    Arguments it does not know are its error too (argparse would leave them to the
    top-level parser, whose message points to the top-level help).
    """

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(_("unrecognized arguments: %s") % " ".join(extras))
        return parsed, extras


def _grading_options(p: argparse.ArgumentParser, name: str) -> None:
    """NAME, and how a check is made: ``check`` and ``watch``."""
    p.add_argument("name", nargs="?", metavar="NAME", default=None, help=_("exercise number or name"))
    if name == "check":
        p.add_argument("--seed", type=seed_int, default=None, help=_("grade on the inputs of this seed"))
    else:
        p.add_argument(
            "--interval", type=positive_float, default=0.5, metavar="S", help=_("seconds between looks (0.5)")
        )
    p.add_argument(
        "--timeout", type=_timeout, default=10.0, metavar="S", help=_("wall-clock limit per check (10 s, at most 3600)")
    )
    p.add_argument(
        "--memory", type=_memory, default=1024, metavar="MB", help=_("memory limit (1024 MiB; 256 to 1048576)")
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=_ActionParser)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name != "init":
            p.add_argument(
                "--dir", metavar="DIR", default=None, help=_("the exercise workspace (default: the one init made)")
            )
        return p

    add("list", _("every exercise with your progress"))
    p = add(
        "init",
        _(
            "copy the exercise scaffolds into DIR, in your language (never overwrites a file you edited; a file you "
            "have not started is given in your language)"
        ),
    )
    p.add_argument("directory", nargs="?", metavar="DIR", default=None, help=_("default: ./microgradnorm-exercises"))
    _grading_options(add("check", _("grade one exercise (default: the next unsolved)")), "check")
    watch = _("re-check an exercise whenever its file is saved (default: start with the next unsolved)")
    _grading_options(add("watch", watch), "watch")
    p = add("hint", _("show the next hint for NAME"))
    p.add_argument("name", metavar="NAME", help=_("exercise number or name"))
    p = add("solution", _("show the reference solution of NAME (after you pass it)"))
    p.add_argument("name", metavar="NAME", help=_("exercise number or name"))
    p.add_argument("--force", action="store_true", help=_("show it even though you have not passed yet"))
    p.add_argument(
        "--diff", action="store_true", help=_("show how your file differs from it, instead of the whole solution")
    )
    p = add("reset", _("put the scaffold of NAME back, in your language (your file is backed up first)"))
    p.add_argument("name", metavar="NAME", help=_("exercise number or name"))
    p.add_argument("--yes", action="store_true", help=_("do not ask for confirmation"))
    from microgradnorm.commands import exercise_classroom  # the teacher's actions: grade, gradescope

    exercise_classroom.add_arguments(sub)


def run(args: argparse.Namespace, console: Any) -> int:
    return main(args, console, sys.stdin)


def main(args: argparse.Namespace, console: Any, stdin: IO[str]) -> int:
    """Dispatch one exercise action. ``stdin`` answers reset's question and carries watch's commands."""
    from rich.text import Text

    from microgradnorm.commands import exercise_classroom
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.i18n.text import assemble

    action = getattr(args, "action", None) or "list"
    if action in exercise_classroom.HANDLERS:  # a teacher's: no learner's progress involved
        return exercise_classroom.HANDLERS[action](args, console, stdin, None)
    progress = ws.load_progress()
    if progress.warning:
        console.print(assemble(_("warning: {problem}"), "yellow", problem=Text(progress.warning)), highlight=False)
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

    folder, problem = None, None
    try:
        folder = ws.resolve_workspace(getattr(args, "dir", None), progress)
    except ValueError as exc:
        if getattr(args, "dir", None) is not None:
            raise
        problem = str(exc) if progress.workspace is not None else None  # check says the same: the folder is gone
    edited = {ex.name: folder is not None and ws.is_edited(folder, ex) for ex in EXERCISES}
    exists = {ex.name: folder is None or ws.learner_file(folder, ex).is_file() for ex in EXERCISES}
    console.print(exercise_list(progress, folder, edited, exists, problem))
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
    from microgradnorm.exercises.diagnose import staged
    from microgradnorm.exercises.grader import grade
    from microgradnorm.exercises.messages import say

    path = ws.learner_file(folder, ex)
    seed = getattr(args, "seed", None)
    with ws.progress_guard() as guard:
        result = grade(ex, path, seed=seed, timeout=args.timeout, memory_mb=args.memory)
    if guard.tampered:
        result.passed, result.status, result.summary = False, "error", say("progress_tampered")
        return result, ws.load_progress()
    # a mistake found for the first time is named, and its fix held back until it is found again
    found = {k for f in result.findings for k in f.keys}
    result.findings = staged(result.findings, ws.seen_findings(ws.load_progress(), ex), ex.number)
    if any(f.held for f in result.findings):
        result.notes.append(say("held_back", number=ex.number))
    if seed is not None:  # inputs known in advance: their answers could be, too
        result.recorded = False
        result.notes.append(say("seed_not_recorded", seed=seed, number=ex.number))
        return result, ws.record_seen(ex, found)
    return result, ws.record_result(ex, result.status, found)


def _check(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.render import grade_report

    folder = ws.resolve_workspace(args.dir, progress)
    ex = _exercise(args.name) if args.name is not None else ws.next_unsolved(progress)  # "" is a bad name, not none
    if ex is None:
        console.print(_done(_("Every exercise is done. `microgradnorm exercise list` shows them.")))
        return 0
    result, progress = _grade_and_record(ex, folder, args)
    nxt = ws.next_after(ex, progress) if result.passed else None  # the "next" of watch's n too
    console.print(grade_report(result, next_exercise=nxt))
    return 0 if result.passed else 1


def _hint(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import translation
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.render import hint_view

    ex = _exercise(args.name)
    all_hints, note = translation.hints(ex)
    shown = ws.record_hint(ex, len(all_hints)) if all_hints else 0
    console.print(hint_view(ex, all_hints, shown, note=note))
    return 0


def _solution(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import translation
    from microgradnorm.exercises.render import solution_view
    from microgradnorm.i18n.text import cjk_text

    ex = _exercise(args.name)
    if not (progress.passed(ex) or args.force):
        text = _(
            "{name} is not passed yet. Pass it first (`microgradnorm exercise check {number}`), or look anyway with "
            "`microgradnorm exercise solution {number} --force`."
        )
        console.print(cjk_text(text.format(name=ex.name, number=ex.number), style="yellow"), highlight=False)
        return 1
    source = translation.solution(ex)
    if getattr(args, "diff", False):
        return _solution_diff(args, console, progress, ex, source.text)
    if not console.is_terminal:  # into a file or a pipe: the file itself, runnable, not its framed view
        console.file.write(source.text)
        if source.note:
            print(source.note, file=sys.stderr)
        return 0
    console.print(solution_view(ex, source.text, note=source.note))
    return 0


def _solution_diff(args, console, progress, ex, reference: str) -> int:
    """The learner's file against the reference solution, as a unified diff (plain text into a pipe)."""
    from microgradnorm.exercises import workspace as ws
    from microgradnorm.exercises.render import solution_diff

    path = ws.learner_file(ws.resolve_workspace(args.dir, progress), ex)
    try:
        mine = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(_("--diff: your file {path} could not be read: {why}").format(path=path, why=exc)) from None
    if not console.is_terminal:
        console.file.write(solution_diff(ex, mine, reference, path, plain=True))
        return 0
    console.print(solution_diff(ex, mine, reference, path))
    return 0


def _reset(args, console, stdin, progress) -> int:
    from microgradnorm.exercises import translation
    from microgradnorm.exercises import workspace as ws

    ex = _exercise(args.name)
    folder = ws.resolve_workspace(args.dir, progress)
    path = ws.learner_file(folder, ex)
    untouched = path.is_file() and not ws.is_edited(folder, ex)  # nothing of the learner's to lose: no question
    if not args.yes and not untouched:
        console.print(
            # Translators: y and N are what the learner types, whatever the language: keep [y/N]
            _("Reset {path} to the scaffold? Your version is backed up first; your progress is kept. [y/N] ").format(
                path=path
            ),
            end="",
            highlight=False,
            markup=False,  # "[y/N]" is the question's answer key, not a style
        )
        answer = stdin.readline()
        if not _is_tty(stdin):
            console.print()  # the answer was not echoed: end the prompt's line
        if answer.strip().lower() not in ("y", "yes"):
            console.print(_("Not reset."), highlight=False)
            return 1
    backup = ws.reset_file(folder, ex)
    if backup:
        done = _("{file} is the scaffold again. Your previous version is in {backup}.")
    elif untouched:
        done = _("{file} is the scaffold again. You had not edited it, so no backup was needed.")
    else:
        done = _("{file} is the scaffold again.")
    console.print(done.format(file=ex.filename, backup=backup), highlight=False)
    note = translation.scaffold(ex).note
    if note:
        console.print(note, style="yellow", highlight=False)
    return 0


def _done(text: str) -> Any:
    from microgradnorm.i18n.text import cjk_text

    return cjk_text(text, style="bold green")


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
        console.print(_done(_("Every exercise is done. Nothing to watch.")))
        return 0
    watcher = watch.Watcher(folder, console, watch.WatchState(first), lambda ex: _grade_and_record(ex, folder, args))
    return watch.run(watcher, watch.Keys(stdin), watch.Files(folder), args.interval, sleep)
