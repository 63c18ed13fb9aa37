"""Exercise 09: the LayerNorm Jacobian, and the projection inside it.

For one vector x of D features, y = LN(x) = gamma * xhat + beta. Its Jacobian
J[i, j] = dy_i / dx_j collects every dy_i / dx_j; row i belongs to output y_i.

Derive J first: row i is the gradient of y_i alone, so it is LayerNorm's
backward pass (lesson 5) with dy = 1 at position i and 0 elsewhere. Then look
at what you found: J = (1/std) diag(gamma) (I - P), std = sqrt(var + eps),
for a D x D matrix P built from the ones vector and xhat alone. Find P in your
J and write it as its own function of xhat. What does P do to the ones vector,
and to xhat, at eps = 0 (where xhat sums to 0 and its squares sum to D)?

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 09_layernorm_jacobian.py
Grade:   microgradnorm exercise check 9
Stuck?   microgradnorm lesson 7 teaches what this exercise needs
"""

import numpy as np


def projection(xhat: np.ndarray) -> np.ndarray:
    """xhat: [D], a normalized vector. Returns P: [D, D], the matrix with J = (1/std) diag(gamma) (I - P)."""
    # ---- write your code here ----
    d = xhat.shape[0]
    ones = np.ones(d)
    return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d
    # ---- end of your code ----


def layernorm_jacobian(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """x, gamma: [D]; eps >= 0. Returns J: [D, D] with J[i, j] = dy_i / dx_j for y = LN(x)."""
    # ---- write your code here ----
    d = x.shape[0]
    xshift = x - x.mean()
    rstd = 1.0 / np.sqrt((xshift * xshift).mean() + eps)
    xhat = xshift * rstd
    return rstd * gamma[:, None] * (np.eye(d) - projection(xhat))
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma = rng.normal(1.0, 2.0, 5), rng.uniform(0.5, 1.5, 5)

    def ln(x: np.ndarray, eps: float) -> np.ndarray:
        xshift = x - x.mean()
        return gamma * xshift / np.sqrt((xshift * xshift).mean() + eps)

    eps = 1e-3  # as the grader's first input: eps > 0
    J = layernorm_jacobian(x, gamma, eps)
    numeric = np.array([numerical_gradient(lambda v, i=i: ln(v, eps)[i], x) for i in range(5)])
    print("Your Jacobian against central finite differences (row i = gradient of y_i):")
    report("J", J, numeric)
    xhat = (x - x.mean()) / x.std()
    P = projection(xhat)
    print("P is not a gradient, so no finite difference checks it; what it must be, with xhat at eps = 0:")
    print(f"  symmetric: {np.allclose(P, P.T)};  P @ P = P: {np.allclose(P @ P, P)}", end="")
    print(f";  rank 2: {np.linalg.matrix_rank(P) == 2}")
    print(f"  P @ ones = ones: {np.allclose(P @ np.ones(5), 1.0)};  P @ xhat = xhat: {np.allclose(P @ xhat, xhat)}")
