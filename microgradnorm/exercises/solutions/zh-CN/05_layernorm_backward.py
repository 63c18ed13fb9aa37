# english: 05_layernorm_backward.py ae01edd02b1a
"""练习 05：LayerNorm 的前向与反向传播，闭式、向量化。

像一个库那样写 LayerNorm：前向传播返回输出，以及一份缓存，存下反向传播需要的一
切；反向传播把 dL/dy 变成 dL/dx、dL/dgamma 和 dL/dbeta，只用几行 NumPy，不写循
环。每一行 x[b, t, :] 的 d 个特征各自归一化：

    mean = 这一行的均值
    var  = (x - mean)^2 的均值（有偏）
    rstd = 1 / sqrt(var + eps)      xhat = (x - mean) * rstd
    y    = gamma * xhat + beta

反向来看，x_i 经三条路径影响损失：直接经过 xhat_i，经过均值（每个 xhat_j 都用
到它），以及经过方差（同样如此）。闭式公式把三条路径合成一行。一条分阶段的路：
先求 dxhat，再求 dvar，再求 dmean，最后把三条路径加起来得到 dx（第 5 课一步步走
过这些阶段）；然后再化简。沿最后一个轴求统计量时，需要 keepdims=True 才能广播；
dgamma 和 dbeta 要对除最后一个轴以外的所有轴求和，这里是 (0, 1)。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 05_layernorm_backward.py
评分：microgradnorm exercise check 5
卡住了？microgradnorm lesson 5 讲的正是这道练习要用的内容
"""

import numpy as np


def layernorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """x：[B, T, d]；gamma、beta：[d]；eps >= 0。返回 (y [B, T, d], cache)，cache 的内容由你决定。"""
    # ---- 在这里写你的代码 ----
    mean = x.mean(axis=-1, keepdims=True)  # B,T,1
    xshift = x - mean  # B,T,D
    var = (xshift * xshift).mean(axis=-1, keepdims=True)  # B,T,1
    rstd = 1.0 / np.sqrt(var + eps)  # B,T,1
    xhat = xshift * rstd  # B,T,D
    y = gamma * xhat + beta  # B,T,D
    return y, (xhat, rstd, gamma)
    # ---- 你的代码到此为止 ----


def layernorm_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy = dL/dy：[B, T, d]；cache：layernorm_forward 给出的。返回 (dx [B, T, d], dgamma [d], dbeta [d])。"""
    # ---- 在这里写你的代码 ----
    xhat, rstd, gamma = cache
    lead = tuple(range(dy.ndim - 1))  # (0, 1)
    dbeta = dy.sum(axis=lead)  # D
    dgamma = (dy * xhat).sum(axis=lead)  # D
    dxhat = dy * gamma  # B,T,D
    mean_part = dxhat.mean(axis=-1, keepdims=True)  # B,T,1：经过均值的路径
    var_part = (dxhat * xhat).mean(axis=-1, keepdims=True)  # B,T,1：经过方差的路径
    dx = rstd * (dxhat - mean_part - xhat * var_part)  # B,T,D
    return dx, dgamma, dbeta
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (2, 3, 5))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 5), rng.normal(size=5), rng.normal(size=(2, 3, 5))
    eps = 1e-5
    y, cache = layernorm_forward(x, gamma, beta, eps)
    dx, dgamma, dbeta = layernorm_backward(dy, cache)
    print("y[0, 0] =", np.round(y[0, 0], 4))
    print("你的梯度与中心差分的比较：")
    report("dx", dx, numerical_gradient(lambda x: np.sum(layernorm_forward(x, gamma, beta, eps)[0] * dy), x))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(layernorm_forward(x, g, beta, eps)[0] * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum(layernorm_forward(x, gamma, b, eps)[0] * dy), beta))
