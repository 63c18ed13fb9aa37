"""Exercise 04: dgamma and dbeta, the affine step backwards.

The last step of every normalization is an affine map, per feature:

    y = gamma * xhat + beta        xhat, y: [B, T, D];  gamma, beta: [D]

The same gamma_d and beta_d are used at every position (b, t). So their
gradients collect a contribution from each position: a sum over every axis
but the last. xhat's gradient needs no sum, each xhat entry is used once.

Return (dgamma [D], dbeta [D], dxhat [B, T, D]) for a given upstream dy = dL/dy.
Mind the shapes: [D], not [1, 1, D], and not [T, D].

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 04_affine_backward.py
Grade:   microgradnorm exercise check 4
Stuck?   microgradnorm lesson 4 teaches what this exercise needs
"""

import numpy as np


def affine_backward(dy: np.ndarray, xhat: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy, xhat: [B, T, D]; gamma: [D]. Returns (dgamma [D], dbeta [D], dxhat [B, T, D])."""
    # ---- write your code here ----
    lead = tuple(range(dy.ndim - 1))  # every axis but the last: (0, 1)
    dgamma = (dy * xhat).sum(axis=lead)  # D
    dbeta = dy.sum(axis=lead)  # D
    dxhat = dy * gamma  # B,T,D
    return dgamma, dbeta, dxhat
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    dy, xhat = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    gamma, beta = rng.uniform(0.5, 1.5, 4), rng.normal(size=4)
    dgamma, dbeta, dxhat = affine_backward(dy, xhat, gamma)
    print("Your gradients against central finite differences:")
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum((g * xhat + beta) * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum((gamma * xhat + b) * dy), beta))
    report("dxhat", dxhat, numerical_gradient(lambda xh: np.sum((gamma * xh + beta) * dy), xhat))
