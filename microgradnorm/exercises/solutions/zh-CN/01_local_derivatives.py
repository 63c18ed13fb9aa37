# english: 01_local_derivatives.py ae1eb0de6f22
"""练习 01：各个基本运算的局部导数。

Value 引擎里的每个运算都知道自己的一件事：某个输入动一点点，输出会跟着动多少，
这就是它的*局部导数*。在 backward() 中，每个节点把这个局部导数乘上从上面传下来
的梯度 ``dout``，再把乘积累加到输入的梯度上。这一次乘法就是链式法则的全部。

请写出四个基本运算的反向传播规则。参数都是形状相同的 NumPy 数组，一切都是逐元
素的：结果的第 k 个元素只取决于各输入的第 k 个元素。每个函数返回“局部导数乘以
dout”：

    mul:     out = a * b       ->  (da, db)
    pow:     out = a ** p      ->  da          p 是普通的 float
    sqrt:    out = sqrt(a)     ->  da          a > 0
    divide:  out = a / b       ->  (da, db)    b != 0

可选：文件末尾的 Tiny 类像 micrograd 视频里那样，把这四条规则写成 _backward 闭包
（不评分）。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 01_local_derivatives.py（与有限差分比较）
评分：microgradnorm exercise check 1
卡住了？microgradnorm lesson 1 讲的正是这道练习要用的内容
"""

import numpy as np


def mul_backward(a: np.ndarray, b: np.ndarray, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """out = a * b。a、b、dout：[K]。返回 (da, db)，形状都是 [K]。"""
    # ---- 在这里写你的代码 ----
    return b * dout, a * dout
    # ---- 你的代码到此为止 ----


def pow_backward(a: np.ndarray, p: float, dout: np.ndarray) -> np.ndarray:
    """out = a ** p，指数 p 是一个 float。a、dout：[K]，a > 0。返回 da [K]。"""
    # ---- 在这里写你的代码 ----
    return p * a ** (p - 1.0) * dout
    # ---- 你的代码到此为止 ----


def sqrt_backward(a: np.ndarray, dout: np.ndarray) -> np.ndarray:
    """out = sqrt(a)。a、dout：[K]，a > 0。返回 da [K]。"""
    # ---- 在这里写你的代码 ----
    return 0.5 / np.sqrt(a) * dout
    # ---- 你的代码到此为止 ----


def div_backward(a: np.ndarray, b: np.ndarray, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """out = a / b。a、b、dout：[K]，b != 0。返回 (da, db)，形状都是 [K]。"""
    # ---- 在这里写你的代码 ----
    return dout / b, -a / b**2 * dout
    # ---- 你的代码到此为止 ----


class Tiny:
    """可选，和 micrograd 视频里一样：把你的四条规则写成 _backward 闭包。

    不评分。这个小小的 Value 的每个运算都在它的 _backward 闭包里调用你写的函数；
    你也可以把调用换成直接写出的规则（对 a * b：self.grad += other.data * dout）。
    运行这个文件时，也会经过一个小的计算图检查 Tiny 的梯度。
    """

    def __init__(self, data: float, children: tuple = ()) -> None:
        self.data, self.grad, self._prev, self._backward = float(data), 0.0, children, lambda: None

    def _op(self, data: float, children: tuple, backward) -> "Tiny":
        out = Tiny(data, children)
        out._backward = lambda: backward(out.grad)
        return out

    def __mul__(self, other: "Tiny") -> "Tiny":
        def _backward(dout: float) -> None:  # 你的规则，也可以在这里直接写出
            da, db = mul_backward(np.float64(self.data), np.float64(other.data), np.float64(dout))
            self.grad += float(da)
            other.grad += float(db)

        return self._op(self.data * other.data, (self, other), _backward)

    def __pow__(self, p: float) -> "Tiny":
        def _backward(dout: float) -> None:  # 你的规则，也可以在这里直接写出
            self.grad += float(pow_backward(np.float64(self.data), p, np.float64(dout)))

        return self._op(self.data**p, (self,), _backward)

    def sqrt(self) -> "Tiny":
        def _backward(dout: float) -> None:  # 你的规则，也可以在这里直接写出
            self.grad += float(sqrt_backward(np.float64(self.data), np.float64(dout)))

        return self._op(self.data**0.5, (self,), _backward)

    def __truediv__(self, other: "Tiny") -> "Tiny":
        def _backward(dout: float) -> None:  # 你的规则，也可以在这里直接写出
            da, db = div_backward(np.float64(self.data), np.float64(other.data), np.float64(dout))
            self.grad += float(da)
            other.grad += float(db)

        return self._op(self.data / other.data, (self, other), _backward)

    def backward(self) -> None:
        """按拓扑顺序（和 micrograd 一样），从这个节点一直到叶子节点，调用每个节点的 _backward。"""
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
    print("你的梯度与中心差分的比较：")
    da, db = mul_backward(a, b, dout)
    report("mul da", da, numerical_gradient(lambda a: np.sum(a * b * dout), a))
    report("mul db", db, numerical_gradient(lambda b: np.sum(a * b * dout), b))
    report("pow da", pow_backward(a, p, dout), numerical_gradient(lambda a: np.sum(a**p * dout), a))
    report("sqrt da", sqrt_backward(a, dout), numerical_gradient(lambda a: np.sum(np.sqrt(a) * dout), a))
    da, db = div_backward(a, b, dout)
    report("divide da", da, numerical_gradient(lambda a: np.sum(a / b * dout), a))
    report("divide db", db, numerical_gradient(lambda b: np.sum(a / b * dout), b))

    # 可选：同样的规则，经过由 Tiny 值构成的计算图，f = (x * y) ** p / sqrt(y)
    def f(v: np.ndarray) -> float:
        return float((v[0] * v[1]) ** p / np.sqrt(v[1]))

    x, y = Tiny(a[0]), Tiny(b[0])
    ((x * y) ** p / y.sqrt()).backward()
    report("Tiny", [x.grad, y.grad], numerical_gradient(f, np.array([a[0], b[0]])))
