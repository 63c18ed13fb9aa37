"""The grader's limits as command-line arguments, shared by the learner's and the teacher's actions."""

from __future__ import annotations

import argparse
import math

from microgradnorm.commands import positive_int
from microgradnorm.i18n import _

__all__ = ["MAX_TIMEOUT", "MEMORY_RANGE", "memory_mib", "positive_float", "timeout_seconds"]


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("expected a positive number of seconds, got {text!r}").format(text=text)
        ) from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(_("expected a positive number of seconds, got {text}").format(text=text))
    return value


MAX_TIMEOUT = 3600.0  # seconds: a check that needs more is stuck
MEMORY_RANGE = (256, 1 << 20)  # MiB: Python with NumPy needs about 128 to start; 1 TiB is more than any machine here


def timeout_seconds(text: str) -> float:
    value = positive_float(text)
    if value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(
            _("expected at most {limit:g} seconds, got {text}").format(limit=MAX_TIMEOUT, text=text)
        )
    return value


def memory_mib(text: str) -> int:
    value = positive_int(text)
    low, high = MEMORY_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(
            _("expected MiB from {low} to {high}, got {value}").format(low=low, high=high, value=value)
        )
    return value
