"""An autograder for Gradescope whose feedback is the grader's own diagnosis.

Gradescope's specification for a programming assignment's autograder
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): a zip with
``setup.sh`` and ``run_autograder`` at its root. Gradescope unpacks it into
``/autograder/source``, runs ``setup.sh`` once when it builds the image, and for
each submission puts the student's files in ``/autograder/submission``, runs
``run_autograder``, and reads ``/autograder/results/results.json``::

    {"score": 2.0, "tests": [{"name": ..., "score": 1.0, "max_score": 1.0, "output": ..., "visibility": ...}]}

:func:`write_autograder` writes that zip for chosen exercises; ``run_autograder``
calls :func:`main` (``python -m microgradnorm.exercises.gradescope``), which grades
each exercise's file with :func:`.grader.grade` (what ``exercise check`` does, on
fresh inputs, in the sandbox) and writes the file. One test per exercise, worth 1
point; its output is the check's report as a learner sees it, in the language the
zip was made in.

Isolation on Gradescope: every submission runs in a throwaway container, and the
grader runs the student's code inside bubblewrap where the container allows user
namespaces; where it does not (``docs/grader.md``), under the Landlock and seccomp
filters and the audit hook. Either way the answer keys, which ship with the
package in the container, are out of the child's reach, and results.json is
written by the grading process alone.

``MICROGRADNORM_AUTOGRADER_ROOT`` (default ``/autograder``) moves the whole tree, for the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import zipfile
from pathlib import Path
from typing import Any

from microgradnorm import __version__
from microgradnorm.exercises.catalog import Exercise, get_exercise
from microgradnorm.store import atomic_write_text

__all__ = ["ROOT_ENV", "main", "results", "write_autograder"]

ROOT_ENV = "MICROGRADNORM_AUTOGRADER_ROOT"

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu).
# It installs Python, bubblewrap (the sandbox the student's code runs in) and microgradnorm {version}.
set -euo pipefail
ROOT="${{{root_env}:-/autograder}}"
if [ -z "${{MICROGRADNORM_PYTHON:-}}" ]; then
  apt-get update -qq
  apt-get install -y -qq python3 python3-pip python3-venv bubblewrap >/dev/null
  python3 -m venv "$ROOT/venv"
  PYTHON="$ROOT/venv/bin/python"
else
  PYTHON="$MICROGRADNORM_PYTHON"   # an interpreter that has the dependencies already (the tests)
fi
echo "$PYTHON" > "$ROOT/source/python"
# microgradnorm itself, into its own folder: from a wheel in MICROGRADNORM_WHEELS (a local build), or PyPI
if [ -n "${{MICROGRADNORM_WHEELS:-}}" ]; then
  "$PYTHON" -m pip install -q --no-deps --no-index --find-links "$MICROGRADNORM_WHEELS" \\
    --target "$ROOT/lib" "microgradnorm=={version}"
else
  "$PYTHON" -m pip install -q --target "$ROOT/lib" "microgradnorm=={version}"
fi
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grade it, write results/results.json.
set -euo pipefail
ROOT="${{{root_env}:-/autograder}}"
PYTHON="$(cat "$ROOT/source/python")"
cd "$ROOT"
PYTHONPATH="$ROOT/lib" exec "$PYTHON" -m microgradnorm.exercises.gradescope \\
  --exercises {names} --timeout {timeout} --memory {memory} --lang {lang}
"""


def write_autograder(exercises: list[Exercise], output: Path, *, timeout: float, memory_mb: int) -> Path:
    """The autograder zip for ``exercises``, in the current language; returns its path."""
    from microgradnorm.i18n import current_language

    fields = {
        "root_env": ROOT_ENV,
        "version": __version__,
        "names": ",".join(str(ex.number) for ex in exercises),
        "timeout": f"{timeout:g}",
        "memory": memory_mb,
        "lang": current_language(),
    }
    with zipfile.ZipFile(output, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            archive.writestr(info, text.format(**fields))
    return output


# ---- on Gradescope: grade the submission ------------------------------------------------------------


def _find(submission: Path, filename: str) -> Path | None:
    """The student's file called ``filename``, at the top of the submission or in a folder of it."""
    found = []
    for folder, dirs, files in os.walk(submission):  # links to folders are not followed
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if filename in files:
            found.append(Path(folder) / filename)
    return min(found, key=lambda p: (len(p.parts), str(p))) if found else None


def results(root: Path, exercises: list[Exercise], *, timeout: float, memory_mb: int) -> dict[str, Any]:
    """results.json's content for the submission in ``root/submission``: one test per exercise."""
    from microgradnorm.exercises.grader import grade
    from microgradnorm.exercises.render import grade_report, plain_text
    from microgradnorm.i18n import _

    tests = []
    for ex in exercises:
        path = _find(root / "submission", ex.filename)
        if path is None:
            score, output = 0.0, _("No file named {filename} in your submission.").format(filename=ex.filename)
        else:
            result = grade(ex, path, timeout=timeout, memory_mb=memory_mb)
            score, output = (1.0 if result.passed else 0.0), plain_text([grade_report(result)])
        tests.append(
            {"name": f"{ex.number:02d} {ex.filename}", "score": score, "max_score": 1.0, "output": output,
             "visibility": "visible"}
        )  # fmt: skip
    return {"score": sum(t["score"] for t in tests), "tests": tests}


def main(argv: list[str] | None = None) -> int:
    from microgradnorm.i18n import set_language

    parser = argparse.ArgumentParser(prog="python -m microgradnorm.exercises.gradescope")
    parser.add_argument("--exercises", required=True, help="exercise numbers, comma-separated")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--memory", type=int, default=1024)
    parser.add_argument("--lang", default=None)
    args = parser.parse_args(argv)
    set_language(args.lang)
    root = Path(os.environ.get(ROOT_ENV, "/autograder"))
    chosen = [get_exercise(n) for n in args.exercises.split(",")]
    data = results(root, chosen, timeout=args.timeout, memory_mb=args.memory)
    atomic_write_text(root / "results" / "results.json", json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
