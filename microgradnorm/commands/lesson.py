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
# rows of a lesson's batch: as many as --dim allows, and at least 2, since BatchNorm's statistics over a
# batch of one value per column normalize everything to 0
BATCH_RANGE = (2, 16)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "lesson",
        nargs="?",
        metavar="LESSON",
        help="lesson number (1, 2, ...) or name (e.g. 06-batchnorm or batchnorm), or the start of a name",
    )
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
        "--batch",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"rows, where a lesson uses a batch, {BATCH_RANGE[0]} to {BATCH_RANGE[1]}",
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
    """The lesson a learner means by ``query``: a number, a file name, a slug or the unique start of one."""
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
    # the start of a name, never any other part of one: "0-" is not lesson 10, nor "chain" lesson 1
    matches = [lesson for lesson in lessons if q and (lesson.name.startswith(q) or lesson.slug.startswith(q))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(m.name for m in matches)
        raise UsageError(
            f"argument LESSON: {query!r} matches several lessons ({names}); give the number, "
            "or list them with: microgradnorm lesson"
        )
    raise UsageError(
        f"argument LESSON: no lesson named {query!r} (expected a number, a name or the start of one); "
        "list them with: microgradnorm lesson"
    )


def run(args: argparse.Namespace, console) -> int:
    from rich.text import Text

    from microgradnorm.lessons import render
    from microgradnorm.lessons.format import load_lessons
    from microgradnorm.lessons.progress import ProgressStore
    from microgradnorm.lessons.runner import LessonRunner, key_source, run_auto
    from microgradnorm.store import StateDirError

    _check_options(args)
    problems: list = []
    lessons = load_lessons(errors=problems)
    for problem in problems:
        console.print(Text(f"Skipping a lesson file that does not load: {problem}", style="yellow"))
    if not lessons:
        raise UsageError("no lesson could be loaded; see the messages above")
    try:
        progress: ProgressStore | None = ProgressStore(steps={x.slug: len(x.steps) for x in lessons})
    except StateDirError as exc:  # a bad MICROGRADNORM_HOME: the lessons still run, progress is not saved
        progress = None
        console.print(Text(f"Progress is not saved: {exc}", style="yellow"), soft_wrap=True)
    saved = progress.load() if progress is not None else {}
    for warning in progress.warnings if progress is not None else []:
        console.print(Text(warning, style="yellow"))

    if args.lesson is None:
        console.print(render.lesson_list(lessons, saved))
        return 0

    lesson = find_lesson(lessons, args.lesson)
    given = {"dim": args.dim, "seed": args.seed, "eps": args.eps, "batch": args.batch}
    for key, value in given.items():
        if value is not None and key not in lesson.options:
            takes = ", ".join(f"--{k}" for k in lesson.options)
            raise UsageError(f"argument --{key}: lesson {lesson.name} does not use it (it takes {takes}), got {value}")
    params = lesson.params(**given)
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


def _check_options(args: argparse.Namespace) -> None:
    """UsageErrors for options out of range, given without a lesson to apply to, or in conflict."""
    if args.lesson is None:
        options = (
            ("--auto", args.auto or None),
            ("--dim", args.dim),
            ("--seed", args.seed),
            ("--eps", args.eps),
            ("--batch", args.batch),
            ("--step", args.step),
            ("--restart", args.restart or None),
            ("--graph-dir", args.graph_dir),
        )
        for flag, value in options:
            if value is not None:
                shown = flag if value is True else f"{flag} {value}"
                raise UsageError(
                    f"argument {flag}: needs a LESSON (as in: microgradnorm lesson 1 {shown}), got no LESSON"
                )
    if args.restart and args.step is not None:
        raise UsageError(
            "argument --restart: not allowed with argument --step (both say where to start), "
            f"got --restart and --step {args.step}"
        )
    for flag, value, (low, high), why in (
        ("--dim", args.dim, DIM_RANGE, "lessons show every node"),
        ("--batch", args.batch, BATCH_RANGE, "lessons show every node and BatchNorm needs two or more rows"),
    ):
        if value is not None and not low <= value <= high:
            raise UsageError(f"argument {flag}: {why}, so expected an integer from {low} to {high}, got {value}")
