"""Lesson files: find them, parse them into :class:`Lesson` and :class:`Step`, validate them.

A lesson is a Markdown file ``NN-slug.md`` with front matter; every ``## `` heading
starts a step, and a fenced block whose info string is ``demo`` names a demo and
its arguments (see ``lessons/FORMAT.md`` for authors)::

    ---
    title: LayerNorm backward, stage by stage
    summary: One line shown in the lesson list.
    defaults: {"dim": 4, "seed": 0, "eps": 1e-05}
    ---

    ## First step title

    Prose (Markdown). Never a computed number.

    ```demo
    forward_steps
    stages: ("mean", "center")
    ```

Why validate so strictly? A typo in a lesson should fail when the lesson is
loaded -- in the test that renders every lesson -- not in front of a learner in
the middle of step 7. Every error names the file, the line and what is allowed.

Where the files are: a wheel ships the repository's ``lessons/`` folder as
``microgradnorm/lessons/content`` (package data), which is looked at first; an
editable install or a source checkout falls back to the ``lessons/`` folder next
to the package. ``MICROGRADNORM_LESSONS`` overrides both (for authors and tests).
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from microgradnorm.i18n import _
from microgradnorm.lessons.demos import DemoSpec, LessonParams, load_demos

__all__ = [
    "DEFAULT_KEYS",
    "DEFAULT_RANGES",
    "FRONT_MATTER_KEYS",
    "DemoCall",
    "Lesson",
    "LessonFormatError",
    "Prose",
    "Step",
    "lessons_dir",
    "load_lessons",
    "parse_lesson",
]

FRONT_MATTER_KEYS = ("title", "summary", "defaults", "ranges")
_KEYS = ", ".join(FRONT_MATTER_KEYS)
REQUIRED_KEYS = ("title", "summary")
DEFAULT_KEYS = ("dim", "seed", "eps", "batch")
# The values --dim and --batch may take: lessons show every node, so keep the graph on a screen; a batch
# needs two rows (BatchNorm over one value per column normalizes everything to 0). A lesson whose numbers
# mean something else at other sizes gives its own range in ``ranges`` (lesson 11: widths of a deep stack).
DEFAULT_RANGES: dict[str, tuple[int, int]] = {"dim": (2, 16), "batch": (2, 16)}

# NN-slug.md: two digits, a dash, lowercase words joined by dashes.
LESSON_FILE = re.compile(r"^(\d{2})-([a-z0-9]+(?:-[a-z0-9]+)*)\.md$")
_KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s?(.*)$")


class LessonFormatError(ValueError):
    """A lesson file that does not follow the format: ``path:line: what is wrong; what is allowed``."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        self.path = _display(path)
        self.line = line
        self.detail = message
        super().__init__(f"{self.path}:{line}: {message}")


@dataclass
class Prose:
    """Markdown text of a step, shown as it is written."""

    text: str


@dataclass
class DemoCall:
    """A ``demo`` block: the demo's name and its keyword arguments."""

    name: str
    args: dict[str, Any]
    line: int
    arg_lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)


Block = Prose | DemoCall


@dataclass
class Step:
    """One screen of a lesson: a title and its prose and demo blocks, in order."""

    title: str
    line: int
    blocks: list[Block] = field(default_factory=list)

    @property
    def demos(self) -> list[DemoCall]:
        return [b for b in self.blocks if isinstance(b, DemoCall)]


@dataclass
class Lesson:
    """A parsed, validated lesson file."""

    path: Path
    number: int
    slug: str
    title: str
    summary: str
    defaults: dict[str, Any]
    steps: list[Step]
    own_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The file's stem, ``03-layernorm-backward``: the key its progress is saved under."""
        return f"{self.number:02d}-{self.slug}"

    @property
    def options(self) -> tuple[str, ...]:
        """The numbers this lesson responds to: the keys of its ``defaults`` (the CLI refuses the others)."""
        return tuple(key for key in DEFAULT_KEYS if key in self.defaults)

    def range_of(self, option: str) -> tuple[int, int] | None:
        """(low, high) that ``--dim`` or ``--batch`` may take in this lesson (None: any value the type allows)."""
        return self.own_ranges.get(option, DEFAULT_RANGES.get(option))

    def params(self, **overrides: Any) -> LessonParams:
        """The lesson's defaults with the non-None ``overrides`` (from the CLI) applied."""
        return LessonParams().replace(**self.defaults).replace(**overrides)


# ---- finding the files ----------------------------------------------------------


def lessons_dir() -> Path:
    """The folder the lesson files are read from (see the module docstring for the order)."""
    override = os.environ.get("MICROGRADNORM_LESSONS")
    if override:
        path = Path(override).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                _("MICROGRADNORM_LESSONS: expected a folder of lesson files, got {path!r}").format(path=override)
            )
        return path
    here = Path(__file__).resolve().parent
    for candidate in (here / "content", here.parent.parent / "lessons"):
        if candidate.is_dir() and any(LESSON_FILE.match(p.name) for p in candidate.iterdir()):
            return candidate
    raise FileNotFoundError(
        _(
            "no lesson files found in {installed} (installed) or {checkout} (source checkout); "
            "reinstall microgradnorm or set MICROGRADNORM_LESSONS to the lessons folder"
        ).format(installed=here / "content", checkout=here.parent.parent / "lessons")
    )


def load_lessons(
    directory: str | Path | None = None,
    *,
    check_demos: bool = True,
    errors: list[LessonFormatError] | None = None,
) -> list[Lesson]:
    """Every lesson file of ``directory`` (default :func:`lessons_dir`), parsed, in number order.

    Markdown files whose names start with a digit must be named ``NN-slug.md``;
    other files (``FORMAT.md``, ``README.md``) are not lessons and are skipped.
    The first invalid file raises :class:`LessonFormatError`, unless an
    ``errors`` list is given: then each invalid file's error is appended to it
    and the valid lessons are still returned (so one broken file does not take
    the others down with it).
    """
    folder = Path(directory) if directory is not None else lessons_dir()
    lessons: list[Lesson] = []
    seen: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        if not path.is_file() or not path.name.endswith(".md"):
            continue
        try:
            if not LESSON_FILE.match(path.name):
                if path.name[:1].isdecimal():
                    raise LessonFormatError(
                        path,
                        1,
                        "a lesson file is named NN-slug.md (two digits, a dash, lowercase words joined by dashes)",
                    )
                continue
            lesson = parse_lesson(path, check_demos=check_demos)
            if lesson.number in seen:
                raise LessonFormatError(
                    path, 1, f"lesson number {lesson.number:02d} is also used by {_display(seen[lesson.number])}"
                )
        except LessonFormatError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        seen[lesson.number] = path
        lessons.append(lesson)
    return lessons


# ---- parsing ----------------------------------------------------------------------


def parse_lesson(path: str | Path, text: str | None = None, *, check_demos: bool = True) -> Lesson:
    """Parse one lesson file (``text`` overrides reading ``path``) and validate it.

    With ``check_demos`` every demo block is checked against the registry: the
    demo must exist and every key must be one of its parameters.
    """
    path = Path(path)
    match = LESSON_FILE.match(path.name)
    if not match:
        raise LessonFormatError(path, 1, "a lesson file is named NN-slug.md, e.g. 03-layernorm-backward.md")
    if text is None:
        text = path.read_text(encoding="utf-8")
    lines = text.lstrip("\ufeff").splitlines()
    meta, body_start = _front_matter(path, lines)
    steps = _steps(path, lines, body_start)
    if not steps:
        raise LessonFormatError(path, len(lines), "the lesson has no steps; start each step with a '## ' heading")
    if check_demos:
        demos = load_demos()
        for step in steps:
            for call in step.demos:
                _check_call(path, call, demos)
    return Lesson(
        path=path,
        number=int(match.group(1)),
        slug=match.group(2),
        title=meta["title"],
        summary=meta["summary"],
        defaults=meta.get("defaults", {}),
        steps=steps,
        own_ranges=meta.get("ranges", {}),
    )


def _front_matter(path: Path, lines: list[str]) -> tuple[dict[str, Any], int]:
    if not lines or lines[0].strip() != "---":
        raise LessonFormatError(path, 1, "a lesson starts with front matter: a '---' line, 'key: value' lines, '---'")
    meta: dict[str, Any] = {}
    for i in range(1, len(lines)):
        line, number = lines[i], i + 1
        if line.strip() == "---":
            for key in REQUIRED_KEYS:
                if key not in meta:
                    raise LessonFormatError(path, number, f"the front matter has no {key!r}; required: title, summary")
            return meta, i + 1
        if not line.strip():
            continue
        if line.startswith("#") or line.startswith("```"):
            raise LessonFormatError(path, 1, "the front matter is not closed: add a '---' line after it")
        m = _KEY_VALUE.match(line)
        if not m:
            raise LessonFormatError(
                path, number, f"expected 'key: value' in the front matter, got {line.strip()!r}; keys: {_KEYS}"
            )
        key, raw = m.group(1), m.group(2).strip()
        if key not in FRONT_MATTER_KEYS:
            raise LessonFormatError(path, number, f"unknown front matter key {key!r}; allowed keys: {_KEYS}")
        if key in meta:
            raise LessonFormatError(path, number, f"front matter key {key!r} is given twice")
        if key == "defaults":
            meta[key] = _defaults(path, number, raw)
        elif key == "ranges":
            meta[key] = _ranges(path, number, raw)
        else:
            value = _string(raw)
            if not value:
                raise LessonFormatError(path, number, f"{key!r} is empty; write one line of text")
            meta[key] = value
    raise LessonFormatError(path, 1, "the front matter is not closed: add a '---' line after it")


def _string(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw
        return value if isinstance(value, str) else raw
    return raw


def _defaults(path: Path, number: int, raw: str) -> dict[str, Any]:
    allowed = ", ".join(DEFAULT_KEYS)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        raise LessonFormatError(
            path, number, f'defaults: expected a dict like {{"dim": 4, "seed": 0, "eps": 1e-05}}, got {raw!r}'
        ) from None
    if not isinstance(value, dict):
        raise LessonFormatError(path, number, f"defaults: expected a dict with keys among {allowed}, got {raw!r}")
    for key, v in value.items():
        if key not in DEFAULT_KEYS:
            raise LessonFormatError(path, number, f"defaults: unknown key {key!r}; allowed keys: {allowed}")
        ok = {
            "dim": isinstance(v, int) and not isinstance(v, bool) and v >= 1,
            "seed": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
            "eps": isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
            "batch": v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        }[key]
        if not ok:
            wanted = {
                "dim": "an integer >= 1",
                "seed": "an integer >= 0",
                "eps": "a finite number >= 0",
                "batch": "an integer >= 1 or None",
            }[key]
            raise LessonFormatError(path, number, f"defaults: {key} must be {wanted}, got {v!r}")
    return value


def _ranges(path: Path, number: int, raw: str) -> dict[str, tuple[int, int]]:
    allowed = ", ".join(DEFAULT_RANGES)
    wanted = f'ranges: expected a dict like {{"dim": (16, 64)}} with keys among {allowed}, got {raw!r}'
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        raise LessonFormatError(path, number, wanted) from None
    if not isinstance(value, dict) or any(k not in DEFAULT_RANGES for k in value):
        raise LessonFormatError(path, number, wanted)
    for key, pair in value.items():
        ok = (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in pair)
            and pair[0] <= pair[1]
        )
        if not ok:
            raise LessonFormatError(
                path, number, f"ranges: {key} must be (low, high), integers 1 <= low <= high, got {pair!r}"
            )
    return {k: (int(v[0]), int(v[1])) for k, v in value.items()}


_BEFORE_FIRST_STEP = "text before the first step: start each step with a '## ' heading"


class _StepBuilder:
    """Collects the steps of one lesson body: prose lines gather until a demo block or the next step."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.steps: list[Step] = []
        self.prose: list[str] = []

    def add_prose(self, lines: list[str], number: int) -> None:
        """Lines of Markdown; blank lines before the first step are skipped, text there is an error."""
        if not self.steps:
            if any(line.strip() for line in lines):
                raise LessonFormatError(self.path, number, _BEFORE_FIRST_STEP)
            return
        self.prose.extend(lines)

    def add_demo(self, call: DemoCall) -> None:
        self._flush()
        self.steps[-1].blocks.append(call)

    def start_step(self, title: str, number: int) -> None:
        if not title:
            raise LessonFormatError(self.path, number, "a step heading needs a title: '## Title'")
        self.finish()
        self.steps.append(Step(title, number))

    def finish(self) -> list[Step]:
        """Close the current step (an empty one is an error) and return the steps so far."""
        if self.steps:
            self._flush()
            step = self.steps[-1]
            if not step.blocks:
                raise LessonFormatError(
                    self.path, step.line, f"step {step.title!r} is empty; give it prose, a demo block, or both"
                )
        return self.steps

    def _flush(self) -> None:
        text = "\n".join(self.prose).strip("\n")
        if text.strip():
            self.steps[-1].blocks.append(Prose(text))
        self.prose = []


def _structure(lines: list[str], start: int) -> dict[int, tuple[str, int, str, str]]:
    """The blocks of the body ``lines[start:]`` that shape a lesson, by the index of their first line:
    ``("heading", end, level, title)`` for an ATX heading and ``("fence", end, marker, info)`` for a fenced
    block, ``end`` one past its last line. markdown-it-py (CommonMark) finds them, so a heading inside a
    list, a quote or a fence is none, and fences follow the standard; setext headings stay prose."""
    from markdown_it import MarkdownIt

    found: dict[int, tuple[str, int, str, str]] = {}
    tokens = MarkdownIt("commonmark").parse("\n".join(lines[start:]))
    for k, token in enumerate(tokens):
        if token.level != 0 or token.map is None:
            continue
        begin, end = token.map[0] + start, token.map[1] + start
        if token.type == "fence":
            found[begin] = ("fence", end, token.markup, token.info.strip())
        elif token.type == "heading_open" and token.markup.startswith("#"):
            found[begin] = ("heading", end, token.markup, tokens[k + 1].content.strip())
    return found


def _steps(path: Path, lines: list[str], start: int) -> list[Step]:
    """The steps of the lesson body ``lines[start:]``: '## ' headings, prose and demo blocks."""
    built = _StepBuilder(path)
    blocks = _structure(lines, start)
    i = start
    while i < len(lines):
        line, number = lines[i], i + 1
        kind, end, marker, text = blocks.get(i, ("", i + 1, "", ""))
        if kind == "fence":
            i = _fenced_block(built, lines, i, end, marker, text)
            continue
        if kind == "heading" and marker == "##":
            built.start_step(text, number)
        elif kind == "heading" and marker == "#":
            raise LessonFormatError(
                path, number, "a '# ' heading is not allowed: the title is in the front matter, steps start with '## '"
            )
        else:
            built.add_prose([line], number)
        i += 1
    return built.finish()


def _fenced_block(built: _StepBuilder, lines: list[str], i: int, end: int, marker: str, info: str) -> int:
    """Add the fenced block ``lines[i:end]`` (a demo call, or prose); return ``end``."""
    number = i + 1
    if not built.steps:
        raise LessonFormatError(built.path, number, _BEFORE_FIRST_STEP)
    closing = lines[end - 1].strip() if end - 1 > i else ""
    if not (closing and set(closing) == {marker[0]} and len(closing) >= len(marker)):  # ran to the end of the file
        raise LessonFormatError(built.path, number, f"this {marker} block is never closed; close it with {marker}")
    if info == "demo":
        built.add_demo(_demo_block(built.path, lines, i + 1, end - 1))
    else:
        built.add_prose(lines[i:end], number)
    return end


def _demo_block(path: Path, lines: list[str], start: int, end: int) -> DemoCall:
    name: str | None = None
    name_line = start
    args: dict[str, Any] = {}
    arg_lines: dict[str, int] = {}
    for j in range(start, end):
        raw, number = lines[j].strip(), j + 1
        if not raw or raw.startswith("#"):
            continue
        if name is None:
            if not raw.isidentifier():
                raise LessonFormatError(
                    path, number, f"the first line of a demo block is the demo's name (an identifier), got {raw!r}"
                )
            name, name_line = raw, number
            continue
        m = _KEY_VALUE.match(raw)
        if not m:
            raise LessonFormatError(
                path, number, f"expected 'key: value' (a Python literal) in the {name} demo block, got {raw!r}"
            )
        key, value_text = m.group(1), m.group(2).strip()
        if key in args:
            raise LessonFormatError(path, number, f"demo {name}: argument {key!r} is given twice")
        try:
            args[key] = ast.literal_eval(value_text)
        except (ValueError, SyntaxError):
            raise LessonFormatError(
                path,
                number,
                f"demo {name}: the value of {key!r} must be a Python literal "
                f'("text", 3, 1e-05, True, (1, 2), None), got {value_text!r}',
            ) from None
        arg_lines[key] = number
    if name is None:
        raise LessonFormatError(path, start, "empty demo block: its first line must name a demo")
    return DemoCall(name, args, name_line, arg_lines)


def _check_call(path: Path, call: DemoCall, demos: Mapping[str, DemoSpec]) -> None:
    spec = demos.get(call.name)
    if spec is None:
        known = ", ".join(sorted(demos)) or "(none registered)"
        raise LessonFormatError(path, call.line, f"unknown demo {call.name!r}; known demos: {known}")
    for key in call.args:
        if key not in spec.parameters:
            allowed = ", ".join(spec.parameters) or "none"
            raise LessonFormatError(
                path,
                call.arg_lines.get(key, call.line),
                f"demo {call.name} has no parameter {key!r}; its parameters: {allowed}",
            )
    missing = [k for k in spec.required if k not in call.args]
    if missing:
        raise LessonFormatError(
            path, call.line, f"demo {call.name} needs {', '.join(repr(k) for k in missing)}; add 'key: value' lines"
        )
    try:
        inspect.signature(spec.function).bind(None, **call.args)
    except TypeError as exc:
        raise LessonFormatError(path, call.line, f"demo {call.name}: {exc}") from None


def _display(path: str | Path) -> str:
    """The path relative to the working directory when it is below it, else as given."""
    p = Path(path)
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return rel if not rel.startswith("..") else str(p)
