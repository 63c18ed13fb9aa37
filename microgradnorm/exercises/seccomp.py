"""A kernel filter (seccomp) on the process that runs the learner's code.

The supervisor installs it in the forked child, between fork and exec
(:func:`exec_filtered`), and then execs the Python that will run the learner's
code: the filter stays on across that exec and for the life of the process, no
code in it can lift it (whatever it calls: Python, NumPy, a C extension), and it
holds for root as well:

* no new process: ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``
  (threads stay possible) and ``clone3`` fail; neither can the process be
  replaced by another program: ``execve`` is allowed once, for the exec that
  starts the child (the filter compares its path argument with the address of
  the buffer :func:`exec_filtered` passes), and ``execveat`` never;
* no signal to another process (``kill``, ``tgkill`` and ``rt_sigqueueinfo``
  only to itself; no pidfd, no ``ptrace``, no reading another's memory);
* no raised limit: ``setrlimit`` and a setting ``prlimit64`` fail, so the
  memory, CPU-time and file-size limits the supervisor set are hard limits,
  even for root (whose hard limits are otherwise its own to raise);
* no file changed: ``open``/``openat`` for writing, creating, truncating,
  renaming, linking, removing, changing a file's mode, owner or extended
  attributes, and mounting or entering namespaces all fail;
* no socket (a tmux server's UNIX socket would run commands outside; UDP,
  netlink, raw packets), no io_uring (its operations open files and sockets
  past this filter), no keyring, no performance counter;
* no scheduling of anyone (``setpriority``, ``sched_setscheduler``,
  ``sched_setaffinity``: another process's, or a real-time priority that
  starves the machine) and no clock set (root keeps ``CAP_SYS_TIME``).

Inside bubblewrap (:mod:`.bubblewrap`) bwrap installs it (``--seccomp``) just
before it starts the child: then ``execve`` stays allowed and signals are not
filtered by pid (the PID namespace holds no one else).

Refused calls return EPERM (``clone3`` and ``openat2``, whose flags a filter
cannot read, return ENOSYS, so that the C library falls back to ``clone`` and
``openat``). A syscall of another ABI (32-bit or x32) ends the process.

Only Linux on x86-64 and aarch64 is covered; elsewhere :func:`exec_filtered`
execs without a filter and the audit hook of :mod:`.sandbox` is the only line.
Standard library only (ctypes included, which the supervisor may use; the child
never loads ctypes): the supervisor loads this module by its path.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from typing import NoReturn

__all__ = ["compiled", "exec_filtered", "namespaced", "program", "supported"]

# classic BPF opcodes and the seccomp return values
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_KILL_PROCESS, _ERRNO, _ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000  # O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND
_X32_BIT = 0x40000000

# (audit arch, seccomp syscall number, {syscall: number}) per machine
_X86_64 = {
    "fork": 57, "vfork": 58, "execveat": 322, "clone": 56, "clone3": 435,
    "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "setrlimit": 160, "prlimit64": 302,
    "open": 2, "openat": 257, "openat2": 437, "creat": 85,
    "rename": 82, "renameat": 264, "renameat2": 316, "unlink": 87, "unlinkat": 263, "rmdir": 84,
    "mkdir": 83, "mkdirat": 258, "symlink": 88, "symlinkat": 266, "link": 86, "linkat": 265,
    "truncate": 76, "chmod": 90, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "lchown": 94,
    "fchownat": 260, "mknod": 133, "mknodat": 259, "utime": 132, "utimes": 235, "utimensat": 280,
    "futimesat": 261, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "chroot": 161,
    "pivot_root": 155, "reboot": 169, "bpf": 321,
    "socket": 41, "socketpair": 53, "fchmod": 91, "fchown": 93, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "setpriority": 141, "sched_setparam": 142,
    "sched_setscheduler": 144, "sched_setaffinity": 203, "sched_setattr": 314, "ioprio_set": 251,
    "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
    "request_key": 249, "perf_event_open": 298, "userfaultfd": 323,
}  # fmt: skip
_AARCH64 = {
    "execveat": 281, "clone": 220, "clone3": 435,
    "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "setrlimit": 164, "prlimit64": 261,
    "openat": 56, "openat2": 437, "renameat": 38, "renameat2": 276, "unlinkat": 35,
    "mkdirat": 34, "symlinkat": 36, "linkat": 37, "truncate": 45, "fchmodat": 53, "fchmodat2": 452,
    "fchownat": 54, "mknodat": 33, "utimensat": 88, "unshare": 97, "setns": 268, "mount": 40,
    "umount2": 39, "chroot": 51, "pivot_root": 41, "reboot": 142, "bpf": 280,
    "socket": 198, "socketpair": 199, "fchmod": 52, "fchown": 55, "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7,
    "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "setpriority": 140, "sched_setparam": 118,
    "sched_setscheduler": 119, "sched_setaffinity": 122, "sched_setattr": 274, "ioprio_set": 30,
    "settimeofday": 170, "clock_settime": 112, "adjtimex": 171, "clock_adjtime": 266,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217,
    "request_key": 218, "perf_event_open": 241, "userfaultfd": 282,
}  # fmt: skip
# machine: (audit arch, execve's number, the other syscalls)
_MACHINES = {"x86_64": (0xC000003E, 59, _X86_64), "aarch64": (0xC00000B7, 221, _AARCH64)}

_ALWAYS_REFUSED = (
    "fork", "vfork", "execveat", "tkill", "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
    "ptrace", "process_vm_readv", "process_vm_writev", "setrlimit", "creat",
    "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "symlink",
    "symlinkat", "link", "linkat", "truncate", "chmod", "fchmodat", "fchmodat2", "chown", "lchown",
    "fchownat", "mknod", "mknodat", "utime", "utimes", "utimensat", "futimesat", "unshare", "setns",
    "mount", "umount2", "chroot", "pivot_root", "reboot", "bpf",
    # sockets (a tmux server's UNIX socket runs commands outside; netlink, raw packets, UDP), a file's mode,
    # owner or attributes (what a write filter on open misses), the scheduling of anyone, and the clock
    "socket", "socketpair", "fchmod", "fchown", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "setpriority", "sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr",
    "ioprio_set", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    # io_uring opens files and sockets without the syscalls above (this filter never sees its operations);
    # the user's keyrings, performance counters and userfaultfd reach beyond the process
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
    "perf_event_open", "userfaultfd",
)  # fmt: skip
_ONLY_TO_SELF = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # first argument: a pid


def _arg(index: int, high: bool = False) -> int:
    """Offset of a syscall argument's low (or high) 32 bits in struct seccomp_data (little-endian)."""
    return 16 + 8 * index + (4 if high else 0)


def _deny(errno: int = _EPERM) -> list[tuple[int, int, int, int]]:
    return [(_RET, 0, 0, _ERRNO | errno)]


def _rule(name: str, pid: int | None) -> list[tuple[int, int, int, int]]:
    """The body run when the syscall is ``name``: it always ends in a return.

    ``pid`` None: the process has a PID namespace of its own (bubblewrap), where every pid it can name is
    its own or its sandbox's, so signals are not filtered by pid.
    """
    if name in _ALWAYS_REFUSED:
        return _deny()
    if name in ("clone3", "openat2"):
        return _deny(_ENOSYS)
    if name == "clone":  # a thread shares the process (and this filter); anything else is a new process
        return [(_LD_ABS, 0, 0, _arg(0)), (_JSET, 1, 0, _CLONE_THREAD), *_deny(), (_RET, 0, 0, _ALLOW)]
    if name in _ONLY_TO_SELF and pid is None:
        return [(_RET, 0, 0, _ALLOW)]
    if name in _ONLY_TO_SELF:
        return [(_LD_ABS, 0, 0, _arg(0)), (_JEQ, 1, 0, pid), *_deny(), (_RET, 0, 0, _ALLOW)]
    if name in ("open", "openat"):
        flags = _arg(1 if name == "open" else 2)
        return [(_LD_ABS, 0, 0, flags), (_JSET, 0, 1, _WRITE_FLAGS), *_deny(), (_RET, 0, 0, _ALLOW)]
    if name == "prlimit64":  # reading a limit passes NULL as the new one
        return [
            (_LD_ABS, 0, 0, _arg(2)),
            (_JEQ, 0, 3, 0),
            (_LD_ABS, 0, 0, _arg(2, high=True)),
            (_JEQ, 0, 1, 0),
            (_RET, 0, 0, _ALLOW),
            *_deny(),
        ]
    raise ValueError(f"no rule for the syscall {name!r}")


def _exec_once(pointer: int) -> list[tuple[int, int, int, int]]:
    """execve allowed only with ``pointer`` as its path argument (both 32-bit halves), else EPERM."""
    return [
        (_LD_ABS, 0, 0, _arg(0)),
        (_JEQ, 0, 3, pointer & 0xFFFFFFFF),
        (_LD_ABS, 0, 0, _arg(0, high=True)),
        (_JEQ, 0, 1, pointer >> 32),
        (_RET, 0, 0, _ALLOW),
        *_deny(),
    ]


def program(machine: str, pid: int | None, exec_pointer: int | None) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` as (code, jt, jf, k) instructions.

    ``pid`` is the process's own (signals may go to it alone); ``exec_pointer``
    the address of the one path ``execve`` may be called with. Both None for a
    process inside bubblewrap: bwrap installs the filter just before its own
    exec of the child (so execve stays allowed; the sandbox's file tree holds
    no program but the interpreter, and nothing can be written there), and
    the PID namespace holds no process to signal but its own.
    """
    arch, execve, numbers = _MACHINES[machine]
    prog = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL_PROCESS), (_LD_ABS, 0, 0, 0)]
    if arch == _MACHINES["x86_64"][0]:
        prog += [(_JGE, 0, 1, _X32_BIT), *_deny()]
    if exec_pointer is not None:
        once = _exec_once(exec_pointer)
        prog += [(_JEQ, 0, len(once), execve), *once]
    for name, number in numbers.items():
        body = _rule(name, pid)
        prog += [(_JEQ, 0, len(body), number), *body]
    return [*prog, (_RET, 0, 0, _ALLOW)]


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def _machine() -> str:
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def compiled(code: list[tuple[int, int, int, int]]) -> bytes:
    """The program as ``struct sock_filter`` bytes, as ``bwrap --seccomp FD`` reads them."""
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def namespaced() -> bytes | None:
    """The filter for a process inside bubblewrap, compiled; None where it is not supported."""
    return compiled(program(_machine(), None, None)) if supported() else None


def supported() -> bool:
    return sys.platform.startswith("linux") and _machine() in _MACHINES


def _install(libc: ctypes.CDLL, code: list[tuple[int, int, int, int]]) -> bool:
    instructions = (_Instruction * len(code))(*(_Instruction(*i) for i in code))
    prog = _Program(len(code), instructions)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: required to install a filter without privileges
        return False
    return libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def exec_filtered(argv: list[str], env: dict[str, str]) -> NoReturn:
    """Between fork and exec: install the filter, then exec ``argv`` (the one exec it allows). Never returns.

    Without a filter where it is not supported; exit code 127 if the exec fails.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    path = ctypes.create_string_buffer(os.fsencode(argv[0]))
    args = (ctypes.c_char_p * (len(argv) + 1))(*(os.fsencode(a) for a in argv), None)
    envp = (ctypes.c_char_p * (len(env) + 1))(*(os.fsencode(f"{k}={v}") for k, v in env.items()), None)
    if supported():
        _install(libc, program(_machine(), os.getpid(), ctypes.addressof(path)))
    libc.execve(path, args, envp)
    os._exit(127)
