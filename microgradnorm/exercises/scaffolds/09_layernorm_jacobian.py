"""Exercise 09: the LayerNorm Jacobian, and the projection inside it.

For one vector x of D features, y = LN(x) = gamma * xhat + beta. Its Jacobian
J[i, j] = dy_i / dx_j has a tidy structure:

    J = (1/sigma) diag(gamma) (I - P),     P = (1/D) (1 1^T + xhat xhat^T)

where sigma = sqrt(var + eps). xhat always sums to 0; at eps = 0 also
|xhat|^2 = D, and then P is the orthogonal projection onto the plane spanned
by the ones vector and xhat (symmetric, P @ P = P, rank 2). I - P removes
exactly the two directions LayerNorm at eps = 0 cannot respond to: adding a
constant to x, and scaling x. (With eps > 0, scaling x moves y a little, and
P is a projection only nearly.)

Write P from xhat, then J from x. Row i of J belongs to output y_i.

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 09_layernorm_jacobian.py
Grade:   microgradnorm exercise check 9
"""

import numpy as np


def projection(xhat: np.ndarray) -> np.ndarray:
    """xhat: [D], a normalized vector. Returns P: [D, D] = (1/D) (1 1^T + xhat xhat^T)."""
    # ---- write your code here ----
    raise NotImplementedError("write your code here")
    # ---- end of your code ----


def layernorm_jacobian(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """x, gamma: [D]; eps >= 0. Returns J: [D, D] with J[i, j] = dy_i / dx_j for y = LN(x)."""
    # ---- write your code here ----
    raise NotImplementedError("write your code here")
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma = rng.normal(1.0, 2.0, 5), rng.uniform(0.5, 1.5, 5)

    def ln(x: np.ndarray, eps: float) -> np.ndarray:
        xshift = x - x.mean()
        return gamma * xshift / np.sqrt((xshift * xshift).mean() + eps)

    J = layernorm_jacobian(x, gamma, 0.0)
    numeric = np.array([numerical_gradient(lambda v, i=i: ln(v, 0.0)[i], x) for i in range(5)])
    print("Your Jacobian against central finite differences (row i = gradient of y_i):")
    report("J", J, numeric)
    xhat = (x - x.mean()) / x.std()
    P = projection(xhat)
    print(
        f"  P symmetric: {np.allclose(P, P.T)};  P @ P = P: {np.allclose(P @ P, P)};  rank: {np.linalg.matrix_rank(P)}"
    )
