"""Exercise 07: BatchNorm backward, simplified to one line.

The staged backward of exercise 06 computes dvar and dmean on the way. Put
them into the three paths, replace xshift by xhat * std, and the sum folds
into one expression that needs only dxhat = gamma * dy, xhat and rstd: rstd
times dxhat, minus two corrections, one the same for every example in the
batch (the path through the mean) and one proportional to xhat (the path
through the variance). Work out both; each is a mean over the batch.

If you did exercise 05, you have seen this formula: BatchNorm's statistics
are taken over the batch (axis 0), one per feature, where LayerNorm's are
taken over each row. The forward pass is given.

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 07_batchnorm_simplified.py
Grade:   microgradnorm exercise check 7
Stuck?   microgradnorm lesson 8 teaches what this exercise needs
"""

import numpy as np


def batchnorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """Given, nothing to write here. x: [M, D]; gamma, beta: [D]. Returns (y [M, D], cache)."""
    mean = x.mean(axis=0, keepdims=True)  # 1,D
    xshift = x - mean  # M,D
    var = (xshift * xshift).mean(axis=0, keepdims=True)  # 1,D
    rstd = 1.0 / np.sqrt(var + eps)  # 1,D
    xhat = xshift * rstd  # M,D
    y = gamma * xhat + beta  # M,D
    return y, (xhat, rstd, gamma)


def batchnorm_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy = dL/dy: [M, D]; cache = (xhat [M, D], rstd [1, D], gamma [D]). Returns (dx [M, D], dgamma [D], dbeta [D])."""
    # ---- write your code here ----
    xhat, rstd, gamma = cache
    dbeta = dy.sum(axis=0)  # D
    dgamma = (dy * xhat).sum(axis=0)  # D
    dxhat = dy * gamma  # M,D
    dx = rstd * (dxhat - dxhat.mean(axis=0) - xhat * (dxhat * xhat).mean(axis=0))  # M,D
    return dx, dgamma, dbeta
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (6, 3))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 3), rng.normal(size=3), rng.normal(size=(6, 3))
    eps = 1e-5
    dx, dgamma, dbeta = batchnorm_backward(dy, batchnorm_forward(x, gamma, beta, eps)[1])
    print("Your gradients against central finite differences:")
    report("dx", dx, numerical_gradient(lambda x: np.sum(batchnorm_forward(x, gamma, beta, eps)[0] * dy), x))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(batchnorm_forward(x, g, beta, eps)[0] * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum(batchnorm_forward(x, gamma, b, eps)[0] * dy), beta))
