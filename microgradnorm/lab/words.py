"""The lab's sentences and run names, translated when they are shown, not when a run makes them.

The experiments are cached per process (:mod:`.experiments`), and one process
may show the same run in two languages (the tests render each lesson in English
and in Chinese). So a claim, a title or a note is kept as its English template,
marked for the catalog with ``N_``, and its fields; ``str()`` translates it into
the language current at that moment::

    out.claim("pre-trains", N_("pre-LN trains without warmup: loss {loss:.2f}"), ok, loss=end)

A sentence is a :class:`microgradnorm.i18n.LazyText`, the package's one deferred translation. A
field may itself be a LazyText, a :class:`Listing` or a :class:`RunName`: each is translated when the
sentence around it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from microgradnorm.i18n import LazyText, _, pgettext
from microgradnorm.i18n.text import separated

__all__ = ["YOURS", "YOURS_REFERENCE", "Listing", "RunName", "named_numbers", "run_name"]


YOURS, YOURS_REFERENCE = "your backward", "exercise 5's answer"  # the names of the learner's curve


class Listing:
    """A short list, joined with the current language's separator when shown ("a, b" or "a、b")."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[object]) -> None:
        self.items = tuple(items)

    def __str__(self) -> str:
        return separated([str(item) for item in self.items])

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class RunName:
    """The name of a run, shown with :func:`run_name` in the current language."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return run_name(self.name)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def run_name(name: str) -> str:
    """A run's name as the reader sees it: the ordinary words among the names are translated; the names
    of layers, norms and slips (``torch.nn.LayerNorm``, ``batchnorm``, ``no-1/d``, ``post-LN``) are not."""
    words = {
        # Translators: the correct LayerNorm backward pass, named beside the slips no-mean-path and no-1/d
        "right": pgettext("lab run", "right"),
        # Translators: the network without a norm layer, named beside batchnorm, layernorm and rmsnorm
        "none": pgettext("lab run", "none"),
        YOURS: _("your backward"),
        YOURS_REFERENCE: _("exercise 5's answer"),
    }
    return words.get(name, name)


def named_numbers(values: Mapping[str, float], spec: str = ".2f") -> Listing:
    """Each run's name and its number, as a list: "right 0.21, no-mean-path 0.20" (names translated when shown)."""
    return Listing(LazyText("{name} {value:" + spec + "}", name=RunName(k), value=v) for k, v in values.items())
