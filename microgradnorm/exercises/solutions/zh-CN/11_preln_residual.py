# english: 11_preln_residual.py 215246be1e7b
"""练习 11：经过 pre-LN 残差块的梯度。

Transformer 给每个子层都包一个残差连接。在 pre-LN 的排布里，归一化放在分支里
面：

    h   = LN(x)            （沿最后一个轴，带 gamma 和 beta）
    out = x + h @ W        x、h、out：[N, D]；W：[D, D]

反向来看，dx 有两部分：恒等路径（残差连接把 dy 原样交给 x），以及经过 W 和
LayerNorm 的路径。把许多这样的块叠起来，记 J_k 为第 k 个块分支的雅可比矩阵，则
dx = (I + J_1)^T (I + J_2)^T ... (I + J_L)^T dy；把这个乘积展开，里面总有
dy 本身这一项：恒等路径保证的，是这一项无论各层做什么都能到达最底层。它并不
保证 dx 很大：其他项可能与它方向相反，抵消掉一部分。Xiong 等人（2020）表明，
pre-LN 的 Transformer 可以不用学习率预热来训练，而 post-LN 的需要；实践中
pre-LN 模型通常仍然用预热来训练。

写出带缓存的前向传播，以及返回 dx、dgamma、dbeta 和 dW 的反向传播。这里 x 是
[N, D]，N 行、每行 D 个特征（练习 05 的 x 是 [B, T, D]：同样的行，只是前面有两
个轴）。愿意的话，可以复用你在练习 05 里写的 LayerNorm（把它复制进来）。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 11_preln_residual.py
评分：microgradnorm exercise check 11
卡住了？microgradnorm lesson 11 讲的正是这道练习要用的内容
"""

import numpy as np


def preln_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, W: np.ndarray, eps: float):
    """x：[N, D]；gamma、beta：[D]；W：[D, D]。返回 (out [N, D], cache)。"""
    # ---- 在这里写你的代码 ----
    mean = x.mean(axis=-1, keepdims=True)  # N,1
    xshift = x - mean  # N,D
    rstd = 1.0 / np.sqrt((xshift * xshift).mean(axis=-1, keepdims=True) + eps)  # N,1
    xhat = xshift * rstd  # N,D
    h = gamma * xhat + beta  # N,D
    return x + h @ W, (xhat, rstd, gamma, h, W)
    # ---- 你的代码到此为止 ----


def preln_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """dy = dL/dy：[N, D]。返回 (dx [N, D], dgamma [D], dbeta [D], dW [D, D])。"""
    # ---- 在这里写你的代码 ----
    xhat, rstd, gamma, h, W = cache
    dW = h.T @ dy  # D,D
    dh = dy @ W.T  # N,D
    dgamma = (dh * xhat).sum(axis=0)  # D
    dbeta = dh.sum(axis=0)  # D
    dxhat = dh * gamma  # N,D
    dx_ln = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dy + dx_ln, dgamma, dbeta, dW
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma, beta = rng.normal(1.0, 2.0, (3, 4)), rng.uniform(0.5, 1.5, 4), rng.normal(size=4)
    W, dy, eps = rng.normal(0.0, 0.5, (4, 4)), rng.normal(size=(3, 4)), 1e-5
    dx, dgamma, dbeta, dW = preln_backward(dy, preln_forward(x, gamma, beta, W, eps)[1])
    print("你的梯度与中心差分的比较：")
    report("dx", dx, numerical_gradient(lambda x: np.sum(preln_forward(x, gamma, beta, W, eps)[0] * dy), x))
    report("dW", dW, numerical_gradient(lambda w: np.sum(preln_forward(x, gamma, beta, w, eps)[0] * dy), W))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(preln_forward(x, g, beta, W, eps)[0] * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum(preln_forward(x, gamma, b, W, eps)[0] * dy), beta))
