"""Authoring tests: every scaffold fails the grader as shipped, every reference solution passes,
and so does a second, independent right answer to each exercise (tests/exercise_answers/).

Also: the catalog, the package data and the grading code cover the same
exercises, scaffolds are exactly their solutions with the marked regions
emptied, each file says what it may use, and every file runs on its own.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from microgradnorm.exercises import catalog
from microgradnorm.exercises.catalog import EXERCISES, derive_scaffold, get_exercise, hints
from microgradnorm.exercises.drivers import DRIVERS
from microgradnorm.exercises.problems import PROBLEMS
from tests.grading import ANSWERS, Submission, grade_all, written
from tests.helpers import refuses

IDS = [ex.name for ex in EXERCISES]
README = Path(__file__).resolve().parents[1] / "README.md"


# more right answers, each written the way a learner might (exercise number first in the name)
VARIANTS = sorted((ANSWERS / "variants").glob("*.py"))
# what a learner's file may do to its own process before the graded code runs
STRICT = "import warnings as _w\nimport numpy as _np\n_np.seterr(all='raise')\n_w.simplefilter('error')\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every scaffold, every reference solution (on two fresh seeds) and every independent answer, graded;
    and every independent answer again, with NumPy raising on any floating-point error and warnings as errors."""
    sources = {f"scaffold-{ex.name}": (ex.number, ex.scaffold_text) for ex in EXERCISES}
    for ex in EXERCISES:
        sources[f"strict-{ex.name}"] = (ex.number, STRICT + (ANSWERS / ex.filename).read_text(encoding="utf-8"))
    subs = written(tmp_path_factory.mktemp("written"), sources)
    subs += [Submission(f"solution-{ex.name}-{i}", ex.number, ex.solution) for ex in EXERCISES for i in range(2)]
    subs += [Submission(f"answer-{ex.name}", ex.number, ANSWERS / ex.filename) for ex in EXERCISES]
    subs += [Submission(f"variant-{p.stem}", int(p.stem[:2]), p) for p in VARIANTS]
    return grade_all(subs)


def test_at_least_ten_exercises_numbered_in_order():
    assert len(EXERCISES) >= 10
    assert [ex.number for ex in EXERCISES] == list(range(1, len(EXERCISES) + 1))
    assert len({ex.slug for ex in EXERCISES}) == len(EXERCISES)


def test_catalog_data_and_grading_cover_the_same_exercises():
    names = {ex.name for ex in EXERCISES}
    assert set(PROBLEMS) == names
    assert set(DRIVERS) == names
    assert not (catalog.PACKAGE_DIR / "scaffolds").exists()  # derived from the solutions, never stored
    assert {p.stem for p in (catalog.PACKAGE_DIR / "solutions").glob("*.py")} == names


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_scaffold_is_the_solution_with_each_function_s_marked_region_emptied(ex):
    scaffold = ex.scaffold_text
    solution = ex.solution.read_text(encoding="utf-8")
    assert scaffold == derive_scaffold(solution) != solution
    assert scaffold.count('raise NotImplementedError("write your code here")') >= 1
    assert catalog.CODE_START in scaffold
    assert scaffold.count(catalog.CODE_START) == scaffold.count(catalog.CODE_END) == len(ex.functions)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_scaffold_declares_its_functions_with_shapes_and_runs_on_its_own(ex):
    tree = ast.parse(ex.scaffold_text)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in ex.functions:
        assert name in functions, f"{ex.filename} lacks {name}"
        doc = ast.get_docstring(functions[name]) or ""
        assert "[" in doc or "list" in doc, f"{name}'s docstring states no shapes"
    assert ast.get_docstring(tree), "the module docstring says what to do"
    # the sandbox refuses everything else, so the file states what its code may use (the catalog and it agree)
    doc = " ".join(ast.get_docstring(tree).split())
    assert f"may use {ex.uses_text}" in doc, doc
    mains = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert mains, f"{ex.filename} has no `if __name__ == '__main__':` block"


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_every_scaffold_fails_as_shipped(ex, graded):
    result = graded[f"scaffold-{ex.name}"]
    assert not result.passed
    assert result.status == "not_written"
    assert "NotImplementedError" in result.summary


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_every_reference_solution_passes_on_fresh_seeds(ex, graded):
    seeds = set()
    for i in range(2):  # two fresh seeds: a pass is no accident of one input
        result = graded[f"solution-{ex.name}-{i}"]
        seeds.add(result.seed)
        assert result.passed, (result.seed, result.summary, result.rows, result.findings, result.printed)
        assert all(row.ok for row in result.rows)
        assert result.findings == []
    assert len(seeds) == 2


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
@pytest.mark.parametrize("kind", ["answer", "strict"])
def test_an_independent_right_answer_passes(ex, kind, graded):
    """Written another way than the reference (staged vs folded, einsum, Welford's other increment, ...); and
    still right (strict) with floating-point errors raised and warnings as errors."""
    result = graded[f"{kind}-{ex.name}"]
    assert result.passed, (result.seed, result.summary, result.rows, result.findings, result.printed)
    assert (ANSWERS / ex.filename).read_text(encoding="utf-8") != ex.solution.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", VARIANTS, ids=[p.stem for p in VARIANTS])
def test_right_answers_written_other_ways_pass(path, graded):
    """Orders of operations a reviewer tried: exp/log powers, a computed zero route, one-pass variances, ..."""
    result = graded[f"variant-{path.stem}"]
    assert result.passed, (result.seed, result.summary, result.rows, result.findings, result.printed)


def test_the_readme_describes_the_marked_places_as_they_are():
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert "one marked place to write" not in readme
    assert "every function you write has its own marked place" in readme


SEED_REFERENCE = re.compile(r"seed\s*0\d\d", re.IGNORECASE)


def test_no_exercise_text_refers_to_the_source_texts():
    """Exercise files, hints, grader messages and the grader's code never say "seed 003" and the like."""
    package = Path(catalog.PACKAGE_DIR)
    files = [
        *package.rglob("*.py"),
        package / "hints.md",
        Path(__file__).resolve().parents[1] / "microgradnorm" / "commands" / "exercise.py",
    ]
    offending = [str(p) for p in files if SEED_REFERENCE.search(p.read_text(encoding="utf-8"))]
    assert offending == []


@functools.cache
def run_solution(ex) -> subprocess.CompletedProcess:
    """The reference solution run on its own (``python file.py``), once for the tests that read what it prints."""
    return subprocess.run([sys.executable, str(ex.solution)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_files_run_on_their_own(ex, tmp_path):
    """A solution's self-check agrees with finite differences; a scaffold stops at the marked place."""
    done = run_solution(ex)
    assert done.returncode == 0, done.stderr
    assert "DIFFERS" not in done.stdout
    assert "agrees" in done.stdout
    scaffold = tmp_path / ex.filename
    scaffold.write_text(ex.scaffold_text, encoding="utf-8")
    todo = subprocess.run([sys.executable, str(scaffold)], capture_output=True, text=True, timeout=120)
    assert todo.returncode != 0
    # one line that says what to do, instead of a NotImplementedError traceback
    assert "is not written yet: write your code where it says so" in todo.stderr
    assert "Traceback" not in todo.stderr and len(todo.stderr.strip().splitlines()) == 1, todo.stderr


def test_a_learner_error_in_a_file_run_on_its_own_keeps_its_traceback(tmp_path):
    ex = EXERCISES[0]
    path = tmp_path / ex.filename
    path.write_text(ex.scaffold_text.replace(
        'raise NotImplementedError("write your code here")', "return undefined_name", 1
    ), encoding="utf-8")  # fmt: skip
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" in done.stderr and "NameError" in done.stderr


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_every_exercise_has_hints_from_gentle_to_specific(ex):
    hs = hints(ex)
    assert len(hs) >= 3
    assert all(h.strip() for h in hs)


@pytest.mark.parametrize(
    "key",
    ["5", "05", 5, "05_layernorm_backward", "layernorm_backward", "layernorm-backward", "05_layernorm_backward.py"],
)
def test_exercise_by_number_or_name(key):
    assert get_exercise(key).name == "05_layernorm_backward"


@pytest.mark.parametrize("key", ["0", "99", "layernorm", "", "5x"])
def test_unknown_exercise_is_one_line_pointing_at_list(key):
    error = refuses(lambda: get_exercise(key), ValueError, ["microgradnorm exercise list", repr(key)])
    assert "\n" not in str(error)


# ---- issue 28: an order that climbs evenly, traps left to the learner, no dead ends --------------------------------


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_each_exercise_names_its_lesson_and_the_lesson_exists(ex):
    lesson = Path(catalog.PACKAGE_DIR).parents[1] / "lessons"
    assert list(lesson.glob(f"{ex.lesson:02d}-*.md")), ex.lesson
    assert f"microgradnorm lesson {ex.lesson}" in ex.solution.read_text(encoding="utf-8")


def test_the_famous_traps_are_left_to_the_learner():
    """The (m-1)/m slip is in a hint, not in exercise 6's statement; exercise 9 asks for J and lets P be found."""
    six = ast.get_docstring(ast.parse(get_exercise(6).scaffold_text)) or ""
    assert "(m-1)/m" not in six and any("(m - 1)/m" in h for h in hints(get_exercise(6)))
    nine = get_exercise(9).scaffold_text
    assert "xhat xhat^T" not in nine and "1 1^T" not in nine  # P's formula is for the learner to find in J
    assert any("1 1^T + xhat xhat^T" in h for h in hints(get_exercise(9)))


# what a self-check cannot compare with a finite difference, and says how it checks instead
NOT_GRADIENTS = {"y": "the forward pass", "P": "P is not a gradient", "mean": "two passes", "var": "two passes"}


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_every_returned_quantity_is_in_the_file_s_own_self_check(ex):
    from microgradnorm.exercises.problems import get_problem

    done = run_solution(ex)
    assert done.returncode == 0, done.stderr
    checked = {line.split()[0] for line in done.stdout.splitlines() if "finite difference|" in line}
    for o in get_problem(ex.name).outputs:
        if o.name in NOT_GRADIENTS or ex.number == 10:
            continue
        if ex.number in (1, 2):  # "mul da", "variance dx": the primitive, then the gradient
            words = o.row.split(": ")
            assert f"{words[0]} {words[1]}" in done.stdout, (o.row, done.stdout)
        else:
            assert o.name in checked, (o.name, checked)
    if ex.number == 1:  # the optional _backward closures of Tiny, through a small graph
        assert "Tiny" in checked
    if ex.number == 9:
        assert "P @ P = P: True" in done.stdout and "rank 2: True" in done.stdout
    if ex.number == 10:
        assert "mid-stream" in done.stdout and "agrees" in done.stdout
