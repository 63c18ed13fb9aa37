# english: 07_batchnorm_simplified.py 4cc454104e01
"""练习 07：BatchNorm 的反向传播，化简成一行。

练习 06 的分阶段反向传播顺路算出了 dvar 和 dmean。把它们代入三条路径，再把
xshift 换成 xhat * std，整个和就合成一个式子，只用到 dxhat = gamma * dy、xhat
和 rstd：rstd 乘以 dxhat，再减去两个修正项，一个对批量中的每个样本都一样（经过
均值的路径），另一个与 xhat 成正比（经过方差的路径）。把两项都推出来；每一项都
是对批量取的均值。

如果你做过练习 05，你见过这个公式：BatchNorm 的统计量在批量上取（axis 0），每
个特征一个，而 LayerNorm 的统计量在每一行上取。前向传播已经写好。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 07_batchnorm_simplified.py
评分：microgradnorm exercise check 7
卡住了？microgradnorm lesson 8 讲的正是这道练习要用的内容
"""

import numpy as np


def batchnorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """已经写好，这里不用动。x：[M, D]；gamma、beta：[D]。返回 (y [M, D], cache)。"""
    mean = x.mean(axis=0, keepdims=True)  # 1,D
    xshift = x - mean  # M,D
    var = (xshift * xshift).mean(axis=0, keepdims=True)  # 1,D
    rstd = 1.0 / np.sqrt(var + eps)  # 1,D
    xhat = xshift * rstd  # M,D
    y = gamma * xhat + beta  # M,D
    return y, (xhat, rstd, gamma)


def batchnorm_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy = dL/dy：[M, D]；缓存 cache = (xhat [M, D], rstd [1, D], gamma [D])。

    返回 (dx [M, D], dgamma [D], dbeta [D])。
    """
    # ---- 在这里写你的代码 ----
    xhat, rstd, gamma = cache
    dbeta = dy.sum(axis=0)  # D
    dgamma = (dy * xhat).sum(axis=0)  # D
    dxhat = dy * gamma  # M,D
    dx = rstd * (dxhat - dxhat.mean(axis=0) - xhat * (dxhat * xhat).mean(axis=0))  # M,D
    return dx, dgamma, dbeta
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (6, 3))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 3), rng.normal(size=3), rng.normal(size=(6, 3))
    eps = 1e-5
    dx, dgamma, dbeta = batchnorm_backward(dy, batchnorm_forward(x, gamma, beta, eps)[1])
    print("你的梯度与中心差分的比较：")
    report("dx", dx, numerical_gradient(lambda x: np.sum(batchnorm_forward(x, gamma, beta, eps)[0] * dy), x))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(batchnorm_forward(x, g, beta, eps)[0] * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum(batchnorm_forward(x, gamma, b, eps)[0] * dy), beta))
