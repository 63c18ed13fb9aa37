"""The core's typed errors (:mod:`microgradnorm.errors`) said in the learner's language.

The core keeps an English template and its fields on each error and imports no
translation; here the template and every :class:`~microgradnorm.errors.Phrase`
among the fields are looked up in the catalog, then filled in. An error without
a template (a plain ValueError) is shown as it is.
"""

from __future__ import annotations

from microgradnorm.errors import Phrase
from microgradnorm.i18n import _

__all__ = ["localize", "say"]


def say(phrase: Phrase) -> str:
    """``phrase`` in the current language (fields that are phrases too)."""
    fields = {k: say(v) if isinstance(v, Phrase) else v for k, v in phrase.fields.items()}
    return _(phrase.template).format(**fields)


def localize(exc: BaseException) -> str:
    """The message of ``exc`` in the current language: translated when it carries a phrase, else ``str(exc)``."""
    phrase = getattr(exc, "phrase", None)
    return say(phrase) if isinstance(phrase, Phrase) else str(exc)
