"""``microgradnorm lesson [N|NAME]``: list the lessons, or step through one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from microgradnorm.commands import UsageError, nonneg_float, positive_int, seed_int

HELP = "step through a lesson in the terminal (start here: microgradnorm lesson)"
DESCRIPTION = (
    "Without LESSON, list the lessons and your progress. With a lesson number or name, step "
    "through it: Enter, n or space for the next step; b or p to go back; r to restart; g to "
    "draw the step's computation graph to a file; q to quit. Your place is saved, and the "
    "lesson resumes there next time. Every number shown is computed live; --dim, --seed and "
    "--eps change them. When the output is not a terminal (or with --auto) every step is "
    "printed at once."
)

DIM_RANGE = (2, 16)  # lessons show every node: keep the graph on a screen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lesson", nargs="?", metavar="LESSON", help="lesson number (1, 2, ...) or name (e.g. 01-...)")
    parser.add_argument("--auto", action="store_true", help="print every step without pausing")
    parser.add_argument(
        "--dim",
        type=positive_int,
        default=None,
        metavar="D",
        help=f"features per row, {DIM_RANGE[0]} to {DIM_RANGE[1]} (default: the lesson's, 3 to 6)",
    )
    parser.add_argument("--seed", type=seed_int, default=None, metavar="S", help="random seed of the lesson's numbers")
    parser.add_argument(
        "--eps", type=nonneg_float, default=None, metavar="E", help="epsilon added to the variance (default 1e-5)"
    )
    parser.add_argument(
        "--batch", type=positive_int, default=None, metavar="N", help="rows, where a lesson uses a batch"
    )
    parser.add_argument("--step", type=positive_int, default=None, metavar="K", help="start at step K")
    parser.add_argument("--restart", action="store_true", help="start at step 1 instead of where you left off")
    parser.add_argument(
        "--graph-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where g writes graph drawings (default: the state folder's graphs/)",
    )


def find_lesson(lessons: list, query: str):
    """The lesson a learner means by ``query``: a number, a file name, a slug or a unique part of one."""
    q = query.strip().lower()
    if q.removesuffix(".md").isdigit():
        number = int(q.removesuffix(".md"))
        for lesson in lessons:
            if lesson.number == number:
                return lesson
        raise UsageError(
            f"argument LESSON: there is no lesson {number} (lessons are numbered 1 to {len(lessons)}); "
            "list them with: microgradnorm lesson"
        )
    q = q.removesuffix(".md")
    for lesson in lessons:
        if q in (lesson.name, lesson.slug):
            return lesson
    matches = [lesson for lesson in lessons if q and q in lesson.name]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(m.name for m in matches)
        raise UsageError(f"argument LESSON: {query!r} matches several lessons ({names}); give the number")
    raise UsageError(f"argument LESSON: no lesson named {query!r}; list them with: microgradnorm lesson")


def run(args: argparse.Namespace, console) -> int:
    from rich.text import Text

    from microgradnorm.lessons import render
    from microgradnorm.lessons.format import load_lessons
    from microgradnorm.lessons.progress import ProgressStore
    from microgradnorm.lessons.runner import LessonRunner, key_source, run_auto

    if args.dim is not None and not DIM_RANGE[0] <= args.dim <= DIM_RANGE[1]:
        raise UsageError(
            f"argument --dim: lessons show every node, so expected an integer from {DIM_RANGE[0]} "
            f"to {DIM_RANGE[1]}, got {args.dim}"
        )
    problems: list = []
    lessons = load_lessons(errors=problems)
    for problem in problems:
        console.print(Text(f"Skipping a lesson file that does not load: {problem}", style="yellow"))
    if not lessons:
        raise UsageError("no lesson could be loaded; see the messages above")
    progress = ProgressStore()
    saved = progress.load()
    for warning in progress.warnings:
        console.print(Text(warning, style="yellow"))

    if args.lesson is None:
        console.print(render.lesson_list(lessons, saved))
        return 0

    lesson = find_lesson(lessons, args.lesson)
    params = lesson.params(dim=args.dim, seed=args.seed, eps=args.eps, batch=args.batch)
    start = None
    if args.step is not None:
        if args.step > len(lesson.steps):
            raise UsageError(f"argument --step: lesson {lesson.number} has {len(lesson.steps)} steps, got {args.step}")
        start = args.step - 1
    elif args.restart:
        start = 0

    interactive = not args.auto and sys.stdin.isatty() and sys.stdout.isatty()
    if not interactive:
        return run_auto(lesson, params, console, start or 0)
    following = next((x for x in lessons if x.number > lesson.number), None)
    runner = LessonRunner(
        lesson,
        params,
        console,
        key_source(sys.stdin),
        progress=progress,
        graph_dir=args.graph_dir,
        following=following,
    )
    return runner.run(start)
