"""The lesson file format: what parses, and that every error names the file, the line and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from microgradnorm.i18n import _
from microgradnorm.lessons import render
from microgradnorm.lessons.demos import DEMOS, DemoOutput, LessonParams, Prediction, demo, load_demos, run_demo
from microgradnorm.lessons.format import DemoCall, LessonFormatError, Prose, lessons_dir, load_lessons, parse_lesson
from tests.helpers import refuses, rendered


@demo("t_fmt_needs_k")
def _needs_k(p: LessonParams, k: int, label: str = "x") -> DemoOutput:
    """A test demo with a required parameter."""
    return DemoOutput(f"{label}={k} dim={p.dim}")


TITLED = "---\ntitle: T\nsummary: S\n"  # the front matter's required fields, open
HEAD = TITLED + 'defaults: {"dim": 5}\n---\n'
PATH = Path("lessons/42-test-lesson.md")


def parse(body: str, head: str = HEAD, path: Path = PATH):
    return parse_lesson(path, head + body)


def error(body: str, head: str = HEAD, path: Path = PATH, words: tuple[str, ...] = ()) -> LessonFormatError:
    """The error parsing ``head + body`` at ``path`` raises, its message naming every one of ``words``."""
    return refuses(lambda: parse(body, head, path), LessonFormatError, words)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_lesson_parses_into_steps_of_prose_and_demo_calls():
    body = (
        "## First\n\nSome *prose*.\n\n```demo\nt_fmt_needs_k\nk: 3\nlabel: 'a'\n```\n\nAfter.\n\n"
        "## Second `code`\n\n```python\n## not a heading inside code\n```\n"
    )
    lesson = parse(body)
    assert (lesson.number, lesson.slug, lesson.name) == (42, "test-lesson", "42-test-lesson")
    assert (lesson.title, lesson.summary, lesson.defaults) == ("T", "S", {"dim": 5})
    assert [s.title for s in lesson.steps] == ["First", "Second `code`"]
    first = lesson.steps[0].blocks
    assert [type(b) for b in first] == [Prose, DemoCall, Prose]
    assert first[1].name == "t_fmt_needs_k" and first[1].args == {"k": 3, "label": "a"}
    assert first[1].line == line_of(HEAD + body, "t_fmt_needs_k")
    assert "## not a heading" in lesson.steps[1].blocks[0].text
    assert lesson.params() == LessonParams(dim=5)
    assert lesson.params(dim=None, seed=7) == LessonParams(dim=5, seed=7)


def test_the_demo_call_runs_with_the_lesson_params():
    lesson = parse("## S\n\n```demo\nt_fmt_needs_k\nk: 9\n```\n")
    call = lesson.steps[0].demos[0]
    assert run_demo(call.name, lesson.params(), call.args).renderable == "x=9 dim=5"


@pytest.mark.parametrize(
    ("head", "body", "needle", "words"),
    [
        ("title: T\n---\n", "## S\ntext\n", None, ["front matter", "---"]),
        (TITLED + "colour: red\n---\n", "## S\ntext\n", "colour", ["unknown", "title, summary, defaults"]),
        ("---\ntitle: T\n---\n", "## S\ntext\n", 3, ["no 'summary'", "required"]),
        (
            TITLED + "defaults: {'dim': 4, 'width': 2}\n---\n",
            "## S\nx\n",
            "defaults",
            ["width", "dim, seed, eps, batch"],
        ),
        (TITLED + "defaults: {'dim': 0}\n---\n", "## S\nx\n", "defaults", ["dim must be an integer >= 1"]),
        (TITLED + "defaults: [1]\n---\n", "## S\nx\n", "defaults", ["expected a dict"]),
        (TITLED, "## S\nx\n", None, ["not closed"]),
        (HEAD, "Intro text\n## S\nx\n", "Intro", ["before the first step", "## "]),
        (HEAD, "# Big\n## S\nx\n", "# Big", ["'# ' heading is not allowed"]),
        (HEAD, "## Empty\n\n## Full\ntext\n", "Empty", ["empty", "prose, a demo block"]),
        (
            HEAD,
            "## S\n```demo\nfowrard_table\n```\n",
            "fowrard",
            ["unknown demo 'fowrard_table'", "known demos:", "value_graph"],
        ),
        (HEAD, "## S\n```demo\nt_fmt_needs_k\nk: 1\nwidth: 3\n```\n", "width", ["no parameter 'width'", "k, label"]),
        (HEAD, "## S\n```demo\nt_fmt_needs_k\n```\n", "t_fmt_needs_k", ["needs 'k'"]),
        (HEAD, "## S\n```demo\nt_fmt_needs_k\nk: three\n```\n", "k: three", ["Python literal"]),
        (HEAD, "## S\n```demo\nt_fmt_needs_k\nk 3\n```\n", "k 3", ["key: value"]),
        (HEAD, "## S\n```demo\nt_fmt_needs_k\nk: 1\nk: 2\n```\n", "k: 2", ["given twice"]),
        (HEAD, "## S\n```demo\n\n```\n", "```demo", ["empty demo block"]),
        (HEAD, "## S\n```demo\nt_fmt_needs_k\nk: 1\n", "```demo", ["never closed"]),
        (HEAD, "## S\n```demo\n3d\n```\n", "3d", ["demo's name"]),
    ],
)
def test_every_error_names_the_file_the_line_and_what_is_allowed(head, body, needle, words):
    exc = error(body, head, words=words)
    message = str(exc)
    text = head + body
    expected_line = needle if isinstance(needle, int) else line_of(text, needle) if needle else 1
    assert message.startswith(f"{PATH}:{expected_line}: "), message
    assert exc.line == expected_line


def test_a_badly_named_file_is_an_error():
    error("## S\nx\n", path=Path("lessons/3-short.md"), words=["NN-slug.md"])


def test_load_lessons_orders_by_number_skips_non_lessons_and_rejects_duplicates(tmp_path):
    (tmp_path / "02-b.md").write_text(HEAD + "## S\nb\n")
    (tmp_path / "01-a.md").write_text(HEAD + "## S\na\n")
    (tmp_path / "FORMAT.md").write_text("# not a lesson\n")
    (tmp_path / "assets").mkdir()
    assert [lesson.name for lesson in load_lessons(tmp_path)] == ["01-a", "02-b"]
    (tmp_path / "02-c.md").write_text(HEAD + "## S\nc\n")
    with pytest.raises(LessonFormatError, match=r"02-c\.md:1: lesson number 02 is also used by"):
        load_lessons(tmp_path)
    (tmp_path / "7-bad.md").write_text(HEAD + "## S\nc\n")
    problems: list[LessonFormatError] = []
    loaded = load_lessons(tmp_path, errors=problems)
    assert [lesson.name for lesson in loaded] == ["01-a", "02-b"]
    assert sorted(Path(p.path).name for p in problems) == ["02-c.md", "7-bad.md"]


def test_lessons_dir_prefers_the_override_then_finds_the_repository_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MICROGRADNORM_LESSONS", raising=False)
    repo = lessons_dir()
    assert (repo / "01-value-and-chain-rule.md").is_file()
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(tmp_path))
    assert lessons_dir() == tmp_path
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="MICROGRADNORM_LESSONS"):
        lessons_dir()


def test_lesson_params_validate_their_fields():
    assert LessonParams().replace(dim=6, seed=None) == LessonParams(dim=6)
    for bad, match in (({"dim": 0}, "dim"), ({"seed": -1}, "seed"), ({"eps": -1e-5}, "eps"), ({"batch": 0}, "batch")):
        with pytest.raises(ValueError, match=match):
            LessonParams(**bad)
    with pytest.raises(TypeError, match="eps"):
        LessonParams(eps="small")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no field 'width'"):
        LessonParams().replace(width=3)


def test_the_demo_decorator_refuses_a_second_demo_of_the_same_name_and_bad_signatures():
    load_demos()
    with pytest.raises(ValueError, match=r"defined twice"):

        @demo("value_graph")
        def other(p: LessonParams) -> str:
            return ""

    with pytest.raises(TypeError, match="first parameter"):

        @demo("t_fmt_no_params")
        def nothing() -> str:
            return ""

    with pytest.raises(ValueError, match="identifier"):
        demo("not a name")
    assert DEMOS["value_graph"].module == "microgradnorm.lessons.demos_chain_rule"


def test_the_real_lessons_load_without_errors():
    lessons = load_lessons()
    assert [lesson.number for lesson in lessons][:4] == [1, 2, 3, 4]
    assert all(re.fullmatch(r"\d\d-[a-z0-9-]+", lesson.name) for lesson in lessons)
    for lesson in lessons[:4]:
        assert 3 <= lesson.params().dim <= 6


def test_a_prediction_is_asked_before_its_numbers_and_answered_from_them():
    guess = Prediction("Which is larger?", ("a", "b"), answer=1, why="b is 2, a is 1.")
    out = rendered(render._demo_renderable(DemoOutput("TABLE", prediction=guess)), 60)
    asked = _("Predict: {question}").format(question=guess.question)
    answered = _("Answer: {answer}. {why}").format(answer="b", why=guess.why)  # the why shown whole
    assert out.index(asked) < out.index(answered) < out.index("TABLE")
    with pytest.raises(ValueError, match="answer: expected an index into the 2 choices, got 2"):
        Prediction("?", ("a", "b"), answer=2, why="")


# ---- colour words: true without colour too (NO_COLOR) ---------------------------------------------------

COLOUR_WORD = re.compile(r"^(red|green|blue|yellow|cyan|magenta|orange|purple|colou?r(ed|s)?)$", re.I)
COLOURED_THING = re.compile(
    r"^(columns?|rows?|lines?|cells?|bars?|edges?|nodes?|paths?|arrows?|entry|entries|curves?|numbers?|values?|box(es)?)$",
    re.I,
)
NAMED_IN_WORDS = re.compile(r"\b(marked|labell?ed|headed|titled|named|called)\b|[✓✗]", re.I)
NEAR = 3  # a colour word at most this many words from the thing it colours
DRAWING_KEY = "`g`"  # a sentence about the g key's drawing: an SVG file, coloured whatever NO_COLOR says


def colour_only_sentences(text: str) -> list[str]:
    """Sentences of ``text`` that pick out a column, row, line... by colour alone."""
    found = []
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        if DRAWING_KEY in sentence or NAMED_IN_WORDS.search(sentence):
            continue
        words = re.findall(r"[A-Za-z]+", sentence)
        colours = [k for k, w in enumerate(words) if COLOUR_WORD.match(w)]
        things = [k for k, w in enumerate(words) if COLOURED_THING.match(w)]
        if any(abs(c - t) <= NEAR for c in colours for t in things):
            found.append(sentence)
    return found


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("The red column is what `=` would give.", True),
        ("Blue lines show the gradient. Then more.", True),
        ("The rows in green pass the check.", True),
        ("The column marked ✗ (red) is what `=` would give.", False),
        ("The column labelled `ratio` (in yellow) is the slip.", False),
        ("Press `g` to draw the graph with the three paths in colour.", False),
        ("A red herring hides in this derivation, far from any table we print.", False),
        ("The mean is subtracted from every column.", False),
    ],
)
def test_the_colour_rule_flags_colour_alone_and_nothing_else(text, flagged):
    assert bool(colour_only_sentences(text)) is flagged


@pytest.mark.parametrize("path", sorted(p for p in lessons_dir().glob("[0-9][0-9]-*.md")), ids=lambda p: p.stem)
def test_lesson_prose_never_picks_out_a_thing_by_colour_alone(path):
    lesson = parse_lesson(path, check_demos=False)
    found = [
        f"step {k} ({step.title}): {sentence}"
        for k, step in enumerate(lesson.steps, 1)
        for block in step.blocks
        if isinstance(block, Prose)
        for sentence in colour_only_sentences(block.text)
    ]
    assert not found, f"{path.name}: false with NO_COLOR=1; name the thing in words too: " + " | ".join(found)
