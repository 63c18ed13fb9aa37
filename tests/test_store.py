"""State files: atomic writes that keep permissions, and corrupt files set aside, never dropped."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from microgradnorm import store
from tests.helpers import refuses


def test_state_dir_follows_the_environment_and_without_it_is_where_platformdirs_puts_state(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "home"))
    assert store.state_dir() == tmp_path / "home"
    assert (tmp_path / "home").is_dir()
    monkeypatch.delenv("MICROGRADNORM_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert store.state_dir() == tmp_path / "xdg" / "microgradnorm"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = Path(platformdirs.user_state_dir("microgradnorm", appauthor=False))
    assert store.state_dir() == expected and expected.is_dir()
    assert str(expected).startswith(str(tmp_path))  # under the user's home, wherever the system keeps state


def test_json_round_trip_and_default(tmp_path):
    path = tmp_path / "progress.json"
    assert store.load_json(path, {"fresh": True}) == {"fresh": True}
    store.save_json(path, {"lesson": 3, "step": 2})
    assert store.load_json(path, None) == {"lesson": 3, "step": 2}


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    store.save_json(path, {"step": 1})

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process is stopped between writing and renaming

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.save_json(path, {"step": 2})
    monkeypatch.undo()
    assert store.load_json(path, None) == {"step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]


@pytest.mark.parametrize(
    "raw",
    [b'{"lesson": 3,', b'\xff\xfe{"lessons": {}}', '{"lessons": {}}'.encode("utf-16")],
    ids=["broken-json", "not-utf8", "utf16"],
)
def test_a_corrupt_file_is_set_aside_and_reported(tmp_path, raw):
    """Broken JSON, and (issue 27, item 3) a file that is not UTF-8: an editor that saves UTF-16 must not block
    every command with a codec error."""
    path = tmp_path / "lessons.json"
    path.write_bytes(raw)
    error = refuses(lambda: store.load_json(path, {}), store.CorruptStateError, ["set aside", str(path)])
    assert not path.exists() and error.moved_to.read_bytes() == raw and error.moved_to.name in str(error)


def test_two_set_asides_in_one_second_keep_both_files(tmp_path, monkeypatch):
    """Issue 27, item 13: the second corrupt file gets its own name instead of replacing the first."""
    monkeypatch.setattr(store.time, "strftime", lambda fmt, *a: "20261201-235959")
    path = tmp_path / "lessons.json"
    moved = []
    for text in ("{broken one", "{broken two", "{broken three"):
        path.write_text(text, encoding="utf-8")
        moved.append(refuses(lambda: store.load_json(path, {}), store.CorruptStateError, ()).moved_to)
    assert len(set(moved)) == 3
    assert [m.read_text(encoding="utf-8") for m in moved] == ["{broken one", "{broken two", "{broken three"]
    assert moved[0].name == "lessons.json.corrupt-20261201-235959" and moved[1].name.endswith("-235959-2")


def test_a_progress_file_of_the_wrong_shape_is_set_aside_without_replacing_an_earlier_one(tmp_path, monkeypatch):
    from microgradnorm.lessons.progress import ProgressStore

    monkeypatch.setattr(store.time, "strftime", lambda fmt, *a: "20261201-235959")
    path = tmp_path / "lessons.json"
    for text in ("[1]", "[2]"):
        path.write_text(text, encoding="utf-8")
        progress = ProgressStore(path)
        assert progress.load() == {} and progress.warnings
    assert sorted(p.read_text() for p in tmp_path.glob("lessons.json.corrupt-*")) == ["[1]", "[2]"]


def test_the_probe_names_a_folder_that_refuses_new_files(read_only_state):
    words = ["cannot write in the state directory", str(read_only_state), "Operation not permitted"]
    refuses(lambda: store.probe_writable(read_only_state), store.StateDirError, words)
    assert list(read_only_state.iterdir()) == []


def test_new_files_get_ordinary_permissions_and_replaced_files_keep_theirs(tmp_path):
    old_umask = os.umask(0o022)
    try:
        new = store.atomic_write_text(tmp_path / "new.py", "x = 1\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        mine = tmp_path / "mine.py"
        mine.write_text("old\n")
        mine.chmod(0o600)
        store.atomic_write_text(mine, "new\n")
        assert stat.S_IMODE(mine.stat().st_mode) == 0o600 and mine.read_text() == "new\n"
    finally:
        os.umask(old_umask)


@pytest.mark.parametrize("variable", ["MICROGRADNORM_HOME", "XDG_STATE_HOME"])
def test_a_state_dir_that_is_a_file_names_the_variable_and_the_path(tmp_path, monkeypatch, variable):
    monkeypatch.delenv("MICROGRADNORM_HOME", raising=False)
    taken = tmp_path / "a-file"
    taken.write_text("mine")
    monkeypatch.setenv(variable, str(taken))
    error = refuses(store.state_dir, store.StateDirError, [str(taken)])
    assert str(error).startswith(f"{variable}: expected a directory")
    assert isinstance(error, OSError) and taken.read_text() == "mine"


@pytest.mark.parametrize("fail", ["mkstemp", "replace"])
def test_an_os_error_names_the_file_being_written_not_the_temporary(tmp_path, monkeypatch, fail):
    import tempfile

    path = tmp_path / "graph.svg"
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if fail == "mkstemp":
            raise FileNotFoundError(2, "No such file or directory", f"{dir}/.graph.svg.abc123.tmp")
        return real_mkstemp(*args, dir=dir, **kwargs)

    def replace(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    if fail == "replace":
        monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError) as info:
        store.atomic_write_bytes(path, b"data")
    monkeypatch.undo()
    assert info.value.filename == str(path) and ".tmp" not in str(info.value)
    assert info.value.strerror in ("No such file or directory", "Permission denied")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
