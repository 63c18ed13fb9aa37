"""Exercise 03 by a review: builtin sum, powers instead of sqrt, the mean as sum / D."""


def layer_norm(x, gamma, beta, eps):
    D = len(x)
    mean = sum(x) / D
    var = sum((xi - mean) ** 2 for xi in x) / D
    rstd = (var + eps) ** -0.5
    return [gi * ((xi - mean) * rstd) + bi for xi, gi, bi in zip(x, gamma, beta)]
