"""Which language the learner reads, and the gettext catalog that says it.

Every learner-facing string in the package's Python code goes through one gettext
domain, ``microgradnorm``, whose catalogs live in
``microgradnorm/locale/<ll_CC>/LC_MESSAGES/microgradnorm.{po,mo}``. English is the
source language: it has no catalog, and any string a catalog lacks (not yet
translated, or marked fuzzy) is shown in English, never as an error.

Marking strings (``docs/translating.md`` has the whole workflow)::

    from microgradnorm.i18n import _, ngettext, lazy_gettext

    raise UsageError(_("argument --dim: expected a positive integer, got {text!r}").format(text=text))
    print(ngettext("{n} step", "{n} steps", n).format(n=n))
    HELP = lazy_gettext("step through a lesson")   # a module constant: translated when it is used

Which language (the first that applies):

1. ``--lang en|zh-CN`` on the command line (:func:`cli_language`; ``zh``, ``zh-Hans``, ``zh_CN.UTF-8`` ... too);
2. ``MICROGRADNORM_LANG`` (the same values);
3. the locale, read as Python's gettext reads it: the first non-empty of ``LANGUAGE``,
   ``LC_ALL``, ``LC_MESSAGES``, ``LANG``; ``LANGUAGE`` may list several
   (``fr:zh_CN``), the first one we have wins. ``zh_CN.UTF-8``, ``zh_SG``, ``zh``
   and ``zh_Hans`` give Simplified Chinese. ``zh_TW``, ``zh_HK``, ``zh_MO`` and
   ``zh_Hant`` do not: a Traditional-Chinese locale gets English, as gettext
   itself would (it never substitutes zh_CN for zh_TW); such a reader who prefers
   Simplified Chinese says so with ``--lang zh-CN`` or ``LANGUAGE=zh_TW:zh_CN``;
4. English.

State: the CLI sets one process-wide language for the duration of a command
(:func:`set_language`, restored afterwards), which threads the command starts
also see; :func:`use_language` overrides it for the current thread or task only
(a context variable), which is what tests use, so no test leaks its language into
another.
"""

from __future__ import annotations

import contextlib
import functools
import gettext
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path

__all__ = [
    "DOMAIN",
    "ENGLISH",
    "ENV_VAR",
    "LANGUAGES",
    "LOCALE_DIR",
    "N_",
    "SIMPLIFIED_CHINESE",
    "LanguageError",
    "LazyText",
    "_",
    "catalog",
    "catalog_dir_name",
    "child_environment",
    "cli_language",
    "current_language",
    "language_arg",
    "language_from_environment",
    "language_from_locale",
    "lazy_gettext",
    "ngettext",
    "parse_language",
    "pgettext",
    "set_language",
    "use_language",
]

DOMAIN = "microgradnorm"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
ENGLISH = "en"
SIMPLIFIED_CHINESE = "zh-CN"
LANGUAGES = (ENGLISH, SIMPLIFIED_CHINESE)  # the values --lang and MICROGRADNORM_LANG accept
ENV_VAR = "MICROGRADNORM_LANG"
LOCALE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")  # gettext's order

# locale region or script -> our language; a Chinese locale not listed here is Traditional Chinese
_SIMPLIFIED_REGIONS = {"", "cn", "sg", "hans", "my"}


class LanguageError(ValueError):
    """A language value that is not one of :data:`LANGUAGES`: one line, naming where it came from.

    The message is translated when it is shown, not when the error is made: working out
    the current language can itself meet a bad ``MICROGRADNORM_LANG`` and make one of these.
    """

    def __init__(self, source: str, text: str) -> None:
        super().__init__(source, text)
        self.source, self.text = source, text

    def __str__(self) -> str:
        return _("{source}: {problem}").format(source=self.source, problem=_expected_language(self.text))


def _expected_language(text: str) -> str:
    return _("expected en or zh-CN, got {text!r}").format(text=text)


def parse_language(text: str, source: str = "--lang") -> str:
    """The canonical tag of a language as people spell it: ``en``, ``EN``, ``en-US``; ``zh-CN``, ``zh_cn``,
    ``zh``, ``zh-Hans``, ``zh-Hans-CN``, ``zh_CN.UTF-8`` (a locale name) -> ``zh-CN``. Traditional Chinese
    (``zh-TW``, ``zh-Hant``) and anything else is a :class:`LanguageError`, as for the locale (module docstring)."""
    base = text.strip().split(".", 1)[0].split("@", 1)[0].replace("-", "_").lower()
    parts = base.split("_")
    if parts[0] == "en":
        return ENGLISH
    if _simplified_chinese(parts):
        return SIMPLIFIED_CHINESE
    raise LanguageError(source, text)


def _simplified_chinese(parts: list[str]) -> bool:
    """Whether a tag or locale name, split at ``_`` (``["zh", "cn"]``), is Chinese written the simplified way."""
    return parts[0] == "zh" and all(part in _SIMPLIFIED_REGIONS for part in parts[1:])


def language_arg(text: str) -> str:
    """argparse ``type=`` for ``--lang``: argparse prefixes the error with 'argument --lang: '."""
    import argparse

    try:
        return parse_language(text)
    except LanguageError:
        raise argparse.ArgumentTypeError(_expected_language(text)) from None


def _from_locale_name(name: str) -> str | None:
    """One locale name (``zh_CN.UTF-8``, ``en_US``, ``C``) -> our language, or None if we have none for it."""
    base = name.split(".", 1)[0].split("@", 1)[0].strip().replace("-", "_").lower()
    if base in ("c", "posix") or base.startswith("en"):
        return ENGLISH
    return SIMPLIFIED_CHINESE if _simplified_chinese(base.split("_")) else None


def language_from_locale(environ: Mapping[str, str] | None = None) -> str:
    """The language the locale variables ask for, as Python's gettext reads them (see the module docstring)."""
    environ = os.environ if environ is None else environ
    value = next((environ[var] for var in LOCALE_VARS if environ.get(var)), "")  # gettext reads the first one set
    for name in filter(None, value.split(":")):
        found = _from_locale_name(name)
        if found is not None:
            return found
    return ENGLISH


def language_from_environment(environ: Mapping[str, str] | None = None, *, strict: bool = False) -> str:
    """``MICROGRADNORM_LANG`` if set, else the locale. A bad value is an error only when ``strict``
    (the CLI's check); elsewhere it is ignored, because a translated string must never raise."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(ENV_VAR, "")
    if explicit:
        try:
            return parse_language(explicit, source=ENV_VAR)
        except LanguageError:
            if strict:
                raise
    return language_from_locale(environ)


# ---- the active language -------------------------------------------------------------

_lock = threading.Lock()
_process_language: str | None = None  # set by the CLI for one command; None: follow the environment
_scoped_language: ContextVar[str | None] = ContextVar("microgradnorm_language", default=None)


def current_language() -> str:
    """The language strings are translated into right now."""
    return _scoped_language.get() or _process_language or language_from_environment()


def set_language(language: str | None) -> str | None:
    """Set the process-wide language (None: follow the environment again); returns the previous setting."""
    global _process_language
    if language is not None:
        language = parse_language(language)
    with _lock:
        previous, _process_language = _process_language, language
    return previous


@contextlib.contextmanager
def use_language(language: str) -> Iterator[str]:
    """Translate into ``language`` inside the block, in this thread or task only."""
    token = _scoped_language.set(parse_language(language))
    try:
        yield _scoped_language.get() or language
    finally:
        _scoped_language.reset(token)


def _option_value(argv: Sequence[str], option: str = "--lang") -> str | None:
    """The last ``--lang X`` / ``--lang=X`` before a bare ``--``, or None."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == option and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(option + "="):
            value = arg[len(option) + 1 :]
    return value


@contextlib.contextmanager
def cli_language(argv: Sequence[str]) -> Iterator[str]:
    """The language of one CLI command, set before the parser is built (so --help is translated too).

    ``--lang`` wins, then the environment. A bad ``--lang`` value is left to argparse,
    which reports it as 'argument --lang: expected en or zh-CN, got ...'; a bad
    ``MICROGRADNORM_LANG`` raises :class:`LanguageError`, one line naming the variable.
    """
    given = _option_value(argv)
    try:
        language = parse_language(given) if given is not None else None
    except LanguageError:
        language = None
    if language is None:
        language = language_from_environment(strict=True)
    previous = set_language(language)
    try:
        yield language
    finally:
        set_language(previous)


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment for a subprocess, with ``MICROGRADNORM_LANG`` set to the current language,
    so that a child process (the exercise grader's) speaks the language the learner chose."""
    env = dict(os.environ if environ is None else environ)
    env[ENV_VAR] = current_language()
    return env


# ---- catalogs and lookups --------------------------------------------------------------


def catalog_dir_name(language: str) -> str:
    """``zh-CN`` -> ``zh_CN``: the folder name gettext looks for under ``locale/``."""
    return language.replace("-", "_")


def load_catalog(language: str, locale_dir: Path = LOCALE_DIR) -> gettext.NullTranslations:
    """The catalog of ``language`` in ``locale_dir``; English, a missing or an unreadable catalog: no translation."""
    if language == ENGLISH:
        return gettext.NullTranslations()
    try:
        return gettext.translation(DOMAIN, str(locale_dir), languages=[catalog_dir_name(language)])
    except Exception:  # missing, truncated or corrupt .mo: English is always a valid answer
        return gettext.NullTranslations()


@functools.cache
def catalog(language: str) -> gettext.NullTranslations:
    """The shipped catalog of ``language``, loaded once."""
    return load_catalog(language)


def _(message: str | LazyText) -> str:
    """``message`` in the current language; English when the catalog has no translation for it.

    The standard gettext marker: ``_("text")``. A :class:`LazyText` is translated too.
    """
    if isinstance(message, LazyText):
        return str(message)
    return catalog(current_language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for ``n`` (Chinese has one form; the catalog's Plural-Forms decides)."""
    return catalog(current_language()).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """``message`` with a context for the translator, when one English word has two meanings."""
    return catalog(current_language()).pgettext(context, message)


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it now; translate it with ``_()`` where used."""
    return message


class LazyText:
    """Words translated each time they are used: a module-level constant (:func:`lazy_gettext`), a sentence
    of the lab kept across languages (``LazyText(N_("... {loss:.2f}"), loss=end)``), a phrase of the grader.

    It behaves as the translated ``str`` for printing, formatting (``%``, ``format``,
    f-strings), concatenation, comparison and rich rendering; any ``str`` method is
    looked up on the translation. Where a real ``str`` is required (``re``,
    ``json``, ``isinstance`` checks, argparse's ``description=``), pass ``str(text)``
    or ``_(text)``. ``fields`` fill the translation's ``{name}`` placeholders; a field may itself be
    deferred (a LazyText, ...): it is translated when the words around it are. A message that is not in
    the catalog (a label such as ``"{name} (Adam)"``) is shown as it is.
    """

    __slots__ = ("fields", "message")

    def __init__(self, message: str, /, **fields: object) -> None:
        self.message = message
        self.fields = fields

    def __str__(self) -> str:
        text = catalog(current_language()).gettext(self.message)
        return text.format(**self.fields) if self.fields else text

    def __repr__(self) -> str:
        return f"lazy_gettext({self.message!r})"

    def __rich__(self) -> str:
        return str(self)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __mod__(self, args: object) -> str:
        return str(self) % args

    def __add__(self, other: object) -> str:
        return str(self) + str(other)

    def __radd__(self, other: object) -> str:
        return str(other) + str(self)

    def __eq__(self, other: object) -> bool:
        return str(self) == (str(other) if isinstance(other, (str, LazyText)) else other)

    def __hash__(self) -> int:  # equal to its translation, so hashed as it (do not key a dict across languages)
        return hash(str(self))

    def __len__(self) -> int:
        return len(str(self))

    def __contains__(self, item: str) -> bool:
        return item in str(self)

    def __iter__(self) -> Iterator[str]:
        return iter(str(self))

    def __getattr__(self, name: str) -> object:
        return getattr(str(self), name)


def lazy_gettext(message: str, **fields: object) -> LazyText:
    """Mark a module-level constant: it is translated into the language current when it is used,
    with ``fields`` put into its ``{name}`` placeholders."""
    return LazyText(message, **fields)
