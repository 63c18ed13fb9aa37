"""The bytes that pass between the grader and the process that runs the learner's code.

One format, both ways (the job sent to the child, the result sent back)::

    b"MGNW" | header length (8 bytes, little-endian) | header (JSON, UTF-8) | array data

The header is a JSON object ``{"message": ..., "arrays": [[key, shape], ...]}``;
the arrays follow it as little-endian float64, one after another, in the order
the header lists them. Nothing is ever unpickled: decoding parses JSON and
reinterprets bytes as floats, and every size is checked against the bytes that
are really there, so a malformed or hostile frame is a :class:`WireError`, never
a hang, a crash or an object of the sender's choosing.

The names of the arrays are built here and nowhere else: :func:`key` makes one
from (call, role, name) and :func:`split_key` takes it apart. A call is a case
label (``a``, ``b``, or ``a2`` for the first case called again); the role is
``in`` (an input, as it was after the call) or ``out`` (a returned value).

This module imports only the standard library and NumPy, and nothing from the
package: the child process loads it by its path.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

__all__ = ["ROLES", "WireError", "decode", "encode", "key", "split_key"]

MAGIC = b"MGNW"
ROLES = ("in", "out")
HEADER_LIMIT = 8 * 2**20  # bytes of JSON: the job carries the learner's source (at most 1 MiB)
ARRAY_LIMIT = 100_000  # arrays in one frame
_DTYPE = np.dtype("<f8")
_LENGTH = struct.Struct("<Q")


class WireError(ValueError):
    """A frame that does not follow the format (cut short, too large, or malformed)."""


def key(call: str, role: str, name: str) -> str:
    """``a/out/dx``: the key of one array in a frame."""
    if role not in ROLES or "/" in call or "/" in name:
        raise ValueError(f"key: expected a role in {ROLES} and names without '/', got {call!r}, {role!r}, {name!r}")
    return f"{call}/{role}/{name}"


def split_key(text: str) -> tuple[str, str, str]:
    """(call, role, name) of a key made by :func:`key`; WireError otherwise."""
    parts = text.split("/") if isinstance(text, str) else []
    if len(parts) != 3 or parts[1] not in ROLES or not all(parts):
        raise WireError(f"an array key is malformed: {str(text)[:60]!r}")
    return parts[0], parts[1], parts[2]


def encode(message: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """One frame: ``message`` (plain JSON data) and ``arrays`` (each stored as float64)."""
    stored = {k: np.asarray(v, dtype=_DTYPE, order="C") for k, v in arrays.items()}
    header = json.dumps({"message": message, "arrays": [[k, list(a.shape)] for k, a in stored.items()]})
    head = header.encode("utf-8")
    return b"".join([MAGIC, _LENGTH.pack(len(head)), head, *(a.tobytes() for a in stored.values())])


def decode(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(message, arrays) of one frame; WireError for anything that is not a well-formed frame."""
    header, offset = _header(data)
    arrays: dict[str, np.ndarray] = {}
    for name, shape in _array_list(header):
        count = math.prod(shape)  # a Python int: no overflow, however large the claim
        end = offset + count * _DTYPE.itemsize
        if end > len(data):
            raise WireError(f"the frame is cut short: array {name!r} needs {end - len(data)} more bytes")
        arrays[name] = np.frombuffer(data, dtype=_DTYPE, count=count, offset=offset).reshape(shape).astype(np.float64)
        offset = end
    if offset != len(data):
        raise WireError(f"the frame has {len(data) - offset} bytes after its last array")
    message = header["message"]
    if not isinstance(message, dict):
        raise WireError("the frame's message is not a JSON object")
    return message, arrays


def _header(data: bytes) -> tuple[dict[str, Any], int]:
    start = len(MAGIC) + _LENGTH.size
    if not isinstance(data, (bytes, bytearray)) or len(data) < start or not data.startswith(MAGIC):
        raise WireError("the data is not a frame (no header)")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    if length > min(HEADER_LIMIT, len(data) - start):
        raise WireError(f"the frame's header claims {length} bytes, more than it has or than a header may hold")
    try:
        header = json.loads(bytes(data[start : start + length]).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise WireError(f"the frame's header is not JSON: {str(exc)[:80]}") from None
    if not isinstance(header, dict) or set(header) != {"message", "arrays"}:
        raise WireError("the frame's header is not {message, arrays}")
    return header, start + length


def _array_list(header: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    entries = header["arrays"]
    if not isinstance(entries, list) or len(entries) > ARRAY_LIMIT:
        raise WireError("the frame's array list is not a list of at most 100000 entries")
    out = []
    for entry in entries:
        ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], list)
        shape = entry[1] if ok else []
        if not ok or len(shape) > 32 or not all(type(s) is int and 0 <= s < 2**31 for s in shape):
            raise WireError(f"an entry of the frame's array list is malformed: {str(entry)[:60]}")
        out.append((entry[0], tuple(shape)))
    if len({name for name, _ in out}) != len(out):
        raise WireError("the frame names an array twice")
    return out
