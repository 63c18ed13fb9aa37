"""``microgradnorm lesson [N|NAME]``: list the lessons, or step through one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from microgradnorm.commands import UsageError, nonneg_float, positive_int, seed_int
from microgradnorm.i18n import _, lazy_gettext
from microgradnorm.lessons.format import DEFAULT_RANGES

HELP = lazy_gettext("step through a lesson in the terminal (start here: microgradnorm lesson)")
DESCRIPTION = lazy_gettext(
    "Without LESSON, list the lessons and your progress. With a lesson number or name, step "
    "through it: Enter or n for the next step (a step taller than the terminal scrolls first: "
    "space, j or the down arrow; k or the up arrow goes back up); 1 to 9 answer a question; b or p "
    "go back a step; r restarts; g draws the step's computation graph to a file; q quits. Your "
    "place is saved, and the lesson resumes there next time. Every number shown is computed live; "
    "--dim, --seed and --eps change them. When the output is not a terminal (or with --auto) "
    "every step is printed at once, questions with their answers. --references lists the "
    "published sources, --glossary the symbols and terms."
)

# --references and --glossary: the file in the lessons folder each one shows
DOCUMENTS = {"references": "REFERENCES.md", "glossary": "GLOSSARY.md"}

DIM_RANGE = DEFAULT_RANGES["dim"]  # lessons show every node: keep the graph on a screen
# rows of a lesson's batch: as many as --dim allows, and at least 2, since BatchNorm's statistics over a
# batch of one value per column normalize everything to 0
BATCH_RANGE = DEFAULT_RANGES["batch"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "lesson",
        nargs="?",
        metavar="LESSON",
        help=_("lesson number (1, 2, ...) or name (e.g. 08-batchnorm or batchnorm), or the start of a name"),
    )
    parser.add_argument("--auto", action="store_true", help=_("print every step without pausing"))
    parser.add_argument(
        "--dim",
        type=positive_int,
        default=None,
        metavar="D",
        help=_(
            "features per row (default: the lesson's); most lessons take {low} to {high}, a refusal names the "
            "lesson's range"
        ).format(low=DIM_RANGE[0], high=DIM_RANGE[1]),
    )
    parser.add_argument(
        "--seed", type=seed_int, default=None, metavar="S", help=_("random seed of the lesson's numbers")
    )
    parser.add_argument(
        "--eps", type=nonneg_float, default=None, metavar="E", help=_("epsilon added to the variance (default 1e-5)")
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        metavar="N",
        help=_("rows, where a lesson uses a batch, {low} to {high}").format(low=BATCH_RANGE[0], high=BATCH_RANGE[1]),
    )
    parser.add_argument("--step", type=positive_int, default=None, metavar="K", help=_("start at step K"))
    parser.add_argument("--restart", action="store_true", help=_("start at step 1 instead of where you left off"))
    parser.add_argument("--references", action="store_true", help=_("show the published sources the lessons build on"))
    parser.add_argument(
        "--glossary", action="store_true", help=_("show the symbols and terms, with the names other texts use")
    )
    parser.add_argument(
        "--graph-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=_("where g writes graph drawings (default: the state folder's graphs/)"),
    )


def find_lesson(lessons: list, query: str):
    """The lesson a learner means by ``query``: a number, a file name, a slug or the unique start of one."""
    q = query.strip().lower().removesuffix(".md")
    if q.isdecimal():
        number = int(q)
        for lesson in lessons:
            if lesson.number == number:
                return lesson
        raise UsageError(
            _(
                "argument LESSON: there is no lesson {number} (lessons are numbered 1 to {last}); "
                "list them with: microgradnorm lesson"
            ).format(number=number, last=len(lessons))
        )
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
            _(
                "argument LESSON: {query!r} matches several lessons ({names}); give the number, "
                "or list them with: microgradnorm lesson"
            ).format(query=query, names=names)
        )
    raise UsageError(
        _(
            "argument LESSON: no lesson named {query!r} (expected a number, a name or the start of one); "
            "list them with: microgradnorm lesson"
        ).format(query=query)
    )


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm.i18n import current_language
    from microgradnorm.lessons import render
    from microgradnorm.lessons.translation import localize_all

    _check_options(args)
    if args.references or args.glossary:
        return _show_documents(args, console)
    lessons = _load_lessons(console)
    progress = _progress_store(lessons, console)
    if args.lesson is None:
        shown = localize_all(lessons, current_language())
        console.print(render.lesson_list(shown, progress.load() if progress is not None else {}))
        return 0
    return _run_lesson(args, console, lessons, progress)


def _run_lesson(args: argparse.Namespace, console, lessons: list, progress) -> int:
    """Step through the lesson ``args.lesson`` names, in the reader's language, interactively or all at once."""
    from microgradnorm.i18n import current_language
    from microgradnorm.lessons.keys import key_source
    from microgradnorm.lessons.runner import LessonRunner, run_auto
    from microgradnorm.lessons.translation import localized

    english = find_lesson(lessons, args.lesson)  # found and checked by its English name, numbers and options
    params = _lesson_params(args, english)
    start = _start(args, english)
    language = current_language()
    shown = localized(english, language)
    notes = {"note": shown.note(), "step_notes": shown.step_notes()}
    if args.auto or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return run_auto(shown.lesson, params, console, start or 0, **notes)
    following = next((x for x in lessons if x.number > english.number), None)
    runner = LessonRunner(
        shown.lesson,
        params,
        console,
        key_source(sys.stdin),
        progress=progress,
        graph_dir=args.graph_dir,
        following=localized(following, language).lesson if following is not None else None,
        **notes,
    )
    return runner.run(start)


def _load_lessons(console) -> list:
    """Every lesson that loads; each file that does not is named, and none at all is an error."""
    from microgradnorm.lessons import render
    from microgradnorm.lessons.format import load_lessons

    problems: list = []
    lessons = load_lessons(errors=problems)
    for problem in problems:
        console.print(render.note(_("Skipping a lesson file that does not load: {problem}").format(problem=problem)))
    if not lessons:
        raise UsageError(_("no lesson could be loaded; see the messages above"))
    return lessons


def _progress_store(lessons: list, console):
    """The learner's progress, or None when the state folder is unusable (the lessons still run)."""
    from microgradnorm.i18n.text import cjk_text
    from microgradnorm.lessons.progress import ProgressStore
    from microgradnorm.store import StateDirError, probe_writable

    try:
        progress = ProgressStore(steps={x.slug: len(x.steps) for x in lessons})
        probe_writable(progress.path.parent)  # a read-only folder: say so now, not at the first save
    except StateDirError as exc:
        console.print(cjk_text(_("Progress is not saved: {reason}").format(reason=exc), style="yellow"))
        return None
    progress.load()  # problems with the file are reported once, here
    for warning in progress.warnings:
        console.print(cjk_text(warning, style="yellow"))
    return progress


def _lesson_params(args: argparse.Namespace, lesson):
    """The lesson's numbers with the options given; an option the lesson does not take is an error."""
    given = {"dim": args.dim, "seed": args.seed, "eps": args.eps, "batch": args.batch}
    for key, value in given.items():
        if value is not None and key not in lesson.options and not lesson.options:
            raise UsageError(
                _("argument --{option}: lesson {lesson} takes no options, got {value}").format(
                    option=key, lesson=lesson.name, value=value
                )
            )
        if value is not None and key not in lesson.options:
            takes = ", ".join(f"--{k}" for k in lesson.options)
            raise UsageError(
                _("argument --{option}: lesson {lesson} does not use it (it takes {takes}), got {value}").format(
                    option=key, lesson=lesson.name, takes=takes, value=value
                )
            )
    # only for options the lesson takes, so a message never talks about another lesson's norm
    _check_ranges(args, lesson)
    return lesson.params(**given)


def _check_ranges(args: argparse.Namespace, lesson) -> None:
    for option, value, message in (
        (
            "dim",
            args.dim,
            _("argument --dim: lessons show every node, so expected an integer from {low} to {high}, got {value}"),
        ),
        (
            "batch",
            args.batch,
            _(
                "argument --batch: lessons show every node and BatchNorm needs two or more rows, "
                "so expected an integer from {low} to {high}, got {value}"
            ),
        ),
    ):
        low, high = lesson.range_of(option)
        if option in lesson.own_ranges:  # the lesson's own range, for its own reason: no reason given here
            message = _("argument --{option}: lesson {lesson} takes an integer from {low} to {high}, got {value}")
        if value is not None and not low <= value <= high:
            raise UsageError(message.format(option=option, lesson=lesson.number, low=low, high=high, value=value))


def _start(args: argparse.Namespace, lesson) -> int | None:
    """The step to start at (0-based) from --step or --restart; None: where the learner left off."""
    if args.step is not None:
        if args.step > len(lesson.steps):
            raise UsageError(
                _("argument --step: lesson {number} has {total} steps, got {step}").format(
                    number=lesson.number, total=len(lesson.steps), step=args.step
                )
            )
        return args.step - 1
    return 0 if args.restart else None


def _show_documents(args: argparse.Namespace, console) -> int:
    """Print lessons/REFERENCES.md and/or lessons/GLOSSARY.md as Markdown, in the reader's language when translated."""
    from microgradnorm.i18n import current_language
    from microgradnorm.lessons import render
    from microgradnorm.lessons.format import lessons_dir
    from microgradnorm.lessons.runner import print_unpadded
    from microgradnorm.lessons.translation import localized_page

    for key, name in DOCUMENTS.items():
        if getattr(args, key):
            path = lessons_dir() / name
            try:
                text, note = localized_page(path, current_language())
            except OSError as exc:
                raise UsageError(
                    _("--{option}: could not read {path} ({reason}); reinstall microgradnorm").format(
                        option=key, path=path, reason=exc.strerror or exc
                    )
                ) from None
            if note:
                print_unpadded(console, render.note(note))
            print_unpadded(console, render.document(text))
    return 0


def _check_options(args: argparse.Namespace) -> None:
    """UsageErrors for options out of range, given without a lesson to apply to, or in conflict."""
    _check_documents(args)
    given = _lesson_options(args)
    if args.lesson is None and given:
        flag, shown = given[0]
        raise UsageError(
            _("argument {flag}: needs a LESSON (as in: microgradnorm lesson 1 {shown}), got no LESSON").format(
                flag=flag, shown=shown
            )
        )
    if args.restart and args.step is not None:
        raise UsageError(
            _(
                "argument --restart: not allowed with argument --step (both say where to start), "
                "got --restart and --step {step}"
            ).format(step=args.step)
        )


def _lesson_options(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(flag, the flag as given) of each option given that only means something for a lesson."""
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
    return [(flag, flag if value is True else f"{flag} {value}") for flag, value in options if value is not None]


def _check_documents(args: argparse.Namespace) -> None:
    """--references and --glossary show a page: neither takes a LESSON or a lesson's options."""
    shown = [f"--{key}" for key in DOCUMENTS if getattr(args, key)]
    if not shown:
        return
    if args.lesson is not None:
        raise UsageError(
            _("argument {flag}: takes no LESSON (it is not a lesson), got LESSON {lesson}").format(
                flag=shown[0], lesson=args.lesson
            )
        )
    given = _lesson_options(args)
    if given:
        flag, as_given = given[0]
        raise UsageError(
            _("argument {flag}: not allowed with {other} (that is for a lesson), got {given}").format(
                flag=shown[0], other=flag, given=as_given
            )
        )
