"""`lab yours` calls the learner's exercise-5 functions with the shapes exercise 5 promises (issue 27 item 1).

Exercise 5 says x is [B, T, D] and its grader calls with [B, T, D]; an answer that
sums dgamma and dbeta over axes (0, 1), as llm.c does, is right there. The lab's
NumPy network must call it with the same shapes, so that answer trains exactly as
the reference does.
"""

from __future__ import annotations

import numpy as np

from microgradnorm.lab import pairs
from microgradnorm.lab.experiments import MLP, task_for
from microgradnorm.lab.net import Net, cross_entropy


def _llm_c_pair() -> pairs.NormPair:
    """Exercise 5 written to its docstring, with llm.c's explicit axes (0, 1) for the parameter sums."""
    shapes: list[tuple[int, ...]] = []

    def forward(x, gamma, beta, eps):
        shapes.append(x.shape)
        mean = x.mean(axis=-1, keepdims=True)
        xshift = x - mean
        rstd = 1.0 / np.sqrt((xshift * xshift).mean(axis=-1, keepdims=True) + eps)
        xhat = xshift * rstd
        return gamma * xhat + beta, (xhat, rstd, gamma)

    def backward(dy, cache):
        shapes.append(dy.shape)
        xhat, rstd, gamma = cache
        dxhat = dy * gamma
        dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
        return dx, (dy * xhat).sum(axis=(0, 1)), dy.sum(axis=(0, 1))

    forward.shapes = backward.shapes = shapes  # type: ignore[attr-defined]
    return forward, backward


def _gradients(pair: pairs.NormPair | None) -> list[np.ndarray]:
    task = task_for(0)
    net = Net(MLP, 0, ln_pair=pair)
    _, dlogits = cross_entropy(net.forward(task.x_train[:32]), task.y_train[:32])
    net.backward(dlogits)
    return [np.array(g, dtype=np.float64) for g in net.gradients()]


def test_the_numpy_network_calls_exercise_5_with_three_axes_and_gets_its_gradients():
    pair = _llm_c_pair()
    got, want = _gradients(pair), _gradients(pairs.reference_pair())
    assert all(len(s) == 3 for s in pair[0].shapes), pair[0].shapes  # [B, T, D], never [N, D]
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14 * float(np.abs(w).max()))
