"""Where the learner's state lives, and how it is written without ever being corrupted.

Lesson and exercise progress are small JSON files in one state directory:
``$MICROGRADNORM_HOME`` if set, else the system's own place for an application's
state, as platformdirs knows it (``$XDG_STATE_HOME/microgradnorm``, else
``~/.local/state/microgradnorm`` on Linux; ``~/Library/Application Support/microgradnorm``
on macOS; ``%LOCALAPPDATA%`` on Windows).

Writes go to a temporary file in the same directory, are flushed to disk, and
then replace the old file in one ``os.replace``: a process killed mid-write
leaves either the old file or the new one, never half of each. A file that does
not parse (or is not UTF-8) is not silently dropped: it is renamed aside
(``progress.json.corrupt-<time>``, with ``-2``, ``-3`` ... when that name is
taken) and reported, so nothing the learner had is lost.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from microgradnorm.i18n import _

__all__ = [
    "CorruptStateError",
    "StateDirError",
    "atomic_write_bytes",
    "atomic_write_text",
    "load_json",
    "probe_writable",
    "save_json",
    "set_aside",
    "state_dir",
]


class CorruptStateError(ValueError):
    """A state file did not parse; it has been moved to ``moved_to``."""

    def __init__(self, path: Path, moved_to: Path, reason: str) -> None:
        super().__init__(
            # Translators: {name} is the file's new name, e.g. progress.json.corrupt-20250101-120000
            _("{path} could not be read ({reason}); it was set aside as {name}").format(
                path=path, reason=reason, name=moved_to.name
            )
        )
        self.path = path
        self.moved_to = moved_to


class StateDirError(OSError):
    """The state directory cannot be used (a file is in its place, or it cannot be created)."""


def state_dir() -> Path:
    """The directory for progress files (created on first use).

    Raises :class:`StateDirError`, naming the environment variable that chose the
    path, if the path is not a directory and cannot be made one.
    """
    home = os.environ.get("MICROGRADNORM_HOME")
    if home:
        root, source = Path(home).expanduser(), "MICROGRADNORM_HOME"
    else:
        import platformdirs

        root = Path(platformdirs.user_state_dir("microgradnorm", appauthor=False))
        # an error names the variable that chose the path, when one did
        source = "XDG_STATE_HOME" if os.environ.get("XDG_STATE_HOME") else _("the state directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where the directory (or one of its parents) should be
        taken = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), root)
        raise StateDirError(
            _("{source}: expected a directory for progress files, got {path!r}, which is not a directory").format(
                source=source, path=str(taken)
            )
        ) from None
    except OSError as exc:
        raise StateDirError(
            _("{source}: cannot create the directory {path!r}: {reason}").format(
                source=source, path=str(root), reason=exc.strerror or exc
            )
        ) from None
    return root


def probe_writable(directory: Path) -> None:
    """Raise :class:`StateDirError` if no file can be created in ``directory`` (read-only, immutable or
    not ours): the callers then run without saving and say so once, instead of failing at the first save."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".probe-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise StateDirError(
            _("cannot write in the state directory {path!r}: {reason}").format(
                path=str(directory), reason=exc.strerror or exc
            )
        ) from None
    os.close(fd)
    os.unlink(tmp)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a mix.

    The data goes to a temporary file in the same directory, is flushed to disk,
    and replaces ``path`` in one ``os.replace``. The file gets the mode a plain
    ``open()`` would give it (0666 minus the umask), or keeps the mode of the file
    it replaces: a learner's exercise file stays as readable as it was.
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise _about(exc, path) from None
    try:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _about(exc, path) from None
        raise
    return path


def _about(exc: OSError, path: Path) -> OSError:
    """``exc`` as if it were about ``path``: the temporary file's name means nothing to the reader."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """:func:`atomic_write_bytes` for text, in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def save_json(path: Path, data: Any) -> None:
    """Atomically write ``data`` as JSON."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def load_json(path: Path, default: Any) -> Any:
    """Read JSON from ``path``; ``default`` if it does not exist.

    Raises :class:`CorruptStateError` after moving an unreadable file aside, so
    the caller can tell the learner and start fresh without losing the old file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return default
    try:
        return json.loads(data.decode("utf-8"))  # a UTF-16 or Latin-1 file is as unreadable as broken JSON
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        moved = set_aside(path)
        raise CorruptStateError(path, moved, str(exc).splitlines()[0]) from None


def set_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.corrupt-<time>`` (``-2``, ``-3``, ... if that name is taken: two set-asides
    in one second keep both files) and return the new path. The new name is claimed with a hard link, which
    fails rather than replace a file another process set aside meanwhile."""
    stamp = f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
    for k in range(1, 1000):
        moved = path.with_name(stamp if k == 1 else f"{stamp}-{k}")
        try:
            os.link(path, moved)
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links: take a free name and rename
            if moved.exists():
                continue
            os.replace(path, moved)
            return moved
        os.unlink(path)
        return moved
    raise FileExistsError(f"{path}: every set-aside name of this second is taken")
