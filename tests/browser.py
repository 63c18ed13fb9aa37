"""A headless Chromium for the step-through page's tests and its README screenshot.

Playwright's Python package drives the system's Chromium (Debian's ``chromium``
package, which .ci/run installs); it never downloads a browser of its own, and
``pip install playwright`` does not either. ``MICROGRADNORM_BROWSER`` names
another Chromium binary. Without playwright or a browser the browser tests skip
with the reason, unless ``MICROGRADNORM_REQUIRE_BROWSER=1`` (set by CI), which
makes that a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any

import pytest

# No sandbox (containers run as root), no GPU, and nothing that would reach the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "chromium-browser")


def browser_path() -> str | None:
    """The Chromium binary to drive, or None."""
    named = os.environ.get("MICROGRADNORM_BROWSER")
    for candidate in ([named] if named else []) + list(CANDIDATES):
        found = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
        if found and os.access(found, os.X_OK):
            return found
    return None


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install '.[test]')"
    if browser_path() is None:
        return "no Chromium found (Debian/Ubuntu: sudo apt-get install chromium; or set MICROGRADNORM_BROWSER)"
    return None


def launch(playwright: Any) -> Any:
    """A headless Chromium from Playwright's ``sync_playwright()`` object, the system's binary."""
    return playwright.chromium.launch(executable_path=browser_path(), args=CHROMIUM_ARGS)


@pytest.fixture(scope="module", name="chromium")
def chromium_fixture():
    """One browser per test module that imports this fixture (each test opens its own tab). Per module, not per
    session: a fixture imported into several modules is defined once in each, and two Playwright sessions
    cannot run at once."""
    reason = missing()
    if reason:
        if os.environ.get("MICROGRADNORM_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MICROGRADNORM_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = launch(playwright)
        yield instance
        instance.close()
