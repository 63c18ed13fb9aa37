"""Helpers for the tests of the grader's isolation: with bubblewrap, without it, or required.

``MICROGRADNORM_REQUIRE_SANDBOX=1`` (set by ``.ci/run``) turns a test that needs
bubblewrap from a skip into a failure where it is missing.
"""

from __future__ import annotations

import os

import pytest

from microgradnorm.exercises import bubblewrap, process

REQUIRED = os.environ.get("MICROGRADNORM_REQUIRE_SANDBOX") == "1"


def _forget() -> None:
    bubblewrap.available.cache_clear()
    process._isolated.cache_clear()


def need_bubblewrap() -> None:
    """Skip (or, where the sandbox is required, fail) unless bubblewrap can make its namespaces here."""
    found = bubblewrap.available()
    if not found:
        if REQUIRED:
            pytest.fail(f"MICROGRADNORM_REQUIRE_SANDBOX=1 but {found.why}")
        pytest.skip(found.why)


@pytest.fixture
def without_bubblewrap(monkeypatch):
    """The fallback: the grader as it runs where bubblewrap is missing (Landlock, seccomp, the audit hook)."""
    monkeypatch.setenv(bubblewrap.ENV, "off")
    _forget()
    yield
    monkeypatch.delenv(bubblewrap.ENV)
    _forget()
