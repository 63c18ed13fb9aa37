"""The scalar graph against PyTorch (float64): forward and every gradient. Skipped without torch."""

from __future__ import annotations

import numpy as np
import pytest

from microgradnorm import tolerances as tol
from microgradnorm.check import random_problem
from microgradnorm.registry import get_norm
from tests import tolerances as test_tol

pytest.importorskip("torch")
from tests.torch_pairs import functional


def scalar_run(norm, x, gamma, beta, eps, dy):
    spec = get_norm(norm)
    graph = spec.build_graph(x.tolist(), gamma.tolist(), None if beta is None else beta.tolist(), eps)
    graph.loss(dy.tolist()).backward()

    def arr(name):
        return np.array([getattr(v, "data" if name == "y" else "grad") for v in graph["y" if name == "y" else name]])

    out = {"y": arr("y").reshape(x.shape), "x": arr("x").reshape(x.shape), "gamma": arr("gamma")}
    if beta is not None:
        out["beta"] = arr("beta")
    return out


@pytest.mark.parametrize(
    ("norm", "shape"),
    [
        ("layernorm", (6,)),
        ("layernorm", (3, 5)),
        ("rmsnorm", (3, 5)),
        ("batchnorm", (6, 3)),
        ("batchnorm", (2, 3, 2, 2)),
    ],
)
@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_scalar_graph_matches_pytorch(norm, shape, eps):
    spec = get_norm(norm)
    x, gamma, beta, dy = random_problem(spec, shape, seed=11)
    ours = scalar_run(norm, x, gamma, beta, eps, dy)
    theirs = functional(norm, x, gamma, beta, eps, dy)
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert tol.close(ours[key], theirs[key], test_tol.TORCH_F64_RTOL, test_tol.TORCH_F64_ATOL), key
