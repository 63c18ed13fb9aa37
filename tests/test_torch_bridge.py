"""microgradnorm.torch against torch.nn: same layers, same numbers, the standard checks. Skipped without torch.

Oracles: torch.nn's own layers (float64 to rounding, float32 to a named
tolerance), torch.autograd.gradcheck (finite differences in float64) and
torch.library.opcheck (the custom ops' registration).
"""

from __future__ import annotations

import inspect
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from microgradnorm import tolerances as tol
from microgradnorm.registry import get_norm
from microgradnorm.vectorized import layer_norm_backward as backward  # a right pair: the package's own
from microgradnorm.vectorized import layer_norm_forward as forward
from tests import tolerances as test_tol

from .strategies import norm_problems

torch = pytest.importorskip("torch")
mt = pytest.importorskip("microgradnorm.torch")
from microgradnorm.torch import ops  # noqa: E402

from .torch_pairs import CASES, PAIRS, close, pair, run  # noqa: E402

# float32 outputs and gradients of this package against torch.nn's float32: both round each
# row's statistics differently, a few float32 units (6e-8) of the values' magnitude
FLOAT32_VS_TORCH_RTOL = 1e-5
# 50 training steps of a small float32 model, once with torch.nn.LayerNorm and once with ours:
# the rounding differences of each step feed into the next, so the weights drift apart by more
# than one step's rounding, but by far less than one learning-rate step (1e-2 here)
TRAINED_F32_RTOL = 1e-4
# the same in float64: rounding differences of 1e-16 grow no larger than this in 50 steps
TRAINED_F64_RTOL = 1e-10
F64 = test_tol.TORCH_F64

# ---- the layers are torch.nn's -----------------------------------------------------------------------


@pytest.mark.parametrize("name", PAIRS)
def test_same_constructor_as_torch_nn(name):
    ours, theirs = PAIRS[name]

    def plain(cls):  # names, kinds and defaults (annotations differ in spelling only)
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls.__init__).parameters.values()]

    assert [p for p in plain(ours) if p[0] != "function"] == plain(theirs)
    assert issubclass(ours, theirs)


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CASES)
def test_same_parameters_buffers_and_state_dict_keys(name, args, kwargs, shape):
    ours, theirs = PAIRS[name][0](*args, **kwargs), PAIRS[name][1](*args, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (n1, a), (n2, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert n1 == n2 and a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    assert repr(ours) == repr(theirs).replace(name, f"microgradnorm.torch.{name}", 1)  # says it was swapped


# ---- the numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, F64), (torch.float32, (FLOAT32_VS_TORCH_RTOL, 0))])
@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CASES)
def test_forward_and_backward_equal_torch_nn_over_train_and_eval(name, args, kwargs, shape, dtype, tolerance):
    """float64 to rounding, float32 within float32 rounding; the results in x's dtype."""
    ours, theirs = pair(name, args, kwargs, dtype=dtype)
    gen = torch.Generator().manual_seed(1)
    for step in range(3):  # three training steps move the running statistics, then one in eval mode
        x = torch.randn(shape, generator=gen, dtype=dtype) * 3 + 1
        dy = torch.randn(shape, generator=gen, dtype=dtype)
        if step == 2:
            ours.eval(), theirs.eval()
        (y1, dx1, g1), (y2, dx2, g2) = run(ours, x, dy), run(theirs, x, dy)
        assert y1.dtype == dx1.dtype == dtype and all(g.dtype == dtype for g in g1.values())
        assert close(y1, y2, *tolerance), (name, step)
        assert close(dx1, dx2, *tolerance), (name, step)
        for n in g2:
            assert close(g1[n], g2[n], *tolerance), (name, step, n)
        for key, value in theirs.state_dict().items():
            assert close(ours.state_dict()[key], value, *tolerance), (name, step, key)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rmsnorm_eps_none_is_the_machine_epsilon_of_the_computation(dtype):
    ours, theirs = pair("RMSNorm", (4,), {}, dtype=dtype)
    x = torch.tensor([[1e-5, -2e-5, 3e-5, 0.0]], dtype=dtype)  # mean square near eps: eps shows in y
    rtol = test_tol.TORCH_F64_RTOL if dtype == torch.float64 else FLOAT32_VS_TORCH_RTOL
    assert ours.eps is None and close(ours(x), theirs(x), rtol)
    assert not close(ours(x), torch.nn.functional.rms_norm(x, (4,), ours.weight, 1e-3), rtol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs_compute_in_float32_and_come_back_in_their_dtype(dtype):
    ours, theirs = pair("LayerNorm", (8,), {}, dtype=dtype)
    x = torch.randn(4, 8).to(dtype)
    y = ours(x)
    assert y.dtype == dtype
    want = torch.nn.functional.layer_norm(x.float(), (8,), theirs.weight.float(), theirs.bias.float())
    assert close(y, want, test_tol.FLOAT16_RTOL, test_tol.FLOAT16_ATOL)


@pytest.mark.parametrize("name", ["LayerNorm", "RMSNorm", "BatchNorm1d"])
def test_non_contiguous_inputs_give_the_contiguous_result(name):
    ours, _ = pair(name, (6,), {})
    base = torch.randn(6, 10, dtype=torch.float64)
    x = base.t()[:, :]  # [10, 6], a transposed view
    assert not x.is_contiguous()
    dy = torch.randn(10, 6, dtype=torch.float64)
    (y1, dx1, _), (y2, dx2, _) = run(ours, x, dy), run(ours, x.contiguous(), dy)
    assert torch.equal(y1, y2) and torch.equal(dx1, dx2)
    strided_dy = torch.randn(6, 10, dtype=torch.float64).t()
    _, dx3, _ = run(ours, x, strided_dy)
    _, dx4, _ = run(ours, x, strided_dy.contiguous())
    assert torch.equal(dx3, dx4)


# ---- the standard checks -------------------------------------------------------------------------------


def _op_inputs(norm, shape, requires_grad=False, dtype=torch.float64, param_dtype=None):
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 2 + 0.5).to(dtype)
    spec = get_norm(norm)
    c = spec.param_size(shape)
    w = (torch.rand(c, generator=gen, dtype=torch.float64) + 0.5).to(param_dtype or dtype)
    b = torch.randn(c, generator=gen, dtype=torch.float64).to(param_dtype or dtype) if spec.has_beta else None
    return [t if t is None else t.requires_grad_(requires_grad) for t in (x, w, b)]


OP_SHAPES = [("layernorm", (3, 5)), ("layernorm", (2, 2, 4)), ("rmsnorm", (3, 5)), ("batchnorm", (6, 3)),
             ("batchnorm", (3, 2, 2, 2)), ("groupnorm", (2, 4, 3))]  # fmt: skip
GROUPS = {"groupnorm": 2}  # the ops' num_groups (0: not a grouped norm)


@pytest.mark.parametrize(("norm", "shape"), OP_SHAPES)
def test_gradcheck_in_float64(norm, shape):
    x, w, b = _op_inputs(norm, shape, requires_grad=True)
    g = GROUPS.get(norm, 0)
    assert torch.autograd.gradcheck(lambda x, w, b: ops.norm_forward(norm, x, w, b, 1e-5, g)[0], (x, w, b))


def test_gradcheck_through_the_modules_in_float64():
    for name, args, kwargs, shape in CASES:
        layer, _ = pair(name, args, kwargs)
        x = (torch.randn(shape, dtype=torch.float64) * 2).requires_grad_(True)
        params = tuple(layer.parameters())

        def f(x, *ps, layer=layer):
            return torch.func.functional_call(layer, dict(zip([n for n, _ in layer.named_parameters()], ps)), (x,))

        assert torch.autograd.gradcheck(f, (x, *params)), name


@pytest.mark.parametrize(("norm", "shape"), OP_SHAPES[::2])
def test_second_derivatives_are_refused_with_a_clear_error(norm, shape):
    x, w, b = _op_inputs(norm, shape, requires_grad=True)
    with pytest.raises(RuntimeError, match="second derivatives") as info:
        torch.autograd.gradgradcheck(lambda x, w, b: ops.norm_forward(norm, x, w, b, 1e-5)[0], (x, w, b))
    assert str(info.value) == mt.SECOND_DERIVATIVE


# (x's dtype, the parameters'): each dtype on its own, and CPU autocast's bfloat16 x with float32 parameters
OP_DTYPES = [(torch.float64, None), (torch.float32, None), (torch.float16, None), (torch.bfloat16, None),
             (torch.bfloat16, torch.float32)]  # fmt: skip


@pytest.mark.parametrize(("dtype", "param_dtype"), OP_DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize(("norm", "shape"), OP_SHAPES)
def test_opcheck_passes_for_the_custom_ops(norm, shape, dtype, param_dtype):
    x, w, b = _op_inputs(norm, shape, dtype=dtype, param_dtype=param_dtype)
    g = GROUPS.get(norm, 0)
    result = torch.library.opcheck(ops.norm_forward, (norm, x, w, b, 1e-5, g))
    assert set(result.values()) == {"SUCCESS"}, result
    dy = torch.randn(shape, dtype=torch.float64).to(dtype)
    _, mean, _, rstd = ops.norm_forward(norm, x, w, b, 1e-5, g)
    result = torch.library.opcheck(ops.norm_backward, (norm, dy, x, w, b is not None, mean, rstd, 1e-5, g))
    assert set(result.values()) == {"SUCCESS"}, result


def _small_model(norm_layer, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16, dtype=dtype), norm_layer, torch.nn.ReLU(), torch.nn.Linear(16, 3, dtype=dtype)
    )


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["LayerNorm", "RMSNorm", "BatchNorm1d", "GroupNorm"])
def test_torch_compile_fullgraph_gives_the_eager_results(layer):
    model = _small_model(PAIRS[layer][0](*((4, 16) if layer == "GroupNorm" else (16,))))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")  # Dynamo and AOTAutograd, no C++
    x = torch.randn(8, 6)
    y1 = model(x)
    y1.square().sum().backward()
    g1 = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    y2 = compiled(x)
    y2.square().sum().backward()
    assert torch.equal(y1, y2)
    assert all(torch.equal(a, p.grad) for a, p in zip(g1, model.parameters()))


# ---- bad input: one line that names the argument --------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: (mt.LayerNorm(4), torch.ones(2, 4, dtype=torch.int64)), TypeError, "x: expected a floating-point"),
        (lambda: (mt.LayerNorm(4), torch.ones(2, 4, device="meta")), ValueError, "x: microgradnorm.torch computes"),
        (lambda: (mt.LayerNorm(4), torch.ones(2, 4, dtype=torch.float64)), TypeError, "weight: expected dtype"),
        (lambda: (mt.LayerNorm(4), torch.ones(2, 5)), ValueError, "x: LayerNorm([4]) expects shape [..., 4]"),
        (lambda: (mt.RMSNorm((2, 3)), torch.ones(3, 2)), ValueError, "x: RMSNorm([2, 3]) expects"),
        (lambda: (mt.BatchNorm1d(4), torch.ones(1, 4)), ValueError, "more than 1 value per channel"),
        (lambda: (mt.BatchNorm1d(4), torch.ones(2, 5)), ValueError, "x: BatchNorm1d(4) expects 4 channels"),
        (lambda: (mt.BatchNorm2d(4), torch.ones(2, 4)), ValueError, "expected 4D input"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(make, error, words):
    layer, x = make()
    state = {k: v.clone() for k, v in layer.state_dict().items()}
    with pytest.raises(error) as info:
        layer(x)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert all(torch.equal(v, layer.state_dict()[k]) for k, v in state.items())  # nothing changed


# ---- 50 steps of training ------------------------------------------------------------------------------


def _train(model, steps=50, seed=1):
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    dtype = next(model.parameters()).dtype
    for _ in range(steps):
        x = torch.randn(16, 6, generator=gen, dtype=dtype)
        target = torch.randint(0, 3, (16,), generator=gen)
        loss = torch.nn.functional.cross_entropy(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float32, TRAINED_F32_RTOL), (torch.float64, TRAINED_F64_RTOL)])
def test_swapping_torch_nn_layernorm_changes_no_weight_after_50_steps(dtype, rtol):
    theirs = _train(_small_model(torch.nn.LayerNorm(16, dtype=dtype), dtype=dtype))
    ours = _train(_small_model(mt.LayerNorm(16, dtype=dtype), dtype=dtype))
    start = [p.detach() for p in _small_model(torch.nn.LayerNorm(16, dtype=dtype), dtype=dtype).parameters()]
    for a, b, s in zip(ours, theirs, start):
        assert close(a, b, rtol)
        assert not close(b, s, 1e-3)  # the weights did move: the comparison is not of two starting points


# ---- a learner's own forward and backward ---------------------------------------------------------------


def test_layer_norm_function_passes_gradcheck_with_a_correct_backward():
    f = mt.layer_norm_function(forward, backward)
    x, w, b = _op_inputs("layernorm", (2, 3, 5), requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, w, b))
    with pytest.raises(RuntimeError, match="second derivatives"):
        torch.autograd.gradgradcheck(f, (x, w, b))


def test_layer_norm_function_fails_gradcheck_with_a_backward_missing_the_mean_path():

    def no_mean_path(dy, cache):
        dx, dgamma, dbeta = backward(dy, cache)
        g = dy * cache.gamma
        return dx + cache.rstd * g.mean(axis=-1, keepdims=True), dgamma, dbeta  # adds back what the mean path took

    f = mt.layer_norm_function(forward, no_mean_path, check=False)  # the bridge hands PyTorch the wrong backward
    x, w, b = _op_inputs("layernorm", (3, 5), requires_grad=True)
    assert not torch.autograd.gradcheck(f, (x, w, b), raise_exception=False)
    checked = mt.layer_norm_function(forward, no_mean_path)  # check=True, the default: refused at the first call
    with pytest.raises(mt.GradientCheckError, match=r"^no_mean_path: fails torch.autograd.gradcheck"):
        checked(x, w, b)


def _scaled(backward, which, factor):
    """backward with one of its results (0 dx, 1 dgamma, 2 dbeta) multiplied by ``factor``."""

    def slipped(dy, cache):
        grads = list(backward(dy, cache))
        grads[which] = grads[which] * factor
        return tuple(grads)

    return slipped


@pytest.mark.parametrize(("which", "name"), [(0, "dx"), (1, "dgamma"), (2, "dbeta")])
def test_check_true_names_the_wrong_gradient_and_its_entries_before_any_training(which, name):
    f = mt.layer_norm_function(forward, _scaled(backward, which, 1.5))
    layer = mt.LayerNorm(5, function=f)
    with pytest.raises(mt.GradientCheckError) as info:
        layer(torch.randn(4, 5))
    message = str(info.value)
    d = mt.learner.CHECK_SHAPE[-1]
    total = math.prod(mt.learner.CHECK_SHAPE) if name == "dx" else d
    assert f"{name} wrong at {total} of {total} entries" in message and "\n" not in message
    assert [other for other in ("dx", "dgamma", "dbeta") if f"{other} wrong" in message] == [name]
    assert not f.checked


def test_check_true_lets_a_right_pair_through_and_checks_it_once():
    calls = []

    def counted(dy, cache):
        calls.append(dy.shape)
        return backward(dy, cache)

    f = mt.layer_norm_function(forward, counted)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    f(x).sum().backward()
    checking = len(calls)
    assert f.checked and checking > 1  # gradcheck's calls, then one for this backward
    f(x).sum().backward()
    assert len(calls) == checking + 1


@pytest.mark.parametrize(
    ("transform", "named"),
    [
        (lambda f, x: torch.func.jvp(f, (x,), (x,)), "torch.func.jvp/jacfwd"),
        (lambda f, x: torch.func.grad(lambda x: f(x).sum())(x), "torch.func.grad/vjp/jacrev"),
        (lambda f, x: torch.func.vmap(f)(x), "torch.func.vmap"),
    ],
)
def test_a_learner_function_under_torch_func_is_refused_naming_the_transform(transform, named):
    f = mt.layer_norm_function(forward, backward)
    with pytest.raises(RuntimeError) as info:
        transform(f, torch.randn(2, 3, 4))
    message = str(info.value)
    assert message.startswith(f"{named}: layer_norm_function(") and "microgradnorm.torch.LayerNorm" in message


def test_layer_norm_function_in_a_layer_equals_torch_nn_and_its_inputs_are_copies():
    seen = []

    def writes_to_x(x, gamma, beta, eps):
        seen.append(x.shape)
        y, cache = forward(x.copy(), gamma, beta, eps)
        x[...] = 0.0  # a learner's in-place slip must not reach the model
        return y, cache

    ours, theirs = pair("LayerNorm", (6,), {})
    ours.function = mt.layer_norm_function(writes_to_x, backward, check=False)  # the shapes of one call only
    x, dy = torch.randn(2, 3, 6, dtype=torch.float64), torch.randn(2, 3, 6, dtype=torch.float64)
    x0 = x.clone()
    (y1, dx1, g1), (y2, dx2, g2) = run(ours, x, dy), run(theirs, x, dy)
    assert seen == [(1, 6, 6)] and torch.equal(x, x0)
    assert close(y1, y2, test_tol.TORCH_F64_RTOL) and close(dx1, dx2, test_tol.TORCH_F64_RTOL)
    assert all(close(g1[n], g2[n], test_tol.TORCH_F64_RTOL) for n in g2)


def test_layer_norm_function_names_what_a_learner_returned_wrong():
    f = mt.layer_norm_function(forward, lambda dy, cache: backward(dy, cache)[:2])
    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(TypeError, match=r"<lambda>: expected to return \(dx, dgamma, dbeta\)"):
        f(x, torch.ones(4), torch.zeros(4)).sum().backward()
    g = mt.layer_norm_function(lambda x, gamma, beta, eps: (x[..., :2], None), backward, check=False)
    with pytest.raises(ValueError, match=r"<lambda>'s y: expected shape \(1, 2, 4\), got shape \(1, 2, 2\)"):
        g(x)
    with pytest.raises(TypeError, match="backward: expected a function"):
        mt.layer_norm_function(forward, None)


@pytest.mark.slow
def test_layer_norm_function_under_torch_compile_runs_outside_the_graph():
    model = _small_model(mt.LayerNorm(16, function=mt.layer_norm_function(forward, backward)))
    x = torch.randn(4, 6)
    assert torch.equal(torch.compile(model, backend="aot_eager")(x), model(x))


# ---- PyTorch stays optional ------------------------------------------------------------------------------

_BLOCK_TORCH = "import sys; sys.modules['torch'] = None; "  # `import torch` now raises ImportError


def test_importing_the_package_the_cli_and_the_lab_never_imports_torch():
    code = (
        "import sys, microgradnorm, microgradnorm.vectorized, microgradnorm.cli, microgradnorm.lessons.demos; "
        "import microgradnorm.lab.torch_net, microgradnorm.lab.experiments; "
        "microgradnorm.cli.build_parser(); microgradnorm.lessons.demos.load_demos(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_microgradnorm_torch_without_torch_is_one_clear_line():
    out = subprocess.run([sys.executable, "-c", _BLOCK_TORCH + "import microgradnorm.torch"], capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    install = "pip install 'microgradnorm[torch]'"
    assert last == f"ImportError: microgradnorm.torch needs PyTorch, which is not installed: {install}"


def test_the_torch_extra_admits_the_cpu_wheel_of_torch_2_13():
    import tomllib
    from packaging.requirements import Requirement

    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    (req,) = [Requirement(r) for r in meta["project"]["optional-dependencies"]["torch"]]
    assert req.name == "torch"
    assert req.specifier.contains("2.13.0+cpu") and req.specifier.contains("2.13.0")
    assert not req.specifier.contains("2.3.1")  # older than the custom-op API this package uses


def test_the_readme_snippet_runs_a_backward_through_the_wrapped_pair():
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "layer_norm_function" in b]
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    weight = namespace["model"][1].weight
    assert weight.grad is not None and weight.grad.abs().sum() > 0


# ---- any shape, layout and eps (Hypothesis) ------------------------------------------------------------


def _torch_takes(norm, x, eps):
    """Whether torch.nn.functional takes this problem in training mode (this package takes all of them)."""
    if norm == "batchnorm":
        return x.size // x.shape[1] > 1 and eps > 0  # one value per channel, or eps = 0: torch refuses
    return norm != "groupnorm" or x.size > 1  # a group of one value (one group here): torch refuses


@pytest.mark.parametrize("norm", ops.NORMS)
@given(data=st.data())
def test_the_ops_equal_torch_functional_for_any_shape_layout_and_eps(norm, data):
    x, gamma, beta, dy, eps = data.draw(norm_problems(norm))
    assume(_torch_takes(norm, x, eps))
    leaves = [None if a is None else torch.from_numpy(a).requires_grad_(True) for a in (x, gamma, beta)]
    # torch on contiguous copies: PyTorch 2.13's batch_norm backward gets some strided layouts with
    # size-1 axes wrong (x of shape [1, 2, 1, 2] and strides (1, 1, 2, 2): the channels' gradients
    # swapped, against finite differences), which this test found; the ops take x as it is
    twins = [None if t is None else t.detach().contiguous().clone().requires_grad_(True) for t in leaves]
    y = ops.norm_forward(norm, *leaves, eps)[0]
    given = list(twins)
    if norm == "groupnorm" and given[1] is None:  # PyTorch 2.13's group_norm backward fails without a weight
        given[1] = torch.ones(x.shape[1], dtype=torch.float64)  # ("tensor does not have a device"): ones, the same map
    want = get_norm(norm).torch_functional(torch.nn.functional, *given, eps)
    assert close(y, want, *F64)
    (y * torch.from_numpy(dy)).sum().backward()
    (want * torch.from_numpy(dy)).sum().backward()
    for mine, theirs in zip(leaves, twins):
        if mine is not None:
            assert close(mine.grad, theirs.grad, *F64)


@pytest.mark.parametrize("norm", ops.NORMS)
@given(data=st.data())
def test_the_tangent_equals_torch_functionals_for_any_shape_layout_and_eps(norm, data):
    """Forward mode through the ops (the projection form) against torch.nn.functional's own forward mode."""
    x, gamma, beta, t, eps = data.draw(norm_problems(norm))
    assume(_torch_takes(norm, x, eps))
    w = None if gamma is None else torch.from_numpy(gamma)
    b = None if beta is None else torch.from_numpy(beta)
    theirs_w = torch.ones(x.shape[1], dtype=torch.float64) if norm == "groupnorm" and w is None else w
    spec = get_norm(norm)
    _, mine = torch.func.jvp(lambda x: ops.norm(norm, x, w, b, eps)[0], (torch.from_numpy(x),), (torch.from_numpy(t),))
    _, want = torch.func.jvp(
        lambda x: spec.torch_functional(torch.nn.functional, x, theirs_w, b, eps),
        (torch.from_numpy(x).contiguous(),),
        (torch.from_numpy(t).contiguous(),),
    )
    # the tangent is exactly zero along what the norm removes (t constant over a group): what is left there
    # is rounding of the group's terms, which the tolerance scales with (rstd is large when var ~ eps)
    xv, axes = x.reshape(spec.view(x.shape)), spec.axes(x.shape)
    spread = xv.var(axis=axes) if spec.centered else (xv**2).mean(axis=axes)
    atol = test_tol.TORCH_F64_ATOL + tol.norm_dx_atol(x, gamma, t, (spread + eps) ** -0.5)
    assert close(mine, want, test_tol.TORCH_F64_RTOL, atol)
