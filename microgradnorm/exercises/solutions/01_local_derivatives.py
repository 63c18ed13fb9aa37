"""Exercise 01: the local derivatives of the primitives.

Every op in the Value engine knows one fact about itself: how much its output
moves when one input moves a little (its *local derivative*). During
backward(), each node multiplies that local derivative by the gradient that
arrives from above, ``dout``, and adds the product to the input's gradient.
That multiplication is the whole chain rule.

Write the backward rule of four primitives. The arguments are NumPy arrays of
one shape and everything is elementwise: entry k of the result depends only on
entry k of the inputs. Each function returns local derivative times dout:

    mul:     out = a * b       ->  (da, db)
    pow:     out = a ** p      ->  da          p is a plain float
    sqrt:    out = sqrt(a)     ->  da          a > 0
    divide:  out = a / b       ->  (da, db)    b != 0

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 01_local_derivatives.py   (compares with finite differences)
Grade:   microgradnorm exercise check 1
Stuck?   microgradnorm lesson 1 teaches what this exercise needs
"""

import numpy as np


def mul_backward(a: np.ndarray, b: np.ndarray, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """out = a * b. a, b, dout: [K]. Returns (da, db), each [K]."""
    # ---- write your code here ----
    return b * dout, a * dout
    # ---- end of your code ----


def pow_backward(a: np.ndarray, p: float, dout: np.ndarray) -> np.ndarray:
    """out = a ** p for a float exponent p. a, dout: [K], a > 0. Returns da [K]."""
    # ---- write your code here ----
    return p * a ** (p - 1.0) * dout
    # ---- end of your code ----


def sqrt_backward(a: np.ndarray, dout: np.ndarray) -> np.ndarray:
    """out = sqrt(a). a, dout: [K], a > 0. Returns da [K]."""
    # ---- write your code here ----
    return 0.5 / np.sqrt(a) * dout
    # ---- end of your code ----


def div_backward(a: np.ndarray, b: np.ndarray, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """out = a / b. a, b, dout: [K], b != 0. Returns (da, db), each [K]."""
    # ---- write your code here ----
    return dout / b, -a / b**2 * dout
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 2.0, 4), rng.uniform(0.5, 2.0, 4)
    dout, p = rng.normal(size=4), 1.5
    print("Your gradients against central finite differences:")
    da, db = mul_backward(a, b, dout)
    report("mul da", da, numerical_gradient(lambda a: np.sum(a * b * dout), a))
    report("mul db", db, numerical_gradient(lambda b: np.sum(a * b * dout), b))
    report("pow da", pow_backward(a, p, dout), numerical_gradient(lambda a: np.sum(a**p * dout), a))
    report("sqrt da", sqrt_backward(a, dout), numerical_gradient(lambda a: np.sum(np.sqrt(a) * dout), a))
    da, db = div_backward(a, b, dout)
    report("divide da", da, numerical_gradient(lambda a: np.sum(a / b * dout), a))
    report("divide db", db, numerical_gradient(lambda b: np.sum(a / b * dout), b))
