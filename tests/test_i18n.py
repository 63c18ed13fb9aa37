"""Choosing the language, looking strings up, and --lang on the command line."""

from __future__ import annotations

import gettext
import importlib
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from microgradnorm import i18n
from microgradnorm.i18n import LOCALE_VARS, LanguageError, _, lazy_gettext, ngettext, use_language
from tests import helpers

babel = pytest.importorskip("babel", reason="the catalog tests need Babel (the test extra installs it)")
from babel.messages.catalog import Catalog  # noqa: E402
from babel.messages.mofile import write_mo  # noqa: E402

from microgradnorm.i18n_tools import catalogs  # noqa: E402

STATE_DIR_MESSAGE = "the state directory"


@pytest.fixture(autouse=True)
def english_machine(monkeypatch):
    """No language variable set: every test says which ones it wants."""
    for var in (i18n.ENV_VAR, *LOCALE_VARS):
        monkeypatch.delenv(var, raising=False)
    assert i18n.set_language(None) is None, "a previous test left a process-wide language set"


def shipped_translation(msgid: str) -> str:
    """The translation as the .po source says it (read by Babel, not by gettext from the .mo)."""
    po = catalogs.read_po(catalogs.po_path(i18n.SIMPLIFIED_CHINESE), i18n.SIMPLIFIED_CHINESE)
    return po.get(msgid).string


def make_catalog(tmp_path, entries):
    """A zh_CN catalog under tmp_path with ``entries``: (msgid, msgstr, flags)."""
    catalog = Catalog(locale="zh_CN", domain=i18n.DOMAIN, fuzzy=False)
    for msgid, msgstr, flags in entries:
        catalog.add(msgid, msgstr, flags=flags)
    path = tmp_path / "zh_CN" / "LC_MESSAGES" / f"{i18n.DOMAIN}.mo"
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        write_mo(f, catalog)
    return tmp_path


# ---- the values --lang and MICROGRADNORM_LANG take ------------------------------------------------


ENGLISH_SPELLINGS = ("en", "EN", "en-US", "en_GB.UTF-8")
# zh-CN as written, then (issue 27, item 14) the usual spellings of Simplified Chinese
CHINESE_SPELLINGS = ("zh-CN", "zh_CN", " zh-cn ", "zh", "zh-Hans", "zh-Hans-CN", "zh_CN.UTF-8", "zh-SG")


@pytest.mark.parametrize(
    ("given", "expected"), [(g, "en") for g in ENGLISH_SPELLINGS] + [(g, "zh-CN") for g in CHINESE_SPELLINGS]
)
def test_language_values_are_read_forgivingly(given, expected):
    assert i18n.parse_language(given) == expected


@pytest.mark.parametrize("given", ["fr", "zh-TW", "zh-Hant", "zh_HK.UTF-8", "", "english", "C", "enx"])
def test_an_unknown_language_names_the_argument_the_expected_and_the_given(given):
    refused = helpers.refuses(lambda: i18n.parse_language(given, source="--lang"), LanguageError, ())
    assert str(refused) == f"--lang: expected en or zh-CN, got {given!r}"


# ---- the locale, read as gettext reads it -------------------------------------------------------------


LOCALES = [
    ({"LANG": "zh_CN.UTF-8"}, "zh-CN"),
    ({"LANG": "zh_CN.GB2312"}, "zh-CN"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "C.UTF-8"}, "en"),
    ({"LANG": "fr_FR.UTF-8"}, "en"),
    ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh-CN"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh-CN"),
    ({"LANGUAGE": "fr:zh_CN", "LANG": "en_US.UTF-8"}, "zh-CN"),
    ({"LANGUAGE": "fr", "LANG": "zh_CN.UTF-8"}, "en"),  # the first variable set decides, as in gettext
    ({"LANGUAGE": "", "LANG": "zh_CN.UTF-8"}, "zh-CN"),  # an empty variable is skipped
    ({"LANG": "zh_TW.UTF-8"}, "en"),  # Traditional Chinese: English, as gettext (decided: see i18n's docstring)
    ({"LANGUAGE": "zh_TW:zh_CN"}, "zh-CN"),  # ... unless the learner lists Simplified Chinese after it
]
# beyond what gettext's own folder lookup matches: the script or region says Simplified or Traditional
SCRIPTS = [({"LANG": name}, "zh-CN") for name in ("zh_SG.UTF-8", "zh", "zh_Hans_CN", "zh-Hans")]
SCRIPTS += [({"LANG": name}, "en") for name in ("zh_HK.UTF-8", "zh_MO", "zh_Hant_TW")]


@pytest.mark.parametrize(("environ", "expected"), LOCALES + SCRIPTS)
def test_the_locale_picks_the_language(environ, expected):
    assert i18n.language_from_locale(environ) == expected


@pytest.mark.parametrize(("environ", "expected"), LOCALES)
def test_the_locale_is_read_as_pythons_gettext_reads_it(tmp_path, monkeypatch, environ, expected):
    """The oracle: gettext.find over a folder that has only a zh_CN catalog finds it exactly when we say zh-CN."""
    make_catalog(tmp_path, [])
    for var, value in environ.items():
        monkeypatch.setenv(var, value)
    found = gettext.find(i18n.DOMAIN, str(tmp_path))
    assert (found is not None) == (expected == "zh-CN")


def test_microgradnorm_lang_comes_before_the_locale(monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv(i18n.ENV_VAR, "en")
    assert i18n.current_language() == "en"
    monkeypatch.setenv(i18n.ENV_VAR, "zh-CN")
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert i18n.current_language() == "zh-CN"


def test_a_bad_microgradnorm_lang_is_an_error_only_where_it_can_be_reported(monkeypatch):
    monkeypatch.setenv(i18n.ENV_VAR, "klingon")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert i18n.language_from_environment() == "zh-CN"  # _() must never raise: the locale decides
    with pytest.raises(LanguageError) as info:
        i18n.language_from_environment(strict=True)
    # the message is translated when shown, into the language the locale asks for (working it out meets the
    # bad variable again, and ignores it)
    assert str(info.value) == "MICROGRADNORM_LANG：应为 en 或 zh-CN，实际为 'klingon'"
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert str(info.value) == "MICROGRADNORM_LANG: expected en or zh-CN, got 'klingon'"


# ---- lookups and the fallback to English ----------------------------------------------------------------


def test_a_shipped_translation_is_found_english_stays_english_and_no_translation_falls_back_to_english():
    assert _(STATE_DIR_MESSAGE) == STATE_DIR_MESSAGE
    with use_language("zh-CN"):
        assert _(STATE_DIR_MESSAGE) == shipped_translation(STATE_DIR_MESSAGE) == "状态目录"
        assert _("a sentence no catalog has") == "a sentence no catalog has"


def test_untranslated_and_fuzzy_entries_fall_back_to_english(tmp_path):
    folder = make_catalog(tmp_path, [("done", "完成", ()), ("empty", "", ()), ("guess", "猜的", ("fuzzy",))])
    translations = i18n.load_catalog("zh-CN", folder)
    assert [translations.gettext(m) for m in ("done", "empty", "guess")] == ["完成", "empty", "guess"]


@pytest.mark.parametrize("content", [b"", b"not a catalog at all", b"\xde\x12\x04\x95" + b"\x00" * 3])
def test_a_missing_or_broken_catalog_means_english_not_an_error(tmp_path, content):
    assert i18n.load_catalog("zh-CN", tmp_path).gettext("x") == "x"  # no file at all
    path = tmp_path / "zh_CN" / "LC_MESSAGES" / f"{i18n.DOMAIN}.mo"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert i18n.load_catalog("zh-CN", tmp_path).gettext("x") == "x"


def test_plural_forms_follow_the_language():
    assert [ngettext("{n} step", "{n} steps", n).format(n=n) for n in (1, 2)] == ["1 step", "2 steps"]
    with use_language("zh-CN"):  # Chinese has one form
        assert [ngettext("{n} step", "{n} steps", n).format(n=n) for n in (1, 2)] == ["1 步", "2 步"]
        # no translation: English, still with the right English form
        assert [ngettext("{n} apple", "{n} apples", n).format(n=n) for n in (1, 2)] == ["1 apple", "2 apples"]


def test_a_lazy_constant_is_translated_when_used_not_when_defined():
    constant = lazy_gettext(STATE_DIR_MESSAGE)  # defined while English is current
    with use_language("zh-CN"):
        chinese = shipped_translation(STATE_DIR_MESSAGE)
        assert str(constant) == chinese and f"[{constant}]" == f"[{chinese}]"
        assert constant + "!" == chinese + "!" and "<" + constant == "<" + chinese
        assert constant == chinese and len(constant) == len(chinese) and chinese[0] in constant
        assert _(constant) == chinese
    assert str(constant) == STATE_DIR_MESSAGE and constant.upper() == STATE_DIR_MESSAGE.upper()


def test_a_lazy_constant_renders_in_rich():
    with use_language("zh-CN"):
        shown = helpers.rendered(lazy_gettext(STATE_DIR_MESSAGE), 40)
    assert shown.strip() == shipped_translation(STATE_DIR_MESSAGE)


# ---- state: threads, tasks, tests ----------------------------------------------------------------------------


def test_use_language_is_private_to_a_thread():
    barrier = threading.Barrier(2)
    seen: dict[str, str] = {}

    def reader(language: str) -> None:
        with use_language(language):
            barrier.wait()  # both threads are inside their blocks at once
            seen[language] = _(STATE_DIR_MESSAGE)
            barrier.wait()

    threads = [threading.Thread(target=reader, args=(lang,)) for lang in ("en", "zh-CN")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"en": STATE_DIR_MESSAGE, "zh-CN": shipped_translation(STATE_DIR_MESSAGE)}
    assert i18n.current_language() == "en"


def test_the_cli_language_reaches_threads_and_is_restored_afterwards(monkeypatch):
    seen = []
    with i18n.cli_language(["lesson", "--lang", "zh-CN"]) as language:
        worker = threading.Thread(target=lambda: seen.append(i18n.current_language()))
        worker.start()
        worker.join()
    assert language == "zh-CN" and seen == ["zh-CN"]
    assert i18n.current_language() == "en"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--lang", "zh-CN", "lesson"], "zh-CN"),
        (["lesson", "3", "--lang=zh_CN"], "zh-CN"),
        (["--lang", "zh-CN", "lesson", "--lang", "en"], "en"),  # the last one wins, as in argparse
        (["lesson", "--", "--lang", "zh-CN"], "en"),  # after --, it is not an option
        (["lesson", "--lang", "fr"], "en"),  # left to argparse to report
    ],
)
def test_cli_language_reads_lang_from_the_arguments(argv, expected):
    with i18n.cli_language(argv) as language:
        assert language == expected == i18n.current_language()


def test_lang_on_the_command_line_beats_the_environment(monkeypatch):
    monkeypatch.setenv(i18n.ENV_VAR, "zh-CN")
    with i18n.cli_language(["--lang", "en"]) as language:
        assert language == "en"
    with i18n.cli_language([]) as language:
        assert language == "zh-CN"


def test_a_child_process_inherits_the_language():
    with use_language("zh-CN"):
        assert i18n.child_environment({"PATH": "/bin"}) == {"PATH": "/bin", i18n.ENV_VAR: "zh-CN"}


# ---- end to end: the sample module (store.py's errors) through the CLI ------------------------------------


@pytest.fixture
def unusable_home(monkeypatch):
    """A file where the state folder should be, at a short path: the warning prints it whole in one table cell
    (tmp_path grows with pytest's worker folders and would be cut with an ellipsis)."""
    with tempfile.TemporaryDirectory(prefix="mg", dir="/tmp") as short:
        taken = Path(short) / "f"
        taken.write_text("mine")
        monkeypatch.setenv("MICROGRADNORM_HOME", str(taken))
        yield taken


def run_cli(argv, capsys):
    code, out, err = helpers.run_cli(capsys, *argv)
    assert i18n.set_language(None) is None, "the CLI left its language set"
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "environ", "chinese"),
    [
        (["--lang", "zh-CN", "exercise", "list"], {}, True),
        (["exercise", "list", "--lang", "zh-CN"], {}, True),
        (["exercise", "list"], {"LANG": "zh_CN.UTF-8"}, True),
        (["exercise", "list"], {"MICROGRADNORM_LANG": "zh-CN", "LANG": "en_US.UTF-8"}, True),
        (["exercise", "list", "--lang", "en"], {"LANG": "zh_CN.UTF-8"}, False),
        (["exercise", "list"], {}, False),
    ],
)
def test_a_cli_error_is_in_the_chosen_language(unusable_home, capsys, monkeypatch, argv, environ, chinese):
    for var, value in environ.items():
        monkeypatch.setenv(var, value)
    code, out, err = run_cli(argv, capsys)
    english = "MICROGRADNORM_HOME: expected a directory for progress files"
    translated = shipped_translation(
        "{source}: expected a directory for progress files, got {path!r}, which is not a directory"
    ).format(source="MICROGRADNORM_HOME", path=str(unusable_home))
    # an unusable state folder is a warning (issue 27, item 2): the exercises still run, unsaved
    flat = " ".join(out.split())
    assert code == 0 and err == ""
    assert (" ".join(translated.split()) in flat) if chinese else (english in flat and translated not in flat)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--lang", "fr", "lesson"], "microgradnorm: error: argument --lang: expected en or zh-CN, got 'fr'"),
        (["lesson", "--lang", "fr"], "microgradnorm lesson: error: argument --lang: expected en or zh-CN, got 'fr'"),
        (["exercise", "list", "--lang"], "microgradnorm exercise list: error: argument --lang: expected one argument"),
    ],
)
def test_a_bad_lang_is_one_line_naming_the_argument(capsys, argv, expected):
    code, _, err = run_cli(argv, capsys)  # and the CLI leaves no language set, as run_cli checks
    assert code == 2 and err.startswith(expected) and len(err.splitlines()) == 1


def test_a_bad_microgradnorm_lang_is_one_line_naming_the_variable(capsys, monkeypatch):
    monkeypatch.setenv(i18n.ENV_VAR, "fr")
    code, out, err = run_cli(["lesson"], capsys)
    assert code == 2 and out == ""
    assert err == "microgradnorm: error: MICROGRADNORM_LANG: expected en or zh-CN, got 'fr'\n"


def test_help_is_translated_and_lists_lang(capsys):
    code, out, _ = run_cli(["--lang", "zh-CN", "lesson", "--help"], capsys)
    assert code == 0
    help_text = shipped_translation("language of the text: en or zh-CN (default: $MICROGRADNORM_LANG, then the locale)")
    assert "--lang LANG" in out and help_text[:12] in out


def test_a_real_process_with_a_chinese_locale_speaks_chinese(unusable_home):
    env = {k: v for k, v in os.environ.items() if k not in (i18n.ENV_VAR, *LOCALE_VARS)}
    env.update(LANG="zh_CN.UTF-8", MICROGRADNORM_HOME=str(unusable_home), PYTHONIOENCODING="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "microgradnorm", "exercise", "list"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert "MICROGRADNORM_HOME：" in proc.stdout and "不是目录" in "".join(proc.stdout.split())


@pytest.mark.parametrize("command", ["check", "graph"])
def test_a_lazy_constant_with_fields_is_translated_first_then_filled_in(capsys, command):
    """A command's description states its size limit, a field: filled in after the translation, in --help too
    (which wraps it: compared without the line breaks, and without spaces in Chinese, which wraps anywhere)."""
    module = importlib.import_module(f"microgradnorm.commands.{command}")
    english = str(module.DESCRIPTION)
    assert f"at most {module.SIZE_LIMIT} entries" in english and "{limit}" not in english
    with use_language(i18n.SIMPLIFIED_CHINESE):
        chinese = _(module.DESCRIPTION)
    assert str(module.SIZE_LIMIT) in chinese and "{limit}" not in chinese and chinese != english
    assert " ".join(english.split()) in " ".join(run_cli([command, "--help"], capsys)[1].split())
    assert "".join(chinese.split()) in "".join(run_cli(["--lang", "zh-CN", command, "--help"], capsys)[1].split())
    with pytest.raises(AttributeError):
        module.NO_SUCH_NAME  # noqa: B018 - a module knows only the names it defines
