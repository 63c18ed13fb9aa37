"""Helpers for the tests of the grader's isolation: with bubblewrap, without it, or required.

``MICROGRADNORM_REQUIRE_SANDBOX=1`` (set by ``.ci/run``) turns a test that needs
bubblewrap from a skip into a failure where it is missing.
"""

from __future__ import annotations

import os

import pytest

from microgradnorm.exercises import bubblewrap, process

REQUIRED = os.environ.get("MICROGRADNORM_REQUIRE_SANDBOX") == "1"


def need_bubblewrap() -> None:
    """Skip (or, where the sandbox is required, fail) unless bubblewrap can make its namespaces here."""
    found = bubblewrap.available()
    if not found:
        if REQUIRED:
            pytest.fail(f"MICROGRADNORM_REQUIRE_SANDBOX=1 but {found.why}")
        pytest.skip(found.why)


def without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback, until the test ends: the grader as it runs where bubblewrap is missing."""
    monkeypatch.setattr(bubblewrap, "available", lambda: bubblewrap.Found(None, "turned off by the test"))
    monkeypatch.setattr(process, "_isolated", lambda engine=False: None)
