"""Exercise 03, answered another way: a power 1/2 and a division instead of sqrt and rstd."""

from microgradnorm import Value


def layer_norm(x, gamma, beta, eps):
    n = len(x)
    mean = Value.sum(x) / n
    centred = [xi - mean for xi in x]
    var = Value.sum([c * c for c in centred]) / n
    std = (var + eps) ** 0.5
    return [g * (c / std) + b for c, g, b in zip(centred, gamma, beta)]
