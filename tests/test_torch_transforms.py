"""microgradnorm.torch under torch.func, forward-mode AD, autocast, and at torch.nn's edges. Skipped without torch.

Oracles: torch.nn's own layers under the same transform (float64, to rounding),
and for forward mode also lesson 7's Jacobian matrix written out
(:func:`microgradnorm.formulas.layer_norm_jacobian`, :func:`~microgradnorm.formulas.rms_jacobian`).
"""

from __future__ import annotations

import pytest

from microgradnorm import formulas as F
from tests import tolerances as test_tol

torch = pytest.importorskip("torch")
mt = pytest.importorskip("microgradnorm.torch")

from .torch_pairs import CASES, FOUR, PAIRS, close, pair  # noqa: E402

func = torch.func
F64 = test_tol.TORCH_F64

# every layer in a mode torch.func can transform: training BatchNorm updates its running statistics in
# place, which torch.func refuses for torch.nn's layer too, so it is tried without them and in eval mode
TRANSFORMABLE = [c for c in CASES if not c[0].startswith("BatchNorm")] + [
    ("BatchNorm1d", (5,), {"track_running_stats": False}, (8, 5)),
    ("BatchNorm1d", (5,), {"track_running_stats": False, "affine": False}, (6, 5, 3)),
    ("BatchNorm2d", (3,), {"track_running_stats": False, "eps": 1e-3}, (4, 3, 2, 5)),
    ("BatchNorm2d", (3,), {"eval": True}, (2, 3, 4, 4)),
]


def _layers(name, args, kwargs):
    kwargs = dict(kwargs)
    evaluate = kwargs.pop("eval", False)
    ours, theirs = pair(name, args, kwargs)
    if evaluate:
        with torch.no_grad():  # running statistics that are not the defaults 0 and 1
            for m in (ours, theirs):
                m.running_mean.copy_(torch.linspace(-1, 1, m.num_features, dtype=torch.float64))
                m.running_var.copy_(torch.linspace(0.5, 2, m.num_features, dtype=torch.float64))
        ours.eval(), theirs.eval()
    return ours, theirs


def _inputs(shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen, dtype=torch.float64) * 2 + 0.5 for _ in range(2)]


def _with_params(layer):
    """f(x, *params) for torch.func: the layer with its parameters as inputs (their tangents can then be set)."""
    names = [n for n, _ in layer.named_parameters()]
    return lambda x, *ps: func.functional_call(layer, dict(zip(names, ps)), (x,))


ID = [f"{c[0]}-{i}" for i, c in enumerate(TRANSFORMABLE)]


# ---- jvp, jacfwd, grad, vjp and vmap ---------------------------------------------------------------------


def _jvp(layer, x, t):
    """y and its tangent, for x's tangent t and the parameters' tangents drawn from one seed."""
    params, gen = [p.detach() for p in layer.parameters()], torch.Generator().manual_seed(1)
    params_t = [torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in params]
    return func.jvp(_with_params(layer), (x, *params), (t, *params_t))


def _grad_and_vjp(layer, x, dy):
    """The gradients of sum(y * dy) in x and every parameter, by torch.func.grad and by torch.func.vjp."""
    f, params = _with_params(layer), [p.detach() for p in layer.parameters()]
    grads = func.grad(lambda *a: (f(*a) * dy).sum(), argnums=tuple(range(1 + len(params))))(x, *params)
    return (*grads, *func.vjp(f, x, *params)[1](dy))


def _vmap(layer, x, dy):
    """vmap over three inputs, and vmap over grad: the gradient of each input's loss on its own."""
    xs = torch.randn((3, *x.shape), dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    return func.vmap(layer)(xs), func.vmap(func.grad(lambda x: (layer(x) * dy).sum()))(xs)


def _forward_ad(layer, x, t):
    """y's tangent for x's tangent t by forward-mode AD outside torch.func (torch.autograd.forward_ad)."""
    fw = torch.autograd.forward_ad
    with fw.dual_level():
        return (fw.unpack_dual(layer(fw.make_dual(x, t))).tangent,)


TRANSFORMS = {  # what each transform gives for a layer, an input and a second array of x's shape
    "jvp": _jvp,
    "forward-ad": _forward_ad,
    "jacfwd-jacrev": lambda layer, x, _: (func.jacfwd(layer)(x), func.jacrev(layer)(x)),
    "grad-vjp": _grad_and_vjp,
    "vmap": _vmap,
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), TRANSFORMABLE, ids=ID)
def test_torch_func_transforms_equal_torch_nn(name, args, kwargs, shape, transform):
    """jvp in x and in the parameters, and forward mode outside torch.func; the Jacobian both ways; grad and vjp in
    every input; vmap, and per-sample gradients (vmap over grad)."""
    ours, theirs = _layers(name, args, kwargs)
    x, other = _inputs(shape)
    mine, want = TRANSFORMS[transform](ours, x, other), TRANSFORMS[transform](theirs, x, other)
    assert len(mine) == len(want) and all(a.shape == b.shape and close(a, b, *F64) for a, b in zip(mine, want))
    assert all(b.abs().max() > 0 for b in want)  # not a comparison of two zeros


@pytest.mark.parametrize(("name", "matrix"), [("LayerNorm", F.layer_norm_jacobian), ("RMSNorm", F.rms_jacobian)])
@pytest.mark.parametrize("eps", [0.0, 0.5])
def test_the_tangent_is_lesson_7s_jacobian_times_the_tangent(name, matrix, eps):
    """One row: jvp(x, t) = rstd diag(gamma) (I - P) t, with the matrix written out (eps included)."""
    layer, _ = pair(name, (7,), {"eps": eps})
    x, t = _inputs((7,), seed=3)
    _, tangent = func.jvp(layer, (x,), (t,))
    xs = x.numpy()
    if name == "LayerNorm":
        rstd = 1.0 / (xs.var() + eps) ** 0.5
        xhat = (xs - xs.mean()) * rstd
    else:
        rstd = 1.0 / ((xs * xs).mean() + eps) ** 0.5
        xhat = xs * rstd
    want = torch.from_numpy(matrix(xhat, rstd, layer.weight.detach().numpy()) @ t.numpy())
    assert close(tangent, want, *F64)


# ---- an ensemble, second derivatives, training BatchNorm under torch.func --------------------------------


def test_vmap_over_the_parameters_an_ensemble_equals_torch_nn():
    ours, theirs = pair("LayerNorm", (6,), {})
    x, _ = _inputs((4, 6))
    weights = torch.rand(3, 6, dtype=torch.float64) + 0.5
    biases = torch.randn(3, 6, dtype=torch.float64)

    def ensemble(layer):
        return func.vmap(lambda w, b: func.functional_call(layer, {"weight": w, "bias": b}, (x,)))(weights, biases)

    assert close(ensemble(ours), ensemble(theirs), *F64)


@pytest.mark.parametrize("transform", ["hessian", "jacfwd(jacrev)", "jvp(grad)"])
def test_second_derivatives_under_torch_func_are_refused_with_the_message(transform):
    layer, _ = pair("LayerNorm", (4,), {})
    x, t = _inputs((2, 4))

    def loss(x):
        return layer(x).pow(3).sum()

    run = {
        "hessian": lambda: func.hessian(loss)(x),
        "jacfwd(jacrev)": lambda: func.jacfwd(func.jacrev(loss))(x),
        "jvp(grad)": lambda: func.jvp(func.grad(loss), (x,), (t,)),
    }[transform]
    with pytest.raises(RuntimeError) as info:
        run()
    assert str(info.value) == mt.SECOND_DERIVATIVE


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
@pytest.mark.parametrize("name", ["BatchNorm1d", "BatchNorm2d"])
def test_training_batchnorm_under_torch_func_fails_as_torch_nn_does(transform, name):
    ours, theirs = pair(name, (3,), {})
    shape = (4, 3) if name == "BatchNorm1d" else (4, 3, 2, 2)
    x, t = _inputs(shape)
    run = {
        "grad": lambda m: func.grad(lambda x: m(x).sum())(x),
        "jvp": lambda m: func.jvp(m, (x,), (t,)),
        "vmap": lambda m: func.vmap(m)(x.unsqueeze(0).expand(2, *shape)),
    }[transform]
    with pytest.raises(RuntimeError):
        run(theirs)
    with pytest.raises(RuntimeError) as info:
        run(ours)
    message = str(info.value)
    assert "in-place" in message if transform != "vmap" else ("track_running_stats=False" in message)
    assert torch.equal(ours.running_mean, theirs.running_mean)  # neither layer moved its statistics


# ---- autocast and mixed dtypes ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("autocast", [True, False])
def test_bfloat16_input_with_float32_parameters_as_torch_nn(name, autocast):
    shape = (6, 4, 3, 2) if name == "BatchNorm2d" else (6, 4)
    ours, theirs = pair(name, FOUR[name], {}, dtype=torch.float32)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    results = []
    for layer in (ours, theirs):
        xi = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = layer(xi)
        (y.float() * torch.linspace(-1, 1, y.numel()).reshape(shape)).sum().backward()
        results.append((y, xi.grad, [(p.dtype, p.grad.dtype, p.grad) for p in layer.parameters()]))
        layer.zero_grad()
    (y1, dx1, p1), (y2, dx2, p2) = results
    assert y1.dtype == y2.dtype == torch.bfloat16 and dx1.dtype == dx2.dtype == torch.bfloat16
    assert [p[:2] for p in p1] == [p[:2] for p in p2] == [(torch.float32, torch.float32)] * len(p1)
    # both compute in float32 and round y to bfloat16 (8 bits of mantissa): a few of its units apart
    assert close(y1, y2, test_tol.FLOAT16_RTOL, test_tol.FLOAT16_ATOL)
    assert all(close(a[2], b[2], test_tol.FLOAT16_RTOL, test_tol.FLOAT16_ATOL) for a, b in zip(p1, p2))
    ours.eval(), theirs.eval()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        assert ours(x).dtype == theirs(x).dtype == torch.bfloat16


def test_float64_input_with_float32_parameters_is_refused_as_torch_nn_refuses_it():
    with pytest.raises(RuntimeError):
        torch.nn.LayerNorm(4)(torch.ones(2, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"^weight: expected dtype torch.float64"):
        mt.LayerNorm(4)(torch.ones(2, 4, dtype=torch.float64))


# ---- torch.nn's edges ------------------------------------------------------------------------------------


def test_batchnorm2d_keeps_channels_last_in_training_and_eval():
    ours, theirs = pair("BatchNorm2d", (3,), {})
    x = torch.randn(4, 3, 5, 2, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    dy = torch.randn(4, 3, 5, 2, dtype=torch.float64)
    cl = torch.channels_last
    for mode in ("train", "eval"):
        getattr(ours, mode)(), getattr(theirs, mode)()
        outs = []
        for layer in (ours, theirs):
            xi = x.clone(memory_format=cl).requires_grad_(True)
            y = layer(xi)
            (y * dy).sum().backward()
            outs.append((y, xi.grad))
        (y1, dx1), (y2, dx2) = outs
        assert y1.is_contiguous(memory_format=cl) and y2.is_contiguous(memory_format=cl), mode
        assert dx1.is_contiguous(memory_format=cl) == dx2.is_contiguous(memory_format=cl), mode
        assert close(y1, y2, *F64), mode
        assert close(dx1, dx2, *F64), mode
        assert close(ours.running_var, theirs.running_var, test_tol.TORCH_F64_RTOL), mode


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CASES)
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_zero_size_batches_as_torch_nn(name, args, kwargs, shape, mode):
    ours, theirs = pair(name, args, kwargs)
    empty = (0, *shape[1:])
    results = []
    for layer in (ours, theirs):
        getattr(layer, mode)()
        x = torch.randn(empty, dtype=torch.float64, requires_grad=True)
        y = layer(x)
        y.sum().backward()
        results.append((y.shape, x.grad.shape, [p.grad for p in layer.parameters()], layer.state_dict()))
    (s1, g1, p1, d1), (s2, g2, p2, d2) = results
    assert s1 == s2 == empty and g1 == g2 == empty
    assert all(torch.equal(a, b) for a, b in zip(p1, p2))  # zeros: an empty sum
    assert d1.keys() == d2.keys() and all(torch.equal(d1[k], d2[k]) for k in d1)  # the batch counted, nothing else


@pytest.mark.parametrize("name", ["BatchNorm1d", "BatchNorm2d"])
@pytest.mark.parametrize("eps", [0.0, -1e-5])
def test_batchnorm_refuses_eps_at_most_zero_in_training_as_torch_nn(name, eps):
    shape = (4, 3) if name == "BatchNorm1d" else (4, 3, 2, 2)
    x = torch.randn(shape)
    with pytest.raises(ValueError, match="eps must be positive"):
        PAIRS[name][1](3, eps=eps)(x)
    layer = PAIRS[name][0](3, eps=eps)
    with pytest.raises(ValueError) as info:
        layer(x)
    assert str(info.value) == f"eps: {name} expects eps > 0 when training (as torch.nn), got {eps}"
    assert int(layer.num_batches_tracked) == 0  # refused before any state changed
    assert layer.eval()(x).shape == x.shape  # eval mode: torch.nn allows it, so does this layer


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("tool", ["torch.jit.script", "torch.fx.symbolic_trace"])
def test_jit_script_and_fx_are_refused_in_one_line_naming_what_to_use(name, tool):
    model = torch.nn.Sequential(PAIRS[name][0](*FOUR[name]))
    trace = torch.jit.script if tool == "torch.jit.script" else torch.fx.symbolic_trace
    with pytest.raises(TypeError) as info:
        trace(model)
    message = str(info.value)
    assert message.startswith(f"{tool}: microgradnorm.torch.{name} computes in NumPy")
    assert "torch.compile" in message and f"torch.nn.{name}" in message and "\n" not in message


@pytest.mark.parametrize("name", ["LayerNorm", "RMSNorm", "GroupNorm"])
def test_a_negative_eps_is_one_clear_line_where_torch_nn_computes_a_non_finite_y(name):
    x = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 2.0, 3.0]])
    assert not torch.isfinite(PAIRS[name][1](*FOUR[name], eps=-1.0)(x)).all()  # torch.nn: no error, a NaN or inf
    with pytest.raises(ValueError) as info:
        PAIRS[name][0](*FOUR[name], eps=-1.0)(x)
    assert str(info.value) == "eps: expected a finite number >= 0, got -1.0"
    assert PAIRS[name][0](*FOUR[name], eps=0.0)(x[1:]).shape == (1, 4)  # eps = 0 is allowed, as in torch.nn
