"""Exercise 03: LayerNorm built from primitives, with the Value engine.

Build the forward pass of LayerNorm for one row out of scalar Value nodes.
You write no derivative at all: every op you use already knows its local
derivative (exercise 01), so backward() can push the gradient through the
graph you build. The grader calls your function row by row, backpropagates
loss = sum(y * dy) with a random dy, and compares the gradients that land on
x, gamma and beta with the closed forms.

    mean = (1/d) sum_j x_j
    var  = (1/d) sum_j (x_j - mean)^2          biased: divide by d
    y_i  = gamma_i * (x_i - mean) / sqrt(var + eps) + beta_i

Use only Value operations: +, -, *, /, **, .sqrt() and Value.sum(list).
While it is graded, your code may use microgradnorm.Value (the scalar engine),
NumPy and the Python standard library, nothing else: the package's own norm
builders (microgradnorm.layer_norm would do it for you) are out of reach.

Try it:  python 03_layernorm_from_values.py
Grade:   microgradnorm exercise check 3
Stuck?   microgradnorm lesson 3 teaches what this exercise needs
"""

from microgradnorm import Value


def layer_norm(x: list[Value], gamma: list[Value], beta: list[Value], eps: float) -> list[Value]:
    """One row. x, gamma, beta: lists of d Values; eps: a float >= 0. Returns the d output Values y."""
    # ---- write your code here ----
    d = len(x)
    mean = Value.sum(x) * (1.0 / d)
    xshift = [xi - mean for xi in x]
    var = Value.sum([s**2 for s in xshift]) * (1.0 / d)
    rstd = (var + eps).sqrt() ** -1
    return [g * (s * rstd) + b for s, g, b in zip(xshift, gamma, beta)]
    # ---- end of your code ----


if __name__ == "__main__":
    import numpy as np

    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma, beta, dy = rng.normal(1.0, 2.0, 5), rng.uniform(0.5, 1.5, 5), rng.normal(size=5), rng.normal(size=5)
    eps = 1e-5

    def loss(xv: np.ndarray, gv: np.ndarray = gamma, bv: np.ndarray = beta) -> float:
        ys = layer_norm(
            [Value(float(v)) for v in xv], [Value(float(g)) for g in gv], [Value(float(b)) for b in bv], eps
        )
        return sum(y.data * g for y, g in zip(ys, dy))

    xs, gs, bs = [Value(float(v)) for v in x], [Value(float(g)) for g in gamma], [Value(float(b)) for b in beta]
    ys = layer_norm(xs, gs, bs, eps)
    print("y =", np.round([y.data for y in ys], 4))
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    print("Your gradient (from backward through your graph) against central finite differences:")
    report("dx", [v.grad for v in xs], numerical_gradient(loss, x))
    report("dgamma", [g.grad for g in gs], numerical_gradient(lambda g: loss(x, g, beta), gamma))
    report("dbeta", [b.grad for b in bs], numerical_gradient(lambda b: loss(x, gamma, b), beta))
