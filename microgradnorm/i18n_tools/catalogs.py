"""The gettext catalogs: extract the marked strings, update each language's ``.po``, compile the ``.mo``, with
Babel's own commands (``pybabel extract``, ``update``, ``compile``); and check that catalogs and code agree.

A developer tool (it needs Babel: ``pip install babel``, or the ``test`` extra),
run from a source checkout as ``python -m microgradnorm.i18n_tools refresh``; the package
itself reads only the compiled ``.mo`` files, with the standard library's gettext.

Files, all under ``microgradnorm/locale/``::

    microgradnorm.pot                        every marked string (generated: never edit it)
    zh_CN/LC_MESSAGES/microgradnorm.po       the translations (edited by translators)
    zh_CN/LC_MESSAGES/microgradnorm.mo       compiled from the .po (generated, committed, shipped)

What is extracted is set by :data:`EXTRACT` (the marker functions of :mod:`microgradnorm.i18n` and no other
keyword, ``# Translators:`` comments, locations without line numbers so that moving code does not churn
the files) and by the mapping file ``babel.cfg`` beside this module (which files; the exercise solutions
are skipped). The compiled ``.mo`` is committed, so that ``pip install .`` of a clean clone ships
it without Babel at build time; :func:`problems` (run by the tests) fails when it
is out of date with its ``.po``, when a string marked in the code is missing from
the ``.pot`` or a ``.po``, and when a translation drops or renames a placeholder.
"""

from __future__ import annotations

import gettext
import importlib.util
import json
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from microgradnorm import __version__
from microgradnorm.i18n import DOMAIN, ENGLISH, LANGUAGES, LOCALE_DIR, catalog_dir_name

if TYPE_CHECKING:
    from babel.messages.catalog import Catalog

__all__ = ["EXTRACT", "compile_catalogs", "extract", "mo_path", "po_path", "pot_path", "problems", "refresh"]

PACKAGE_DIR = LOCALE_DIR.parent
MAPPING = Path(__file__).with_name("babel.cfg")
WIDTH = "--width=100"
# pybabel extract's options: the marker functions of microgradnorm.i18n as keywords (Babel's defaults off,
# so that a stray gettext() call elsewhere is not picked up), translators' comments, file-only locations
EXTRACT = (
    f"--mapping-file={MAPPING}",
    "--no-default-keywords",
    *(f"--keyword={spec}" for spec in ("_", "N_", "lazy_gettext", "ngettext:1,2", "pgettext:1c,2")),
    "--add-comments=Translators:",
    "--strip-comment-tags",
    "--add-location=file",
    WIDTH,
    "--project=microgradnorm",
    f"--version={__version__}",
    "--copyright-holder=microgradnorm maintainers",
    "--msgid-bugs-address=the microgradnorm issue tracker",
    "--header-comment=# Messages of microgradnorm (see docs/translating.md).\n#",
)
_CREATION_DATE = re.compile(rb'^"POT-Creation-Date: .*\\n"\n', re.MULTILINE)
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")
_NEED_BABEL = "the catalog tools need Babel: pip install babel (or pip install -e '.[test]')"


def pot_path(locale_dir: Path = LOCALE_DIR) -> Path:
    return locale_dir / f"{DOMAIN}.pot"


def po_path(language: str, locale_dir: Path = LOCALE_DIR) -> Path:
    return locale_dir / catalog_dir_name(language) / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(language: str, locale_dir: Path = LOCALE_DIR) -> Path:
    return po_path(language, locale_dir).with_suffix(".mo")


def translated_languages() -> tuple[str, ...]:
    return tuple(lang for lang in LANGUAGES if lang != ENGLISH)


def read_po(path: Path, language: str | None = None) -> Catalog:
    if importlib.util.find_spec("babel") is None:
        raise SystemExit(_NEED_BABEL)
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        return read_po(f, locale=catalog_dir_name(language) if language else None, abort_invalid=True)


# ---- extraction, update, compilation: pybabel's ------------------------------------------------------------


# what the pybabel script does for each command, in one fresh Python for a batch of them
_BATCH = """import json, sys
from babel.messages.frontend import CommandLineInterface
for args in json.loads(sys.argv[1]):
    CommandLineInterface().run(["pybabel", "--quiet", *args])
"""


def _pybabel(*commands: tuple[str, ...], cwd: Path | None = None) -> None:
    """Run ``pybabel`` commands in order (``cwd`` names the extracted files: ``pkg/mod.py``); with
    ``BABEL_PYPROJECT_TOML=none`` only these arguments count, not a ``[tool.babel]`` table where it runs."""
    if importlib.util.find_spec("babel") is None:
        raise SystemExit(_NEED_BABEL)
    env = {**os.environ, "BABEL_PYPROJECT_TOML": "none"}
    batch = [sys.executable, "-c", _BATCH, json.dumps(commands)]
    done = subprocess.run(batch, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError(f"pybabel failed: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")


def _extract(pot: Path, package_dir: Path) -> tuple[str, ...]:
    return ("extract", *EXTRACT, f"--output-file={pot}", package_dir.name)


def extract(package_dir: Path = PACKAGE_DIR) -> Catalog:
    """Every string marked in the package's Python code, as a template catalog."""
    with tempfile.TemporaryDirectory() as tmp:
        _pybabel(_extract(Path(tmp) / f"{DOMAIN}.pot", package_dir), cwd=package_dir.parent)
        return read_po(Path(tmp) / f"{DOMAIN}.pot")


def _catalog(language: str, locale_dir: Path) -> tuple[str, ...]:
    """Which .po (and .mo) a pybabel update or compile works on (``-d`` is both's base directory)."""
    return ("-d", str(locale_dir), "-D", DOMAIN, "-l", catalog_dir_name(language))


def compile_catalogs(locale_dir: Path = LOCALE_DIR) -> None:
    """pybabel compile each ``.po`` to its ``.mo`` (translated, non-fuzzy entries only)."""
    languages = [lang for lang in translated_languages() if po_path(lang, locale_dir).exists()]
    _pybabel(*(("compile", *_catalog(lang, locale_dir)) for lang in languages))


def refresh(package_dir: Path = PACKAGE_DIR, locale_dir: Path = LOCALE_DIR) -> list[Path]:
    """Extract, update and compile: what to run after marking strings or translating. Returns the files whose
    content changed (pybabel rewrites the .po and .mo each time, with the same bytes when nothing changed).

    update: new strings added (untranslated, or fuzzy when close to an old one), strings gone from the code
    kept as obsolete ``#~`` entries, the .po's dates left as they are; a missing .po is created first.
    """
    before = _contents(locale_dir)
    pot = pot_path(locale_dir)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / pot.name
        update = ("-i", str(fresh), "--init-missing", "--ignore-pot-creation-date", WIDTH)
        commands = [("update", *_catalog(lang, locale_dir), *update) for lang in translated_languages()]
        commands += [("compile", *_catalog(lang, locale_dir)) for lang in translated_languages()]
        _pybabel(_extract(fresh, package_dir), *commands, cwd=package_dir.parent)
        # Written by hand because pybabel cannot do it: extract stamps the current time as POT-Creation-Date and
        # has no option to leave it out short of --omit-header, which drops the whole header and the charset
        # with it (msgfmt and msgcat refuse a non-ASCII file without one): keep the old .pot if that is all.
        if not pot.exists() or not _same_but_date(pot, fresh):
            pot.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fresh, pot)
    return sorted(path for path, data in _contents(locale_dir).items() if before.get(path) != data)


def _same_but_date(pot: Path, fresh: Path) -> bool:
    """The two templates say the same, their POT-Creation-Date aside."""
    return _CREATION_DATE.sub(b"", pot.read_bytes()) == _CREATION_DATE.sub(b"", fresh.read_bytes())


def _contents(locale_dir: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in locale_dir.rglob("*") if path.is_file()}


# ---- checks ----------------------------------------------------------------------------------------------


def _key(message: Any) -> tuple[str | None, str]:
    msgid = message.id[0] if isinstance(message.id, tuple) else message.id
    return message.context, msgid


def _keys(catalog: Catalog) -> dict[tuple[str | None, str], Any]:
    return {_key(m): m for m in catalog if m.id}


def _show(key: tuple[str | None, str]) -> str:
    context, msgid = key
    return f"{msgid!r}" + (f" (context {context!r})" if context else "")


def _drift(expected: Catalog, actual: Catalog, what: str, actual_name: str) -> Iterator[str]:
    want, have = _keys(expected), _keys(actual)
    for key in want.keys() - have.keys():
        where = ", ".join(sorted({loc for loc, _line in want[key].locations})) or "the code"
        yield f"{actual_name}: {_show(key)} is marked in {where} but missing from the {what}"
    for key in have.keys() - want.keys():
        yield f"{actual_name}: {_show(key)} is in the {what} but no longer marked in the code"
    for key in want.keys() & have.keys():
        if isinstance(want[key].id, tuple) != isinstance(have[key].id, tuple):
            yield f"{actual_name}: {_show(key)} is plural in one of the code and the {what} only"


def placeholders(text: str) -> list[str]:
    """The ``{name!r:>4}`` fields and ``%(name)s`` specs of ``text``, sorted (their order may change)."""
    found = _PERCENT.findall(text)
    try:
        for _literal, field, spec, conversion in string.Formatter().parse(text):
            if field is not None:
                found.append(f"{{{field}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}")
    except ValueError:
        found.append("<unbalanced braces>")
    return sorted(found)


def _placeholder_problems(po: Catalog, name: str) -> Iterator[str]:
    for message in po:
        if not message.id or not message.string or message.fuzzy:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        want = placeholders(ids[-1])
        for translation in _strings(message):
            if translation and placeholders(translation) != want:
                yield (
                    f"{name}: the translation of {ids[0]!r} has the placeholders {placeholders(translation)}, "
                    f"the English has {want}"
                )


def _mo_entries(mo: Path) -> dict[Any, str]:
    """What gettext finds in a compiled catalog."""
    with mo.open("rb") as f:
        return dict(gettext.GNUTranslations(f)._catalog)


def _mo_problems(mo: Path, fresh: Path, po: Path) -> Iterator[str]:
    """The committed ``mo`` against ``fresh``, what pybabel compiles from ``po`` now."""
    if not mo.exists():
        yield f"{mo}: missing; run python -m microgradnorm.i18n_tools refresh"
        return
    try:
        have = _mo_entries(mo)
    except Exception as exc:  # any unreadable .mo is a finding, not a crash of the check
        yield f"{mo}: not a readable .mo file ({exc}); run python -m microgradnorm.i18n_tools refresh"
        return
    if not fresh.exists():
        yield f"{po}: pybabel compile makes no .mo of it (it skips a catalog whose header is marked fuzzy)"
        return
    want = _mo_entries(fresh)
    stale = sorted(repr(k) for k in want.keys() | have.keys() if k != "" and want.get(k) != have.get(k))
    if stale:
        yield (
            f"{mo}: out of date with its .po ({len(stale)} entries differ, e.g. {stale[0]}); "
            "run python -m microgradnorm.i18n_tools refresh"
        )


def problems(package_dir: Path = PACKAGE_DIR, locale_dir: Path = LOCALE_DIR) -> list[str]:
    """Everything that makes the catalogs disagree with the code or with each other; empty when in step."""
    languages = [lang for lang in translated_languages() if po_path(lang, locale_dir).exists()]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        compiles = [
            (
                "compile",
                "-i",
                str(po_path(lang, locale_dir)),
                "-o",
                str(fresh / f"{lang}.mo"),
                "-l",
                catalog_dir_name(lang),
            )
            for lang in languages
        ]
        _pybabel(_extract(fresh / f"{DOMAIN}.pot", package_dir), *compiles, cwd=package_dir.parent)
        template = read_po(fresh / f"{DOMAIN}.pot")
        pot = pot_path(locale_dir)
        if not pot.exists():
            return [f"{pot}: missing; run python -m microgradnorm.i18n_tools refresh"]
        found = list(_drift(template, read_po(pot), "template", str(pot)))
        if not found and not _same_but_date(pot, fresh / pot.name):
            found.append(
                f"{pot}: out of date (a location or a translators' comment);"
                " run python -m microgradnorm.i18n_tools refresh"
            )
        for language in translated_languages():
            path = po_path(language, locale_dir)
            if language not in languages:
                found.append(f"{path}: missing; run python -m microgradnorm.i18n_tools refresh")
                continue
            po = read_po(path, language)
            found += _drift(template, po, "catalog", str(path))
            found += _placeholder_problems(po, str(path))
            found += _mo_problems(mo_path(language, locale_dir), fresh / f"{language}.mo", path)
    return found


def untranslated(language: str, locale_dir: Path = LOCALE_DIR) -> list[str]:
    """The strings of ``language``'s catalog shown in English for now (empty or fuzzy): allowed, but listed."""
    po = read_po(po_path(language, locale_dir), language)
    return [_show(_key(m)) for m in po if m.id and (not m.string or m.fuzzy or not all(_strings(m)))]


def _strings(message: Any) -> Iterable[str]:
    return message.string if isinstance(message.string, tuple) else (message.string,)
