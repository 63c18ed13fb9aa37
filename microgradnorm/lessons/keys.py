"""Keys for the lesson runner: one key at a time from a terminal in raw mode, or characters from a stream.

Arrow and page keys arrive as escape sequences and are returned by name (``"UP"``, ``"PAGEDOWN"``); a
change of the terminal's size is returned as ``"RESIZE"``, so the runner redraws without waiting for a key.
Tests give the runner an iterator of keys instead (:func:`from_iterable`).

Why not readchar or click.getchar: both switch the terminal to raw mode with ``tty.setraw``'s default
``TCSAFLUSH``, which throws away the keys typed while a step was being drawn (a learner pressing Enter
twice loses the second; ``tests/test_lesson_terminal.py`` checks that none is lost); both read from
``sys.stdin`` only; readchar waits for a second byte after a lone Esc, and click reads up to 32 bytes at
once, which merges keys typed ahead into one. Neither reports a terminal resize. The reader here is
``os.read`` of one byte in raw mode switched on with ``TCSANOW``, plus a 50 ms look for the rest of an
escape sequence.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

__all__ = ["KeyReader", "TerminalKeys", "from_iterable", "key_source"]

KeyReader = Callable[[], str]


def from_iterable(keys: Iterable[str]) -> KeyReader:
    """The keys of ``keys`` one at a time, then "" (end of input: the runner quits)."""
    it: Iterator[str] = iter(keys)
    return lambda: next(it, "")


class _Resized(Exception):
    """Raised by the SIGWINCH handler while :class:`TerminalKeys` waits for a key."""


def _on_sigwinch(signum: int, frame: Any) -> None:
    raise _Resized


@contextlib.contextmanager
def _resize_interrupts() -> Iterator[None]:
    """While waiting for a key, a change of the terminal's size interrupts the wait (raises :class:`_Resized`).
    Only in the main thread, where Python runs signal handlers, and where SIGWINCH exists."""
    if not hasattr(signal, "SIGWINCH") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGWINCH, _on_sigwinch)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)


def _terminal_size(fd: int) -> tuple[int, int] | None:
    try:
        return tuple(os.get_terminal_size(fd))  # type: ignore[return-value]
    except OSError:
        return None


_ARROWS = {b"A": "UP", b"B": "DOWN", b"C": "RIGHT", b"D": "LEFT"}  # the final byte of an arrow key's sequence


class TerminalKeys:
    """Read one key at a time from a terminal file descriptor, in raw mode only while reading.

    Raw mode is switched on for each read and off again before anything is
    printed, so output keeps its normal line endings and a crash never leaves
    the terminal raw. The switch does not flush pending input, so keys typed
    while a step was being drawn are not lost. Arrow and page keys arrive as escape sequences and are
    returned as ``"UP"``, ``"DOWN"``, ``"LEFT"``, ``"RIGHT"``, ``"PAGEUP"``, ``"PAGEDOWN"``. A change of the
    terminal's size, while waiting or since the last key, is returned as ``"RESIZE"`` (the runner redraws
    without waiting for a key).
    """

    # CSI ("[") and SS3 ("O") arrows, and CSI page keys, without their leading Esc
    _SEQUENCES: ClassVar[dict[bytes, str]] = {
        **{b"[" + code: name for code, name in _ARROWS.items()},
        **{b"O" + code: name for code, name in _ARROWS.items()},
        b"[5~": "PAGEUP",
        b"[6~": "PAGEDOWN",
    }

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self.size = _terminal_size(self.fd)  # as of the last key: a resize while drawing is caught too

    def __call__(self) -> str:
        import termios
        import tty

        size, self.size = self.size, _terminal_size(self.fd)
        if size != self.size:
            return "RESIZE"
        saved = termios.tcgetattr(self.fd)
        try:
            tty.setraw(self.fd, termios.TCSANOW)  # not TCSAFLUSH: keep keys typed ahead
            try:
                with _resize_interrupts():
                    first = os.read(self.fd, 1)
            except _Resized:
                self.size = _terminal_size(self.fd)
                return "RESIZE"
            if first != b"\x1b":
                return first.decode("latin-1")
            rest = b""
            while len(rest) < 3 and select.select([self.fd], [], [], 0.05)[0]:
                rest += os.read(self.fd, 1)
                if rest[-1:].isalpha() or rest[-1:] == b"~":
                    break
            return self._SEQUENCES.get(rest, "ESC")
        finally:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)


def key_source(stream: Any = None) -> KeyReader:
    """Keys from ``stream`` (default stdin): raw single keys from a terminal, else characters."""
    stream = sys.stdin if stream is None else stream
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is not None and os.isatty(fd):
        return TerminalKeys(fd)
    return lambda: stream.read(1)
