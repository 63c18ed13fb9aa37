"""A hostile corpus: submissions that try to pass without the maths, escape the limits, or forge progress.

Every class of attack of issue 13 has at least two submissions here, and every
exercise is attacked at least once. Each must end as a clear failure, within
its time limit, with no process left running, no temporary folder made, and no
pass recorded. (The right answers that must still pass are in
test_exercises_authoring.py; the kernel filter and the supervisor's cleanup are
tested on their own, without the audit hook in front of them, in
test_exercises_sandbox.py.)
"""

from __future__ import annotations

import io
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from microgradnorm.exercises import landlock, messages, render
from microgradnorm.exercises import workspace as ws
from microgradnorm.exercises.catalog import EXERCISES, get_exercise
from microgradnorm.exercises.problems import get_problem
from tests.grading import Submission, grade_all, grade_source, live_child_processes, solution, titles, written
from tests.helpers import run_exercise

SOLUTIONS = get_exercise(1).solution.parent
TIMEOUT = 5.0  # seconds per check here; the endless loops are stopped by it
SLACK = 20.0  # seconds beyond it that a loaded machine may take to start and clean up


@dataclass(frozen=True)
class Attack:
    id: str
    attack_class: str
    number: int
    code: str  # put at the top of the reference solution (after its imports), or the whole file if ``whole``
    words: str  # in the summary or the findings
    whole: bool = False
    # only the kernel stops it (bubblewrap's mount namespace or Landlock; the hook is undone)
    kernel_files: bool = False


FORMULAS = Path(__file__).resolve().parents[1] / "microgradnorm" / "formulas.py"
SOLUTION_5 = SOLUTIONS / "05_layernorm_backward.py"
REFUSED_IMPORT = "cannot be imported while an exercise is graded"
REFUSED_OPEN = "may not open"

ATTACKS = [
    # ---- the answer keys, by import (any route)
    Attack("import-vectorized", "import", 5,
           "from microgradnorm.vectorized import layer_norm_backward as _backward\n", REFUSED_IMPORT),
    Attack("importlib-formulas", "import", 7,
           "import importlib\n_f = importlib.import_module('microgradnorm.formulas')\n", REFUSED_IMPORT),
    Attack("meta-path-cleared", "import", 6,
           f"import sys\nsys.meta_path.clear()\nsys.path.insert(0, {str(FORMULAS.parents[1])!r})\n"
           "import microgradnorm.formulas\n", REFUSED_IMPORT),
    Attack("library-rms-norm", "import", 8,
           "from microgradnorm import rms_norm, Value\n", REFUSED_IMPORT),
    Attack("engine-in-numpy-exercise", "import", 11,
           "from microgradnorm.engine import Value\n", REFUSED_IMPORT),
    Attack("dunder-import-torch", "import", 9, "_t = __import__('torch')\n", REFUSED_IMPORT),
    Attack("runpy-solution", "import", 4,
           f"import runpy\n_ns = runpy.run_path({str(SOLUTIONS / '04_affine_backward.py')!r})\n"
           "affine_backward = _ns['affine_backward']\n", REFUSED_OPEN),
    Attack("value-exercise-builder", "import", 3,
           "import microgradnorm\n_ln = microgradnorm.layer_norm\n", "only Value can"),
    # ---- the answer keys, by reading their text
    Attack("open-solution", "read", 5,
           f"exec(open({str(SOLUTION_5)!r}).read())\n", REFUSED_OPEN),
    Attack("os-open-formulas", "read", 2,
           f"import os\n_fd = os.open({str(FORMULAS)!r}, os.O_RDONLY)\n", REFUSED_OPEN),
    Attack("pathlib-read-text", "read", 1,
           f"import pathlib\n_src = pathlib.Path({str(SOLUTIONS / '01_local_derivatives.py')!r}).read_text()\n",
           REFUSED_OPEN),
    Attack("proc-self-root", "read", 10,
           f"_src = open('/proc/self/root' + {str(SOLUTIONS / '10_stable_variance.py')!r}).read()\n", REFUSED_OPEN),
    Attack("spec-from-file", "read", 9,
           "import importlib.util as _u\n"
           f"_s = _u.spec_from_file_location('key', {str(SOLUTIONS / '09_layernorm_jacobian.py')!r})\n"
           "_m = _u.module_from_spec(_s)\n_s.loader.exec_module(_m)\n", REFUSED_OPEN),
    Attack("listdir-solutions", "read", 7, f"import os\n_names = os.listdir({str(SOLUTIONS)!r})\n", "may not list"),
    # ---- the answer keys, through objects the harness holds (it holds none)
    Attack("gc-objects", "objects", 6, "import gc\n_all = gc.get_objects()\n", "may not look through"),
    Attack("frames-and-modules", "objects", 8, """
import sys as _sys


def _harvest():
    found = []
    for module in list(_sys.modules.values()):
        for value in list(vars(module).values()):
            if type(value).__name__ == "ndarray":
                found.append(value)
    frame = _sys._getframe()
    while frame is not None:
        found += [v for v in frame.f_locals.values() if type(v).__name__ == "ndarray"]
        frame = frame.f_back
    return found


def rmsnorm_forward(x, gamma, eps):
    return gamma * x, x


def rmsnorm_backward(dy, cache):
    arrays = [a for a in _harvest() if a.shape == dy.shape]
    return arrays[-1], arrays[0].sum(axis=0)
""", "Not yet", whole=True),
    Attack("numpy-raw-memory", "objects", 7, f"""
import numpy as _np


def _words(address, count):  # an array over any address: NumPy's array interface takes a raw pointer
    class _Raw:
        pass

    raw = _Raw()
    raw.__array_interface__ = {{"shape": (count,), "typestr": "<u8", "data": (address, False), "version": 3}}
    return _np.asarray(raw)


def _undo_the_hook():
    try:
        open({str(SOLUTIONS / '07_batchnorm_simplified.py')!r})
    except PermissionError as refusal:
        tb, frames = refusal.__traceback__, []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
    readable = next(f.f_locals["readable"] for f in frames if "readable" in f.f_locals)
    _words(id(readable) + 3 * 8, len(readable))[0] = id(_ROOT)  # the hook now allows the whole checkout


_ROOT = {str(SOLUTIONS.parents[3])!r}
_undo_the_hook()
exec(open({str(SOLUTIONS / '07_batchnorm_simplified.py')!r}).read())
""", "operating system refused", whole=True, kernel_files=True),
    # ---- processes (every one refused; nothing outlives the check)
    Attack("fork-bomb", "process", 1, "import os\nwhile True:\n    os.fork()\n", "may not start processes"),
    Attack("setsid-daemon", "process", 2,
           "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n        time.sleep(1)\n",
           "may not start processes"),
    Attack("double-fork", "process", 3,
           "import os\nif os.fork() == 0:\n    if os.fork() == 0:\n        import time\n        time.sleep(600)\n"
           "    os._exit(0)\n", "may not start processes"),
    Attack("multiprocessing", "process", 4,
           "import multiprocessing\nmultiprocessing.Process(target=print).start()\n", REFUSED_IMPORT),
    Attack("exec-fresh-python", "process", 5,
           "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'import microgradnorm.formulas'])\n",
           "may not start processes"),
    Attack("os-system", "process", 11, "import os\nos.system('sleep 600 &')\n", "may not start processes"),
    Attack("posix-spawn", "process", 10, "import os, sys\nos.posix_spawn(sys.executable, ['python'], {})\n",
           "may not start processes"),
    Attack("ctypes-fork", "process", 9, "import ctypes\nctypes.CDLL(None).fork()\n", REFUSED_IMPORT),
    Attack("kill-the-grader", "process", 8, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
           "may not send signals"),
    Attack("pidfd-signal", "process", 7,
           "import os, _signal\n_signal.pidfd_send_signal(os.pidfd_open(os.getppid()), 9)\n",
           "operating system refused"),
    # ---- hard limits
    Attack("raise-memory-limit", "limits", 1, "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n",
           REFUSED_IMPORT),
    Attack("memory-hog", "limits", 2, "import numpy as _np\n_big = _np.ones(10**10)\n", "ran out of memory"),
    Attack("cpu-burn", "limits", 3, "while True:\n    pass\n", "did not finish within"),
    Attack("write-a-big-file", "limits", 4, "open('/tmp/microgradnorm-hostile-big', 'w').write('x' * 10**8)\n",
           "may not write files"),
    Attack("pipe-buffers", "limits", 6,  # each full pipe holds 64 KiB of kernel memory, outside the memory limit
           "import os\n_held = []\ntry:\n    while True:\n        _r, _w = os.pipe()\n"
           "        os.set_blocking(_w, False)\n        os.write(_w, b'x' * 2**16)\n"
           "        _held.append((_r, _w))\nexcept OSError as _e:\n"
           "    raise OSError(f'{len(_held)} pipes, then: {_e}')\n", "Too many open files"),
    # ---- progress forging
    Attack("forge-progress-home", "progress", 5,
           "import os, json\n_home = os.environ.get('MICROGRADNORM_HOME', '/nonexistent')\n"
           "_path = os.path.join(_home, 'exercises.json')\n"
           "open(_path, 'w').write(json.dumps({'exercises': {'05_layernorm_backward': {'passed': True}}}))\n",
           "may not write files"),
    Attack("forge-progress-xdg", "progress", 6,
           "import os\n_p = os.path.expanduser('~/.local/state/microgradnorm/exercises.json')\n"
           "_data = open(_p).read()\n",
           REFUSED_OPEN),
    # ---- the result channel
    Attack("forged-result-frame", "channel", 7, """
import os, json, struct
_head = json.dumps({"message": {"calls": {"a": {}, "b": {}, "a2": {}}, "error": None}, "arrays": []}).encode()
for _fd in range(3, 256):
    try:
        os.write(_fd, b"MGNW" + struct.pack("<Q", len(_head)) + _head)
    except OSError:
        pass
os._exit(0)
""", "Not yet"),
    Attack("junk-on-every-fd", "channel", 10,
           "import os\nfor _fd in range(3, 256):\n    try:\n        os.write(_fd, b'\\x00' * 65536)\n"
           "    except OSError:\n        pass\n", "could not be read"),
    Attack("flood-the-channel", "channel", 11,
           "import os\n_chunk = b'x' * 2**20\nwhile True:\n    for _fd in range(3, 256):\n        try:\n"
           "            os.write(_fd, _chunk)\n        except OSError:\n            pass\n",
           "more than"),
    # ---- answers estimated instead of computed
    Attack("finite-differences", "estimate", 5, """
import numpy as np


def layernorm_forward(x, gamma, beta, eps):
    def forward(x, gamma, beta):
        xshift = x - x.mean(axis=-1, keepdims=True)
        return gamma * xshift / np.sqrt((xshift * xshift).mean(axis=-1, keepdims=True) + eps) + beta

    return forward(x, gamma, beta), (forward, x, gamma, beta)


def _numerical(f, v, h=1e-6):
    v = np.array(v, dtype=np.float64)
    g = np.zeros_like(v)
    for k in np.ndindex(v.shape):
        old = v[k]
        v[k] = old + h
        up = f(v.copy())
        v[k] = old - h
        down = f(v.copy())
        v[k] = old
        g[k] = (up - down) / (2 * h)
    return g


def layernorm_backward(dy, cache):
    forward, x, gamma, beta = cache
    dx = _numerical(lambda v: np.sum(forward(v, gamma, beta) * dy), x)
    dgamma = _numerical(lambda v: np.sum(forward(x, v, beta) * dy), gamma)
    dbeta = _numerical(lambda v: np.sum(forward(x, gamma, v) * dy), beta)
    return dx, dgamma, dbeta
""", "this looks like a finite-difference estimate", whole=True),
    Attack("keep-the-values", "estimate", 10, """
import numpy as np

_seen = []


def welford_update(count, mean, m2, value):
    _seen.append(value)
    return count + 1, float(np.mean(_seen)), float(np.var(_seen) * len(_seen))
""", "keep state between calls", whole=True),
    # ---- what the child prints or says is shown, never obeyed by the terminal
    Attack("terminal-escapes", "channel", 2,
           "print('\\x1b[1A\\x1b[2K' * 40 + '\\x1b[32mEvery check passed.\\x1b]52;c;Zm9yZ2Vk\\x07')\n"
           "raise ValueError('\\x1b[2J\\x1b[HPassed.')\n", "Importing your file failed"),
    # ---- an exit at import is an exit, not a graded function
    Attack("exit-at-import", "exit", 9, "import sys\nsys.exit(0)\n", "while it was being imported"),
    Attack("exit-at-import-code", "exit", 3, "raise SystemExit('bye')\n", "while it was being imported"),
    # ---- the sandbox's own workings
    Attack("patch-realpath", "tamper", 2,
           "import os, posixpath\nposixpath.realpath = lambda p, **k: p\nos.path.isabs = lambda p: True\n"
           f"_src = open({str(FORMULAS)!r}).read()\n", REFUSED_OPEN),
    Attack("swap-hook-code", "tamper", 1, f"""
try:
    open({str(FORMULAS)!r})
except Exception as _e:
    _tb = _e.__traceback__
    while _tb.tb_next is not None:
        _tb = _tb.tb_next
    _check = _tb.tb_frame.f_locals["_path_ok"]
    _check.__code__ = (lambda *a, **k: True).__code__
""", "may not touch __code__"),
]  # fmt: skip


def _source(attack: Attack) -> str:
    if attack.whole:
        return attack.code
    reference = solution(attack.number)
    head, sep, body = reference.partition("\ndef ")
    return f"{head}\n{attack.code}\n{sep.lstrip()}{body}" if sep else attack.code + reference


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every attack graded (several at once), with no temporary file or folder allowed meanwhile."""
    sources = {attack.id: (attack.number, _source(attack)) for attack in ATTACKS}
    subs = written(tmp_path_factory.mktemp("hostile"), sources, timeout=TIMEOUT, memory_mb=512)

    def refuse(*args, **kwargs):
        raise AssertionError("the grader made a temporary file or folder")

    seconds: dict[str, float] = {}
    with pytest.MonkeyPatch.context() as mp:
        for name in ("mkdtemp", "mkstemp", "TemporaryDirectory", "NamedTemporaryFile", "TemporaryFile"):
            mp.setattr(tempfile, name, refuse)
        graded = grade_all(subs, seconds)
    return graded, seconds


def test_every_class_is_attacked_twice_and_every_exercise_once():
    classes = Counter(attack.attack_class for attack in ATTACKS)
    assert min(classes.values()) >= 2, classes
    assert {a.number for a in ATTACKS} == {ex.number for ex in EXERCISES}


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_an_attack_ends_as_a_clear_failure(results, attack):
    result = results[0][attack.id]
    if attack.kernel_files and landlock.abi_version() == 0:
        pytest.skip("no Landlock in this kernel: the audit hook alone can be undone through memory writes")
    assert result.isolated or result.file_filter or not attack.kernel_files
    assert not result.passed
    said = f"{result.summary} {titles(result)}"
    # inside bubblewrap the answer keys are not refused but absent: the mount namespace holds none of them
    words = "No such file or directory" if attack.kernel_files and result.isolated else attack.words
    assert words in said, said
    assert "Traceback" not in result.summary


def test_every_refusal_the_child_wrote_can_be_said_in_another_language(results):
    """The child speaks English only; each of its refusals here is a template of messages.CHILD, which the
    grading process says again in the learner's language (tests/test_zh_exercises.py says them in Chinese)."""
    said = 0
    for attack_id, result in results[0].items():
        if result.rows and result.rows[0].detail in ("forbidden", "bad return"):
            text = result.summary.removesuffix(".")
            assert messages.recognise(text[:1].lower() + text[1:]) or messages.recognise(text), (attack_id, text)
            said += 1
    assert said >= 10


def test_each_attack_ends_within_its_time_limit(results):
    """The limit, plus the slack a loaded machine needs to start Python and NumPy and to clean up."""
    _, seconds = results
    slow = {k: round(v, 1) for k, v in seconds.items() if v > TIMEOUT + SLACK}
    assert slow == {}


def test_no_attack_leaves_a_process_running(results):
    assert live_child_processes() == []


def test_no_attack_wrote_its_file(results):
    assert not Path("/tmp/microgradnorm-hostile-big").exists()


def test_open_files_are_limited_so_kernel_buffers_are_too(results):
    """A full pipe holds 64 KiB outside the address-space limit: the number of open files bounds them."""
    from microgradnorm.exercises.supervisor import FILES_LIMIT

    summary = results[0]["pipe-buffers"].summary
    held = int(summary.split("OSError: ")[1].split(" pipes")[0])
    assert 0 < held < FILES_LIMIT // 2, summary


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0})


def test_what_the_child_printed_or_said_reaches_the_terminal_inert(results):
    """Escape sequences from the child (cursor up, erase line, colours, clipboard) are shown as text."""
    result = results[0]["terminal-escapes"]
    said = " ".join([result.printed, result.summary, result.where or "", *(r.detail for r in result.rows)])
    assert _raw_controls(said) == []
    assert "\\x1b[2K" in result.printed and "Every check passed." in result.printed  # shown, as text
    buf = io.StringIO()
    Console(file=buf, width=100, force_terminal=True).print(render.grade_report(result))
    shown = buf.getvalue()
    assert [seq for seq in ("\x1b[1A", "\x1b[2K", "\x1b]52", "\x1b[2J") if seq in shown] == []


def test_the_checks_ran_under_the_kernel_filter_where_there_is_one(results):
    from microgradnorm.exercises import seccomp

    if not seccomp.supported():
        pytest.skip("the seccomp filter covers Linux on x86-64 and aarch64 only")
    for attack_id in ("finite-differences", "gc-objects", "fork-bomb", "exit-at-import"):
        assert results[0][attack_id].kernel_filter, attack_id


# ---- through the command, as a learner runs it: no pass recorded -------------------------------------


def _check(folder: Path, name: str, *extra: str) -> tuple[int, str]:
    return run_exercise("check", name, "--dir", str(folder), "--timeout", str(TIMEOUT), *extra)


@pytest.mark.parametrize("attack_id", ["forge-progress-home", "forged-result-frame", "finite-differences"])
def test_through_the_command_no_pass_is_recorded(tmp_path, attack_id):
    folder = tmp_path / "work"
    ws.init_workspace(folder)
    attack = next(a for a in ATTACKS if a.id == attack_id)
    ex = get_exercise(attack.number)
    (folder / ex.filename).write_text(_source(attack), encoding="utf-8")
    code, out = _check(folder, str(ex.number))
    assert code == 1, out
    progress = ws.load_progress()
    assert not progress.passed(ex) and progress.exercises[ex.name]["last"] != "passed"


def test_answers_looked_up_for_chosen_inputs_pass_the_check_but_are_not_recorded(tmp_path):
    """``--seed`` makes the inputs known in advance, and with them their answers: such a pass is not recorded."""
    folder = tmp_path / "work"
    ws.init_workspace(folder)
    ex, seed = get_exercise(4), 2024
    problem, rng = get_problem(ex.name), np.random.default_rng(seed)
    cases = [problem.make_case(rng, False), problem.make_case(rng, True)]
    table = {
        c.inputs["dy"].tobytes().hex(): [c.expected[k].tolist() for k in ("dgamma", "dbeta", "dxhat")] for c in cases
    }
    (folder / ex.filename).write_text(
        f"import numpy as np\n_T = {table!r}\n\n\ndef affine_backward(dy, xhat, gamma):\n"
        "    return tuple(np.array(v) for v in _T[dy.tobytes().hex()])\n",
        encoding="utf-8",
    )
    code, out = _check(folder, str(ex.number), "--seed", str(seed))
    flat = " ".join(out.split())
    assert code == 0 and "Every check passed." in flat and "not recorded" in flat, out
    assert not ws.load_progress().passed(ex)
    code, out = _check(folder, str(ex.number))  # fresh inputs: the table knows none of them
    assert code == 1 and not ws.load_progress().passed(ex)


def test_a_progress_file_changed_during_a_check_is_put_back_and_nothing_recorded(tmp_path, monkeypatch):
    """The second line, should the sandbox ever let a write through: the grading process undoes it."""
    folder = tmp_path / "work"
    ws.init_workspace(folder)
    before = (ws.state_dir() / ws.PROGRESS_FILE).read_bytes()
    from microgradnorm.exercises import grader

    real = grader.grade

    def forging(ex, path, **kwargs):
        forged = ws.load_progress()
        forged.record(ex)["passed"] = True
        ws.save_json(ws.state_dir() / ws.PROGRESS_FILE, forged.to_json())
        return real(ex, path, **kwargs)

    monkeypatch.setattr(grader, "grade", forging)
    code, out = _check(folder, "1")
    assert code == 1
    assert " ".join(messages.say("progress_tampered").split()) in " ".join(out.split())
    assert (ws.state_dir() / ws.PROGRESS_FILE).read_bytes() == before
    assert not ws.load_progress().passed(get_exercise(1))


def test_the_child_gets_no_environment_of_the_grader(tmp_path):
    result = grade_source(tmp_path, 1, "import os\nprint(sorted(os.environ))\n" + solution(1))
    assert result.passed, result.summary
    assert "MICROGRADNORM_HOME" not in result.printed and "'HOME'" not in result.printed
    assert "OPENBLAS_NUM_THREADS" in result.printed


# ---- the learner's file itself, hostile ------------------------------------------------------------


def test_a_learner_file_that_is_not_a_plain_file_is_refused_without_hanging(tmp_path):
    fifo, zero, folder, big, binary = (tmp_path / n for n in ("fifo.py", "zero.py", "folder.py", "big.py", "bin.py"))
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    folder.mkdir()
    big.write_bytes(b"# " + b"x" * (2**20 + 10))
    binary.write_bytes(b"\xff\xfe\x00 not text")
    # a link out of the file's folder is refused before it is opened (the grader may run as someone else)
    expected = {fifo: "a FIFO", zero: "outside its folder", folder: "is a directory", big: "larger than",
                binary: "not text"}  # fmt: skip
    results = grade_all([Submission(str(p), 1, p) for p in expected])
    for path, words in expected.items():
        result = results[str(path)]
        assert not result.passed and words in result.summary, result.summary
