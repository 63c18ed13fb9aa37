# english: 10_stable_variance.py 5614a4414f7f
"""练习 10：数值稳定的方差，只遍历一遍（Welford）。

教科书上的捷径 var = mean(x^2) - mean(x)^2 只需遍历数据一遍，却是一个数值陷
阱：均值比离散程度大得多时，两项都很大而且几乎相等，它们的差大部分是舍入误差。
数值在 1e8 附近、离散程度为 1 时，x^2 约为 1e16，在那里 float64 连每个整数都表
示不了；结果甚至可能是负的。

Welford 的方法在逐个读入数值时只维护三个数：

    count   到目前为止读了多少个值
    mean    它们的均值
    m2      相对这个均值的偏差平方和

每来一个新值，只用相对滑动均值的偏差来更新它们，而这些偏差一直很小。最后 var =
m2 / count（有偏，和各种归一化一样）。请写出这个更新。评分程序会把一行行数值流
式地送进你的函数，其中有些行的值全在 1e8 附近；而且它从每一行的中途开始：第一
次调用拿到的状态 (count, mean, m2) 已经汇总了一些你的函数从没见过的值。更新你
拿到的状态就好；自己把数值存下来（再对它们调用 np.var）是行不通的。

评分时，你的代码只能使用 NumPy 和 Python 标准库，别的都不行。

运行：python 10_stable_variance.py
评分：microgradnorm exercise check 10
卡住了？microgradnorm lesson 12 讲的正是这道练习要用的内容
"""

import numpy as np


def welford_update(count: int, mean: float, m2: float, value: float) -> tuple[int, float, float]:
    """把 ``value`` 加进 (count, mean, m2)；返回新的 (count, mean, m2)，count 多 1。

    你自己的数据流从 (0, 0.0, 0.0) 开始；评分程序则从中途的某个状态开始。

    四个参数都是标量（形状 []）：count 是 int，mean、m2 和 value 是 float。
    """
    # ---- 在这里写你的代码 ----
    count += 1
    delta = value - mean
    mean += delta / count
    m2 += delta * (value - mean)
    return count, mean, m2
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    import microgradnorm.exercises.selfcheck  # noqa: F401  （还没写的函数只给一行提示，而不是一大段 traceback）

    rng = np.random.default_rng(0)
    values = 1e8 + rng.normal(0.0, 1.0, 1000)
    state = (0, 0.0, 0.0)
    for v in values:
        state = welford_update(*state, float(v))
    count, mean, m2 = state
    shifted = values - values.mean()
    reference = np.mean(shifted * shifted)
    yours, shortcut = m2 / count, np.mean(values * values) - np.mean(values) ** 2
    print(f"{len(values)} 个值，都在 1e8 附近，离散程度为 1：     相对差")
    print(f"  两遍公式（参考值）：      {reference:.12f}")
    print(f"  Welford（你的）：         {yours:.12f}   {abs(yours - reference) / reference:.1e}")
    print(f"  mean(x^2) - mean(x)^2：   {shortcut:.12f}   {abs(shortcut - reference) / reference:.1e}")
    # 在 1e8 附近，一个 double 的舍入大约是 1e-8，每一步的滑动均值也是如此
    close = abs(yours - reference) <= 1e-6 * reference
    half = values[:500]
    state = (500, float(half.mean()), float(((half - half.mean()) ** 2).sum()))
    for v in values[500:]:
        state = welford_update(*state, float(v))
    mid = abs(state[2] / state[0] - reference) <= 1e-6 * reference
    print("从前 500 个值的状态中途开始：", "一致。" if mid else "不一致。")
    print("你的结果：", "与两遍公式一致，只差舍入误差。" if close else "与两遍公式不一致：检查一下更新公式。")
