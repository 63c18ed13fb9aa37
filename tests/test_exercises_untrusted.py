"""The grading side trusts nothing from the child (issue 24, item 2), and right answers in odd clothes still pass.

Every string from the child reaches the terminal on one line, capped, its control
characters escaped; a forged result frame is bounded; a hostile object returned
or raised by the learner's code ends as a clear failure, never as the runner's
traceback; the learner's file is not read through a link that leaves its folder;
``numpy.testing`` works in the child; a right value of another real type is told
what to return.
"""

from __future__ import annotations

import os

import pytest

from microgradnorm.exercises import render
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.exercises.grader import STRING_LIMIT, grade
from tests.grading import grade_all, grade_source, live_child_processes, solution, written
from tests.helpers import flat, rendered
from tests.sandboxing import need_bubblewrap, without_bubblewrap

PASSED = "Every check passed."


HOSTILE = {  # each raised or returned by exercise 4's affine_backward
    # a newline in an exception's class name: its second line would print as a verdict of its own
    "newline-class-name": "def affine_backward(dy, xhat, gamma):\n"
    f"    raise type('Boom\\n{PASSED}\\n', (Exception,), {{}})('no')\n",
    # str() of the exception raises, and SystemExit at that
    "str-raises": "class E(Exception):\n    def __str__(self):\n        raise SystemExit(3)\n\n\n"
    "def affine_backward(dy, xhat, gamma):\n    raise E()\n",
    # the class's name is a property of its metaclass that raises
    "name-raises": "class M(type):\n    @property\n    def __name__(cls):\n        raise RuntimeError('no name')\n\n\n"
    "class E(Exception, metaclass=M):\n    pass\n\n\n"
    "def affine_backward(dy, xhat, gamma):\n    raise E('x')\n",
    # a returned object that pretends to be an array and raises when NumPy reads it
    "array-raises": "import numpy as np\n\n\nclass Fake:\n    __class__ = np.ndarray\n\n"
    "    def __array__(self, *a, **k):\n        raise SystemExit('read me not')\n\n"
    "    def __len__(self):\n        raise KeyboardInterrupt\n\n\n"
    "def affine_backward(dy, xhat, gamma):\n    return Fake(), Fake(), Fake()\n",
    # a list whose items raise when made floats
    "float-raises": "class Bad:\n    def __float__(self):\n        raise GeneratorExit\n\n\n"
    "def affine_backward(dy, xhat, gamma):\n    return [Bad()], [Bad()], [Bad()]\n",
    # the runner's own encoder replaced: before, its traceback was shown as a crash of the learner's code
    "patched-json": "import json\njson.dumps = lambda *a, **k: 1 / 0\n\n\ndef affine_backward(dy, xhat, gamma):\n"
    "    lead = tuple(range(dy.ndim - 1))\n    return (dy * xhat).sum(axis=lead), dy.sum(axis=lead), dy * gamma\n",
    # a huge message, once per line
    "long-message": "def affine_backward(dy, xhat, gamma):\n    raise ValueError('x' * 10**6)\n",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return grade_all(written(tmp_path_factory.mktemp("untrusted"), {k: (4, v) for k, v in HOSTILE.items()}))


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_object_ends_as_a_clear_failure_never_a_crash(hostile, name):
    result = hostile[name]
    assert not result.passed and result.status in ("error", "failed"), result.summary
    said = " ".join([result.summary, result.where or "", result.printed, *(r.detail for r in result.rows)])
    assert "Traceback" not in said and "runner.py" not in said, said
    assert "\n" not in result.summary and len(result.summary) < 3 * STRING_LIMIT


def test_no_line_from_the_child_stands_as_a_verdict_of_its_own(hostile):
    result = hostile["newline-class-name"]
    lines = [line.strip() for line in rendered(render.grade_report(result)).splitlines()]
    assert PASSED not in lines, lines
    assert "Boom\\n" + PASSED in result.summary  # shown, escaped, on the failing line


def test_live_processes_are_none_after_hostile_objects(hostile):
    assert live_child_processes() == []


FORGED = """
import os, json, struct
_error = {{"kind": "sys_exit", "stage": "import", "code": ["{passed}"] * 5000, "line": ["x"] * 5000,
          "frames": [{{"line": "12", "function": "f\\nEvery check passed.", "code": "y" * 10**5}}] * 5000}}
_head = json.dumps({{"message": {{"calls": {{}}, "error": _error}}, "arrays": []}}).encode()
for _fd in range(3, 256):
    try:
        os.write(_fd, b"MGNW" + struct.pack("<Q", len(_head)) + _head)
    except OSError:
        pass
os._exit(0)
"""


def test_a_forged_result_frame_prints_a_bounded_failure(tmp_path):
    """Before: a forged frame's unchecked fields printed 7.4 MB of fake pass rows."""
    result = grade_source(tmp_path, 7, FORGED.format(passed=PASSED))
    assert not result.passed
    shown = rendered(render.grade_report(result))
    assert len(shown) < 5000, len(shown)
    assert PASSED not in [line.strip() for line in shown.splitlines()]


def test_numpy_testing_works_in_the_child(tmp_path):
    """numpy.testing imports subprocess and socket (stand-ins while it loads); its assertions need neither."""
    wrapped = (
        "import numpy as np\n\n" + solution(4) + "\n\n_real = affine_backward\n\n\n"
        "def affine_backward(dy, xhat, gamma):\n    out = _real(dy, xhat, gamma)\n"
        "    np.testing.assert_allclose(out[1], dy.reshape(-1, dy.shape[-1]).sum(axis=0))\n    return out\n"
    )
    result = grade_source(tmp_path, 4, wrapped)
    assert result.passed, result.summary


def test_a_right_value_of_another_real_type_is_told_what_to_return(tmp_path):
    fractions = (
        "from fractions import Fraction\n\n\ndef welford_update(count, mean, m2, value):\n"
        "    count += 1\n    delta = Fraction(value) - Fraction(mean)\n    mean = Fraction(mean) + delta / count\n"
        "    return count, mean, Fraction(m2) + delta * (Fraction(value) - mean)\n"
    )
    result = grade_source(tmp_path, 10, fractions)
    assert not result.passed
    assert "a Fraction" in result.summary and "float()" in result.summary, result.summary
    floats = fractions.replace("return count, mean, ", "return count, float(mean), float(")
    assert grade_source(tmp_path, 10, floats.replace("- mean)\n", "- mean))\n")).passed


def test_a_link_out_of_the_folder_is_refused_and_one_inside_is_graded(tmp_path):
    """The grader may run as root for a student's folder: a link to /etc/shadow must not be read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root-only line\n")
    folder = tmp_path / "student"
    folder.mkdir()
    out = folder / "04_affine_backward.py"
    out.symlink_to(secret)
    result = grade(get_exercise(4), out)
    assert not result.passed and "outside its folder" in result.summary
    assert "root-only line" not in result.summary + (result.where or "")
    (folder / "real.py").write_text(solution(4), encoding="utf-8")
    inside = folder / "link.py"
    inside.symlink_to("real.py")
    assert grade(get_exercise(4), inside).passed


def test_inside_bubblewrap_the_solution_files_cannot_even_be_looked_at(tmp_path):
    """Before: os.stat (no audit event, no Landlock right) told the sizes and ages of the solution files."""
    need_bubblewrap()
    key = get_exercise(4).solution
    result = grade_source(tmp_path, 4, f"import os\n_size = os.stat({str(key)!r}).st_size\n" + solution(4))
    assert not result.passed and "FileNotFoundError" in result.summary, result.summary
    assert os.stat(key).st_size > 0  # it is there, outside the sandbox


def test_without_bubblewrap_a_check_says_so_once(monkeypatch):
    from microgradnorm.exercises import grader

    without_bubblewrap(monkeypatch)
    monkeypatch.setattr(grader, "_said_unisolated", [])
    ex = get_exercise(4)
    first, second = grade(ex, ex.solution), grade(ex, ex.solution)
    assert first.passed and second.passed
    assert any("without bubblewrap" in note for note in first.notes) and second.notes == []
    assert "without bubblewrap" in flat(render.grade_report(first))
