"""Which layer holds which attack, and what bubblewrap costs: a measurement, not a test.

    PYTHONPATH=. python -m tests.measure_isolation [ROUNDS]

Grades the attacks of ``tests/test_exercises_isolation.py`` (the audit hook undone
through NumPy's raw memory where it would explain), plus a fork bomb and a
write to the sandbox's ``/tmp`` with the hook undone, under three set-ups, side
by side in one run:

* ``bwrap+seccomp``: what the grader does where bubblewrap works;
* ``bwrap only``: the same without the seccomp filter (is it still earning its lines?);
* ``fallback``: no bubblewrap: Landlock, seccomp and the hook.

For each attack it prints how it ended (``held: <why>`` or ``GOT THROUGH``), then
the median wall time of grading a right answer under each set-up (ROUNDS runs
each, interleaved) and their ratio.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from microgradnorm.exercises import bubblewrap, process
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.exercises.grader import grade
from tests import test_exercises_isolation as attacks

EXTRA = [
    # a bounded one (200 sleeping children, not 2**n): the machine is shared
    attacks.Attack(
        "fork-200",
        "import os, time\nfor _ in range(200):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\n",
    ),
    attacks.Attack("write-tmp", "open('/tmp/x', 'w').write('x' * 10**6)\n"),
    attacks.Attack("read-solution", f"open({str(get_exercise(4).solution)!r}).read()\n"),
]


@contextlib.contextmanager
def setup(name: str) -> Iterator[None]:
    real_isolated, real_dumps = process._isolated, process.json.dumps
    if name == "fallback":
        process._isolated = lambda engine=False: None  # type: ignore[assignment]
    if name == "bwrap only":

        class _NoFilter:
            @staticmethod
            def dumps(config: dict) -> str:
                return real_dumps({**config, "filter": False})

        process.json = _NoFilter  # type: ignore[assignment]
    try:
        yield
    finally:
        process._isolated, process.json = real_isolated, json  # type: ignore[assignment]


def main(rounds: int = 5) -> None:
    if not bubblewrap.available():
        sys.exit(f"bubblewrap is not usable here: {bubblewrap.available().why}")
    setups = ("bwrap+seccomp", "bwrap only", "fallback")
    other = __import__("subprocess").Popen(["sleep", "600"])
    folder = Path(tempfile.mkdtemp(prefix="mgn-measure-"))
    targets = {"tmux": str(folder / "none.sock"), "unix": str(folder / "none.sock"), "udp": 9,
               "numpy": str(Path(__import__("numpy").__file__)), "other": other.pid}  # fmt: skip
    print(f"{'attack':18}" + "".join(f"{s:>34}" for s in setups))
    for attack in [*attacks.ATTACKS, *EXTRA]:
        path = folder / f"{attack.id}.py"
        path.write_text(attacks.source(attack, targets), encoding="utf-8")
        row = []
        for name in setups:
            with setup(name):
                r = grade(get_exercise(attack.number), path, timeout=5.0)
            through = r.passed or attacks.WORKED in r.printed
            row.append("GOT THROUGH" if through else "held: " + r.summary.split("(")[-1].split(")")[0][:26])
        print(f"{attack.id:18}" + "".join(f"{c:>34}" for c in row), flush=True)
    other.kill()
    times: dict[str, list[float]] = {s: [] for s in setups}
    ex = get_exercise(5)
    for _ in range(rounds):
        for name in setups:
            with setup(name):
                start = time.monotonic()
                assert grade(ex, ex.solution).passed
                times[name].append(time.monotonic() - start)
    medians = {k: statistics.median(v) for k, v in times.items()}
    base = medians["fallback"]
    for name, m in medians.items():
        print(f"grading a right answer, {name:14}: median {m:.3f} s over {rounds} runs, {m / base:.2f}x the fallback")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
