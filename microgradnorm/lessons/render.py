"""Pure renderers for lessons: data in, rich renderable out. Nothing here prints or reads.

The runner calls the demos and hands their outputs here; the renderers only
arrange them (step header, prose as Markdown, demo output, failures), so the
same step looks the same in the interactive runner, in ``--auto`` and in tests.

Every word here is translated (:mod:`microgradnorm.i18n`) when a renderable is
made, and prose and longer lines wrap the Chinese way (:func:`~microgradnorm.i18n.text.cjk_markdown`,
:func:`~microgradnorm.i18n.text.cjk_text`); English renders exactly as rich renders it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from microgradnorm.i18n import _, lazy_gettext, ngettext, pgettext
from microgradnorm.i18n.text import CJKText, assemble, cjk_markdown, cjk_text, separated

if TYPE_CHECKING:
    from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction
    from microgradnorm.lessons.format import DemoCall, Lesson
    from microgradnorm.lessons.progress import LessonProgress

__all__ = [
    "KEY_HELP",
    "DemoFailure",
    "document",
    "finished",
    "first_question",
    "inline",
    "key_footer",
    "lesson_list",
    "note",
    "prediction_answer",
    "prediction_question",
    "render_step",
    "step_body",
    "step_header",
]

KEY_HELP = lazy_gettext(
    "Enter, n or space: next (scrolls first while the step goes on below) · ↓ j ↑ k PgDn PgUp: scroll · "
    "1 to 9: answer a question · b or p: back · r: restart · g: draw the graph · q: quit"
)


def note(text: str) -> CJKText:
    """A line above a step: where the lesson resumes, what is shown in English."""
    return cjk_text(text, style="yellow")


@dataclass
class DemoFailure:
    """A demo that raised: shown in place of its output, and counted by ``--auto``'s exit code."""

    call: DemoCall
    error: BaseException

    @property
    def message(self) -> str:
        text = str(self.error).splitlines()[0] if str(self.error) else ""
        return f"{type(self.error).__name__}: {text}" if text else type(self.error).__name__


def step_header(lesson: Lesson, index: int) -> Group:
    """The lesson's name as a rule, then 'Step k of n · title' in bold."""
    step = lesson.steps[index]
    where = _("Step {step} of {total}").format(step=index + 1, total=len(lesson.steps))
    return Group(
        Rule(Text(f"{lesson.number:02d} · {lesson.title}", style="bold cyan"), style="cyan"),
        cjk_text(Text.assemble((f"{where} · ", "dim"), inline(step.title, "bold"))),
    )


def inline(text: str, style: str = "") -> Text:
    """A one-line title with Markdown `code` spans shown as code, not as backticks."""
    out = Text(style=style)
    for k, part in enumerate(text.split("`")):
        out.append(part, style="cyan" if k % 2 else "")
    return out


def render_step(
    lesson: Lesson,
    index: int,
    outputs: Sequence[DemoOutput | DemoFailure],
    params: LessonParams | None = None,
) -> Group:
    """One whole step as ``--auto`` prints it: header, then its prose and demo outputs in file order.

    ``outputs`` holds one entry per demo block of the step, in order. A demo with a
    prediction shows its question and the answer with its numbers, without asking.
    """
    return Group(step_header(lesson, index), step_body(lesson, index, outputs, params))


def step_body(
    lesson: Lesson,
    index: int,
    outputs: Sequence[DemoOutput | DemoFailure],
    params: LessonParams | None = None,
    answers: Mapping[int, int | None] | None = None,
) -> Group:
    """The step below its header: the options line (step 1), then prose and demo outputs in file order.

    ``answers`` None shows every prediction answered (``--auto``). Otherwise it maps the
    position of a demo in ``outputs`` to the learner's guess (an index into the choices,
    or None when they asked to see the answer without guessing): the first demo with a
    prediction not in ``answers`` shows only its question, and nothing after it is shown.
    """
    from microgradnorm.lessons.format import DemoCall

    step = lesson.steps[index]
    parts: list[RenderableType] = []
    if index == 0 and params is not None and lesson.options:
        parts.append(params_line(params, lesson.options))
    position = 0
    for block in step.blocks:
        if not isinstance(block, DemoCall):
            parts.append(Padding(cjk_markdown(block.text), (1, 0, 0, 0)))
            continue
        if position >= len(outputs):
            raise ValueError(f"render_step: step {index + 1} has more demo blocks than outputs given")
        out = outputs[position]
        if answers is not None and _asks(out) and position not in answers:
            parts.append(Padding(prediction_question(out.prediction), (1, 0, 0, 0)))
            break
        guess = answers.get(position) if answers is not None else None
        parts.append(Padding(_demo_renderable(out, guess), (1, 0, 0, 0)))
        position += 1
    return Group(*parts)


def first_question(outputs: Sequence[DemoOutput | DemoFailure], answers: Mapping[int, int | None]) -> int | None:
    """The position of the first demo whose prediction is not in ``answers``, or None."""
    return next((k for k, out in enumerate(outputs) if _asks(out) and k not in answers), None)


def _asks(out: DemoOutput | DemoFailure) -> bool:
    return not isinstance(out, DemoFailure) and out.prediction is not None


def params_line(params: LessonParams, options: Sequence[str]) -> Text:
    """The numbers the lesson runs on (``options``: the ones it responds to), and how to change them."""
    shown = {
        "dim": f"dim {params.dim}",
        "seed": f"seed {params.seed}",
        "eps": f"eps {params.eps:g}",
        "batch": _("batch as each demo needs") if params.batch is None else f"batch {params.batch}",
    }
    flags = separated([f"--{key}" for key in options])
    values = separated([shown[key] for key in options])
    # Translators: {values} is e.g. "dim 4, seed 0"; {flags} is "--dim, --seed"
    return cjk_text(_("{values} (change with {flags})").format(values=values, flags=flags), style="dim")


def _demo_renderable(out: DemoOutput | DemoFailure, guess: int | None = None) -> RenderableType:
    """A demo's output; with a prediction, its question, the answer (and ``guess``'s verdict) first."""
    if isinstance(out, DemoFailure):
        return Panel(
            Text(out.message),
            title=_("demo {name} failed").format(name=out.call.name),
            title_align="left",
            border_style="red",
            box=box.ROUNDED,
        )
    if out.prediction is None:
        return out.renderable
    return Group(prediction_question(out.prediction), prediction_answer(out.prediction, guess), out.renderable)


def prediction_question(prediction: Prediction) -> Group:
    """The question and its numbered choices, shown before the numbers; a long choice wraps under itself."""
    question = assemble(_("Predict: {question}"), "bold", question=cjk_text(prediction.question))  # formulas kept whole
    choices = Table.grid(padding=(0, 2))
    choices.add_column(justify="right", no_wrap=True)
    choices.add_column()
    for number, choice in enumerate(prediction.choices, start=1):
        choices.add_row(str(number), cjk_text(choice))
    return Group(question, Padding(choices, (0, 0, 0, 2)))


def prediction_answer(prediction: Prediction, guess: int | None) -> Text:
    """The answer the live numbers give, whether ``guess`` (an index, or None when not asked) was right, and why."""
    right = prediction.choices[prediction.answer]
    why = cjk_text(prediction.why)  # a formula in backticks is not broken at its spaces
    if guess is None:
        return assemble(_("Answer: {answer}. {why}"), "bold", answer=right, why=why)
    if guess == prediction.answer:
        return assemble(_("✓ Right: {answer}. {why}"), "bold green", answer=right, why=why)
    said = prediction.choices[guess]
    return assemble(
        _("✗ Not this time: you said {guess}; the answer is {answer}. {why}"), "bold", guess=said, answer=right, why=why
    )


def key_footer(index: int, total: int, remaining: int = 0, choices: int = 0) -> Text:
    """The one-line reminder of the keys under each step (fits in 60 columns).

    ``remaining``: lines of the step still below the screen (the learner scrolls first);
    ``choices``: the number of choices of a question waiting for an answer.
    """
    where = f"{index + 1}/{total} · "
    if remaining:
        keys = ngettext(
            "{n} more line: space to scroll · ↑ up · q quit",
            "{n} more lines: space to scroll · ↑ up · q quit",
            remaining,
        )
        return Text(where + keys.format(n=remaining), style="dim")
    if choices:
        return Text(where + _("answer with 1 to {n} · Enter: just show it · q quit").format(n=choices), style="dim")
    return Text(where + _("Enter next · b back · r restart · g graph · q quit"), style="dim")


def finished(lesson: Lesson, following: Lesson | None) -> Text:
    """What to say after the last step."""
    text = assemble(_("Lesson complete: {title}."), "bold green", title=Text(lesson.title))
    text.append("\n")
    if following is not None:
        text.append(
            _("Next: microgradnorm lesson {number}  ({title})").format(number=following.number, title=following.title)
        )
    else:
        text.append(_("That was the last lesson. List them again with: microgradnorm lesson"))
    return text


def lesson_list(lessons: Sequence[Lesson], progress: Mapping[str, LessonProgress]) -> Group:
    """The lessons with the learner's progress, and how to start one."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column(pgettext("lesson list header", "lesson"), ratio=1)
    table.add_column(pgettext("lesson list header", "progress"), no_wrap=True)
    for lesson in lessons:
        table.add_row(
            f"{lesson.number}",
            cjk_text(Text.assemble((lesson.title, "bold"), "\n", (lesson.summary, "dim"))),
            _progress_cell(progress.get(lesson.slug), len(lesson.steps)),
        )
    hint = assemble(
        _("Start one with {command} (by number or name); add {auto} to print every step at once."),
        command=Text("microgradnorm lesson 1", style="bold"),
        auto=Text("--auto", style="bold"),
    )
    places = [(entry.updated, lesson) for lesson in lessons if _resumes(entry := progress.get(lesson.slug))]
    if places:
        _when, last = max(places, key=lambda pair: pair[0])
        entry = progress[last.slug]
        resume = assemble(
            _("Continue where you left off: {command} (step {step} of {total})."),
            command=Text(f"microgradnorm lesson {last.number}", style="bold"),
            step=str(min(entry.step, len(last.steps))),
            total=str(len(last.steps)),
        )
        hint = Text.assemble(resume, "\n", hint)
    return Group(table, Text(""), cjk_text(hint))


def _resumes(entry: LessonProgress | None) -> bool:
    """Whether ``microgradnorm lesson N`` continues this lesson somewhere (a finished one restarts at step 1)."""
    return entry is not None and (not entry.completed or entry.step > 1)


def _progress_cell(entry: LessonProgress | None, steps: int) -> Text:
    if entry is None:
        return Text(ngettext("{n} step", "{n} steps", steps).format(n=steps), style="dim")
    place = _("step {step}/{total}").format(step=min(entry.step, steps), total=steps)
    if entry.completed:
        done = _("✓ done")
        return Text(f"{done} · {place}" if entry.step > 1 else done, style="green")
    return Text(place, style="yellow")


def document(text: str) -> Markdown:
    """A Markdown page of the lessons folder (the references, the glossary) as rich shows it at any width."""
    return cjk_markdown(text)
