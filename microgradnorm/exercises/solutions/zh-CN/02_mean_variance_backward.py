# english: 02_mean_variance_backward.py 369b287413dc
"""练习 02：均值与方差的反向传播。

归一化层对每一行算两个统计量：均值和方差。在写整个层之前，先弄清楚每个统计量怎
样把自己的梯度交还给算出它的那些输入。

    mean = (1/D) sum_j x_j                        每行一个数
    var  = (1/D) sum_j (x_j - mean)^2             有偏：除以 D，不是 D - 1

已知每一行的 dL/dmean（或 dL/dvar），返回每个元素的 dL/dx。x 的形状是 [N, D]
（N 行，每行 D 个值）；统计量和它们的梯度形状是 [N, 1]，这样才能与 x 广播
（keepdims）。

方差对 x 的依赖有两条路线：直接依赖，以及经过均值。动手写代码之前，先算出第二
条路线贡献了多少。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 02_mean_variance_backward.py
评分：microgradnorm exercise check 2
卡住了？microgradnorm lesson 5 讲的正是这道练习要用的内容
"""

import numpy as np


def mean_backward(x: np.ndarray, dmean: np.ndarray) -> np.ndarray:
    """mean = x.mean(axis=1, keepdims=True)。x：[N, D]；dmean = dL/dmean：[N, 1]。返回 dx：[N, D]。"""
    # ---- 在这里写你的代码 ----
    d = x.shape[1]
    return np.ones_like(x) * dmean / d
    # ---- 你的代码到此为止 ----


def variance_backward(x: np.ndarray, dvar: np.ndarray) -> np.ndarray:
    """var = ((x - mean) ** 2).mean(axis=1, keepdims=True)。x：[N, D]；dvar：[N, 1]。返回 dx：[N, D]。"""
    # ---- 在这里写你的代码 ----
    d = x.shape[1]
    xshift = x - x.mean(axis=1, keepdims=True)  # N,D
    # 经过均值的路线贡献 dvar * (-2/D) sum_j xshift_j / D = 0：偏差之和为零。
    return 2.0 * xshift * dvar / d
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, (2, 5))
    dmean, dvar = rng.normal(size=(2, 1)), rng.normal(size=(2, 1))
    print("你的梯度与中心差分的比较：")
    report(
        "mean dx", mean_backward(x, dmean), numerical_gradient(lambda x: np.sum(x.mean(1, keepdims=True) * dmean), x)
    )
    report(
        "variance dx",
        variance_backward(x, dvar),
        numerical_gradient(lambda x: np.sum(x.var(1, keepdims=True) * dvar), x),
    )
