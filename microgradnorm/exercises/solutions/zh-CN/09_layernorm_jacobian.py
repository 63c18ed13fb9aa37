# english: 09_layernorm_jacobian.py fd63994efacf
"""练习 09：LayerNorm 的雅可比矩阵，以及藏在里面的投影。

对一个有 D 个特征的向量 x，y = LN(x) = gamma * xhat + beta。它的雅可比矩阵
J[i, j] = dy_i / dx_j 收集了所有的 dy_i / dx_j；第 i 行属于输出 y_i。

先推导 J：第 i 行只是 y_i 的梯度，所以就是 dy 在位置 i 为 1、其余为 0 时
LayerNorm 的反向传播（第 5 课）。然后看看你得到了什么：J = (1/std) diag(gamma)
(I - P)，std = sqrt(var + eps)，其中 P 是一个只由全 1 向量和 xhat 构成的
D x D 矩阵。在你的 J 里找出 P，把它写成 xhat 的一个单独的函数。在 eps = 0 时
（xhat 之和为 0，平方和为 D），P 把全 1 向量和 xhat 变成什么？

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 09_layernorm_jacobian.py
评分：microgradnorm exercise check 9
卡住了？microgradnorm lesson 7 讲的正是这道练习要用的内容
"""

import numpy as np


def projection(xhat: np.ndarray) -> np.ndarray:
    """xhat：[D]，一个归一化后的向量。返回 P：[D, D]，即 J = (1/std) diag(gamma) (I - P) 中的那个矩阵。"""
    # ---- 在这里写你的代码 ----
    d = xhat.shape[0]
    ones = np.ones(d)
    return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d
    # ---- 你的代码到此为止 ----


def layernorm_jacobian(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """x、gamma：[D]；eps >= 0。返回 J：[D, D]，其中 J[i, j] = dy_i / dx_j，y = LN(x)。"""
    # ---- 在这里写你的代码 ----
    d = x.shape[0]
    xshift = x - x.mean()
    rstd = 1.0 / np.sqrt((xshift * xshift).mean() + eps)
    xhat = xshift * rstd
    return rstd * gamma[:, None] * (np.eye(d) - projection(xhat))
    # ---- 你的代码到此为止 ----


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
    print("你的雅可比矩阵与中心差分的比较（第 i 行 = y_i 的梯度）：")
    report("J", J, numeric)
    xhat = (x - x.mean()) / x.std()
    P = projection(xhat)
    print("P 不是梯度，没有有限差分能检查它；它必须满足的性质（xhat 取 eps = 0 时的值）：")
    print(f"  对称：{np.allclose(P, P.T)}；  P @ P = P：{np.allclose(P @ P, P)}", end="")
    print(f"；  秩为 2：{np.linalg.matrix_rank(P) == 2}")
    print(f"  P @ ones = ones：{np.allclose(P @ np.ones(5), 1.0)}；  P @ xhat = xhat：{np.allclose(P @ xhat, xhat)}")
