# english: 04_affine_backward.py 29b2c890659d
"""练习 04：dgamma 和 dbeta，反向走一遍仿射变换。

每种归一化的最后一步都是逐特征的仿射变换：

    y = gamma * xhat + beta        xhat、y：[B, T, D]；gamma、beta：[D]

同一个 gamma_d 和 beta_d 在每个位置 (b, t) 上都被用到。所以它们的梯度要把每个
位置的贡献都收集起来：对除最后一个轴以外的所有轴求和。xhat 的梯度不用求和，
xhat 的每个元素只用到一次。

已知上游梯度 dy = dL/dy，返回 (dgamma [D], dbeta [D], dxhat [B, T, D])。注意形
状：是 [D]，不是 [1, 1, D]，也不是 [T, D]。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 04_affine_backward.py
评分：microgradnorm exercise check 4
卡住了？microgradnorm lesson 4 讲的正是这道练习要用的内容
"""

import numpy as np


def affine_backward(dy: np.ndarray, xhat: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy、xhat：[B, T, D]；gamma：[D]。返回 (dgamma [D], dbeta [D], dxhat [B, T, D])。"""
    # ---- 在这里写你的代码 ----
    lead = tuple(range(dy.ndim - 1))  # 除最后一个轴以外的所有轴：(0, 1)
    dgamma = (dy * xhat).sum(axis=lead)  # D
    dbeta = dy.sum(axis=lead)  # D
    dxhat = dy * gamma  # B,T,D
    return dgamma, dbeta, dxhat
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    dy, xhat = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    gamma, beta = rng.uniform(0.5, 1.5, 4), rng.normal(size=4)
    dgamma, dbeta, dxhat = affine_backward(dy, xhat, gamma)
    print("你的梯度与中心差分的比较：")
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum((g * xhat + beta) * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum((gamma * xhat + b) * dy), beta))
    report("dxhat", dxhat, numerical_gradient(lambda xh: np.sum((gamma * xh + beta) * dy), xhat))
