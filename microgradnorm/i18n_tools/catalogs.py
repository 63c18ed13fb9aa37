"""The gettext catalogs: extract the marked strings, update each language's ``.po``, compile the ``.mo``.

A developer tool (it needs Babel: ``pip install babel``, or the ``test`` extra),
run from a source checkout as ``python -m microgradnorm.i18n_tools refresh``; the package
itself reads only the compiled ``.mo`` files, with the standard library's gettext.

Files, all under ``microgradnorm/locale/``::

    microgradnorm.pot                        every marked string (generated: never edit it)
    zh_CN/LC_MESSAGES/microgradnorm.po       the translations (edited by translators)
    zh_CN/LC_MESSAGES/microgradnorm.mo       compiled from the .po (generated, committed, shipped)

The compiled ``.mo`` is committed, so that ``pip install .`` of a clean clone ships
it without Babel at build time; :func:`problems` (run by the tests) fails when it
is out of date with its ``.po``, when a string marked in the code is missing from
the ``.pot`` or a ``.po``, and when a translation drops or renames a placeholder.
Locations are written without line numbers, so moving code does not churn the files.
"""

from __future__ import annotations

import io
import re
import string
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from microgradnorm.i18n import DOMAIN, ENGLISH, LANGUAGES, LOCALE_DIR, catalog_dir_name

if TYPE_CHECKING:
    from babel.messages.catalog import Catalog

__all__ = [
    "KEYWORDS",
    "compile_catalogs",
    "extract",
    "mo_path",
    "po_path",
    "pot_path",
    "problems",
    "refresh",
    "update_catalogs",
]

PACKAGE_DIR = LOCALE_DIR.parent
# the marker functions of microgradnorm.i18n, as Babel keyword specs
KEYWORDS: dict[str, Any] = {"_": None, "N_": None, "lazy_gettext": None, "ngettext": (1, 2), "pgettext": ((1, "c"), 2)}
# learner files (scaffolds, solutions) are translated as whole files, not through the catalog
EXCLUDED_DIRS = ("exercises/scaffolds", "exercises/solutions")
COMMENT_TAGS = ("Translators:",)
_DATE_HEADER = re.compile(r'^"(POT-Creation-Date|PO-Revision-Date): .*\\n"$', re.MULTILINE)
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")


def pot_path(locale_dir: Path = LOCALE_DIR) -> Path:
    return locale_dir / f"{DOMAIN}.pot"


def po_path(language: str, locale_dir: Path = LOCALE_DIR) -> Path:
    return locale_dir / catalog_dir_name(language) / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(language: str, locale_dir: Path = LOCALE_DIR) -> Path:
    return po_path(language, locale_dir).with_suffix(".mo")


def translated_languages() -> tuple[str, ...]:
    return tuple(lang for lang in LANGUAGES if lang != ENGLISH)


def _babel() -> Any:
    try:
        from babel.messages import catalog, extract, mofile, pofile
    except ImportError:
        raise SystemExit("the catalog tools need Babel: pip install babel (or pip install -e '.[test]')") from None
    return catalog, extract, mofile, pofile


# ---- extraction, update, compilation ---------------------------------------------------------------


def _included(path: str) -> bool:
    return not any(path.replace("\\", "/").startswith(d) for d in EXCLUDED_DIRS)


def extract(package_dir: Path = PACKAGE_DIR) -> Catalog:
    """Every string marked in the package's Python code, as a template catalog."""
    catalog_mod, extract_mod, _mofile, _pofile = _babel()
    from microgradnorm import __version__

    template = catalog_mod.Catalog(fuzzy=False, **_header(__version__))
    found = extract_mod.extract_from_dir(
        package_dir,
        method_map=[("**.py", "python")],
        keywords=KEYWORDS,
        comment_tags=COMMENT_TAGS,
        strip_comment_tags=True,
        directory_filter=lambda d: _included(str(Path(d).relative_to(package_dir))) and "__pycache__" not in d,
    )
    for filename, lineno, message, comments, context in found:
        location = f"{package_dir.name}/{filename}".replace("\\", "/")
        template.add(message, None, [(location, lineno)], auto_comments=comments, context=context)
    return template


def _header(version: str) -> dict[str, Any]:
    return {
        "domain": DOMAIN,
        "project": "microgradnorm",
        "version": version,
        "copyright_holder": "microgradnorm maintainers",
        "msgid_bugs_address": "the microgradnorm issue tracker",
        "header_comment": "# Messages of microgradnorm (see docs/translating.md).\n#",
        "charset": "utf-8",
    }


def _write_if_changed(path: Path, data: bytes, ignore_dates: bool = False) -> bool:
    """Write ``data`` unless the file already says the same (dates aside, for .pot/.po); True if written."""
    if path.exists():
        old = path.read_bytes()
        if ignore_dates:
            same = _DATE_HEADER.sub("", old.decode("utf-8")) == _DATE_HEADER.sub("", data.decode("utf-8"))
        else:
            same = old == data
        if same:
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def _po_bytes(catalog: Catalog) -> bytes:
    _catalog, _extract, _mofile, pofile = _babel()
    buf = io.BytesIO()
    pofile.write_po(buf, catalog, width=100, include_lineno=False, sort_output=False)
    return buf.getvalue()


def _mo_bytes(catalog: Catalog) -> bytes:
    _catalog, _extract, mofile, _pofile = _babel()
    buf = io.BytesIO()
    mofile.write_mo(buf, catalog)
    return buf.getvalue()


def read_po(path: Path, language: str | None = None) -> Catalog:
    _catalog, _extract, _mofile, pofile = _babel()
    with path.open("rb") as f:
        return pofile.read_po(f, locale=catalog_dir_name(language) if language else None, abort_invalid=True)


def write_template(template: Catalog, locale_dir: Path = LOCALE_DIR) -> bool:
    return _write_if_changed(pot_path(locale_dir), _po_bytes(template), ignore_dates=True)


def update_catalogs(template: Catalog, locale_dir: Path = LOCALE_DIR) -> list[Path]:
    """Bring each language's ``.po`` up to the template: new strings added (untranslated, or fuzzy when
    close to an old one), strings gone from the code kept as obsolete ``#~`` entries. Returns the files written."""
    catalog_mod, _extract, _mofile, _pofile = _babel()
    written = []
    for language in translated_languages():
        path = po_path(language, locale_dir)
        if path.exists():
            po = read_po(path, language)
        else:
            from microgradnorm import __version__

            po = catalog_mod.Catalog(locale=catalog_dir_name(language), fuzzy=False, **_header(__version__))
        po.update(template, update_creation_date=False)
        if _write_if_changed(path, _po_bytes(po), ignore_dates=True):
            written.append(path)
    return written


def compile_catalogs(locale_dir: Path = LOCALE_DIR) -> list[Path]:
    """Compile each ``.po`` to its ``.mo`` (translated, non-fuzzy entries only). Returns the files written."""
    written = []
    for language in translated_languages():
        path = po_path(language, locale_dir)
        if path.exists() and _write_if_changed(mo_path(language, locale_dir), _mo_bytes(read_po(path, language))):
            written.append(mo_path(language, locale_dir))
    return written


def refresh(package_dir: Path = PACKAGE_DIR, locale_dir: Path = LOCALE_DIR) -> list[Path]:
    """Extract, update and compile: what to run after marking strings or translating. Returns the files written."""
    template = extract(package_dir)
    written = [pot_path(locale_dir)] if write_template(template, locale_dir) else []
    written += update_catalogs(template, locale_dir)
    written += compile_catalogs(locale_dir)
    return written


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
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        want = placeholders(ids[-1])
        for translation in strings:
            if translation and placeholders(translation) != want:
                yield (
                    f"{name}: the translation of {ids[0]!r} has the placeholders {placeholders(translation)}, "
                    f"the English has {want}"
                )


def _expected_mo(po: Catalog) -> dict[Any, str]:
    """What gettext should find in the .mo compiled from ``po``: translated, non-fuzzy entries."""
    import gettext

    return dict(gettext.GNUTranslations(io.BytesIO(_mo_bytes(po)))._catalog)


def _mo_problems(po: Catalog, mo: Path) -> Iterator[str]:
    import gettext

    if not mo.exists():
        yield f"{mo}: missing; run python -m microgradnorm.i18n_tools refresh"
        return
    try:
        with mo.open("rb") as f:
            have = dict(gettext.GNUTranslations(f)._catalog)
    except Exception as exc:  # any unreadable .mo is a finding, not a crash of the check
        yield f"{mo}: not a readable .mo file ({exc}); run python -m microgradnorm.i18n_tools refresh"
        return
    want = _expected_mo(po)
    stale = sorted(repr(k) for k in want.keys() | have.keys() if k != "" and want.get(k) != have.get(k))
    if stale:
        yield (
            f"{mo}: out of date with its .po ({len(stale)} entries differ, e.g. {stale[0]}); "
            "run python -m microgradnorm.i18n_tools refresh"
        )


def problems(package_dir: Path = PACKAGE_DIR, locale_dir: Path = LOCALE_DIR) -> list[str]:
    """Everything that makes the catalogs disagree with the code or with each other; empty when in step."""
    template = extract(package_dir)
    pot = pot_path(locale_dir)
    if not pot.exists():
        return [f"{pot}: missing; run python -m microgradnorm.i18n_tools refresh"]
    found = list(_drift(template, read_po(pot), "template", str(pot)))
    for language in translated_languages():
        path = po_path(language, locale_dir)
        if not path.exists():
            found.append(f"{path}: missing; run python -m microgradnorm.i18n_tools refresh")
            continue
        po = read_po(path, language)
        found += _drift(template, po, "catalog", str(path))
        found += _placeholder_problems(po, str(path))
        found += _mo_problems(po, mo_path(language, locale_dir))
    return found


def untranslated(language: str, locale_dir: Path = LOCALE_DIR) -> list[str]:
    """The strings of ``language``'s catalog shown in English for now (empty or fuzzy): allowed, but listed."""
    po = read_po(po_path(language, locale_dir), language)
    return [_show(_key(m)) for m in po if m.id and (not m.string or m.fuzzy or not all(_strings(m)))]


def _strings(message: Any) -> Iterable[str]:
    return message.string if isinstance(message.string, tuple) else (message.string,)
