"""The errors the core raises: typed, carrying their fields, English when printed.

The core (engine, norms, formulas, the textbook NumPy file, the registry's facts)
imports nothing of the translation layer. So an error here keeps what it is
about as fields -- which argument, what was expected, what was given -- and an
English template that says it. ``str(error)`` is the English sentence; the CLI,
the lessons, the page and the grader call
:func:`microgradnorm.i18n.errors.localize` to say it in the learner's language
(the templates are in the translation catalog, marked with :func:`N_` below).

A field can itself be a :class:`Phrase` ("row 2", "channel 0"), translated the
same way.
"""

from __future__ import annotations

from typing import Any

# DomainError stays the engine's class, so callers that catch it keep working.
from microgradnorm.engine import DomainError

__all__ = ["N_", "FieldError", "InputError", "InputTypeError", "NormDomainError", "Phrase"]


def N_(template: str) -> str:
    """Mark an English template for the catalog; the workshop translates it when it is shown."""
    return template


class Phrase:
    """An English template and its fields, formatted on demand (``str``) or translated by the workshop."""

    def __init__(self, template: str, **fields: Any) -> None:
        self.template = template
        self.fields = fields

    def __str__(self) -> str:
        return self.template.format(**{k: str(v) if isinstance(v, Phrase) else v for k, v in self.fields.items()})

    def __repr__(self) -> str:
        return f"Phrase({str(self)!r})"


class FieldError(Exception):
    """An error that says which argument was wrong, what was expected and what was given."""

    def __init__(self, template: str, *, argument: str, expected: Any = "", given: Any = "", **fields: Any) -> None:
        self.phrase = Phrase(template, argument=argument, expected=expected, given=given, **fields)
        super().__init__(str(self.phrase))

    @property
    def argument(self) -> str:
        return self.phrase.fields["argument"]

    @property
    def expected(self) -> Any:
        return self.phrase.fields["expected"]

    @property
    def given(self) -> Any:
        return self.phrase.fields["given"]


class InputError(FieldError, ValueError):
    """A value the function cannot take: a wrong shape, a ragged list, eps < 0."""


class InputTypeError(FieldError, TypeError):
    """A value of the wrong type: a string where a number belongs."""


class NormDomainError(FieldError, DomainError):
    """A norm was asked to divide by a standard deviation (or RMS) of 0."""
