"""The gettext catalogs stay in step with the code: extraction, update, compilation, and every kind of drift.

The drift tests work on a small package written to a temporary folder, so that
they can add, change and remove marked strings without touching the real catalogs.
"""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("babel", reason="the catalog tools need Babel (the test extra installs it)")

from babel.messages.pofile import write_po

from microgradnorm.i18n import DOMAIN
from microgradnorm.i18n_tools import catalogs

REPO = Path(__file__).resolve().parents[1]
ZH = "zh-CN"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A package with two marked strings (one plural), its catalogs made by refresh, one string translated
    (made once: each pybabel command is a fresh Python)."""
    root = tmp_path_factory.mktemp("built")
    package = root / "pkg"
    package.mkdir()
    write_module(package, ['_("hello")', 'ngettext("{n} file", "{n} files", n)'])
    catalogs.refresh(package, root / "locale")
    translate(root / "locale", "hello", "你好")
    catalogs.compile_catalogs(root / "locale")
    return root


@pytest.fixture
def project(built, tmp_path):
    """A copy of ``built`` for one test to change: (package folder, locale folder)."""
    shutil.copytree(built, tmp_path, dirs_exist_ok=True)
    return tmp_path / "pkg", tmp_path / "locale"


def write_module(package: Path, calls: list[str]) -> None:
    body = "\n".join(f"    {call}" for call in calls)
    (package / "mod.py").write_text(
        f"from microgradnorm.i18n import _, ngettext\n\n\ndef f(n):\n{body}\n", encoding="utf-8"
    )


def translate(locale: Path, msgid: str, msgstr: str, fuzzy: bool = False) -> None:
    path = catalogs.po_path(ZH, locale)
    po = catalogs.read_po(path, ZH)
    message = po.get(msgid)
    message.string = (msgstr,) if message.pluralizable else msgstr  # Chinese has one plural form
    if fuzzy:
        message.flags.add("fuzzy")
    with path.open("wb") as f:
        write_po(f, po)


def lookup(locale: Path, msgid: str) -> str:
    with catalogs.mo_path(ZH, locale).open("rb") as f:
        return gettext.GNUTranslations(f).gettext(msgid)


def test_refresh_makes_a_template_a_catalog_and_a_compiled_catalog(project):
    package, locale = project
    assert catalogs.problems(package, locale) == []
    assert lookup(locale, "hello") == "你好"
    assert lookup(locale, "{n} file") == "{n} file"  # not translated yet: English
    assert catalogs.untranslated(ZH, locale) == ["'{n} file'"]
    assert catalogs.refresh(package, locale) == []  # nothing changed: nothing rewritten


def test_extraction_takes_the_markers_of_i18n_their_comments_and_no_exercise_solution(tmp_path):
    package = tmp_path / "pkg"
    (package / "exercises" / "solutions").mkdir(parents=True)
    calls = ["# Translators: {n} counts files", '_("noted {n}")', 'N_("marked only")', 'lazy_gettext("lazy")']
    calls += ['ngettext("{n} dog", "{n} dogs", n)', 'pgettext("menu", "open")', 'gettext("Babel\'s default keyword")']
    write_module(package, calls)
    (package / "exercises" / "solutions" / "01_x.py").write_text('_("a solution: translated as a file")\n')
    template = catalogs.extract(package)
    found = {(m.context, m.id) for m in template if m.id}
    want = {(None, "noted {n}"), (None, "marked only"), (None, "lazy"), (None, ("{n} dog", "{n} dogs"))}
    assert found == want | {("menu", "open")}
    assert template.get("noted {n}").auto_comments == ["{n} counts files"]
    assert {loc for m in template if m.id for loc in m.locations} == {("pkg/mod.py", None)}


def test_moving_code_or_a_new_day_rewrites_nothing(project):
    """Locations carry no line numbers, and the template keeps its creation date while its strings stay."""
    package, locale = project
    pot = catalogs.pot_path(locale)
    dated = re.sub(r"POT-Creation-Date: [^\\]*", "POT-Creation-Date: 2000-01-01 00:00+0000", pot.read_text())
    pot.write_text(dated)
    (package / "mod.py").write_text("\n\n\n" + (package / "mod.py").read_text())  # every marked call 3 lines down
    assert catalogs.refresh(package, locale) == []
    assert pot.read_text() == dated and "#: pkg/mod.py\n" in dated


def test_a_failing_pybabel_command_is_one_line_naming_what_failed_and_changes_nothing(project):
    package, locale = project
    before = {path: path.read_bytes() for path in locale.rglob("*") if path.is_file()}
    shutil.rmtree(package)
    with pytest.raises(ValueError, match=r"^pybabel failed: .*Input path: pkg does not exist$"):
        catalogs.refresh(package, locale)
    assert {path: path.read_bytes() for path in locale.rglob("*") if path.is_file()} == before


def test_a_newly_marked_string_is_drift_until_refresh(project):
    package, locale = project
    write_module(package, ['_("hello")', 'ngettext("{n} file", "{n} files", n)', '_("new words")'])
    found = catalogs.problems(package, locale)
    assert any("'new words' is marked in pkg/mod.py but missing from the template" in p for p in found)
    assert any("microgradnorm.po" in p and "'new words'" in p and "missing from the catalog" in p for p in found)
    catalogs.refresh(package, locale)
    assert catalogs.problems(package, locale) == []
    assert lookup(locale, "hello") == "你好"  # the translation survived the update


def test_a_string_no_longer_marked_is_drift_until_refresh(project):
    package, locale = project
    write_module(package, ['_("hello")'])
    found = catalogs.problems(package, locale)
    assert any("'{n} file' is in the template but no longer marked in the code" in p for p in found)
    catalogs.refresh(package, locale)
    assert catalogs.problems(package, locale) == []


def test_a_mo_older_than_its_po_is_drift_until_refresh(project):
    package, locale = project
    translate(locale, "{n} file", "{n} 个文件")
    found = catalogs.problems(package, locale)
    assert len(found) == 1 and "microgradnorm.mo: out of date with its .po" in found[0]
    catalogs.refresh(package, locale)
    assert catalogs.problems(package, locale) == [] and lookup(locale, "hello") == "你好"


def test_a_template_with_an_old_location_or_comment_is_drift_until_refresh(project):
    """Same strings, but the template still names where one used to be marked (what a merge of two branches
    can leave): check says so, and refresh writes it anew."""
    package, locale = project
    pot = catalogs.pot_path(locale)
    pot.write_text(pot.read_text().replace("#: pkg/mod.py\n", "#: pkg/old.py\n", 1))
    (found,) = catalogs.problems(package, locale)
    assert str(pot) in found and "refresh" in found
    catalogs.refresh(package, locale)
    assert catalogs.problems(package, locale) == []


@pytest.mark.parametrize("content", [None, b"garbage"])
def test_a_missing_or_unreadable_mo_is_reported(project, content):
    package, locale = project
    mo = catalogs.mo_path(ZH, locale)
    if content is None:
        mo.unlink()
    else:
        mo.write_bytes(content)
    (found,) = catalogs.problems(package, locale)
    assert str(mo) in found and "refresh" in found


def test_a_fuzzy_translation_is_not_compiled(project):
    package, locale = project
    translate(locale, "hello", "你好？", fuzzy=True)
    catalogs.compile_catalogs(locale)
    assert catalogs.problems(package, locale) == [] and lookup(locale, "hello") == "hello"


@pytest.mark.parametrize("bad", ["{m} 个文件", "{n!r} 个文件", "文件", "{n} 个{文件"])
def test_a_translation_that_changes_the_placeholders_is_reported(project, bad):
    package, locale = project
    translate(locale, "{n} file", bad)
    catalogs.compile_catalogs(locale)
    (found,) = catalogs.problems(package, locale)
    assert "the translation of '{n} file' has the placeholders" in found and "the English has ['{n}']" in found


def test_placeholders_may_move_but_not_change():
    assert catalogs.placeholders("{a} and {b!r:>4}") == catalogs.placeholders("{b!r:>4}，然后 {a}")
    assert catalogs.placeholders("%(x)s of %d") == ["%(x)s", "%d"]
    assert catalogs.placeholders("{a}") != catalogs.placeholders("{a!r}")


def test_the_check_command_passes_on_the_repository(capsys):
    """Every drift at once: the shipped catalogs against the code, the glossary, and the lesson, page and exercise
    translations against their English (each also tested on its own, on copies made to drift)."""
    from microgradnorm.i18n_tools.__main__ import main

    code, out = main(["check"]), capsys.readouterr().out
    assert code == 0 and out.strip().endswith("in step"), out


def test_the_tool_command_checks_and_lists():
    def tool(*argv: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "microgradnorm.i18n_tools", *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    out = tool("untranslated")
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1].endswith("shown in English for zh-CN")
    bad = tool("untranslated", "--lang", "fr")
    assert bad.returncode == 2 and "argument --lang: expected en or zh-CN, got 'fr'" in bad.stderr


def test_a_clean_clone_builds_a_wheel_that_ships_the_compiled_catalogs(tmp_path):
    """What `pip install .` of a fresh clone installs: the committed .mo files, readable by gettext."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: there is no clean clone to build")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    shipped = sorted(p.relative_to(clone).as_posix() for p in (clone / "microgradnorm" / "locale").rglob("*.mo"))
    assert shipped, "no compiled catalog is committed"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(clone), "--no-deps", "-q", "-w", str(tmp_path / "dist")],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("microgradnorm-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        missing = [name for name in shipped if name not in archive.namelist()]
        assert not missing, f"compiled catalogs missing from the wheel: {missing}"
        with archive.open(f"microgradnorm/locale/zh_CN/LC_MESSAGES/{DOMAIN}.mo") as f:
            translations = gettext.GNUTranslations(f)
    assert translations.gettext("the state directory") != "the state directory"
