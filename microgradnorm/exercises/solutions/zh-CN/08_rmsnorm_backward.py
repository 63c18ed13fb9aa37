# english: 08_rmsnorm_backward.py cc7c64c73897
"""练习 08：RMSNorm 的前向与反向传播。

RMSNorm（Zhang 和 Sennrich，2019；LLaMA 和许多其他近来的语言模型都在用）不减均
值：它把每一行除以这一行的均方根，再乘上 gamma。没有 beta，也不做中心化。

    ms   = 这一行 x^2 的均值
    rrms = 1 / sqrt(ms + eps)
    xhat = x * rrms                       y    = gamma * xhat

反向来看，x_i 有两条路径：直接经过 xhat_i，以及经过 rms（这一行的每个 x_j 都要
除以它）。与 LayerNorm 相比少了一条路径；少的是哪一条，公式又会变成什么样？

x：[N, D]，逐行归一化；gamma：[D]。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 08_rmsnorm_backward.py
评分：microgradnorm exercise check 8
卡住了？microgradnorm lesson 9 讲的正是这道练习要用的内容
"""

import numpy as np


def rmsnorm_forward(x: np.ndarray, gamma: np.ndarray, eps: float):
    """x：[N, D]；gamma：[D]；eps >= 0。返回 (y [N, D], cache)，即输出和缓存。"""
    # ---- 在这里写你的代码 ----
    ms = (x * x).mean(axis=-1, keepdims=True)  # N,1
    rrms = 1.0 / np.sqrt(ms + eps)  # N,1
    xhat = x * rrms  # N,D
    return gamma * xhat, (xhat, rrms, gamma)
    # ---- 你的代码到此为止 ----


def rmsnorm_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray]:
    """dy = dL/dy：[N, D]。返回 (dx [N, D], dgamma [D])。"""
    # ---- 在这里写你的代码 ----
    xhat, rrms, gamma = cache
    dgamma = (dy * xhat).sum(axis=0)  # D
    dxhat = dy * gamma  # N,D
    dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # N,D
    return dx, dgamma
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma, dy = rng.normal(1.0, 2.0, (3, 5)), rng.uniform(0.5, 1.5, 5), rng.normal(size=(3, 5))
    eps = 1e-5
    dx, dgamma = rmsnorm_backward(dy, rmsnorm_forward(x, gamma, eps)[1])
    print("你的梯度与中心差分的比较：")
    report("dx", dx, numerical_gradient(lambda x: np.sum(rmsnorm_forward(x, gamma, eps)[0] * dy), x))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(rmsnorm_forward(x, g, eps)[0] * dy), gamma))
