"""The page's own words, in the current language: the labels of its HTML and the messages its script shows.

The page is one file that fetches nothing, so its words travel inside it: :func:`html_text`
fills the placeholders of ``page.html`` (headings, buttons, their tooltips and accessible
names), :func:`script_text` goes into the page's data as ``ui``, where ``page.js`` fills in
the ``{name}`` fields of each message. Numbers and formulas are never part of these
words: they come from the engine (:mod:`microgradnorm.page.data`).
"""

from __future__ import annotations

import html

from microgradnorm.i18n import SIMPLIFIED_CHINESE, _, current_language, pgettext

__all__ = ["html_lang", "html_text", "script_text"]


# Every word here has the catalog context "graph page": short words like "value" or "sum" are the page's own.


def html_lang() -> str:
    """The ``lang`` attribute of the page: ``en`` or ``zh-CN``."""
    return SIMPLIFIED_CHINESE if current_language() == SIMPLIFIED_CHINESE else "en"


def html_text() -> dict[str, str]:
    """``page.html``'s placeholder -> its words, escaped for HTML (text and attribute values alike)."""
    words = {
        "graph_area": pgettext("graph page", "The computation graph"),
        "details": pgettext("graph page", "Details"),
        "step_heading": pgettext("graph page", "Step"),
        "node_heading": pgettext("graph page", "Node"),
        # Translators: a label before the list of nodes the panel can show
        "show": pgettext("graph page", "Show"),
        "node_select": pgettext("graph page", "Node to show"),
        "paths_heading": pgettext("graph page", "Gradient paths"),
        # Translators: a label before the list of inputs x_i whose gradient paths are coloured
        "into": pgettext("graph page", "Into"),
        "path_select": pgettext("graph page", "Input whose gradient paths to colour"),
        "stages_heading": pgettext("graph page", "Stages"),
        "stages_why": pgettext("graph page", "Fold a stage into one box, or open it again."),
        "check_heading": pgettext("graph page", "Check"),
        "keys_heading": pgettext("graph page", "Keys"),
        "keys": pgettext(
            "graph page",
            "→ / ← one step · Shift+→ / Shift+← one stage · Space play or pause · Home / End first or last "
            "step · + / − / 0 zoom (0: actual size) · Esc follow the steps again",
        ),
        "controls": pgettext("graph page", "Stepping"),
        "first": pgettext("graph page", "First step (Home)"),
        # Translators: the accessible names say "Left"/"Right" (read aloud); the tooltips show the arrows
        "back_stage_label": pgettext("graph page", "Back one stage (Shift+Left)"),
        "back_stage": pgettext("graph page", "Back one stage (Shift+←)"),
        "back_label": pgettext("graph page", "Back one step (Left)"),
        "back": pgettext("graph page", "Back one step (←)"),
        "play_label": pgettext("graph page", "Play (Space)"),
        "play_title": pgettext("graph page", "Play or pause (Space)"),
        "play": pgettext("graph page", "▶ Play"),
        "forward_label": pgettext("graph page", "Forward one step (Right)"),
        "forward": pgettext("graph page", "Forward one step (→)"),
        "forward_stage_label": pgettext("graph page", "Forward one stage (Shift+Right)"),
        "forward_stage": pgettext("graph page", "Forward one stage (Shift+→)"),
        "last": pgettext("graph page", "Last step (End)"),
        "scrubber": pgettext("graph page", "Step"),
        "one_box": pgettext("graph page", "One box per stage"),
        "zoom_out": pgettext("graph page", "Zoom out (−)"),
        "zoom_actual": pgettext("graph page", "Actual size (0)"),
        "zoom_fit_label": pgettext("graph page", "Whole drawing in the window"),
        # Translators: a short button: zoom so that the whole drawing fits the window
        "zoom_fit": pgettext("graph page", "Fit"),
        "zoom_in": pgettext("graph page", "Zoom in (+)"),
        # Translators: a button that switches to the dark colour theme
        "dark": pgettext("graph page", "Dark"),
        # Translators: a label before the list of playing speeds (steps per second)
        "speed": pgettext("graph page", "Speed"),
        "reveal": pgettext("graph page", "Show final gradients now (before backward reaches them)"),
        "whatif_heading": pgettext("graph page", "What if"),
        "whatif_why": pgettext(
            "graph page",
            "Change the inputs and apply: the page replays the recorded graph, forward then backward, op by op.",
        ),
        "whatif_apply": pgettext("graph page", "Apply"),
        "whatif_reset": pgettext("graph page", "Original inputs"),
        # Translators: the legend of the bars under the nodes: a solid bar and "+" ...
        "bar_positive": pgettext("graph page", "positive gradient"),
        # Translators: ... a dashed bar and "−"
        "bar_negative": pgettext("graph page", "negative gradient"),
        "bar_size": pgettext(
            "graph page",
            "A bar's length grows with the square root of the gradient's size, the largest final one full.",
        ),
    }
    return {f"ui_{key}": html.escape(text, quote=True) for key, text in words.items()}


def script_text() -> dict[str, str]:
    """The messages of ``page.js``, by name; ``{name}`` fields are filled in by the script."""
    return {
        "pressToStart": pgettext("graph page", "Press → to run the forward pass: {n} values, made in order."),
        # Translators: {forward} is how the node was computed, e.g. "xhat[2] = xshift[2]·rstd"
        "forwardStep": pgettext("graph page", "Forward {t}/{n}: {forward} = {value}"),
        "forwardLeaf": pgettext("graph page", "Forward {t}/{n}: {forward} = {value} (a leaf)"),
        "stageOf": pgettext("graph page", "stage {stage}"),
        # Translators: {text} is e.g. "L.grad = 1: dL/dL, where backward() starts"
        "backwardStarts": pgettext("graph page", "Backward starts: {text}"),
        # Translators: {text} is e.g. "y[0].grad += 0.3 × 1 = 0.3 (1/1)"
        "backwardStep": pgettext("graph page", "Backward {j}/{m}: {text}"),
        "allFinal": pgettext("graph page", "{text} · every gradient is final"),
        "forwardDone": pgettext("graph page", "{text} · the forward pass is done"),
        "counter": pgettext("graph page", "step {t} of {total}"),
        "gradForwardOnly": pgettext("graph page", "not computed: this page shows the forward pass only"),
        "gradNotYet": pgettext("graph page", "not yet: backward starts after the forward pass"),
        "gradRevealed": pgettext("graph page", "not yet; backward() will give {exact}"),
        # Translators: one backward step, e.g. "rstd.grad += -0.6337 × -1.035 (= 0.6556); total 0.1687 (2/4)"
        "contribution": _("{name}.grad += {local} × {grad} (= {product}); total {total} ({k}/{m})"),
        "whatIfCount": pgettext("graph page", "{name}: expected {n} numbers separated by commas, got “{got}”"),
        "whatIfEps": pgettext("graph page", "eps: expected a number >= 0, got “{got}”"),
        "whatIfNotFinite": pgettext(
            "graph page", "These inputs make a value infinite or not a number; the page keeps the previous ones."
        ),
        # Translators: a playing speed, {n} steps per second
        "perSecond": pgettext("graph page", "{n} steps/s"),
        "gradCount": pgettext("graph page", "{grad} ({k}/{m} contributions)"),
        "gradCountFinal": pgettext("graph page", "{grad} ({k}/{m} contributions), final ✓; backward() gives {exact}"),
        "gradFinal": pgettext("graph page", "{grad}, final ✓; backward() gives {exact}"),
        # Translators: {cf} and {fd} are ✓ or ✗
        "checkLine": pgettext(
            "graph page", "after backward: autograd {grad} · closed form {closed}{cf} · finite difference {fdValue}{fd}"
        ),
        "checkLineNoFd": pgettext(
            "graph page",
            "after backward: autograd {grad} · closed form {closed}{cf} · finite difference not taken here",
        ),
        "factCheck": pgettext("graph page", "check"),
        "factValue": pgettext("graph page", "value"),
        "factGrad": pgettext("graph page", "grad"),
        "factMadeBy": pgettext("graph page", "made by"),
        "factOp": pgettext("graph page", "op"),
        "factStage": pgettext("graph page", "stage"),
        "factLabel": pgettext("graph page", "label"),
        "factLocal": pgettext("graph page", "local"),
        "hoverHint": pgettext("graph page", "Hover or click a node, or choose one above."),
        "notComputedYet": pgettext("graph page", "not computed yet"),
        "leaf": pgettext("graph page", "nothing: a leaf (an input, a parameter or a constant)"),
        # Translators: a node without a stage or a label
        "none": pgettext("graph page", "none"),
        "pathsNormOnly": pgettext("graph page", "Paths are drawn for a built norm only."),
        # Translators: the last row of the gradient paths table, whose amounts it adds up
        "pathSum": pgettext("graph page", "sum"),
        "autogradGrad": pgettext("graph page", "autograd's {name}.grad = {grad}"),
        "folded": pgettext("graph page", "{stage}: {formula} · {n} values folded"),
        "foldedNoFormula": pgettext("graph page", "{stage} · {n} values folded"),
        "clickToOpen": pgettext("graph page", "Click to open {stage}"),
        "openInPlace": pgettext("graph page", "Open {stage} with every node, the other stages folded"),
        "openStage": pgettext("graph page", "Open {stage}"),
        "foldStage": pgettext("graph page", "Fold {stage}"),
        "followSteps": pgettext("graph page", "(follow the steps)"),
        # Translators: the choice of no input in the list of gradient paths
        "noInput": pgettext("graph page", "(none)"),
        # Translators: said under the step when the drawing shrank (text under 11 px) to show both nodes of a step
        "zoomedOut": pgettext(
            "graph page",
            "Zoomed out to {percent}% to show where this contribution comes from; the next step returns to your zoom.",
        ),
    }
