"""The scalar graph against PyTorch (float64): forward and every gradient. Skipped without torch."""

from __future__ import annotations

import pytest

from microgradnorm.check import random_problem
from microgradnorm.registry import get_norm
from tests import tolerances as test_tol
from tests.helpers import assert_results_close, graph_results, torch_results

pytest.importorskip("torch")


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
    x, gamma, beta, dy = random_problem(get_norm(norm), shape, seed=11)
    graph = get_norm(norm).build_graph(x.tolist(), gamma.tolist(), None if beta is None else beta.tolist(), eps)
    graph.loss(dy.tolist()).backward()
    assert_results_close(graph_results(graph, shape), torch_results(norm, x, gamma, beta, dy, eps), *test_tol.TORCH_F64)
