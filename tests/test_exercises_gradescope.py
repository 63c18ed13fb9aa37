"""``exercise gradescope``: the autograder zip, unpacked into an ``/autograder``-shaped tree, run as Gradescope does.

setup.sh's install step runs against a wheel built from this checkout (``pip wheel
. --no-deps``), with this interpreter (which has the dependencies); run_autograder
then grades a right, a wrong and a hostile submission, and results.json is checked
against Gradescope's specification.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from numbers import Real
from pathlib import Path

import pytest

from microgradnorm.exercises import messages
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.exercises.gradescope import ROOT_ENV
from tests.grading import changed
from tests.test_exercises_classroom import MEAN_PATH, _run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="Gradescope runs Linux")]

CHECKOUT = Path(__file__).resolve().parents[1]
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}  # Gradescope's values


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    root = tmp_path_factory.mktemp("gs")
    wheels = root / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(CHECKOUT), "-w", str(wheels), "--no-deps", "-q"],
        check=True,
        capture_output=True,
    )
    zip_path = root / "autograder.zip"
    code, said = _run(["exercise", "gradescope", "4", "5", "-o", str(zip_path), "--timeout", "10"])
    assert code == 0, said
    tree = root / "autograder"
    (tree / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in z.infolist()}
        z.extractall(tree / "source")
    env = {
        "PATH": os.environ["PATH"],
        ROOT_ENV: str(tree),
        "MICROGRADNORM_PYTHON": sys.executable,
        "MICROGRADNORM_WHEELS": str(wheels),
    }
    done = subprocess.run(["bash", str(tree / "source" / "setup.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {"tree": tree, "env": env, "names": names, "modes": modes}


def _grade(autograder, files: dict[str, str]) -> dict:
    tree = autograder["tree"]
    submission = tree / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    (submission / "nested").mkdir(parents=True)
    for name, text in files.items():
        (submission / name).write_text(text, encoding="utf-8")
    results = tree / "results" / "results.json"
    results.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", str(tree / "source" / "run_autograder")], env=autograder["env"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(results.read_text(encoding="utf-8"))
    _valid(data)
    return data


def _valid(data: dict) -> None:
    """results.json as Gradescope's specification describes it."""
    assert isinstance(data["score"], Real)
    assert isinstance(data["tests"], list) and data["tests"]
    for test in data["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], Real) and isinstance(test["max_score"], Real)
        assert 0 <= test["score"] <= test["max_score"]
        assert test["visibility"] in VISIBILITY
    assert data["score"] == sum(t["score"] for t in data["tests"])


def test_the_zip_holds_setup_and_run_autograder_at_its_root_executable(autograder):
    assert sorted(autograder["names"]) == ["run_autograder", "setup.sh"]
    assert all(mode & 0o100 for mode in autograder["modes"].values())
    assert (autograder["tree"] / "lib" / "microgradnorm" / "exercises" / "grader.py").is_file()


def test_a_right_submission_scores_and_a_missing_file_is_said(autograder):
    data = _grade(autograder, {"nested/04_affine_backward.py": get_exercise(4).solution.read_text()})
    by_name = {t["name"]: t for t in data["tests"]}
    assert by_name["04 04_affine_backward.py"]["score"] == 1.0
    assert "Every check passed." in by_name["04 04_affine_backward.py"]["output"]
    assert by_name["05 05_layernorm_backward.py"]["score"] == 0.0
    assert "No file named 05_layernorm_backward.py" in by_name["05 05_layernorm_backward.py"]["output"]
    assert data["score"] == 1.0


def test_a_wrong_submission_gets_the_graders_diagnosis(autograder):
    data = _grade(autograder, {"05_layernorm_backward.py": changed(5, MEAN_PATH)})
    five = next(t for t in data["tests"] if t["name"].startswith("05"))
    assert five["score"] == 0.0 and messages.title("mean_path_missing", {}) in " ".join(five["output"].split())


def test_a_hostile_submission_can_neither_write_the_results_nor_reach_the_answers(autograder):
    results = autograder["tree"] / "results" / "results.json"
    forge = (
        f"import os, json\nopen({str(results)!r}, 'w').write(json.dumps({{'score': 100, 'tests': []}}))\nos._exit(0)\n"
    )
    steal = f"exec(open({str(get_exercise(5).solution)!r}).read())\n"
    data = _grade(autograder, {"04_affine_backward.py": forge, "05_layernorm_backward.py": steal})
    assert data["score"] == 0.0 and len(data["tests"]) == 2
