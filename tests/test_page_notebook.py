"""The graph in a notebook as people share them: executed by nbclient (so untrusted), exported by nbconvert.

An untrusted notebook's HTML output is shown by JupyterLab without its scripts and
frames; what is left must still show the graph (a still picture and a one-line note).
Where scripts run (a trusted notebook, the ``nbconvert --to html`` export) the page
replaces the picture and steps. Needs nbclient, nbformat, nbconvert and ipykernel
(the ``test`` extra) and Chromium; skips without them unless CI requires them.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from tests.browser import chromium_fixture  # noqa: F401  (a browser for this module)

NEEDED = ("nbclient", "nbformat", "nbconvert", "ipykernel")
REPO = Path(__file__).resolve().parent.parent
CELLS = [
    "import microgradnorm as mgn",
    "y = mgn.layer_norm([0.5, -1.0, 2.0, 0.25], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0])\ny",
    "loss = mgn.Value.dot(list(y), [1.0, -0.5, 0.25, 2.0])\nloss.backward()\nloss",
]
# what JupyterLab's sanitizer drops from an untrusted notebook's HTML output
UNTRUSTED = re.compile(r"<script\b.*?</script>|<iframe\b.*?</iframe>", re.S)


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        if os.environ.get("MICROGRADNORM_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MICROGRADNORM_REQUIRE_BROWSER=1 but {', '.join(missing)} not installed")
        pytest.skip(f"{', '.join(missing)} not installed (pip install '.[test]')")
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in CELLS])
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    old = os.environ.copy()
    os.environ.update(environment)  # the kernel is a child process: it inherits this
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb


def graph_outputs(nb) -> list[dict]:
    return [o["data"] for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]


def test_each_graph_output_is_one_html_page_with_its_own_still_picture(needs_dot, notebook):
    outputs = graph_outputs(notebook)
    assert len(outputs) == 2
    for data in outputs:
        assert set(data) == {"text/html", "text/plain"}  # no second copy of the drawing as image/svg+xml
        page = data["text/html"]
        assert "data:image/svg+xml;base64," in page and "A still picture" in page and "<iframe hidden" in page
        assert len(page.encode()) < 400_000  # a d = 4 graph: the page, its data and one still picture


def test_untrusted_the_picture_and_the_note_show_and_where_scripts_run_the_page_steps(
    needs_dot, notebook, chromium, tmp_path
):
    from nbconvert import HTMLExporter

    outputs = graph_outputs(notebook)
    untrusted = tmp_path / "untrusted.html"
    body = "".join(f"<div class='output'>{UNTRUSTED.sub('', data['text/html'])}</div>" for data in outputs)
    untrusted.write_text(f"<!DOCTYPE html><html><body>{body}</body></html>", encoding="utf-8")
    tab = chromium.new_page(viewport={"width": 1280, "height": 800})
    try:
        tab.route(re.compile(r"^(?!file:|data:|about:).*"), lambda route: route.abort())
        tab.goto(untrusted.as_uri())
        pictures = tab.eval_on_selector_all(
            ".microgradnorm-still img", "els => els.map(e => [e.naturalWidth, e.getBoundingClientRect().height])"
        )
        assert len(pictures) == 2 and all(w > 100 and h > 29 for w, h in pictures), pictures
        assert tab.locator("text=A still picture").count() == 2
        exported = tmp_path / "exported.html"
        exported.write_text(HTMLExporter().from_notebook_node(notebook)[0], encoding="utf-8")
        tab.goto(exported.as_uri())
        tab.wait_for_selector(".microgradnorm-graph iframe:not([hidden])")
        assert tab.locator(".microgradnorm-still").count() == 0  # the script replaced the picture by the page
        frames = [f for f in tab.frames if f != tab.main_frame]
        assert len(frames) == 2
        before = tab.evaluate("window.scrollY")
        ends = set()
        for frame in frames:
            frame.wait_for_selector("#status")
            frame.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'End', bubbles: true}))")
            ends.add(frame.inner_text("#status").rpartition(" · ")[2])
        assert ends == {"the forward pass is done", "every gradient is final"}  # y forward only; the loss both ways
        assert tab.evaluate("window.scrollY") == before  # stepping kept the notebook still
    finally:
        tab.close()
