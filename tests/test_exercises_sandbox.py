"""The sandbox's parts on their own: the wire format, the kernel filter, the supervisor's cleanup, the hook.

The hostile corpus (test_exercises_hostile.py) meets the audit hook first; here
each line of defence is tested without the others in front of it: the kernel
filter with code that calls fork, exec, kill and setrlimit directly, and the
supervisor's cleanup with no filter at all, against a fork bomb, a setsid
daemon, a double fork and multiprocessing.
"""

from __future__ import annotations

import dis
import errno
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from microgradnorm.exercises import landlock, process, sandbox, seccomp, supervisor, wire
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.exercises.grader import grade
from microgradnorm.exercises.process import child_environment
from tests.grading import grade_source
from tests.sandboxing import need_bubblewrap, without_bubblewrap

SUPERVISOR = Path(supervisor.__file__)
linux_only = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the subreaper and /proc are Linux's")
filter_only = pytest.mark.skipif(not seccomp.supported(), reason="the seccomp filter covers Linux x86-64 and aarch64")


# ---- the wire format ---------------------------------------------------------------------------------


def test_a_frame_round_trips_exactly():
    arrays = {wire.key("a", "out", "dx"): np.random.default_rng(0).normal(size=(3, 5)), "b/in/eps": np.float64(0.0)}
    message, back = wire.decode(wire.encode({"x": [1, "two"]}, arrays))
    assert message == {"x": [1, "two"]}
    assert set(back) == set(arrays)
    for k, v in arrays.items():
        assert back[k].shape == np.shape(v) and np.array_equal(back[k], v)


def _frame(header: bytes, data: bytes = b"") -> bytes:
    return wire.MAGIC + len(header).to_bytes(8, "little") + header + data


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not a frame at all",
        wire.MAGIC + (2**40).to_bytes(8, "little") + b"{}",  # a header longer than the frame
        _frame(b"{not json"),
        _frame(b"[" * 100_000 + b"]" * 100_000),  # nesting deep enough to exhaust the recursion limit
        _frame(json.dumps({"message": {}, "arrays": [["a/out/x", [2**30, 2**30]]]}).encode()),  # claims 8 EiB
        _frame(json.dumps({"message": {}, "arrays": [["a/out/x", [1]], ["a/out/x", [1]]]}).encode(), b"\0" * 16),
        _frame(json.dumps({"message": {}, "arrays": [["a/out/x", [-1]]]}).encode()),
        _frame(json.dumps({"message": [], "arrays": []}).encode()),
        _frame(json.dumps({"message": {}, "arrays": []}).encode(), b"trailing"),
        _frame(json.dumps({"message": {}, "arrays": [["a/out/x", [1]]]}).encode(), b"\0" * 4),  # cut short
    ],
    ids=["empty", "no-magic", "huge-header", "bad-json", "deep-json", "huge-array", "twice", "negative", "list",
         "trailing", "short"],
)  # fmt: skip
def test_a_malformed_frame_is_a_wire_error_never_a_crash(data):
    with pytest.raises(wire.WireError):
        wire.decode(data)


def test_array_keys_are_made_and_split_in_one_place():
    assert wire.split_key(wire.key("a2", "in", "x")) == ("a2", "in", "x")
    with pytest.raises(wire.WireError):
        wire.split_key("a/sideways/x")
    with pytest.raises(ValueError):
        wire.key("a/b", "out", "x")


# ---- the kernel filter, with nothing in front of it --------------------------------------------------------


def _supervise(
    code: str,
    *,
    kernel_filter: bool = True,
    deadline: float = 30.0,
    readable: dict | None = None,
    isolated: dict | None = None,
    python: str = sys.executable,
) -> tuple[list[str], str]:
    """Run ``code`` in a child of the supervisor (no audit hook); (status lines, what the child printed).

    ``readable``: the file filter's arguments (:func:`.landlock.allowed_paths`), or None for no file filter;
    ``isolated``: bubblewrap's (:func:`.process._isolated`), or None to run the child without it.
    """
    log_r, log_w = os.pipe()
    config = {
        "argv": [python, "-I", "-S", "-c", code],
        "pass_fds": [],
        "log_fd": log_w,
        "memory": 2**30,
        "cpu": 60,
        "deadline": deadline,
        "filter": kernel_filter,
        "readable": readable,
        "isolated": isolated,
    }
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(SUPERVISOR), json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        pass_fds=(log_w,),
        env=child_environment(),
    )
    os.close(log_w)
    with os.fdopen(log_r, "rb") as log:
        printed = log.read().decode()  # EOF once the child and everything it started are gone
    status = proc.stdout.read().decode()  # EOF once the supervisor has cleaned up and exited by itself
    proc.stdin.close()
    proc.stdout.close()
    proc.wait(timeout=60)
    return status.splitlines(), printed


ATTEMPTS = """
import os, sys, resource
def attempt(name, f):
    try:
        f()
        print(name, "allowed", flush=True)
    except (OSError, ValueError) as exc:
        print(name, "refused", exc.errno if isinstance(exc, OSError) else "", flush=True)
attempt("fork", os.fork)
attempt("exec", lambda: os.execv(sys.executable, [sys.executable, "-c", "pass"]))
attempt("kill-parent", lambda: os.kill(os.getppid(), 0))
attempt("raise-limit", lambda: resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2))
attempt("write", lambda: open("/tmp/microgradnorm-sandbox-test", "w"))
attempt("pidfd", lambda: os.pidfd_open(os.getppid()))
attempt("read", lambda: open("/etc/hostname").close() if os.path.exists("/etc/hostname") else None)
attempt("kill-self", lambda: os.kill(os.getpid(), 0))
"""


@filter_only
def test_the_kernel_filter_refuses_processes_signals_limits_and_writes():
    status, printed = _supervise(ATTEMPTS)
    said = dict(line.split(" ", 1) for line in printed.splitlines())
    for name in ("fork", "exec", "kill-parent", "raise-limit", "write", "pidfd"):
        assert said[name].startswith("refused"), (name, printed)
    assert said["read"] == "allowed" and said["kill-self"] == "allowed"  # it is a filter, not a wall
    assert "exit 0" in status and not os.path.exists("/tmp/microgradnorm-sandbox-test")


PACKAGE = Path(sandbox.__file__).resolve().parents[1]
# a child that tries to open the package's files, another package's, the standard library's and NumPy's
OPEN_ATTEMPTS = f"""
import os, sys
sys.path.append({str(Path(np.__file__).resolve().parents[1])!r})
def attempt(name, path):
    try:
        os.close(os.open(path, os.O_RDONLY))
        print(name, "allowed", flush=True)
    except OSError as exc:
        print(name, "refused", exc.errno, flush=True)
attempt("closed-form", {str(PACKAGE / "formulas.py")!r})
attempt("solution", {str(PACKAGE / "exercises" / "solutions" / "05_layernorm_backward.py")!r})
attempt("answers", {str(Path(__file__).resolve().parent / "exercise_answers" / "05_layernorm_backward.py")!r})
attempt("other-package", {str(Path(pytest.__file__))!r})
attempt("engine", {str(PACKAGE / "engine.py")!r})
attempt("stdlib", os.__file__)
import numpy
attempt("numpy", numpy.__file__)
"""
FILE_ATTEMPTS = (
    OPEN_ATTEMPTS
    + """attempt("grader-memory", f"/proc/{os.getppid()}/mem")
import math, fractions, statistics
print("site-packages", "listed" if os.listdir(os.path.dirname(os.path.dirname(numpy.__file__))) else "empty")
"""
)


@pytest.mark.skipif(landlock.abi_version() == 0, reason="the file filter needs Landlock (Linux 5.13 or later)")
def test_the_file_filter_alone_keeps_the_package_and_other_processes_out():
    """Without the audit hook: the kernel lets the child read the standard library and NumPy, nothing else."""
    _, printed = _supervise(FILE_ATTEMPTS, readable=process._readable(engine=True))
    said = dict(line.split(" ", 1) for line in printed.splitlines())
    for name in ("closed-form", "solution", "answers", "grader-memory", "other-package"):
        assert said[name] == f"refused {errno.EACCES}", (name, printed)
    for name in ("engine", "stdlib", "numpy"):
        assert said[name] == "allowed", (name, printed)
    assert said["site-packages"] == "listed"  # names only: imports look there
    _, printed = _supervise(FILE_ATTEMPTS, readable=process._readable(engine=False))
    assert "engine refused 13" in printed  # the engine only for the exercise about it


def test_the_filter_program_is_well_formed():
    for machine in ("x86_64", "aarch64"):
        prog = seccomp.program(machine, 1234, 0x7FFF_1234_5678)
        assert len(prog) < 4096 and prog[-1] == (0x06, 0, 0, 0x7FFF0000)  # ends in "allow"
        for i, (code, jt, jf, _) in enumerate(prog):
            if code in (0x15, 0x45, 0x35):  # every jump lands inside the program
                assert i + 1 + max(jt, jf) < len(prog)


# ---- the supervisor's cleanup, with no filter at all ------------------------------------------------------

FORK_BOMB = """
import os, time
for _ in range(20):
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        time.sleep(600)
        os._exit(0)
time.sleep(600)
"""
SETSID_DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        time.sleep(600)
    os._exit(0)
time.sleep(0.5)
"""
DOUBLE_FORK = """
import os, time
if os.fork() == 0:
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        time.sleep(600)
    os._exit(0)
os.wait()
time.sleep(0.5)
"""
MULTIPROCESSING = """
import multiprocessing, os, time
def stay():
    print(os.getpid(), flush=True)
    time.sleep(600)
if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    p = multiprocessing.Process(target=stay, daemon=False)
    p.start()
    time.sleep(0.5)
    os._exit(0)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


@linux_only
@pytest.mark.parametrize(
    "code, count, deadline",
    [(FORK_BOMB, 20, 3.0), (SETSID_DAEMON, 1, 30.0), (DOUBLE_FORK, 1, 30.0), (MULTIPROCESSING, 1, 30.0)],
    ids=["fork-bomb", "setsid-daemon", "double-fork", "multiprocessing"],
)
def test_the_supervisor_leaves_no_descendant_behind(code, count, deadline):
    """Whether the child exits (daemons, double fork, multiprocessing) or is stopped (the bomb): all gone."""
    started = time.monotonic()
    status, printed = _supervise(textwrap.dedent(code), kernel_filter=False, deadline=deadline)
    pids = [int(line) for line in printed.split()]
    assert len(pids) == count, printed
    assert [p for p in pids if _alive(p)] == []
    cleaned = int(next(line for line in status if line.startswith("clean ")).split()[1])
    assert cleaned >= count
    assert time.monotonic() - started < deadline + 30


@linux_only
def test_descendants_are_found_through_proc():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in supervisor.descendants(os.getpid())
    finally:
        child.kill()
        child.wait()


# ---- the audit hook ---------------------------------------------------------------------------------------------


def _loads_global(fn) -> list[str]:
    return [i.argval for i in dis.get_instructions(fn) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF")]


def test_the_hook_looks_up_no_global_or_builtin_name():
    """So that patching builtins, os.path or the sandbox module changes nothing it decides."""
    hook = sandbox.make_hook(sandbox.Policy("exercise 1", "NumPy", ("/usr/lib/python3",)))
    helpers = (sandbox._path_ok, sandbox._canonical, sandbox._plainly_below, sandbox._import_message, sandbox._refusal)
    for fn in (hook, sandbox._on_open, sandbox._on_import, sandbox._on_attribute, *helpers):
        assert _loads_global(fn) == [], fn.__name__
        assert not fn.__code__.co_freevars, fn.__name__


def test_paths_are_checked_as_text_and_links_below_an_allowed_directory_are_refused(tmp_path):
    base = tmp_path / "lib"
    (base / "pkg").mkdir(parents=True)
    (base / "pkg" / "mod.py").write_text("")
    (base / "site-packages" / "other").mkdir(parents=True)
    (base / "link").symlink_to(tmp_path)
    readable = (str(base),)
    ok = sandbox._path_ok
    assert ok(str(base / "pkg" / "mod.py"), readable)
    assert ok(os.fsencode(base / "pkg" / "mod.py"), readable)
    assert ok(str(base / "pkg"), readable)
    assert not ok(str(base / "pkg" / ".." / ".." / "secret"), readable)
    assert not ok("pkg/mod.py", readable)  # relative: resolved against a directory the hook cannot see
    assert not ok(str(base / "link" / "secret"), readable)
    assert not ok(str(base / "site-packages" / "other" / "x.py"), readable)
    assert not ok(base / "pkg" / "mod.py", readable)  # a PathLike could answer differently the second time

    class Sneaky(str):
        def startswith(self, *args):  # type: ignore[override]
            return True

    assert not ok(Sneaky("/etc/passwd"), readable)
    assert ok("/dev/null", readable)


# ---- what the child sends back is judged, never believed -------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"calls": {"a": {"mul_da": {"kind": "array", "dtype": "float64", "shape": [2**30] * 40}}}, "error": None},
        {"calls": {"a": "not a dict", "b": [], "a2": None}, "error": None},
        {"calls": {}, "error": {"kind": "x" * 10_000, "frames": "nope", "message": 5}},
        {"calls": {"a": {"mul_da": {"kind": "array", "dtype": "float64", "shape": [5]}}}, "error": None},
    ],
    ids=["absurd-shape", "wrong-types", "strange-error", "claims-without-arrays"],
)
def test_a_forged_result_is_a_clear_failure(message):
    from microgradnorm.exercises.grader import GradeResult, _conclude
    from microgradnorm.exercises.problems import get_problem
    from microgradnorm.exercises.process import ChildRun

    ex = get_exercise(1)
    rng = np.random.default_rng(0)
    cases = [get_problem(ex.name).make_case(rng, False), get_problem(ex.name).make_case(rng, True)]
    run = ChildRun(result=bytearray(wire.encode(message, {})))
    out = GradeResult(ex, Path("forged.py"), False, "failed", "", 0)
    _conclude(out, run, cases, timeout=5.0, memory_mb=512)
    assert not out.passed and out.summary
    assert len(out.summary) < 2000 and all(len(r.detail) < 2000 for r in out.rows)


# ---- a file filter that keeps Python from starting is found out, never blamed on the learner -----------------


@pytest.fixture
def fresh_filter_state(monkeypatch):
    without_bubblewrap(monkeypatch)
    monkeypatch.setitem(process._file_filter_works, "state", None)
    return process._file_filter_works


@pytest.mark.skipif(landlock.abi_version() == 0, reason="the file filter needs Landlock (Linux 5.13 or later)")
def test_a_file_filter_under_which_no_child_starts_is_dropped_for_the_audit_hook(fresh_filter_state, monkeypatch):
    """On a machine where the filter lets too little through, a probe without learner code finds it out."""
    nothing = {"directories": [], "files": [], "programs": [], "listable": [], "library_dirs": []}
    monkeypatch.setattr(process, "_readable", lambda engine=False: nothing)
    ex = get_exercise(1)
    result = grade(ex, ex.solution)
    assert result.passed and not result.file_filter, result.summary
    assert fresh_filter_state["state"] is False


@pytest.mark.skipif(landlock.abi_version() == 0, reason="the file filter needs Landlock (Linux 5.13 or later)")
def test_a_learner_file_that_ends_its_process_does_not_turn_the_file_filter_off(fresh_filter_state, tmp_path):
    result = grade_source(tmp_path, 2, "import os\nos._exit(3)\n")
    assert not result.passed and "exit code 3" in result.summary
    assert fresh_filter_state["state"] is True  # the probe answered under the filter: it stays on
    later = grade(get_exercise(2), get_exercise(2).solution)
    assert later.passed and later.file_filter


def test_the_probe_has_limits_of_its_own_and_a_probe_out_of_time_leaves_the_filter_on(fresh_filter_state, monkeypatch):
    """A tight --timeout or --memory chosen by the learner must not make a working filter look broken."""
    calls = []

    def fake(job, *, timeout, memory_mb, cwd, readable, isolated=None):
        calls.append((job, timeout, memory_mb, readable is not None))
        return process.ChildRun(timed_out=job == b"probe")

    monkeypatch.setattr(process, "_run", fake)
    process.run_child(b"job", timeout=0.5, memory_mb=256, cwd=Path("."), probe=b"probe")
    assert calls == [(b"job", 0.5, 256, True), (b"probe", process.PROBE_TIMEOUT, 1024, True)]
    assert fresh_filter_state["state"] is None  # still unknown: the next check runs under the filter again


# ---- bubblewrap, with nothing else in front of it (no audit hook, no seccomp filter) -------------------------

NAMESPACE_ATTEMPTS = (
    OPEN_ATTEMPTS
    + """print("site-packages", ",".join(sorted(os.listdir(os.path.dirname(os.path.dirname(numpy.__file__))))))
print("processes", ",".join(sorted(e for e in os.listdir("/proc") if e.isdigit())))
print("uid", os.getuid(), os.getgid())
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
print("capabilities", status["CapEff"].strip(), status["CapBnd"].strip())
try:
    open("/tmp/x", "w").write("x")
    print("tmp", "written")
except OSError as exc:
    print("tmp", "refused", exc.errno)
try:
    os.chmod(numpy.__file__, 0o777)
    print("chmod", "allowed")
except OSError as exc:
    print("chmod", "refused", exc.errno)
"""
)


def test_bubblewrap_alone_shows_the_child_only_what_it_needs():
    """No hook, no seccomp: the namespaces hold the package's files, other processes and capabilities."""
    need_bubblewrap()
    _, printed = _supervise(
        NAMESPACE_ATTEMPTS,
        kernel_filter=False,
        isolated=process._isolated(engine=True),
        python=os.path.realpath(sys.executable),
    )
    said = dict(line.split(" ", 1) for line in printed.splitlines())
    for name in ("closed-form", "solution", "answers", "other-package"):
        assert said[name] == f"refused {errno.ENOENT}", (name, printed)  # not refused: not there at all
    for name in ("engine", "stdlib", "numpy"):
        assert said[name] == "allowed", (name, printed)
    assert set(said["site-packages"].split(",")) <= {"numpy", "numpy.libs"}, printed
    assert all(int(pid) < 10 for pid in said["processes"].split(",")), printed  # its own PID namespace
    assert said["uid"] == "65534 65534"
    assert said["capabilities"] == "0000000000000000 0000000000000000"
    assert said["tmp"].startswith("refused") and said["chmod"].startswith("refused"), printed


def test_a_hidden_site_packages_shows_only_the_files_bound_into_it(tmp_path):
    """A package installed in site-packages (pip install .): its harness files are bound into the empty folder
    that covers site-packages; its other files (and every other package) stay out of view."""
    from microgradnorm.exercises import bubblewrap

    need_bubblewrap()
    lib = tmp_path / "lib"
    (lib / "site-packages" / "pkg").mkdir(parents=True)
    (lib / "site-packages" / "pkg" / "runner.py").write_text("harness\n")
    (lib / "site-packages" / "pkg" / "solution.py").write_text("answer key\n")
    (lib / "stdlib.py").write_text("stdlib\n")
    spec = process._isolated(engine=False)
    python = os.path.realpath(sys.executable)
    code = (
        f"import os; print(sorted(os.listdir({str(lib)!r})), sorted(os.listdir({str(lib / 'site-packages')!r})),"
        f" sorted(os.listdir({str(lib / 'site-packages' / 'pkg')!r})),"
        f" open({str(lib / 'site-packages' / 'pkg' / 'runner.py')!r}).read().strip())"
    )
    argv = bubblewrap.command(
        spec["bwrap"],
        read_dirs=[*spec["read_dirs"], str(lib)],
        read_files=[*spec["read_files"], str(lib / "site-packages" / "pkg" / "runner.py")],
        hide=[*spec["hide"], str(lib / "site-packages")],
        argv=[python, "-I", "-S", "-c", code],
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=child_environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['site-packages', 'stdlib.py'] ['pkg'] ['runner.py'] harness", done.stdout


def test_an_installed_harness_in_a_venvs_hidden_site_packages_is_bound():
    """CI's failure: in a venv, platstdlib holds site-packages, so an installed microgradnorm's runner.py lay
    "inside the stdlib" and was not bound, while the site-packages it is in was hidden: no check could run."""
    from microgradnorm.exercises.process import files_to_bind

    stdlib = ["/opt/python/lib/python3.11", "/venv/lib/python3.11"]
    hide = ["/opt/python/lib/python3.11/site-packages", "/venv/lib/python3.11/site-packages"]
    runner = "/venv/lib/python3.11/site-packages/microgradnorm/exercises/runner.py"
    files = [runner, "/opt/python/lib/python3.11/os.py", "/dev/null", "/work/microgradnorm/exercises/wire.py"]
    assert files_to_bind(files, stdlib, hide) == [runner, "/work/microgradnorm/exercises/wire.py"]
