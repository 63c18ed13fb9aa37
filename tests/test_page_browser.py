"""The step-through page in a real browser: headless Chromium, opened from file://.

Every gradient the page shows is read back from the DOM (each value node carries
``data-grad``, the exact ``repr`` of the number) and compared with the engine's:
after k contributions with a replay of the chain rule in backward()'s order, at
the end with ``Value.backward()`` itself. The page must make no request but its
own file and log no console error. Without playwright or Chromium these tests
skip, unless MICROGRADNORM_REQUIRE_BROWSER=1 (set by .ci/run), which fails them.
"""

from __future__ import annotations

import re
import struct
from contextlib import contextmanager
from pathlib import Path

import pytest

from microgradnorm import viz
from microgradnorm.engine import topological_order
from microgradnorm.output import to_html
from microgradnorm.page import data as page_data
from tests.browser import chromium_fixture  # noqa: F401  (a browser for this module)
from tests.helpers import graph_problem
from tests.page_screenshot import WINDOW, make_page, screenshot
from tests.test_page import SHOWN_RTOL, replay, shown_equal


def _ln4_page(folder: Path, **options):
    """A d = 4 LayerNorm page in ``folder``, with the loss it backpropagates from: (path, loss, graph)."""
    graph, (*_, dy) = graph_problem(shape=(4,), backward=False)
    loss = graph.loss(dy.tolist())
    return to_html(loss, folder / "ln4.html", graph=graph, **options), loss, graph


@pytest.fixture(scope="module")
def ln4(tmp_path_factory):
    """A d = 4 LayerNorm page, with the loss it backpropagates from."""
    return _ln4_page(tmp_path_factory.mktemp("page"))


@contextmanager
def opened(chromium, path: Path, **context):
    """A tab on ``path`` that records every request and console message; it must end with neither."""
    tab = chromium.new_page(**{"viewport": WINDOW, **context})
    requests, problems = [], []
    tab.on("request", lambda r: requests.append(r.url))
    tab.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    tab.goto(path.resolve().as_uri())
    try:
        yield tab
    finally:
        tab.close()
    own = path.resolve().as_uri()
    assert requests and all(r.split("#")[0] == own for r in requests), "the page asked for something besides itself"
    assert problems == []


def counts(tab) -> tuple[int, int]:
    """(nodes, contributions) as the page's data has them."""
    return tuple(
        tab.evaluate(
            "(() => { const d = JSON.parse(document.getElementById('graph-data').textContent);"
            " return [d.nodes.length, d.backward.length]; })()"
        )
    )


def shown_grads(tab) -> dict[int, tuple[str | None, str | None]]:
    """Node position -> (data-grad, data-final) of every value node in the drawing."""
    rows = tab.eval_on_selector_all(
        "g.node.value", "els => els.map(e => [e.id, e.getAttribute('data-grad'), e.getAttribute('data-final')])"
    )
    return {int(i[1:]): (g, f) for i, g, f in rows}


def press(tab, key: str, times: int = 1) -> None:
    for _ in range(times):
        tab.keyboard.press(key)


def assert_shown_after(tab, loss, order, k: int) -> None:
    """The page shows each node's grad after the first k contributions, and whether it is final then."""
    position = {n.id: p for p, n in enumerate(order)}
    grads = {p: 0.0 for p in range(len(order))}
    grads[position[loss.id]] = 1.0
    total = {p: 0 for p in grads}
    steps = replay(loss)
    for child_id, _, _ in steps:
        total[position[child_id]] += 1
    got = {p: 0 for p in grads}
    for child_id, _, value in steps[:k]:
        grads[position[child_id]] = value
        got[position[child_id]] += 1
    for p, (g, f) in shown_grads(tab).items():
        assert g is not None and shown_equal(g, grads[p]), (k, order[p].label, g, grads[p])
        assert (f == "true") == (got[p] == total[p]), (k, order[p].label)


def test_stepping_forward_and_back_shows_the_engines_gradients(needs_dot, chromium, ln4):
    path, loss, graph = ln4
    order = viz.drawing(loss, graph).order
    with opened(chromium, path) as tab:
        n, m = counts(tab)
        assert n == len(order)
        press(tab, "ArrowRight", n)  # the forward pass: every node made, no gradient yet
        assert tab.evaluate("document.body.dataset.step") == str(n)
        assert all(g is None for g, _ in shown_grads(tab).values())
        for k, key, times in ((25, "ArrowRight", 1 + 25), (15, "ArrowLeft", 10), (m, "End", 1)):
            press(tab, key, times)
            assert_shown_after(tab, loss, order, k)
        loss.backward()  # the engine's own pass, after the page was made
        for p, (g, f) in shown_grads(tab).items():
            assert abs(float(g) - order[p].grad) <= SHOWN_RTOL * abs(order[p].grad) and f == "true"
        assert "every gradient is final" in tab.inner_text("#status")


def test_each_step_says_what_it_adds(needs_dot, chromium, ln4):
    path, loss, _ = ln4
    with opened(chromium, path) as tab:
        n, m = counts(tab)
        press(tab, "ArrowRight", n + 2)  # the first contribution: L = Σ y·dy sends dy[0] into y[0]
        dy0 = loss.children[len(loss.children) // 2].data  # the loss's inputs: y[0..3], then dy[0..3]
        want = f"Backward 1/{m}: y[0].grad += {viz.num(dy0)} × 1 (= {viz.num(dy0)}); total {viz.num(dy0)} (1/1)"
        assert tab.inner_text("#status") == want
        assert tab.inner_text("#node-info h3") == "y[0]"
        last = len(topological_order(loss)) - 1  # the loss is made last
        assert "active" in tab.get_attribute(f"#e{last}_0", "class").split()


def test_hovering_a_node_shows_its_numbers_and_local_derivatives(needs_dot, chromium, ln4):
    path, loss, graph = ln4
    d = viz.drawing(loss, graph)
    k = d.pos(graph["xhat"][1])
    rstd, xshift = graph["rstd"][0].data, graph["xshift"][1].data
    with opened(chromium, path) as tab:
        press(tab, "End")
        tab.hover(f"#v{k}")
        panel = tab.inner_text("#node-info")
        assert panel.splitlines()[0] == "xhat[1]"
        assert "xhat[1] = xshift[1]·rstd" in panel
        assert f"∂xhat[1]/∂rstd = xshift[1] = {viz.num(xshift)}" in panel
        assert f"∂xhat[1]/∂xshift[1] = rstd = {viz.num(rstd)}" in panel
        assert f"{viz.num(graph['xhat'][1].data)} ({graph['xhat'][1].data!r})" in panel
        assert "closed form" in panel and "finite difference" in panel and "✓" in panel
        assert "divide" in panel  # its stage


def test_the_page_works_from_the_keyboard_alone(needs_dot, chromium, ln4):
    path, _, _ = ln4
    with opened(chromium, path) as tab:
        n, m = counts(tab)
        for _ in range(40):  # Tab through the controls to the step-forward button
            tab.keyboard.press("Tab")
            if tab.evaluate("document.activeElement.id") == "forward":
                break
        assert tab.evaluate("document.activeElement.id") == "forward"
        outline = tab.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none"  # the focus can be seen
        tab.keyboard.press("Enter")
        tab.keyboard.press("Enter")
        assert tab.evaluate("document.body.dataset.step") == "2"
        tab.evaluate("document.activeElement.blur()")
        press(tab, "End")
        assert tab.evaluate("document.body.dataset.step") == str(n + 1 + m)
        press(tab, "Shift+ArrowLeft")  # back to where the last stage's contributions start
        assert int(tab.evaluate("document.body.dataset.step")) < n + 1 + m
        press(tab, "Home")
        assert tab.evaluate("document.body.dataset.step") == "0"
        press(tab, " ")
        assert tab.get_attribute("#play", "aria-pressed") == "true"
        press(tab, " ")
        assert tab.get_attribute("#play", "aria-pressed") == "false"
        tab.focus("#node-select")
        tab.keyboard.press("ArrowDown")  # the first node the forward pass makes, chosen without a mouse
        assert tab.inner_text("#node-info h3") == "x[0]"
        labels = tab.eval_on_selector_all(
            "button", "els => els.filter(b => !(b.getAttribute('aria-label') || b.textContent.trim())).length"
        )
        assert labels == 0  # every button says what it does


def test_the_paths_into_x_i_are_coloured_and_add_up_to_its_gradient(needs_dot, chromium, ln4):
    path, loss, graph = ln4
    d = viz.drawing(loss, graph)
    k = d.pos(graph["x"][1])
    data = page_data.page_data(page_data.subject_of(loss, graph), d)
    with opened(chromium, path) as tab:
        press(tab, "End")
        tab.select_option("#path-select", str(k))
        for key in ("direct", "mean", "var"):
            assert tab.locator(f".path-copy.{key}").count() > 0, key
        legend = tab.inner_text("#path-info")
        for p in data["paths"]["byNode"][k]["paths"]:
            assert p["title"] in legend and p["amountText"] in legend
        assert f"x[1].grad = {viz.num(graph['x'][1].grad)}" in legend
        tab.select_option("#path-select", "")
        assert tab.locator(".path-copy").count() == 0


def test_a_stage_folds_into_one_box_and_opens_again(needs_dot, chromium, ln4):
    path, loss, graph = ln4
    var = viz.drawing(loss, graph).pos(graph["var"][0])
    with opened(chromium, path) as tab:
        tab.click("#fold-cluster_var")
        assert tab.evaluate(f"getComputedStyle(document.getElementById('v{var}')).display") == "none"
        assert "7 values folded" in tab.text_content(".fold")  # 1/n, four xshift², their Σ and var
        assert tab.get_attribute("#fold-cluster_var", "aria-pressed") == "true"
        tab.click(".fold")
        assert tab.evaluate(f"getComputedStyle(document.getElementById('v{var}')).display") != "none"
        assert tab.locator(".fold").count() == 0


def test_views_and_themes_switch(needs_dot, chromium, ln4):
    path, _, _ = ln4
    with opened(chromium, path, color_scheme="dark") as tab:
        assert tab.evaluate("document.documentElement.dataset.theme") == "dark"
        background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
        tab.click("#theme")
        assert tab.evaluate("document.documentElement.dataset.theme") == "light"
        assert tab.evaluate("getComputedStyle(document.body).backgroundColor") != background
        tab.click("#view-toggle")
        assert tab.is_visible("#svg-stages") and not tab.is_visible("#svg-full")
        press(tab, "ArrowRight", 12)
        assert tab.locator("#svg-stages .node.stage.current").count() == 1


def test_a_large_page_opens_collapsed_says_so_and_steps_through(needs_dot, chromium, tmp_path):
    graph, _ = graph_problem(shape=(24,))
    path = to_html(graph, tmp_path / "ln24.html")
    with opened(chromium, path) as tab:
        assert tab.is_visible("#svg-stages") and not tab.is_visible("#svg-full")
        assert "too many to read" in tab.inner_text("#note")
        press(tab, "End")
        press(tab, "Home")
        tab.click("#view-toggle")
        assert tab.is_visible("#svg-full")


def test_a_forward_only_page_of_a_plain_graph(needs_dot, chromium, tmp_path):
    import microgradnorm as mgn

    a, b = mgn.Value(2.0, label="a"), mgn.Value(-3.0, label="b")
    path = to_html([a * b, a + b], tmp_path / "plain.html")
    with opened(chromium, path) as tab:
        press(tab, "End")
        assert "forward pass is done" in tab.inner_text("#status")
        assert all(g is None for g, _ in shown_grads(tab).values())
        assert not tab.is_visible("#paths-section") and not tab.is_visible("#check-section")


def test_the_readme_screenshot_is_made_by_its_command(needs_dot, chromium, tmp_path, capsys):
    png = screenshot(make_page(tmp_path), tmp_path / "page.png", chromium)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (WINDOW["width"], WINDOW["height"])


# ---- the page in Chinese ----------------------------------------------------------------------------------------

ZH = "zh-CN"
# three or more lowercase English words in a row: prose left untranslated (formulas and names are not prose)
ENGLISH_RUN = re.compile(r"(?<![\w.])[a-z]{2,}(?: [a-z]{2,}){2,}(?![\w(])")


@pytest.fixture(scope="module")
def ln4_zh(tmp_path_factory):
    """The d = 4 LayerNorm page of ``ln4``, made in Chinese."""
    return _ln4_page(tmp_path_factory.mktemp("page"), lang=ZH)


def test_the_chinese_page_steps_through_the_engines_gradients(needs_dot, chromium, ln4_zh):
    path, loss, graph = ln4_zh
    order = viz.drawing(loss, graph).order
    with opened(chromium, path) as tab:
        n, m = counts(tab)
        assert tab.evaluate("document.documentElement.lang") == ZH
        assert tab.inner_text("#step-heading") == "步骤" and tab.inner_text("#play") == "▶ 播放"
        assert tab.inner_text("#counter") == f"第 0 步，共 {n + 1 + m} 步"
        assert tab.inner_text("#status") == f"按 → 开始前向传播：共 {n} 个值，按创建顺序出现。"
        press(tab, "ArrowRight", n + 2)
        dy0 = loss.children[len(loss.children) // 2].data
        g = viz.num(dy0)
        assert tab.inner_text("#status") == f"反向 1/{m}：y[0].grad += {g} × 1（= {g}）；累计 {g}（1/1）"
        for k, key, times in ((40, "ArrowRight", 39), (12, "ArrowLeft", 28), (m, "End", 1)):
            press(tab, key, times)
            assert_shown_after(tab, loss, order, k)
        assert "所有梯度都已是最终值" in tab.inner_text("#status")


def test_the_chinese_page_labels_its_panel_and_controls_in_chinese(needs_dot, chromium, ln4_zh):
    path, loss, graph = ln4_zh
    d = viz.drawing(loss, graph)
    k = d.pos(graph["xhat"][1])
    with opened(chromium, path) as tab:
        press(tab, "End")
        tab.hover(f"#v{k}")
        panel = tab.inner_text("#node-info")
        assert "xhat[1] = xshift[1]·rstd" in panel  # the formula as it is
        for word in ("值", "梯度", "计算式", "局部导数", "检查", "闭式", "有限差分", "已是最终值 ✓"):
            assert word in panel, word
        tab.select_option("#path-select", str(d.pos(graph["x"][1])))
        legend = tab.inner_text("#path-info")
        assert "直接路径" in legend and "经过均值" in legend and "合计" in legend
        tab.click("#fold-cluster_var")
        assert "折叠了" in tab.text_content(".fold") and tab.inner_text("#fold-cluster_var") == "展开 方差"
        tab.click("#view-toggle")
        assert tab.inner_text("#view-toggle") == "每个阶段一个框"
        assert tab.get_attribute("#view-toggle", "aria-pressed") == "true"
        shown = tab.inner_text("#panel") + "\n" + tab.inner_text("#controls") + "\n" + tab.inner_text("header")
        assert ENGLISH_RUN.findall(shown) == []
        titles = tab.eval_on_selector_all("button", "els => els.map(b => b.title || b.getAttribute('aria-label'))")
        assert all(re.search(r"[\u4e00-\u9fff]", t) for t in titles if t and re.search("[A-Za-z]{3}", t)), titles
