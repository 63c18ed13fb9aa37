"""What a learner sees of the step-through page: the step in view, readable text, a phone, axe, the URL.

Headless Chromium (see tests/browser.py), at 1280×800, 1920×1080 and a 390×844 phone. The
stepping runs inside the page (one ``evaluate`` presses → and measures, for every step of
a d = 4 page and sampled steps of d = 16 and 64 and of a BatchNorm and a GroupNorm page), so
the test costs seconds, not minutes.
Screenshots of a d = 4 page mid-backward and of a d = 64 page's opening view are written to
``$MICROGRADNORM_SCREENS`` when it names a folder (otherwise to pytest's temporary folder).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from microgradnorm.output import to_html
from microgradnorm.viz import num as viz_num
from tests.browser import chromium_fixture  # noqa: F401  (a browser for this module)
from tests.helpers import graph_problem
from tests.page_screenshot import SHOWN
from tests.test_page_browser import opened

DESKTOP = {"width": 1280, "height": 800}
WIDE = {"width": 1920, "height": 1080}
PHONE = {"width": 390, "height": 844}
READABLE_PX = 11  # the smallest text the page may open with or zoom to by itself
CONTRAST = 3.0  # WCAG 2.1 non-text contrast, for the frame of the current step

PEEK_PX = 24  # a node partly in view shows at least this much of itself (the page's rules 3-4, page.js keepInView)
MARGIN_PX = 12  # the page keeps this much free at the pane's edges (page.js keepInView)
CUE_PAD_PX = 4  # a cue frame is this far outside its node (page.js drawCues)
IN_VIEW_PX = 12  # a node is in view when at least this much of its frame (or all of it) is inside the pane

# Runs inside the page: press → until step `upto` (with `every` > 1, jump with the scrubber to every `every`-th
# step) and check at each measured step the page's rule for what is in view (page.js, keepInView):
#  - the step's node ("current") and, in backward, the node its contribution comes from ("source") both show at
#    least IN_VIEW_PX of their boxes' frames inside the graph pane, at any window size ('current' / 'source' in `lost`);
#  - the smallest text drawn is at least 11 px, unless the two are so far apart that even at 11 px they could not
#    both show PEEK_PX of themselves in the pane ('small' in `lost`: the page zoomed out below 11 px without need);
#  - when it is under 11 px, the page zoomed out no further than needed: at 1.25 times the zoom they would no
#    longer both fit ('too small' in `lost`).
#  - the page says so under the step when, and only when, it shrank the text under 11 px ('silent' / 'note').
# `below` lists the steps shown under 11 px (allowed, by the rule above), with their text size.
WALK = """([upto, every]) => {
  const area = document.getElementById('graph-area');
  const pane = area.getBoundingClientRect();
  const inner = {left: pane.left + area.clientLeft, top: pane.top + area.clientTop};
  inner.right = inner.left + area.clientWidth;  // the pane less its scroll bars
  inner.bottom = inner.top + area.clientHeight;
  const shown = (lo, hi, a, b) => Math.min(hi, b) - Math.max(lo, a);  // px of [lo, hi] inside [a, b]
  const meets = (r) => shown(r.left, r.right, inner.left, inner.right) >= Math.min(${inview}, r.width)
    && shown(r.top, r.bottom, inner.top, inner.bottom) >= Math.min(${inview}, r.height);
  const view = () => document.querySelector('.view:not([hidden])');
  const rects = (name) => [...view().querySelectorAll('rect.cue.' + name)].map((e) => e.getBoundingClientRect());
  const smallest = () => {
    const svg = view().querySelector('svg');
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const sizes = [...svg.querySelectorAll('text')]
      .filter((t) => getComputedStyle(t).visibility !== 'hidden' && !t.closest('.folded, .future'))
      .filter((t) => getComputedStyle(t).display !== 'none' && t.getClientRects().length)
      .map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
    return Math.min(...sizes);
  };
  const lost = [], below = [];
  let measured = 0;
  const scrubber = document.getElementById('scrubber');
  for (let s = 1; s <= upto; s++) {
    if (every === 1) {
      document.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight', bubbles: true}));
    } else if (s % every === 0 || s === upto) {  // a sampled step: jump there as the scrubber does
      scrubber.value = String(s);
      scrubber.dispatchEvent(new Event('input', {bubbles: true}));
    }
    if (s % every && s !== upto) continue;
    measured += 1;
    const current = rects('current');  // the node's box first, then its op's circle (page.js drawCues)
    if (!current.length || !meets(current[0])) lost.push(['current', s]);
    const source = rects('source');
    if (source.length && !meets(source[0])) lost.push(['source', s]);
    const px = smallest();
    const said = document.getElementById('zoom-note').textContent !== '';  // the page says when it shrank
    if (px >= ${readable}) {
      if (said && px > ${readable} + 0.5) lost.push(['note', s, px]);
      continue;
    }
    below.push([s, Math.round(px * 10) / 10]);
    if (!said) lost.push(['silent', s, px]);
    if (!current.length || !source.length) { lost.push(['small', s, px]); continue; }
    const a = current[0], b = source[0];
    const apart = (lo1, hi1, lo2, hi2) => Math.max(0, lo2 - hi1, lo1 - hi2) + 2 * ${pad};  // between the nodes
    const gap = [apart(a.left, a.right, b.left, b.right), apart(a.top, a.bottom, b.top, b.bottom)];
    const room = [area.clientWidth - 2 * (${peek} + ${margin}), area.clientHeight - 2 * (${peek} + ${margin})];
    const at11 = ${readable} / px;  // how much larger everything is at 11 px text
    if (gap[0] * at11 <= room[0] && gap[1] * at11 <= room[1]) lost.push(['small', s, px]);
    else if (gap[0] * 1.25 <= room[0] && gap[1] * 1.25 <= room[1]) lost.push(['too small', s, px]);
  }
  return {lost: lost, below: below, measured: measured, step: Number(document.body.dataset.step)};
}"""
_CONSTANTS = (("readable", READABLE_PX), ("peek", PEEK_PX), ("margin", MARGIN_PX), ("pad", CUE_PAD_PX))
for _name, _value in (*_CONSTANTS, ("inview", IN_VIEW_PX)):
    WALK = WALK.replace("${" + _name + "}", str(_value))

# The rendered size in CSS px of the smallest text drawn in the view shown (Graphviz's font-size is in user units).
SMALLEST_TEXT = """() => {
  const svg = document.querySelector('.view:not([hidden]) svg');
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const sizes = [...svg.querySelectorAll('text')]
    .filter((t) => getComputedStyle(t).visibility !== 'hidden' && !t.closest('.folded, .future'))
    .map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
  return Math.min(...sizes);
}"""

STEPS = "JSON.parse(document.getElementById('graph-data').textContent)"
FULL = "document.getElementById('svg-full')"
SCALE = f"{FULL}.getBoundingClientRect().width / {FULL}.viewBox.baseVal.width"  # CSS px per drawing unit


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """LayerNorm pages with their loss (forward and backward) at d = 4, 16 and 64; pages of the norms whose stages
    differ, made by the command (GroupNorm's is an L-shaped layout on a phone)."""
    from microgradnorm import cli

    folder = tmp_path_factory.mktemp("view")
    made = {}
    for d in (4, 16, 64):
        graph, (*_, dy) = graph_problem(shape=(d,), backward=False)
        loss = graph.loss(dy.tolist())
        made[d] = to_html(loss, folder / f"ln{d}.html", graph=graph, paths=True)
    for name, args in (("batchnorm", ["--dim", "3", "--batch", "3"]), ("groupnorm", ["--shape", "2,4,2,2"])):
        made[name] = folder / f"{name}.html"
        assert cli.main(["graph", name, *args, "--grad", "--full", "--html", "-o", str(made[name])]) == 0
    return made


@pytest.fixture(scope="module")
def screens(tmp_path_factory) -> Path:
    named = os.environ.get("MICROGRADNORM_SCREENS")
    folder = Path(named) if named else tmp_path_factory.mktemp("screens")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def total_steps(tab) -> int:
    return tab.evaluate(f"(() => {{ const d = {STEPS}; return d.nodes.length + 1 + d.backward.length; }})()")


VIEWS = ("full", "stages", "folded")  # every node; one box per stage; every node with two stages folded
FOLDED = ("var", "affine")


def show(tab, view: str) -> None:
    """Go back to step 0 and show `view` (one of VIEWS)."""
    tab.keyboard.press("Home")
    stages = view == "stages"
    if (tab.get_attribute("#view-toggle", "aria-pressed") == "true") != stages:
        tab.click("#view-toggle")
    for name in FOLDED if not stages else ():
        button = f"#fold-cluster_{name}"
        if (tab.get_attribute(button, "aria-pressed") == "true") != (view == "folded"):
            tab.click(button)


@pytest.mark.parametrize("viewport", [DESKTOP, WIDE, PHONE], ids=["1280x800", "1920x1080", "390x844"])
@pytest.mark.parametrize("page", [4, 16, 64, "batchnorm", "groupnorm"])
def test_every_step_in_view_with_readable_text_sampled_on_larger_pages(needs_dot, chromium, pages, viewport, page):
    with opened(chromium, pages[page], viewport=viewport) as tab:
        assert tab.evaluate(SMALLEST_TEXT) >= READABLE_PX  # as it opens
        steps = total_steps(tab)
        every = 1 if page == 4 else max(1, steps // 25)  # the d = 4 page: every step
        for view in VIEWS:
            show(tab, view)
            walked = tab.evaluate(WALK, [steps, every])
            assert walked["measured"] == len({*range(every, steps + 1, every), steps}) >= 25, view
            assert walked["step"] == steps and walked["lost"] == [], view
            # stacked stages: the overview never needs text under 11 px, nor the d = 4 page on a laptop or larger
            if view == "stages" or (page == 4 and viewport != PHONE):
                assert walked["below"] == [], view


@pytest.mark.parametrize("d", [4, 64])
@pytest.mark.parametrize("viewport", [PHONE, {"width": 320, "height": 640}], ids=["390x844", "320x640"])
def test_a_phone_page_does_not_scroll_sideways_and_keeps_room_for_the_details(needs_dot, chromium, pages, viewport, d):
    with opened(chromium, pages[d], viewport=viewport) as tab:
        tab.keyboard.press("End")
        assert tab.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        heights = tab.evaluate(
            "['graph-area', 'panel', 'controls'].map(id => document.getElementById(id).getBoundingClientRect().height)"
        )
        graph, panel, _ = heights
        assert graph >= 0.25 * viewport["height"] and panel >= 0.15 * viewport["height"]
        rows = tab.evaluate(  # no button's label breaks over two lines
            "[...document.querySelectorAll('#controls button')].map(b => b.getBoundingClientRect().height)"
        )
        assert max(rows) < 2 * min(rows)


def _luminance(rgb: tuple[float, float, float]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _rgb(css: str) -> tuple[float, float, float]:
    parts = css[css.index("(") + 1 : css.index(")")].replace(",", " ").split()
    return tuple(float(p) for p in parts[:3])  # type: ignore[return-value]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_in_either_theme_the_step_frame_stands_out_and_axe_finds_nothing_serious(needs_dot, chromium, pages, theme):
    from axe_playwright_python.sync_playwright import Axe

    with opened(chromium, pages[4], viewport=DESKTOP, color_scheme=theme) as tab:
        assert tab.evaluate("document.documentElement.dataset.theme") == theme
        n = tab.evaluate(f"{STEPS}.nodes.length")
        tab.evaluate(WALK, [n + 5, 1000])  # a contribution: it has a source
        stroke = tab.evaluate("getComputedStyle(document.querySelector('rect.cue.current')).stroke")
        background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
        a, b = sorted((_luminance(_rgb(stroke)), _luminance(_rgb(background))), reverse=True)
        assert (a + 0.05) / (b + 0.05) >= CONTRAST, (stroke, background)
        assert tab.locator("#svg-full g.node.current").count() >= 1
        assert tab.locator("#svg-full g.node.source").count() >= 1
        assert tab.locator("rect.cue.source").count() >= 1
        tab.evaluate(WALK, [total_steps(tab) // 2 + 30, 1000])  # mid-backward
        for view in ("full", "stages"):
            violations = Axe().run(tab).response["violations"]
            serious = [v for v in violations if v["impact"] in ("serious", "critical")]
            bad = [(v["id"], v["impact"], len(v["nodes"])) for v in serious]
            assert bad == [], (view, bad)
            tab.click("#view-toggle")


def test_a_pinned_node_stays_while_hovering_and_stepping(needs_dot, chromium, pages):
    with opened(chromium, pages[4], viewport=WIDE) as tab:
        tab.keyboard.press("End")
        first, other = tab.evaluate(
            f"(() => {{ const d = {STEPS}; return [d.forward[0], d.forward[1]].map(k => [k, d.nodes[k].name]); }})()"
        )
        tab.click(f"#v{first[0]}")
        tab.hover(f"#v{other[0]}")
        assert tab.inner_text("#node-info h3") == first[1]
        tab.keyboard.press("ArrowLeft")
        assert tab.inner_text("#node-info h3") == first[1]


def test_focus_stays_on_the_stepping_controls_and_they_come_first(needs_dot, chromium, pages):
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        tab.keyboard.press("Tab")  # the stepping controls are first (|◀ and ◀ are disabled at step 0)
        assert tab.evaluate("document.activeElement.id") == "play"
        tab.focus("#last")
        tab.keyboard.press("Enter")  # to the last step: "last" is disabled now
        assert tab.evaluate("document.activeElement.id") == "back"
        tab.focus("#first")
        tab.keyboard.press("Enter")
        assert tab.evaluate("document.activeElement.id") == "forward"
        label = tab.inner_text("#view-toggle")
        tab.click("#view-toggle")
        assert tab.inner_text("#view-toggle") == label  # the label says what it does; aria-pressed says if it is on
        assert tab.get_attribute("#view-toggle", "aria-pressed") == "true"


def test_no_final_number_shows_before_backward_reaches_it_unless_asked(needs_dot, chromium, pages):
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        data = tab.evaluate(f"(() => {{ const d = {STEPS}; return [d.paths.inputs[0], d.nodes.length]; }})()")
        x0, n = data
        info = tab.evaluate(f"{STEPS}.paths.byNode[{x0}]")
        amounts = [p["amountText"] for p in info["paths"]]
        tab.evaluate(WALK, [n + 3, 1000])  # backward has started; x[0] is far from final
        tab.select_option("#node-select", str(x0))
        legend, panel = tab.inner_text("#path-info"), tab.inner_text("#node-info")
        assert not any(a in legend for a in amounts) and info["sumText"] not in legend
        assert "closed form" not in panel  # the check line waits for the final gradient
        tab.check("#reveal")
        assert all(a in tab.inner_text("#path-info") for a in amounts)
        tab.uncheck("#reveal")
        tab.keyboard.press("End")
        assert all(a in tab.inner_text("#path-info") for a in amounts)
        future = tab.evaluate(  # at step 0, no drawn number of a node not yet made is visible
            "(() => { document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Home', bubbles: true}));"
            " return [...document.querySelectorAll('.future text')].filter(t => getComputedStyle(t).visibility"
            " !== 'hidden').length; })()"
        )
        assert future == 0


def test_the_url_keeps_the_step_the_node_the_paths_and_the_view(needs_dot, chromium, pages):
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        d = tab.evaluate(STEPS)
        xhat = next(k for k, node in enumerate(d["nodes"]) if node["name"] == "xhat[2]")
        x1 = next(k for k, node in enumerate(d["nodes"]) if node["name"] == "x[1]")
        tab.evaluate(WALK, [78, 1000])
        tab.select_option("#node-select", str(xhat))
        tab.select_option("#path-select", str(x1))
        tab.click("#view-toggle")
        url = tab.url
        assert url.endswith("#step=78&node=xhat%5B2%5D&paths=x%5B1%5D&view=stages")
        tab.goto("about:blank")
        tab.goto(url)  # from file://, as a learner would open a shared link
        assert tab.evaluate("document.body.dataset.step") == "78"
        assert tab.inner_text("#node-info h3") == "xhat[2]"
        assert tab.evaluate("document.getElementById('path-select').value") == str(x1)
        assert tab.is_visible("#svg-stages") and not tab.is_visible("#svg-full")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280x800", "390x844"])
def test_screenshots_of_a_small_page_mid_backward_and_a_large_page_opening(
    needs_dot, chromium, pages, screens, viewport
):
    tag = f"{viewport['width']}x{viewport['height']}"
    with opened(chromium, pages[4], viewport=viewport) as tab:
        tab.evaluate(WALK, [tab.evaluate(SHOWN), 1000])  # backward, as the mean receives its second contribution
        shot = screens / f"d4-mid-backward-{tag}.png"
        tab.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
    with opened(chromium, pages[64], viewport=viewport) as tab:
        shot = screens / f"d64-opening-{tag}.png"
        tab.screenshot(path=str(shot))
        assert tab.is_visible("#svg-stages")
        assert tab.evaluate(SMALLEST_TEXT) >= READABLE_PX


def test_gradient_bars_show_size_and_sign_without_relying_on_colour(needs_dot, chromium, pages):
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        tab.keyboard.press("End")
        bars = tab.evaluate(
            "[...document.querySelectorAll('#svg-full g.node.value')].map(g => {"
            " const b = g.querySelector('.grad-bar');"
            " return [Number(g.dataset.grad), b && b.style.display !== 'none' ? b.getAttribute('class') : null,"
            " b ? Number(b.getAttribute('data-fraction')) : 0, b ? b.textContent : '']; })"
        )
        drawn = [(g, cls, w, sign) for g, cls, w, sign in bars if g != 0]
        assert drawn and all(cls is not None for _, cls, _, _ in drawn)
        for g, cls, _, sign in drawn:  # the sign as a class (colour), a glyph and, for negatives, dashes
            assert (cls.endswith("positive"), sign) == ((True, "+") if g > 0 else (False, "−"))
        largest = max(abs(g) for g, _, _, _ in drawn)  # at the last step every gradient is final
        for g, _, fraction, _ in drawn:  # the bar's share of the box: sqrt(|grad| / largest)
            assert fraction == pytest.approx(math.sqrt(abs(g) / largest), rel=1e-12)
        assert all(cls is None for g, cls, _, _ in bars if g == 0)
        assert "positive gradient" in tab.inner_text("#bars-legend")


WHAT_IF_RTOL = 1e-12  # the page replays the engine's own ops in the engine's order: only pow/exp may differ (1 ulp)


def _engine(x, gamma, beta, eps, dy):
    """The engine's graph for these inputs, backpropagated from L = Σ y·dy, in the drawing's node order."""
    from microgradnorm import viz
    from microgradnorm.registry import get_norm

    graph = get_norm("layernorm").build_graph(x, gamma, beta, eps)
    loss = graph.loss(list(dy))
    loss.backward()
    return viz.drawing(loss, graph).order


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280x800", "390x844"])
def test_what_if_edits_replay_the_recorded_graph_as_the_engine_computes_it(needs_dot, chromium, pages, viewport):
    edits = [
        {"x": [1.0, 2.0, 3.0, 5.0]},
        {"x": [0.1, -0.2, 0.30000000000000004, 7e-3], "gamma": [2.0, -1.0, 0.5, 1e-3], "eps": [0.25]},
        {"beta": [0.0, 0.0, 0.0, 1.0], "dy": [1.0, -1.0, 2.5, 1e-8], "eps": [0.0]},
    ]
    with opened(chromium, pages[4], viewport=viewport) as tab:
        inputs = {
            name: [float(v) for v in tab.input_value(f"#whatif-{name}").split(",")]
            for name in ("x", "gamma", "beta", "eps", "dy")
        }
        for edit in edits:
            inputs.update(edit)
            for name, values in edit.items():
                tab.fill(f"#whatif-{name}", ", ".join(repr(v) for v in values))
            tab.click("#whatif-apply")
            assert tab.inner_text("#whatif-error") == ""
            tab.keyboard.press("End")
            order = _engine(inputs["x"], inputs["gamma"], inputs["beta"], inputs["eps"][0], inputs["dy"])
            shown = tab.eval_on_selector_all(
                "g.node.value", "els => els.map(e => [e.id, e.dataset.value, e.dataset.grad])"
            )
            assert len(shown) == len(order)
            for node_id, value, grad in shown:
                node = order[int(node_id[1:])]
                assert float(value) == pytest.approx(node.data, rel=WHAT_IF_RTOL, abs=0), node_id
                assert float(grad) == pytest.approx(node.grad, rel=WHAT_IF_RTOL, abs=0), node_id
            # the step line speaks of the new numbers too
            tab.keyboard.press("Home")
            n = tab.evaluate(f"{STEPS}.nodes.length")
            tab.evaluate(WALK, [n + 2, 1000])
            y0 = next(v for v in order if v.label == "y")
            dy0 = inputs["dy"][0]
            assert tab.inner_text("#status").startswith("Backward 1/")
            assert f"{y0.label}[0].grad += {viz_num(dy0)} × 1 (= {viz_num(dy0)})" in tab.inner_text("#status")


def test_what_if_refuses_bad_input_in_one_line_and_keeps_the_numbers(needs_dot, chromium, pages):
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        tab.keyboard.press("End")
        before = tab.eval_on_selector_all("g.node.value", "els => els.map(e => e.dataset.grad)")
        for name, text, expected in (
            ("x", "1, 2, 3", "x: expected 4 numbers separated by commas, got “1, 2, 3”"),
            ("x", "1, 2, three, 4", "x: expected 4 numbers separated by commas, got “1, 2, three, 4”"),
            ("eps", "-1", "eps: expected a number >= 0, got “-1”"),
        ):
            original = tab.input_value(f"#whatif-{name}")
            tab.fill(f"#whatif-{name}", text)
            tab.click("#whatif-apply")
            assert tab.inner_text("#whatif-error") == expected
            tab.fill(f"#whatif-{name}", original)
        tab.fill("#whatif-x", "1, 1, 1, 1")
        tab.fill("#whatif-eps", "0")  # var + eps = 0: std = 0 and rstd infinite
        tab.click("#whatif-apply")
        assert "infinite" in tab.inner_text("#whatif-error")
        assert tab.eval_on_selector_all("g.node.value", "els => els.map(e => e.dataset.grad)") == before


def test_a_stage_box_of_the_overview_opens_that_stage_with_the_others_folded(needs_dot, chromium, pages):
    with opened(chromium, pages[16], viewport=DESKTOP) as tab:
        tab.click("#view-toggle")  # the d = 16 page opens with every node; the stage view is the overview
        assert tab.is_visible("#svg-stages")
        tab.focus("#s_var")
        tab.keyboard.press("Enter")
        assert tab.is_visible("#svg-full") and not tab.is_visible("#svg-stages")
        pressed = tab.eval_on_selector_all(
            "#stage-list button", "els => els.map(b => [b.id, b.getAttribute('aria-pressed')])"
        )
        assert dict(pressed)["fold-cluster_var"] == "false"
        assert all(p == "true" for name, p in pressed if name != "fold-cluster_var")
        box = tab.evaluate("document.getElementById('cluster_var').getBoundingClientRect().toJSON()")
        pane = tab.evaluate("document.getElementById('graph-area').getBoundingClientRect().toJSON()")
        assert box["right"] > pane["left"] and box["left"] < pane["right"]  # the opened stage is in view
        assert box["bottom"] > pane["top"] and box["top"] < pane["bottom"]


def test_the_minimap_frames_the_part_in_the_pane_and_takes_you_elsewhere(needs_dot, chromium, pages):
    frame_of = "['x', 'y', 'width', 'height'].map(a => Number(document.getElementById('minimap-view').getAttribute(a)))"
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        assert tab.is_visible("#minimap")  # the d = 4 drawing is wider than the pane
        box = tab.evaluate(f"{FULL}.viewBox.baseVal.width")
        before = tab.evaluate(frame_of)
        scroll = tab.evaluate("document.getElementById('graph-area').scrollLeft")
        scale = tab.evaluate(SCALE)
        pane = tab.evaluate("document.getElementById('graph-area').clientWidth")
        assert before[2] == pytest.approx(pane / scale, rel=1e-6)  # the frame is as wide as the pane shows
        target = tab.evaluate(  # click the minimap at 80 % of the drawing's width
            "(() => { const m = document.getElementById('minimap'); const r = m.getBoundingClientRect();"
            " const p = m.createSVGPoint(); const ctm = m.getScreenCTM();"
            f" p.x = 0.8 * {box}; p.y = 0; const s = p.matrixTransform(ctm); return [s.x, r.top + r.height / 2]; }})()"
        )
        tab.mouse.click(*target)
        # the frame follows the pane's scroll event, a moment later on a loaded machine: wait for it to move
        tab.wait_for_function(f"{frame_of}[0] !== {before[0]}", timeout=10_000)
        after = tab.evaluate(frame_of)
        assert tab.evaluate("document.getElementById('graph-area').scrollLeft") > scroll
        assert after[0] + after[2] / 2 == pytest.approx(0.8 * box, abs=after[2] / 2 + 1)  # centred there, or at the end


def test_folding_a_stage_compacts_the_drawing_and_its_steps_show_on_its_box(needs_dot, chromium, pages):
    box_of = "(id) => document.getElementById(id).getBoundingClientRect().toJSON()"
    with opened(chromium, pages[4], viewport=DESKTOP) as tab:
        height = f"{FULL}.viewBox.baseVal.height"
        unfolded = tab.evaluate(height)
        var = tab.evaluate(f"({box_of})('cluster_var')")
        sqrt = tab.evaluate(f"({box_of})('cluster_sqrt')")
        scale = tab.evaluate(SCALE)
        tab.click("#fold-cluster_var")
        folded_box = tab.evaluate(f"({box_of})('folded-cluster_var')")
        assert folded_box["height"] < var["height"] / 3  # the box, not the stage's nodes
        saved = (var["height"] - folded_box["height"]) / scale  # drawing units the fold frees
        assert tab.evaluate(height) == pytest.approx(unfolded - saved, abs=1)  # the whole drawing is that much shorter
        moved = tab.evaluate(f"({box_of})('cluster_sqrt')")  # the stage below moved up by as much
        assert moved["top"] == pytest.approx(sqrt["top"] - (var["height"] - folded_box["height"]), abs=2)
        # a step inside the folded stage: shown on its box, which is in view
        d = tab.evaluate(STEPS)
        inside = {k for s in d["stages"] if s["name"] == "var" for k in s["nodes"]}
        step = next(s + 1 for s, k in enumerate(d["forward"]) if k in inside)
        tab.evaluate(WALK, [step, 1000])
        assert tab.evaluate("document.getElementById('folded-cluster_var').classList.contains('current')")
        cue = tab.evaluate("document.querySelector('rect.cue.current').getBoundingClientRect().toJSON()")
        pane = tab.evaluate(f"({box_of})('graph-area')")
        assert cue["bottom"] > pane["top"] and cue["top"] < pane["bottom"]
        assert cue["right"] > pane["left"] and cue["left"] < pane["right"]
        tab.click("#fold-cluster_var")  # opened again: the drawing is as it was
        assert tab.evaluate(height) == pytest.approx(unfolded, abs=1e-6)
