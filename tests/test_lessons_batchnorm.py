"""Lesson 08 (BatchNorm) and the cube figure of lessons 08 and 10, checked against oracles written here.

Oracles: which values share a statistic, written out by hand per norm from the
papers' definitions (BatchNorm: same channel; LayerNorm: same example;
GroupNorm: same example and channel group; for tokens [B, T, C] BatchNorm:
same channel, LayerNorm/RMSNorm: same token); NumPy standardization written
here; the predictions' answers recomputed from those oracles for several seeds.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from microgradnorm import tolerances as tol
from microgradnorm.lessons import demos_batchnorm as bn
from microgradnorm.lessons import norm_axes as A
from microgradnorm.lessons.demos import LessonParams, load_demos, run_demo
from tests.helpers import flat, marked, numeric_grad, standardize
from tests.helpers import rendered as render

SEEDS = (0, 1, 2, 5, 11)


# ---- which values share a statistic --------------------------------------------------------


def same_group_by_hand(layout: str, label: str, shape: tuple[int, ...]) -> np.ndarray:
    """[size, size]: True where two values are normalized together, from the norms' definitions."""
    index = np.indices(shape).reshape(len(shape), -1)  # the coordinates of every value
    if layout == "images":
        n, c = index[0], index[1]
        key = {
            "BatchNorm": (c,),
            "LayerNorm": (n,),
            "GroupNorm": (n, c // (shape[1] // A.GROUPS)),
        }[label]
    else:
        b, t, c = index
        key = {"BatchNorm": (c,), "LayerNorm": (b, t), "RMSNorm": (b, t)}[label]
    same = np.ones((index.shape[1], index.shape[1]), dtype=bool)
    for k in key:
        same &= k[:, None] == k[None, :]
    return same


@pytest.mark.parametrize(
    ("layout", "shape"),
    [("images", (3, 6, 2, 2)), ("images", (2, 4, 1, 3)), ("tokens", (2, 3, 6)), ("tokens", (3, 2, 4))],
)
def test_group_ids_from_the_registry_match_the_definitions(layout, shape):
    lay = A.LAYOUTS[layout]
    for pooling in A.poolings(lay, shape):
        ids = A.group_ids(pooling, shape).reshape(-1)
        assert np.array_equal(ids[:, None] == ids[None, :], same_group_by_hand(layout, pooling.label, shape))


@pytest.mark.parametrize("layout", ["images", "tokens"])
def test_changing_one_value_moves_exactly_its_group(layout):
    lay = A.LAYOUTS[layout]
    x = np.random.default_rng(3).normal(size=lay.shape)
    for pooling in A.poolings(lay):
        assert np.array_equal(A.moved_by_one(pooling, x), same_group_by_hand(layout, pooling.label, lay.shape))


def test_pooled_axes_in_words():
    lay = A.LAYOUTS["images"]
    words = {p.label: A.pooled_axes(A.group_ids(p, lay.shape), lay.axes) for p in A.poolings(lay)}
    assert words == {"BatchNorm": "N, H, W", "LayerNorm": "C, H, W", "GroupNorm": f"H, W, C/{A.GROUPS}"}
    tok = A.LAYOUTS["tokens"]
    words = {p.label: A.pooled_axes(A.group_ids(p, tok.shape), tok.axes) for p in A.poolings(tok)}
    assert words == {"BatchNorm": "B, T", "LayerNorm": "C", "RMSNorm": "C"}


def test_groupnorm_refuses_channels_it_cannot_split():
    with pytest.raises(ValueError, match="shape: GroupNorm needs C divisible by 2, got C = 5"):
        A.poolings(A.LAYOUTS["images"], (2, 5, 2, 2))


def _marks(text: str, label_prefix: str) -> list[str]:
    """The ■/· cells of each grid line (one line holds every panel, side by side)."""
    return [line for line in text.splitlines() if line.lstrip().startswith(label_prefix)]


def test_the_terminal_grid_marks_the_first_values_group():
    lay = A.LAYOUTS["images"]
    text = render(A.axes_panels(lay))
    n, c = lay.shape[:2]
    lines = _marks(text, "n")
    assert len(lines) == n
    for r, line in enumerate(lines):
        panels = [re.findall(r"[■·]", part) for part in re.split(r"n\d", line)[1:]]
        bn_cells, ln_cells, gn_cells = panels
        assert bn_cells == ["■"] + ["·"] * (c - 1)  # one channel, every example
        assert ln_cells == (["■"] * c if r == 0 else ["·"] * c)  # one example, every channel
        half = c // A.GROUPS
        assert gn_cells == (["■"] * half + ["·"] * (c - half) if r == 0 else ["·"] * c)
    size = lay.shape[0] * lay.shape[2] * lay.shape[3]
    assert f"{c} groups of {size}" in text


def test_the_svg_cube_shades_the_same_cells():
    lay = A.LAYOUTS["tokens"]
    svg = A.axes_figure(lay).svg()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    shaded = svg.count(f'fill="{A.PALETTE[0]}"')
    b, t, c = lay.shape
    # visible faces: front (T x C at B = 0), top (C x B at T = 0), right (T x B at C = last)
    # BatchNorm, channel 0: front column (t), top column (b), right face none  -> t + b
    # LayerNorm and RMSNorm, token (0, 0): front row (c), top front strip (c), and on the right
    # face the one cell at t = 0, b = 0                                         -> 2 c + 1 each
    assert shaded == (t + b) + 2 * (2 * c + 1)
    assert "BatchNorm" in svg and "RMSNorm" in svg and "over B, T" in svg


def test_the_cube_demo_checks_and_returns_the_figure():
    out = run_demo("norm_axes_cube", LessonParams(), {"layout": "tokens"})
    assert marked(out, "outputs that move outside their value's group, or stay inside it")
    assert "✗" not in render(out.renderable)
    assert isinstance(out.graph, A.AxesFigure) and "<svg" in out.graph.svg()
    with pytest.raises(ValueError, match="layout: expected one of images, tokens, got 'video'"):
        run_demo("norm_axes_cube", LessonParams(), {"layout": "video"})


# ---- predictions -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("eps", [1e-5, 0.0, 1.0, 1e8])
def test_the_shift_prediction_matches_numpy(seed, eps):
    """Adding a number to every X leaves xhat, so dgamma, unchanged at any eps (a question lesson 4 does not ask)."""
    p = LessonParams(dim=3, seed=seed, eps=eps, batch=4)
    x, _gamma, _, dy = bn._batch(p)
    out = run_demo("bn_param_grads", p)
    dg = np.sum(dy * standardize(x, 0, eps), axis=0)
    dg_shifted = np.sum(dy * standardize(x + bn.SHIFT, 0, eps), axis=0)
    # the oracle's own check: the two agree to the rounding of the centering (values of size |x| + SHIFT)
    rounding = 64 * np.finfo(float).eps * (np.max(np.abs(x)) + bn.SHIFT) / np.sqrt(np.var(x, axis=0).min() + eps)
    assert np.max(np.abs(dg_shifted - dg)) <= rounding * np.sum(np.abs(dy), axis=0).max()
    assert out.prediction.choices[out.prediction.answer] == "it stays the same"
    assert "Add 5 to every value of X" in out.prediction.question


@pytest.mark.parametrize("batch", [2, 3, 4, 9])
def test_the_slip_prediction_and_its_ratio(batch):
    p = LessonParams(dim=3, seed=batch, batch=batch)
    out = run_demo("bn_variance_slip", p)
    assert out.prediction.choices[out.prediction.answer] == "(m − 1)/m of it"
    assert f"(m − 1)/m = {(batch - 1) / batch:.4g} for m = {batch}" in out.prediction.why
    paths = bn.slip_paths(p)
    ratio = paths["slip_via_var"] / paths["via_var"]
    assert np.allclose(ratio, (batch - 1) / batch, rtol=tol.CLOSED_FORM_RTOL)
    text = render(out.renderable)
    assert text.count("✓") == 3 and "✗" not in text


# ---- checked claims ------------------------------------------------------------------------------


def _torch_dx(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> np.ndarray:
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x, requires_grad=True)
    mu = xt.mean(dim=0, keepdim=True)
    y = torch.tensor(gamma) * (xt - mu) / torch.sqrt(((xt - mu) ** 2).mean(dim=0, keepdim=True) + eps)
    (y * torch.tensor(dy)).sum().backward()
    return xt.grad.numpy()


@pytest.mark.parametrize(("m", "eps"), [(4, 0.0), (2, 0.0), (7, 0.0), (4, 1e-5), (5, 0.3), (2, 1e-5)])
def test_the_gradient_bound_is_met_and_tight_at_eps_0(m, eps):
    """Santurkar et al.'s Theorem 4.1 for one BatchNorm layer, with PyTorch's dX as the oracle."""
    rng = np.random.default_rng(m)
    x, dy, gamma = rng.normal(0.5, 2.0, size=(m, 3)), rng.normal(size=(m, 3)), rng.uniform(0.5, 1.5, 3)
    dx = _torch_dx(x, gamma, dy, eps)
    xhat, std = standardize(x, 0, eps), np.sqrt(x.var(axis=0) + eps)
    bound = (gamma / std) ** 2 * (
        np.sum(dy**2, axis=0) - np.sum(dy, axis=0) ** 2 / m - np.sum(xhat * dy, axis=0) ** 2 / m
    )
    lhs = np.sum(dx**2, axis=0)
    # the bound subtracts terms of size (gamma/std)² |dY|² (at m = 2 they cancel to 0): tolerances scale with them
    slack = tol.CLOSED_FORM_RTOL * (gamma / std) ** 2 * np.sum(dy**2, axis=0)
    assert np.all(lhs <= bound + slack)
    if eps == 0:
        assert np.all(np.abs(lhs - bound) <= slack)
    elif m > 2:
        assert np.all(lhs < bound - slack)
    ours = bn.gradient_bound(x, gamma, dy, eps)
    assert np.all(np.abs(ours[0] - lhs) <= slack) and np.all(np.abs(ours[1] - bound) <= slack)
    p = LessonParams(dim=3, seed=m, eps=eps, batch=m)
    text = flat(run_demo("bn_gradient_bound", p).renderable, 60)
    assert text.startswith("✓ |dX_j|² ≤ (gamma_j/std_j)²")
    assert ("equal at eps = 0" in text) == (eps == 0)


def test_the_radial_remainder_at_eps_is_what_the_demo_predicts():
    # independent: dX from central differences of the loss, not from the closed form
    rng = np.random.default_rng(7)
    x, dy, eps = rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), 0.5

    dx = numeric_grad(lambda v: np.sum(standardize(v, 0, eps) * dy), x)
    xhat = standardize(x, 0, eps)
    var = x.var(axis=0)
    predicted = (var + eps) ** -0.5 * np.sum(dy * xhat, axis=0) * eps / (var + eps)
    assert np.allclose(np.sum(dx * xhat, axis=0), predicted, rtol=tol.FD_RTOL, atol=tol.FD_ATOL)


@pytest.mark.parametrize(
    "p",
    [
        LessonParams(dim=3, batch=4),
        LessonParams(dim=5, seed=3, eps=0.0, batch=2),
        LessonParams(dim=2, seed=8, eps=0.1, batch=7),
    ],
)
def test_every_lesson_8_demo_shows_only_passing_checks(p):
    names = [name for name, spec in load_demos().items() if spec.module == bn.__name__]  # and the cube of lesson 8
    lesson_8 = {"bn_axes", "bn_param_grads", "bn_three_paths", "bn_variance_slip", "bn_simplified"}
    assert lesson_8 | {"bn_is_ln_transposed", "bn_gradient_bound"} <= set(names)
    for name in names:
        text = render(run_demo(name, p).renderable, 60)
        assert "✓" in text and "✗" not in text, name


@pytest.mark.parametrize("name", ["bn_three_paths", "bn_simplified", "bn_gradient_bound"])
def test_at_two_values_per_column_and_eps_0_the_dx_steps_say_dx_is_rounding(name):
    """m = 2, eps = 0: every column is (−1, +1) whatever X is, so dX is 0 and the steps say so; at m = 3 they don't."""
    two = LessonParams(seed=3, dim=3, eps=0.0, batch=2)
    x = bn._batch(two)[0]
    xhat = (x - x.mean(0)) / x.std(0)
    assert np.allclose(np.abs(xhat), 1.0)  # the reason, checked independently
    said = "m = 2, eps = 0"

    def shown(p: LessonParams) -> str:
        return render(run_demo(name, p).renderable)

    assert said in shown(two)
    assert said not in shown(LessonParams(seed=3, dim=3, eps=0.0, batch=3))
    assert said not in shown(LessonParams(seed=3, dim=3, eps=1e-5, batch=2))
