"""Exercise 02: the backward pass of the mean and of the variance.

A normalization layer computes two statistics per row: the mean and the
variance. Before the whole layer, learn how each one hands its gradient back
to the inputs it was computed from.

    mean = (1/D) sum_j x_j                        one number per row
    var  = (1/D) sum_j (x_j - mean)^2             biased: divided by D, not D - 1

Given dL/dmean (or dL/dvar) for each row, return dL/dx for every entry.
x is [N, D] (N rows of D values); the statistics and their gradients have
shape [N, 1], so that they broadcast against x (keepdims).

The variance depends on x twice: directly, and through the mean. Work out
what the second route contributes before you write any code.

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 02_mean_variance_backward.py
Grade:   microgradnorm exercise check 2
Stuck?   microgradnorm lesson 5 teaches what this exercise needs
"""

import numpy as np


def mean_backward(x: np.ndarray, dmean: np.ndarray) -> np.ndarray:
    """mean = x.mean(axis=1, keepdims=True). x: [N, D]; dmean = dL/dmean: [N, 1]. Returns dx: [N, D]."""
    # ---- write your code here ----
    d = x.shape[1]
    return np.ones_like(x) * dmean / d
    # ---- end of your code ----


def variance_backward(x: np.ndarray, dvar: np.ndarray) -> np.ndarray:
    """var = ((x - mean) ** 2).mean(axis=1, keepdims=True). x: [N, D]; dvar: [N, 1]. Returns dx: [N, D]."""
    # ---- write your code here ----
    d = x.shape[1]
    xshift = x - x.mean(axis=1, keepdims=True)  # N,D
    # The route through the mean adds dvar * (-2/D) sum_j xshift_j / D = 0: the deviations sum to zero.
    return 2.0 * xshift * dvar / d
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (2, 5))
    dmean, dvar = rng.normal(size=(2, 1)), rng.normal(size=(2, 1))
    print("Your gradients against central finite differences:")
    report(
        "mean dx", mean_backward(x, dmean), numerical_gradient(lambda x: np.sum(x.mean(1, keepdims=True) * dmean), x)
    )
    report(
        "variance dx",
        variance_backward(x, dvar),
        numerical_gradient(lambda x: np.sum(x.var(1, keepdims=True) * dvar), x),
    )
