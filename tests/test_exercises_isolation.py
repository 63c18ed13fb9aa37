"""The attacks of issue 24, reproduced through the command, each failing closed, inside bubblewrap and without it.

Each attack is a whole exercise file: the attack first, then (should the attack
get through) a line that says so, then the reference solution, so that an attack
that works also passes and is recorded, as it did before (the issue's "Broken").
Where the audit hook explains a refusal, the file first undoes the hook through
NumPy's raw memory (its helpers' code replaced by functions that allow
everything), so that what is tested is the layer that holds: the kernel
(namespaces, no capabilities, the seccomp filter), never the hook.

Each must end with: no pass, nothing recorded, the attack's words never printed,
no process of the grader left, and no effect outside the child (the other
process's priority, policy and CPUs; NumPy's file's mode, owner and attributes;
nothing received by a socket of this test; the tmux server's windows).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from microgradnorm.exercises import workspace as ws
from microgradnorm.exercises.catalog import get_exercise
from tests.grading import live_child_processes, solution
from tests.helpers import run_exercise
from tests.sandboxing import need_bubblewrap, without_bubblewrap

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.isdir("/proc"), reason="these attacks are Linux's")]

TIMEOUT = 5.0
WORKED = "ATTACK-GOT-THROUGH"
NUMPY_FILE = Path(np.__file__)

# undoes the audit hook: its helpers' code is replaced, through an array over their memory, by code that allows all
UNDO = """
import numpy as _np
import sys as _sys


def _words(address, count):
    class _Raw:
        pass

    raw = _Raw()
    raw.__array_interface__ = {"shape": (count,), "typestr": "<u8", "data": (address, False), "version": 3}
    return _np.asarray(raw)


def _none(*args):
    return None


def _true(*args):
    return True


_CODE = 6 * 8  # PyFunctionObject (CPython 3.10+): refcount, type, globals, builtins, name, qualname, code


def _undo_the_hook():
    try:
        open("/nonexistent-file-the-hook-refuses")
    except PermissionError as refusal:
        tb, frames = refusal.__traceback__, []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
    hook = next(f.f_locals for f in frames if "_on_import" in f.f_locals)
    for name in ("_on_open", "_on_import", "_on_attribute", "_refusal"):
        _words(id(hook[name]) + _CODE, 1)[0] = id(_none.__code__)
    _words(id(hook["_path_ok"]) + _CODE, 1)[0] = id(_true.__code__)
    _sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != "_Blocker"]


_undo_the_hook()
"""


TMUX = """import os, socket, struct


def _message(kind, data=b""):  # an imsg: type, length, flags, peer id (tmux's protocol version 8), pid
    return struct.pack("<IHHII", kind, 16 + len(data), 0, 8, 0xFFFFFFFF) + data


def _tmux(path, *argv):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    words = b"".join(a.encode() + b"\\0" for a in argv)
    s.sendall(b"".join([
        _message(100, struct.pack("<i", 0x10000)), _message(111, struct.pack("<Q", 0x10000)),
        _message(101, b"xterm\\0"), _message(109, struct.pack("<i", 0)), _message(102, b"\\0"),
        _message(108, b"/\\0"), _message(107, struct.pack("<i", os.getpid())), _message(106),
        _message(200, struct.pack("<i", len(argv)) + words),
    ]))
    s.recv(100)  # the server answers once the command ran
"""

RAW = """import ctypes, os, platform
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _raw(*args):
    if _libc.syscall(*args) < 0:
        raise PermissionError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
"""


@dataclass(frozen=True)
class Attack:
    id: str
    code: str  # the attack; {placeholders} are filled from the test's targets
    undo: bool = True  # the audit hook is undone first (it would refuse with an explanation)
    number: int = 4


ATTACKS = [
    # tmux's own client protocol (as its client speaks it, recorded from tmux 3.3a): the server runs a command
    # for anyone who reaches its socket; now, and in the background after the grader has exited
    Attack("tmux-run-now", TMUX + "_tmux({tmux!r}, 'run-shell', 'cp {solution} {marker}')\n"),
    Attack("tmux-run-later", TMUX + "_tmux({tmux!r}, 'run-shell', '-b', 'sleep 1; touch {marker}')\n"),
    Attack("unix-socket",
           "import socket\n_s = socket.socket(socket.AF_UNIX)\n_s.connect({unix!r})\n_s.sendall(b'hi')\n"),
    Attack("unix-socketpair", "import socket\n_a, _b = socket.socketpair()\n_a.sendall(b'hi')\n_b.recv(2)\n"),
    Attack("udp", "import socket\n_s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
           "_s.sendto(b'hi', ('127.0.0.1', {udp}))\n"),
    Attack("netlink", "import socket\n_s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n"),
    Attack("raw-packet", "import socket\n_s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"),
    Attack("fchmod-numpy", "import os\n_fd = os.open({numpy!r}, os.O_RDONLY)\nos.fchmod(_fd, 0o777)\n"),
    Attack("fchown-numpy", "import os\n_fd = os.open({numpy!r}, os.O_RDONLY)\nos.fchown(_fd, 65534, 65534)\n"),
    Attack("fsetxattr-numpy", "import os\n_fd = os.open({numpy!r}, os.O_RDONLY)\nos.setxattr(_fd, 'user.mgn', b'x')\n"),
    Attack("renice-other", "import os\nos.setpriority(os.PRIO_PROCESS, {other}, 19)\n", undo=False),
    Attack("sched-idle-other", "import os\nos.sched_setscheduler({other}, os.SCHED_IDLE, os.sched_param(0))\n",
           undo=False),
    Attack("affinity-other", "import os\nos.sched_setaffinity({other}, {{0}})\n", undo=False),
    Attack("set-clock",
           "import time\ntime.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME))\n",
           undo=False),
    # raw system calls through ctypes (importable once the hook is undone): io_uring would open files and
    # sockets past the seccomp filter; the keyring is the user's, shared with every process of theirs
    Attack("io-uring", RAW + "_raw(425, 8, ctypes.create_string_buffer(120))\n"),
    Attack("keyring", RAW + "_raw(250 if platform.machine() == 'x86_64' else 219, 0, -4, 0)\n"),
    Attack("sched-fifo-hog", "import os\nos.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\n"
           f"print({WORKED!r}, flush=True)\nwhile True:\n    pass\n", undo=False),
]  # fmt: skip


def source(attack: Attack, targets: dict[str, object]) -> str:
    """The whole file: the hook undone (if so), the attack, a line that says it got through, the solution."""
    said = f"print({WORKED!r}, flush=True)\n"
    return (UNDO if attack.undo else "") + attack.code.format(**targets) + said + solution(attack.number)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    """What the attacks aim at outside the child: a tmux server, a UNIX and a UDP socket, another process."""
    folder = tmp_path_factory.mktemp("targets")
    other = subprocess.Popen(["sleep", "600"])
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(folder / "unix.sock"))
    unix.listen()
    unix.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    tmux = shutil.which("tmux")
    tmux_sock = str(folder / "tmux.sock")
    if tmux:
        subprocess.run([tmux, "-S", tmux_sock, "-f", "/dev/null", "new-session", "-d", "sleep 600"], check=True)
    found = {"tmux": tmux_sock, "unix": str(folder / "unix.sock"), "udp": udp.getsockname()[1],
             "numpy": str(NUMPY_FILE), "other": other.pid, "marker": str(folder / "ran-outside"),
             "solution": str(get_exercise(4).solution)}  # fmt: skip
    before = _outside(found, tmux)
    mode, owner = NUMPY_FILE.stat().st_mode, (NUMPY_FILE.stat().st_uid, NUMPY_FILE.stat().st_gid)
    yield found, unix, udp, tmux, before
    # should an attack ever get through, NumPy's file is put back as it was (the venv may be shared)
    os.chmod(NUMPY_FILE, mode & 0o7777)
    os.chown(NUMPY_FILE, *owner)
    if "user.mgn" in os.listxattr(NUMPY_FILE):
        os.removexattr(NUMPY_FILE, "user.mgn")
    if tmux:
        subprocess.run([tmux, "-S", tmux_sock, "kill-server"], check=False)
    other.kill()
    other.wait()
    unix.close()
    udp.close()


def _outside(found: dict[str, object], tmux: str | None) -> dict[str, object]:
    """What an attack that got through would have changed, outside the child."""
    other, info = int(found["other"]), NUMPY_FILE.stat()
    windows = ""
    if tmux:
        windows = subprocess.run([tmux, "-S", str(found["tmux"]), "list-windows", "-a"], capture_output=True).stdout
    return {
        "priority": os.getpriority(os.PRIO_PROCESS, other),
        "policy": os.sched_getscheduler(other),
        "cpus": os.sched_getaffinity(other),
        "numpy mode": info.st_mode,
        "numpy owner": (info.st_uid, info.st_gid),
        "numpy attributes": os.listxattr(NUMPY_FILE),
        "tmux windows": windows,
        "a command ran outside": os.path.exists(str(found["marker"])),
    }


def _received(unix: socket.socket, udp: socket.socket) -> list[str]:
    got = []
    try:
        unix.accept()
        got.append("a UNIX connection")
    except BlockingIOError:
        pass
    try:
        got.append(f"a UDP datagram {udp.recv(100)!r}")
    except BlockingIOError:
        pass
    return got


def _check_through_the_command(folder: Path, number: int) -> tuple[int, str]:
    return run_exercise("check", str(number), "--dir", str(folder), "--timeout", str(TIMEOUT))


@pytest.fixture(params=["bubblewrap", "fallback"])
def sandbox(request, monkeypatch):
    if request.param == "bubblewrap":
        need_bubblewrap()
    else:
        without_bubblewrap(monkeypatch)
    return request.param


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_an_attack_fails_closed_through_the_command(attack, sandbox, targets, tmp_path):
    found, unix, udp, tmux, before = targets
    if attack.id.startswith("tmux") and not tmux:
        pytest.skip("tmux is not installed")
    folder = tmp_path / "work"
    ws.init_workspace(folder)
    ex = get_exercise(attack.number)
    (folder / ex.filename).write_text(source(attack, found), encoding="utf-8")
    code, out = _check_through_the_command(folder, ex.number)
    assert code == 1 and WORKED not in out, out
    time.sleep(1.5)  # a job left behind (tmux-run-later: a second) would act after the check
    progress = ws.load_progress()
    assert not progress.passed(ex) and progress.exercises[ex.name]["last"] != "passed"
    assert live_child_processes() == []
    assert _received(unix, udp) == []
    assert _outside(found, tmux) == before
