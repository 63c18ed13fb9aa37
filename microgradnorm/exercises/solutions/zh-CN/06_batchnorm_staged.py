# english: 06_batchnorm_staged.py bd528f323bbc
"""练习 06：BatchNorm 的反向传播，一个阶段一个阶段地来。

BatchNorm 对 x [M, D] 的每个特征（每一列）在批量的 M 个样本上做归一化。前向传
播已经在下面替你写好了，它把每个中间量都存进缓存。沿着它把链式法则一个阶段一个
阶段地往回走，就像在纸上推导那样：

    dbeta  [D]      来自 y = gamma * xhat + beta
    dgamma [D]
    dxhat  [M, D]
    dvar   [1, D]   xhat = xshift * (var + eps)^(-1/2)
    dmean  [1, D]   xshift = x - mean（均值也流进了 var：这条路线贡献多少？）
    dx     [M, D]   三条路径：直接的、经过均值的、经过方差的

在相信每个阶段之前，先拿有限差分核对一下：运行这个文件，六个阶段都会核对。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 06_batchnorm_staged.py
评分：microgradnorm exercise check 6
卡住了？microgradnorm lesson 8 讲的正是这道练习要用的内容
"""

import numpy as np


def batchnorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """已经写好，这里不用动。x：[M, D]；gamma、beta：[D]。返回 (y [M, D], cache)。"""
    mean = x.mean(axis=0, keepdims=True)  # 1,D
    xshift = x - mean  # M,D
    var = (xshift * xshift).mean(axis=0, keepdims=True)  # 1,D
    std = np.sqrt(var + eps)  # 1,D
    rstd = 1.0 / std  # 1,D
    xhat = xshift * rstd  # M,D
    y = gamma * xhat + beta  # M,D
    cache = {"xhat": xhat, "xshift": xshift, "var": var, "std": std, "rstd": rstd, "gamma": gamma, "eps": eps}
    return y, cache


def batchnorm_backward_staged(dy: np.ndarray, cache: dict) -> dict:
    """dy = dL/dy：[M, D]；cache：batchnorm_forward 生成的字典（xhat、xshift、var、std、rstd、gamma、eps）。

    返回一个字典，键为 dbeta、dgamma、dxhat、dvar、dmean、dx（形状见上）。
    """
    # ---- 在这里写你的代码 ----
    xhat, xshift, std, rstd, gamma = (cache[k] for k in ("xhat", "xshift", "std", "rstd", "gamma"))
    m = dy.shape[0]
    dbeta = dy.sum(axis=0)  # D
    dgamma = (dy * xhat).sum(axis=0)  # D
    dxhat = dy * gamma  # M,D
    dvar = -0.5 * std**-3 * (dxhat * xshift).sum(axis=0, keepdims=True)  # 1,D
    # dmean：经过 xshift 的部分，加上经过 var 的部分，后者是 dvar * (-2/m) * sum(xshift) = 0
    dmean = -rstd * dxhat.sum(axis=0, keepdims=True)  # 1,D
    dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift / m  # M,D
    return {"dbeta": dbeta, "dgamma": dgamma, "dxhat": dxhat, "dvar": dvar, "dmean": dmean, "dx": dx}
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (6, 3))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 3), rng.normal(size=3), rng.normal(size=(6, 3))
    eps = 1e-5
    y, cache = batchnorm_forward(x, gamma, beta, eps)
    stages = batchnorm_backward_staged(dy, cache)
    print("你的各个阶段：", {k: np.shape(v) for k, v in stages.items()})
    print("你的梯度与中心差分的比较：")
    report("dx", stages["dx"], numerical_gradient(lambda x: np.sum(batchnorm_forward(x, gamma, beta, eps)[0] * dy), x))
    report(
        "dgamma",
        stages["dgamma"],
        numerical_gradient(lambda g: np.sum(batchnorm_forward(x, g, beta, eps)[0] * dy), gamma),
    )
    report(
        "dbeta",
        stages["dbeta"],
        numerical_gradient(lambda b: np.sum(batchnorm_forward(x, gamma, b, eps)[0] * dy), beta),
    )
    xshift = cache["xshift"]
    report("dxhat", stages["dxhat"], numerical_gradient(lambda xh: np.sum((gamma * xh + beta) * dy), cache["xhat"]))
    report(
        "dvar",
        stages["dvar"],
        numerical_gradient(lambda v: np.sum((gamma * xshift / np.sqrt(v + eps) + beta) * dy), cache["var"]),
    )

    def loss_of_mean(mu: np.ndarray) -> float:
        xs = x - mu
        return float(np.sum((gamma * xs / np.sqrt((xs * xs).mean(axis=0, keepdims=True) + eps) + beta) * dy))

    report("dmean", stages["dmean"], numerical_gradient(loss_of_mean, x.mean(axis=0, keepdims=True)))
