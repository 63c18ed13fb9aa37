"""Exercise 08: RMSNorm forward and backward.

RMSNorm (Zhang and Sennrich, 2019; used by LLaMA and many other recent
language models) skips the mean: it divides each row by its root mean square
and scales by gamma. There is no beta and no centering.

    ms   = mean of x^2 over the row       rrms = 1 / sqrt(ms + eps)
    xhat = x * rrms                       y    = gamma * xhat

Backwards there are two paths from x_i: directly through xhat_i, and through
the rms that divides every x_j. Compared with LayerNorm one path is gone;
which one, and what happens to the formula?

x: [N, D], normalized row by row; gamma: [D].

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 08_rmsnorm_backward.py
Grade:   microgradnorm exercise check 8
Stuck?   microgradnorm lesson 9 teaches what this exercise needs
"""

import numpy as np


def rmsnorm_forward(x: np.ndarray, gamma: np.ndarray, eps: float):
    """x: [N, D]; gamma: [D]; eps >= 0. Returns (y [N, D], cache)."""
    # ---- write your code here ----
    ms = (x * x).mean(axis=-1, keepdims=True)  # N,1
    rrms = 1.0 / np.sqrt(ms + eps)  # N,1
    xhat = x * rrms  # N,D
    return gamma * xhat, (xhat, rrms, gamma)
    # ---- end of your code ----


def rmsnorm_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray]:
    """dy = dL/dy: [N, D]. Returns (dx [N, D], dgamma [D])."""
    # ---- write your code here ----
    xhat, rrms, gamma = cache
    dgamma = (dy * xhat).sum(axis=0)  # D
    dxhat = dy * gamma  # N,D
    dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # N,D
    return dx, dgamma
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma, dy = rng.normal(1.0, 2.0, (3, 5)), rng.uniform(0.5, 1.5, 5), rng.normal(size=(3, 5))
    eps = 1e-5
    dx, dgamma = rmsnorm_backward(dy, rmsnorm_forward(x, gamma, eps)[1])
    print("Your gradients against central finite differences:")
    report("dx", dx, numerical_gradient(lambda x: np.sum(rmsnorm_forward(x, gamma, eps)[0] * dy), x))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(rmsnorm_forward(x, g, eps)[0] * dy), gamma))
