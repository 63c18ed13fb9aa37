"""A non-editable install finds the lessons: build the wheel, install it in a fresh venv, run a lesson.

The wheel carries the repository's ``lessons/`` folder as
``microgradnorm/lessons/content`` (pyproject.toml, force-include). The fresh
venv has no system site-packages; pip installs the wheel and fetches its
dependencies the ordinary way (its configured index or wheel folders).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from microgradnorm.lessons.format import load_lessons

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def test_the_wheel_ships_the_lessons_and_a_fresh_venv_runs_one(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    _run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(wheelhouse), *isolation])
    (wheel,) = wheelhouse.glob("microgradnorm-*.whl")

    names = set(zipfile.ZipFile(wheel).namelist())
    lesson_files = sorted(p.name for p in (REPO / "lessons").glob("[0-9][0-9]-*.md"))
    assert lesson_files
    pages = ["REFERENCES.md", "GLOSSARY.md"]  # not lessons, but shown by lesson --references / --glossary
    missing = [n for n in [*lesson_files, *pages] if f"microgradnorm/lessons/content/{n}" not in names]
    assert not missing, f"lesson files missing from the wheel: {missing}"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MICROGRADNORM_LESSONS", "VIRTUAL_ENV")}
    _run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)], env=env)

    env.update(MICROGRADNORM_HOME=str(tmp_path / "state"), NO_COLOR="1", COLUMNS="60")
    where = _run(
        [str(bindir / "python"), "-c", "from microgradnorm.lessons.format import lessons_dir; print(lessons_dir())"],
        env=env,
        cwd=tmp_path,
    ).stdout.strip()
    assert Path(where).is_relative_to(venv), f"lessons found at {where}, not inside the fresh venv"
    assert Path(where).name == "content"

    out = _run([str(bindir / "microgradnorm"), "lesson", "--auto", "1"], env=env, cwd=tmp_path).stdout
    first = load_lessons()[0].steps[0].title  # from this checkout: the wheel carries the same lesson files
    assert "Step 1 of" in out and first in out
    listing = _run([str(bindir / "microgradnorm"), "lesson"], env=env, cwd=tmp_path).stdout
    assert "Skipping" not in listing and "A Value, the chain rule" in listing
    references = _run([str(bindir / "microgradnorm"), "lesson", "--references"], env=env, cwd=tmp_path).stdout
    assert references.lstrip().startswith("References") and "Ioffe and Szegedy" in references
