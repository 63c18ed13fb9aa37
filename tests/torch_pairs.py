"""The microgradnorm.torch layers beside their torch.nn namesakes, for the test_torch_* files."""

from __future__ import annotations

import torch

import microgradnorm.torch as mt

PAIRS = {
    "LayerNorm": (mt.LayerNorm, torch.nn.LayerNorm),
    "RMSNorm": (mt.RMSNorm, torch.nn.RMSNorm),
    "BatchNorm1d": (mt.BatchNorm1d, torch.nn.BatchNorm1d),
    "BatchNorm2d": (mt.BatchNorm2d, torch.nn.BatchNorm2d),
    "GroupNorm": (mt.GroupNorm, torch.nn.GroupNorm),
}
# each layer's constructor arguments for 4 channels or features
FOUR = {name: (2, 4) if name == "GroupNorm" else (4,) for name in PAIRS}
# constructor arguments to try, and an input shape for each layer
CASES = [
    ("LayerNorm", (6,), {}, (4, 6)),
    ("LayerNorm", ((3, 4),), {}, (2, 5, 3, 4)),
    ("LayerNorm", (6,), {"bias": False}, (3, 2, 6)),
    ("LayerNorm", (6,), {"elementwise_affine": False, "eps": 1e-3}, (5, 6)),
    ("RMSNorm", (6,), {}, (4, 6)),
    ("RMSNorm", (6,), {"eps": 1e-4}, (2, 3, 6)),
    ("RMSNorm", ((2, 3),), {"elementwise_affine": False}, (4, 2, 3)),
    ("BatchNorm1d", (5,), {}, (8, 5)),
    ("BatchNorm1d", (5,), {"momentum": None}, (6, 5, 3)),
    ("BatchNorm1d", (5,), {"affine": False, "track_running_stats": False}, (8, 5)),
    ("BatchNorm2d", (3,), {"eps": 1e-3, "momentum": 0.3}, (4, 3, 2, 5)),
    ("BatchNorm2d", (3,), {"bias": False}, (2, 3, 4, 4)),
    ("GroupNorm", (2, 6), {}, (3, 6, 4)),
    ("GroupNorm", (3, 6), {"affine": False, "eps": 1e-3}, (2, 6, 2, 3)),
    ("GroupNorm", (1, 4), {}, (2, 4)),  # one group: LayerNorm over each example
    ("GroupNorm", (4, 4), {}, (2, 4, 5)),  # a group per channel: InstanceNorm
]


def pair(name, args, kwargs, dtype=torch.float64, seed=0):
    """(ours, torch.nn's) with the same random parameters (not the default 1 and 0, which hide mistakes)."""
    ours_cls, theirs_cls = PAIRS[name]
    ours, theirs = ours_cls(*args, **kwargs, dtype=dtype), theirs_cls(*args, **kwargs, dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ours.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=dtype) + 0.5)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def run(layer, x, dy):
    """(y, dx, {parameter name: grad}) of one forward and backward pass."""
    x = x.clone().requires_grad_(True)
    y = layer(x)
    (y * dy).sum().backward()
    grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
    layer.zero_grad()
    return y.detach(), x.grad, grads


def close(a, b, rtol, atol=0.0):
    """max|a - b| <= atol + rtol * max|b|, normwise over the whole tensor."""
    a, b = a.detach().double(), b.detach().double()
    scale = float(b.abs().max()) if b.numel() else 0.0
    return float((a - b).abs().max()) <= atol + rtol * scale if b.numel() else True


def functional(norm, x, gamma, beta, eps, dy):
    """torch.nn.functional's ``norm`` (GroupNorm: one group) on NumPy inputs, and the gradients of sum(y·dy) by
    autograd: {"y", "x", "gamma", "beta"} as NumPy arrays ("beta" only when given)."""
    leaves = {k: torch.tensor(a, requires_grad=True) for k, a in (("x", x), ("gamma", gamma), ("beta", beta))
              if a is not None}  # fmt: skip
    tx, tg, tb, fn = leaves["x"], leaves["gamma"], leaves.get("beta"), torch.nn.functional
    if norm == "layernorm":
        y = fn.layer_norm(tx, (x.shape[-1],), tg, tb, eps)
    elif norm == "rmsnorm":
        y = fn.rms_norm(tx, (x.shape[-1],), tg, eps)
    elif norm == "groupnorm":
        y = fn.group_norm(tx, 1, tg, tb, eps)
    else:
        y = fn.batch_norm(tx, None, None, tg, tb, training=True, eps=eps)
    y.backward(torch.tensor(dy))
    return {"y": y.detach().numpy(), **{k: t.grad.numpy() for k, t in leaves.items()}}
