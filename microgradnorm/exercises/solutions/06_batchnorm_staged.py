"""Exercise 06: BatchNorm backward, one stage at a time.

BatchNorm normalizes each feature (column) of x [M, D] over the M examples
of the batch. The forward pass is written for you below; it keeps every
intermediate in its cache. Walk the chain rule back through it, stage by
stage, the way you would on paper:

    dbeta  [D]      from y = gamma * xhat + beta
    dgamma [D]
    dxhat  [M, D]
    dvar   [1, D]   xhat = xshift * (var + eps)^(-1/2)
    dmean  [1, D]   xshift = x - mean (the mean also feeds var: what does that route add?)
    dx     [M, D]   three paths: directly, through the mean, through the variance

Check every stage against a finite difference before you trust it: running
this file does that for each of the six.

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 06_batchnorm_staged.py
Grade:   microgradnorm exercise check 6
Stuck?   microgradnorm lesson 8 teaches what this exercise needs
"""

import numpy as np


def batchnorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """Given, nothing to write here. x: [M, D]; gamma, beta: [D]. Returns (y [M, D], cache)."""
    mean = x.mean(axis=0, keepdims=True)  # 1,D
    xshift = x - mean  # M,D
    var = (xshift * xshift).mean(axis=0, keepdims=True)  # 1,D
    std = np.sqrt(var + eps)  # 1,D
    rstd = 1.0 / std  # 1,D
    xhat = xshift * rstd  # M,D
    y = gamma * xhat + beta  # M,D
    cache = {"xhat": xhat, "xshift": xshift, "var": var, "std": std, "rstd": rstd, "gamma": gamma, "eps": eps}
    return y, cache


def batchnorm_backward_staged(dy: np.ndarray, cache: dict) -> dict:
    """dy = dL/dy: [M, D]; cache: the dict batchnorm_forward made (xhat, xshift, var, std, rstd, gamma, eps).

    Returns a dict with keys dbeta, dgamma, dxhat, dvar, dmean, dx (shapes above).
    """
    # ---- write your code here ----
    xhat, xshift, std, rstd, gamma = (cache[k] for k in ("xhat", "xshift", "std", "rstd", "gamma"))
    m = dy.shape[0]
    dbeta = dy.sum(axis=0)  # D
    dgamma = (dy * xhat).sum(axis=0)  # D
    dxhat = dy * gamma  # M,D
    dvar = -0.5 * std**-3 * (dxhat * xshift).sum(axis=0, keepdims=True)  # 1,D
    # dmean: through xshift, plus through var, which is dvar * (-2/m) * sum(xshift) = 0
    dmean = -rstd * dxhat.sum(axis=0, keepdims=True)  # 1,D
    dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift / m  # M,D
    return {"dbeta": dbeta, "dgamma": dgamma, "dxhat": dxhat, "dvar": dvar, "dmean": dmean, "dx": dx}
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (6, 3))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 3), rng.normal(size=3), rng.normal(size=(6, 3))
    eps = 1e-5
    y, cache = batchnorm_forward(x, gamma, beta, eps)
    stages = batchnorm_backward_staged(dy, cache)
    print("Your stages:", {k: np.shape(v) for k, v in stages.items()})
    print("Your gradients against central finite differences:")
    report("dx", stages["dx"], numerical_gradient(lambda x: np.sum(batchnorm_forward(x, gamma, beta, eps)[0] * dy), x))
    report(
        "dgamma",
        stages["dgamma"],
        numerical_gradient(lambda g: np.sum(batchnorm_forward(x, g, beta, eps)[0] * dy), gamma),
    )
    report(
        "dbeta",
        stages["dbeta"],
        numerical_gradient(lambda b: np.sum(batchnorm_forward(x, gamma, b, eps)[0] * dy), beta),
    )
    xshift = cache["xshift"]
    report("dxhat", stages["dxhat"], numerical_gradient(lambda xh: np.sum((gamma * xh + beta) * dy), cache["xhat"]))
    report(
        "dvar",
        stages["dvar"],
        numerical_gradient(lambda v: np.sum((gamma * xshift / np.sqrt(v + eps) + beta) * dy), cache["var"]),
    )

    def loss_of_mean(mu: np.ndarray) -> float:
        xs = x - mu
        return float(np.sum((gamma * xs / np.sqrt((xs * xs).mean(axis=0, keepdims=True) + eps) + beta) * dy))

    report("dmean", stages["dmean"], numerical_gradient(loss_of_mean, x.mean(axis=0, keepdims=True)))
