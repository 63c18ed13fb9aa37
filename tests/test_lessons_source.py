"""The lessons show the code that ran (microgradnorm/lessons/source.py) and point to the exercise that fits.

The shown code is compared with the live source of the object the demo used, read
independently here with :mod:`inspect` and :mod:`ast`, so a demo that showed a copy, a
stale extract or the wrong op would fail.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize

import pytest

from microgradnorm import engine, formulas, norms
from microgradnorm.exercises.problems import PROBLEMS
from microgradnorm.lessons import demos_chain_rule
from microgradnorm.lessons.demos import LessonParams, run_demo
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.source import WIDTH, backward_code, code_of, op_code, source_of
from tests.helpers import rendered, syntax_blocks


def _raw(obj) -> str:
    return textwrap.dedent(inspect.getsource(inspect.unwrap(obj)))


def _comments(text: str) -> dict[int, int]:
    """Line number -> column of each comment in ``text``, by tokenize."""
    return {
        t.start[0]: t.start[1]
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.COMMENT
    }


def _uncommented(lines: list[str], comments: dict[int, int]) -> list[str]:
    """The lines with their comments cut off, blank ones dropped."""
    cut = [line[: comments[i]] if i in comments else line for i, line in enumerate(lines, 1)]
    return [line.rstrip() for line in cut if line.strip()]


def _code_lines(obj) -> list[str]:
    """The object's source lines without docstrings and comments, found here by ast and tokenize."""
    raw = _raw(obj)
    docs: set[int] = set()
    for node in ast.walk(ast.parse(raw)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and ast.get_docstring(node):
            first = node.body[0]
            docs.update(range(first.lineno, first.end_lineno + 1))
    lines = [line if i not in docs else "" for i, line in enumerate(raw.splitlines(), 1)]
    return _uncommented(lines, _comments(raw))


def _shows(text: str, obj) -> bool:
    """Whether the rendered ``text`` holds every code line of ``obj``, in order, contiguously (comments aside)."""
    code = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    shown = _uncommented(code.splitlines(), _comments(code))
    want = _code_lines(obj)
    return any(shown[i : i + len(want)] == want for i in range(len(shown) - len(want) + 1))


# comments addressed to tools, found in the package's shown code: none of them may reach the learner
MARKERS = ("# fmt: off", "# fmt: on", "# fmt: skip", "# readable-core:")


@pytest.mark.parametrize("obj", [norms.layer_norm, engine.Value, engine.Op, engine.Value.backward])
def test_shown_code_keeps_every_readers_comment_drops_tool_markers_and_fits_60_columns(obj):
    raw, shown = _raw(obj), source_of(obj)
    words = " ".join(shown.split())
    for number, col in _comments(raw).items():
        comment = raw.splitlines()[number - 1][col:]
        if comment.startswith(MARKERS):
            assert comment.strip() not in shown
        else:  # every reader's comment, its words in order
            assert " ".join(comment.lstrip("#").split()) in words.replace(" # ", " ")
    assert not any(marker in shown for marker in MARKERS)
    # a line past 60 columns is code alone, never code made long by its comment
    comments = _comments(shown)
    assert all(
        len(line) <= 60 or len(line[comments[i] :].split()) <= 3
        for i, line in enumerate(shown.splitlines(), 1)
        if i in comments
    )


def test_a_marker_inside_a_string_is_code_and_stays():
    def f() -> str:
        return "# fmt: off"  # a long reader's comment, which goes above its line when the line is too long

    shown = source_of(f)
    assert 'return "# fmt: off"' in shown
    assert shown.splitlines()[1].strip().startswith("# a long reader's comment")


def _sample(x: int) -> int:
    """A docstring that must not be shown."""
    y = x + 1  # a comment that must be shown
    return y


def test_source_of_drops_the_docstring_and_keeps_every_line_of_code():
    text = source_of(_sample)
    assert "A docstring" not in text
    assert "y = x + 1  # a comment that must be shown" in text
    assert text.splitlines()[0] == "def _sample(x: int) -> int:"
    assert "A docstring" in source_of(_sample, docstrings=True)


@pytest.mark.parametrize("obj", [norms.layer_norm, norms.batch_norm, norms.rms_norm, formulas.dx_paths, engine.Value])
def test_code_of_shows_exactly_the_live_source(obj):
    assert _shows(rendered(code_of(obj), 300), obj)


def test_code_of_soft_wraps_at_60_columns_and_loses_no_character():
    text = rendered(code_of(formulas.dx_paths), 60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "".join(text.split()).count("".join(source_of(formulas.dx_paths).split())) == 1


def test_op_code_is_the_code_of_the_op_that_built_the_node():
    a, b = engine.Value(2.0), engine.Value(3.0)
    for node, result in ((a * b, 6.0), (a + b, 5.0), (a.sqrt(), 2.0**0.5), (a**2, 4.0)):
        shown = "".join(source_of(o) for o in op_code(node))
        assert node.data == pytest.approx(result)
        # the class of the op that made the node, whose forward recomputes the node's value
        assert shown.startswith(f"class {type(node.operation).__name__}(")
        assert node.operation.forward(*[c.data for c in node.children]) == node.data
    with pytest.raises(ValueError, match="leaf"):
        op_code(a)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_lesson_1_shows_the_code_of_every_op_its_expression_used(seed):
    out = run_demo("ops_code", LessonParams(seed=seed), {"example": "chain"})
    text = rendered(out.renderable, 300)
    root, leaves = demos_chain_rule._example("chain", demos_chain_rule._lesson1_numbers(seed))
    ops = {n.op: n for n in engine.topological_order(root) if n.op}
    assert set(ops) == {"*", "+"}
    for node in ops.values():
        for obj in op_code(node):
            assert _shows(text, obj), f"the code of {node.op!r} is not shown as it is in the package"
    # the answer is the engine's local derivative of e = a·b for a, which is b
    e = next(n for n in engine.topological_order(root) if n.label == "e")
    assert engine.local_grads(e)[0] == leaves["b"].data
    assert out.prediction.answer == 0


def test_lesson_1_shows_the_backward_sweep_that_ran():
    text = rendered(run_demo("backward_code", LessonParams(), {}).renderable, 300)
    assert [obj for obj in (engine.Value.backward, *backward_code()) if not _shows(text, obj)] == []


@pytest.mark.parametrize("seed", [0, 3])
def test_lesson_1_asks_how_many_contributions_e_collects_and_the_trace_counts_them(seed):
    out = run_demo("backward_trace", LessonParams(seed=seed), {"example": "shared"})
    text = rendered(out.renderable, 300)
    e_rows = [line for line in text.splitlines() if line.startswith("e ")]
    assert len(e_rows) == 2  # e is used by d and by L
    assert out.prediction.choices[out.prediction.answer] == "2"


# ---- the exercise pointers ----------------------------------------------------------------------------------

# lesson -> the exercises that fit it (exercise list: 1 local derivatives, 3 LayerNorm from Values, 5 LayerNorm
# backward, 6/7 BatchNorm backward, 8 RMSNorm backward, 9 the LayerNorm Jacobian)
FITTING = {1: {1}, 3: {2, 3}, 5: {4, 5}, 7: {9}, 8: {6, 7}, 9: {8}}
_CHECK = re.compile(r"microgradnorm exercise check (\d+)")


def _lesson_text(number: int, chinese: bool) -> str:
    folder = lessons_dir() / "zh-CN" if chinese else lessons_dir()
    (path,) = folder.glob(f"{number:02d}-*.md")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("chinese", [False, True], ids=["en", "zh-CN"])
@pytest.mark.parametrize("number", sorted(FITTING))
def test_the_lesson_closes_by_pointing_to_an_exercise_that_exists_and_fits(number, chinese):
    text = _lesson_text(number, chinese)
    last_step = text.rsplit("\n## ", 1)[1]
    named = {int(n) for n in _CHECK.findall(last_step)}
    assert named, f"lesson {number}: its last step names no `microgradnorm exercise check N`"
    assert named <= FITTING[number], f"lesson {number} points to exercise {named}, which does not fit it"
    existing = {int(name[:2]) for name in PROBLEMS}
    assert named <= existing


CORE_LESSONS = sorted(p for p in lessons_dir().glob("0[1-9]-*.md"))


@pytest.mark.parametrize("path", CORE_LESSONS, ids=lambda p: p.stem)
def test_every_code_block_lessons_1_to_9_show_fits_60_columns(path):
    """A shown line longer than the narrowest console wraps to column 0 mid-expression (review-a 7)."""
    lesson = parse_lesson(path)
    params = lesson.params()
    long: list[str] = []
    blocks = 0
    for index in range(len(lesson.steps)):
        for out in step_outputs(lesson, index, params):
            for block in syntax_blocks(getattr(out, "renderable", out)):
                blocks += 1
                long += [f"step {index + 1}: {line!r}" for line in block.code.splitlines() if len(line) > WIDTH]
    assert not long, f"{path.name}: shown code past {WIDTH} columns: " + "; ".join(long)
    if path.stem in SHOWS_CODE:
        assert blocks, f"{path.name} shows no code any more: this test would check nothing"


SHOWS_CODE = {
    "01-value-and-chain-rule",
    "03-layernorm-forward",
    "05-layernorm-backward-paths",
    "08-batchnorm",
    "09-rmsnorm",
}
