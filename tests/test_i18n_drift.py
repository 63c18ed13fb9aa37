"""The translation drift both the lessons and the exercises keep: the hash, and a marked file's state."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from microgradnorm.i18n.drift import HASH_LENGTH, KEY, MISSING, digest, marked_file, normalized

MARK = re.compile(rf"\A# {KEY}: (\S+) ([0-9a-f]{{{HASH_LENGTH}}})\n")


def test_the_digest_is_sha256_of_text_as_it_is_and_of_anything_else_as_compact_json():
    text = "步骤 1\nstep"
    assert digest(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]
    payload = ["page", "步骤"]
    compact = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert digest(payload) == hashlib.sha256(compact).hexdigest()[:HASH_LENGTH]
    assert digest("a") != digest(["a"])


def test_normalized_text_drops_trailing_spaces_and_blank_end_lines_only():
    assert normalized("\n\na  \n\n b\t\n\n") == "a\n\n b"  # (and leading spaces of the first line)
    assert digest(normalized("a \nb\n")) == digest(normalized("\na\nb  "))


@pytest.fixture
def english_and_translation(tmp_path):
    english = tmp_path / "01_x.py"
    english.write_text("print('hi')\n", encoding="utf-8")
    return english, tmp_path / "zh-CN" / english.name


def _state(english, translation, now="0123456789ab"):
    return marked_file(translation, MARK, english.name, now, f"# {KEY}: {english.name} <hash>", "run X")


@pytest.mark.parametrize(
    ("first_line", "state", "problem"),
    [
        (None, MISSING, None),
        ("", "mismatched", ":1: expected a first line '# english: 01_x.py <hash>' (run X)"),
        ("# english: 02_y.py 0123456789ab\n", "mismatched", ":1: its 'english:' mark names '02_y.py'"),
        ("# english: 01_x.py ba9876543210\n", "stale", ": 01_x.py changed in the English since it was translated"),
        ("# english: 01_x.py 0123456789ab\n", "translated", None),
    ],
)
def test_a_marked_file_is_missing_mismatched_stale_or_translated(english_and_translation, first_line, state, problem):
    english, translation = english_and_translation
    if first_line is not None:
        translation.parent.mkdir()
        translation.write_text(first_line + "print('你好')\n", encoding="utf-8")
    got, text, problems = _state(english, translation)
    assert got == state
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(f"{translation}{problem}"), problems
    if state in ("stale", "translated"):
        assert text == "print('你好')\n"  # the mark is not part of the text


def test_an_unreadable_translation_is_mismatched_not_an_error(english_and_translation):
    english, translation = english_and_translation
    translation.parent.mkdir()
    translation.write_bytes(b"\xff\xfe not utf-8")
    state, text, problems = _state(english, translation)
    assert (state, text) == ("mismatched", "") and "could not be read" in problems[0]
