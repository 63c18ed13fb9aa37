# english: 09_layernorm_jacobian.py 0ea0e0f5b798
"""练习 09：LayerNorm 的雅可比矩阵，以及藏在里面的投影。

对一个有 D 个特征的向量 x，y = LN(x) = gamma * xhat + beta。它的雅可比矩阵
J[i, j] = dy_i / dx_j 有一个整齐的结构：

    J = (1/sigma) diag(gamma) (I - P),     P = (1/D) (1 1^T + xhat xhat^T)

其中 sigma = sqrt(var + eps)。xhat 之和总是 0；在 eps = 0 时还有 |xhat|^2 =
D，这时 P 就是到全 1 向量与 xhat 张成的平面上的正交投影（对称，P @ P = P，秩为
2）。I - P 恰好去掉 eps = 0 的 LayerNorm 不会响应的两个方向：给 x 加一个常数，
以及把 x 缩放。（eps > 0 时，缩放 x 会让 y 稍微动一点，P 也只是近似的投影。）

先用 xhat 写出 P，再用 x 写出 J。J 的第 i 行属于输出 y_i。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 09_layernorm_jacobian.py
评分：microgradnorm exercise check 9
"""

import numpy as np


def projection(xhat: np.ndarray) -> np.ndarray:
    """xhat：[D]，一个归一化后的向量。返回 P：[D, D] = (1/D) (1 1^T + xhat xhat^T)。"""
    # ---- 在这里写你的代码 ----
    raise NotImplementedError("write your code here")
    # ---- 你的代码到此为止 ----


def layernorm_jacobian(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    """x、gamma：[D]；eps >= 0。返回 J：[D, D]，其中 J[i, j] = dy_i / dx_j，y = LN(x)。"""
    # ---- 在这里写你的代码 ----
    raise NotImplementedError("write your code here")
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma = rng.normal(1.0, 2.0, 5), rng.uniform(0.5, 1.5, 5)

    def ln(x: np.ndarray, eps: float) -> np.ndarray:
        xshift = x - x.mean()
        return gamma * xshift / np.sqrt((xshift * xshift).mean() + eps)

    J = layernorm_jacobian(x, gamma, 0.0)
    numeric = np.array([numerical_gradient(lambda v, i=i: ln(v, 0.0)[i], x) for i in range(5)])
    print("你的雅可比矩阵与中心差分的比较（第 i 行 = y_i 的梯度）：")
    report("J", J, numeric)
    xhat = (x - x.mean()) / x.std()
    P = projection(xhat)
    print(f"  P 对称：{np.allclose(P, P.T)}；  P @ P = P：{np.allclose(P @ P, P)}；  秩：{np.linalg.matrix_rank(P)}")
