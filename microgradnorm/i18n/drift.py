"""Translation drift: a translation records a short hash of the English it follows, and when the English
changes, the reader is given the English until a translator catches up.

The lessons (one hash per step, :mod:`microgradnorm.lessons.translation`), the pages beside them and the
exercise files and hints (:mod:`microgradnorm.exercises.translation`) all keep their translations in
step this way; this module is the part they share: the hash, and the state of a file whose first line
records it. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

__all__ = ["HASH_LENGTH", "KEY", "MARKED_FILE_STATES", "MISSING", "digest", "marked_file", "normalized"]

KEY = "english"  # the word a translation records its English under
HASH_LENGTH = 12
TRANSLATED, MISSING, STALE, MISMATCHED = "translated", "missing", "stale", "mismatched"
MARKED_FILE_STATES = (TRANSLATED, MISSING, STALE, MISMATCHED)


def normalized(text: str) -> str:
    """``text`` without trailing spaces and blank lines at its ends: what a hash of prose should not see."""
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def digest(payload: object) -> str:
    """The first :data:`HASH_LENGTH` hex digits of the SHA-256 of ``payload`` (a string as it is, anything else
    as compact JSON)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def marked_file(
    path: Path, mark: re.Pattern[str], english: str, now: str, expected: str, remedy: str, label: str = ""
) -> tuple[str, str, list[str]]:
    """(state, the translation's text after its mark, problems) of the translated file ``path``.

    ``mark`` matches the translation's first line, with the English file's name and the recorded hash as its
    two groups; ``english`` is that file's name and ``now`` its hash today; ``expected`` is the first line's
    shape, told when it is missing, ``remedy`` the command that prints it, and ``label`` names the English in
    the problems (default: ``english``). The state is one of :data:`MARKED_FILE_STATES`.
    """
    if not path.is_file():
        return MISSING, "", []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return MISMATCHED, "", [f"{path}: could not be read ({exc})"]
    found = mark.match(text)
    if found is None:
        return MISMATCHED, text, [f"{path}:1: expected a first line '{expected}' ({remedy})"]
    if found.group(1) != english:
        return MISMATCHED, text, [f"{path}:1: its '{KEY}:' mark names {found.group(1)!r}, expected {english!r}"]
    if found.group(2) != now:
        problem = (
            f"{path}: {label or english} changed in the English since it was translated (recorded {found.group(2)}, "
            f"now {now}); update the translation, then its first line ({remedy})"
        )
        return STALE, text[found.end() :], [problem]
    return TRANSLATED, text[found.end() :], []
