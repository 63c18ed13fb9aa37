"""The README's picture of the step-through page: ``python -m tests.page_screenshot [PNG]``.

Makes the page with the README's command (a d = 4 LayerNorm with its gradients
and the paths into x[0]), opens it in the system's Chromium (see tests/browser.py),
steps into the backward pass, and saves the window to PNG (default
``lessons/assets/graph_page.png``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests import browser

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO / "lessons" / "assets" / "graph_page.png"
COMMAND = ["graph", "layernorm", "--dim", "4", "--grad", "--paths", "--rankdir", "TB", "--html"]
WINDOW = {"width": 1500, "height": 940}
# the step shown: backward, as the mean receives the second of its four contributions
SHOWN = "(() => { const d = JSON.parse(document.getElementById('graph-data').textContent);"
SHOWN += " const j = d.backward.findIndex(c => d.nodes[c.into].name === 'mean' && c.k === 2);"
SHOWN += " return d.nodes.length + 2 + j; })()"


def make_page(folder: Path) -> Path:
    """The README's page, written by the command line itself."""
    from microgradnorm import cli

    out = folder / "layernorm.html"
    if cli.main([*COMMAND, "-o", str(out)]) != 0:
        raise SystemExit("microgradnorm graph failed; see its message above")
    return out


def screenshot(page_file: Path, png: Path, chromium) -> Path:
    """Open ``page_file`` in a tab of ``chromium`` (a Playwright browser), step into backward, save to ``png``."""
    page = chromium.new_page(viewport=WINDOW)
    try:
        page.goto(page_file.resolve().as_uri())
        page.evaluate(f"document.getElementById('scrubber').value = String({SHOWN})")
        page.dispatch_event("#scrubber", "input")
        page.screenshot(path=str(png))
    finally:
        page.close()
    return png


def main(argv: list[str]) -> int:
    reason = browser.missing()
    if reason:
        print(f"page_screenshot: {reason}", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    png = Path(argv[0]) if argv else DEFAULT
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        chromium = browser.launch(playwright)
        try:
            screenshot(make_page(Path(folder)), png, chromium)
        finally:
            chromium.close()
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
