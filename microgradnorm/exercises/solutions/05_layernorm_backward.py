"""Exercise 05: LayerNorm forward and backward in closed form, vectorized.

Write LayerNorm the way a library does: a forward pass that returns its output
and a cache of whatever the backward pass will need, and a backward pass that
turns dL/dy into dL/dx, dL/dgamma and dL/dbeta with a few NumPy lines and no
loops. Each row x[b, t, :] of d features is normalized on its own:

    mean = mean of the row          var = mean of (x - mean)^2   (biased)
    rstd = 1 / sqrt(var + eps)      xhat = (x - mean) * rstd
    y    = gamma * xhat + beta

Backwards, x_i reaches the loss by three paths: directly through xhat_i, through
the mean (which every xhat_j uses), and through the variance (likewise). The
closed form folds all three into one line. One way there, in stages: dxhat,
then dvar, then dmean, then dx as the sum of the three paths (lesson 5 walks
these stages); then simplify. Statistics over the last axis need keepdims=True
to broadcast; dgamma and dbeta sum over every axis but the last, (0, 1) here.

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 05_layernorm_backward.py
Grade:   microgradnorm exercise check 5
Stuck?   microgradnorm lesson 5 teaches what this exercise needs
"""

import numpy as np


def layernorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """x: [B, T, d]; gamma, beta: [d]; eps >= 0. Returns (y [B, T, d], cache), cache as you like."""
    # ---- write your code here ----
    mean = x.mean(axis=-1, keepdims=True)  # B,T,1
    xshift = x - mean  # B,T,D
    var = (xshift * xshift).mean(axis=-1, keepdims=True)  # B,T,1
    rstd = 1.0 / np.sqrt(var + eps)  # B,T,1
    xhat = xshift * rstd  # B,T,D
    y = gamma * xhat + beta  # B,T,D
    return y, (xhat, rstd, gamma)
    # ---- end of your code ----


def layernorm_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy = dL/dy: [B, T, d]; cache: from layernorm_forward. Returns (dx [B, T, d], dgamma [d], dbeta [d])."""
    # ---- write your code here ----
    xhat, rstd, gamma = cache
    lead = tuple(range(dy.ndim - 1))  # (0, 1)
    dbeta = dy.sum(axis=lead)  # D
    dgamma = (dy * xhat).sum(axis=lead)  # D
    dxhat = dy * gamma  # B,T,D
    mean_part = dxhat.mean(axis=-1, keepdims=True)  # B,T,1: the path through the mean
    var_part = (dxhat * xhat).mean(axis=-1, keepdims=True)  # B,T,1: the path through the variance
    dx = rstd * (dxhat - mean_part - xhat * var_part)  # B,T,D
    return dx, dgamma, dbeta
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (2, 3, 5))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 5), rng.normal(size=5), rng.normal(size=(2, 3, 5))
    eps = 1e-5
    y, cache = layernorm_forward(x, gamma, beta, eps)
    dx, dgamma, dbeta = layernorm_backward(dy, cache)
    print("y[0, 0] =", np.round(y[0, 0], 4))
    print("Your gradients against central finite differences:")
    report("dx", dx, numerical_gradient(lambda x: np.sum(layernorm_forward(x, gamma, beta, eps)[0] * dy), x))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(layernorm_forward(x, g, beta, eps)[0] * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum(layernorm_forward(x, gamma, b, eps)[0] * dy), beta))
