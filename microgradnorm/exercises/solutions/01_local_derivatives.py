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

Optional: the class Tiny at the end holds these four rules as _backward
closures, as in the micrograd video (not graded).

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


class Tiny:
    """Optional, as in the micrograd video: your four rules as _backward closures.

    Not graded. Each op of this tiny Value calls your function in its _backward
    closure; you may replace the call with the rule written out inline (for
    a * b: self.grad += other.data * dout). Running this file checks Tiny's
    gradients through a small graph too.
    """

    def __init__(self, data: float, children: tuple = ()) -> None:
        self.data, self.grad, self._prev, self._backward = float(data), 0.0, children, lambda: None

    def _op(self, data: float, children: tuple, backward) -> "Tiny":
        out = Tiny(data, children)
        out._backward = lambda: backward(out.grad)
        return out

    def __mul__(self, other: "Tiny") -> "Tiny":
        def _backward(dout: float) -> None:  # your rule, or write it out here
            da, db = mul_backward(np.float64(self.data), np.float64(other.data), np.float64(dout))
            self.grad += float(da)
            other.grad += float(db)

        return self._op(self.data * other.data, (self, other), _backward)

    def __pow__(self, p: float) -> "Tiny":
        def _backward(dout: float) -> None:  # your rule, or write it out here
            self.grad += float(pow_backward(np.float64(self.data), p, np.float64(dout)))

        return self._op(self.data**p, (self,), _backward)

    def sqrt(self) -> "Tiny":
        def _backward(dout: float) -> None:  # your rule, or write it out here
            self.grad += float(sqrt_backward(np.float64(self.data), np.float64(dout)))

        return self._op(self.data**0.5, (self,), _backward)

    def __truediv__(self, other: "Tiny") -> "Tiny":
        def _backward(dout: float) -> None:  # your rule, or write it out here
            da, db = div_backward(np.float64(self.data), np.float64(other.data), np.float64(dout))
            self.grad += float(da)
            other.grad += float(db)

        return self._op(self.data / other.data, (self, other), _backward)

    def backward(self) -> None:
        """Every node's _backward, from this one back to the leaves (a topological order, as in micrograd)."""
        order, seen = [], set()

        def visit(v: "Tiny") -> None:
            if id(v) not in seen:
                seen.add(id(v))
                for child in v._prev:
                    visit(child)
                order.append(v)

        visit(self)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()


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

    # optional: the same rules through a graph of Tiny values, f = (x * y) ** p / sqrt(y)
    def f(v: np.ndarray) -> float:
        return float((v[0] * v[1]) ** p / np.sqrt(v[1]))

    x, y = Tiny(a[0]), Tiny(b[0])
    ((x * y) ** p / y.sqrt()).backward()
    report("Tiny", [x.grad, y.grad], numerical_gradient(f, np.array([a[0], b[0]])))
