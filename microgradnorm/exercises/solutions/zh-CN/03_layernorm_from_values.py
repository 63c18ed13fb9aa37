# english: 03_layernorm_from_values.py 40e3b5e45e53
"""练习 03：用 Value 引擎，从基本运算搭出 LayerNorm。

用标量 Value 节点搭出一行 LayerNorm 的前向传播。你一个导数都不用写：你用到的每
个运算都已经知道自己的局部导数（练习 01），所以 backward() 能把梯度沿着你搭出
的计算图传回去。评分程序逐行调用你的函数，用随机的 dy 对损失 loss = sum(y *
dy) 做反向传播，再把落到 x、gamma 和 beta 上的梯度与闭式公式比较。

    mean = (1/d) sum_j x_j
    var  = (1/d) sum_j (x_j - mean)^2          有偏：除以 d
    y_i  = gamma_i * (x_i - mean) / sqrt(var + eps) + beta_i

只用 Value 的运算：+、-、*、/、**、.sqrt() 和 Value.sum(list)。评分时，你的代
码只能使用 microgradnorm.Value（标量引擎）、NumPy 和 Python 标准库，别的都不
行：本包自己搭归一化的函数（microgradnorm.layer_norm 会替你做完）是拿不到的。

运行：python 03_layernorm_from_values.py
评分：microgradnorm exercise check 3
卡住了？microgradnorm lesson 3 讲的正是这道练习要用的内容
"""

from microgradnorm import Value


def layer_norm(x: list[Value], gamma: list[Value], beta: list[Value], eps: float) -> list[Value]:
    """一行。x、gamma、beta：各含 d 个 Value 的列表；eps：不小于 0 的 float。返回 d 个输出 Value，即 y。"""
    # ---- 在这里写你的代码 ----
    d = len(x)
    mean = Value.sum(x) * (1.0 / d)
    xshift = [xi - mean for xi in x]
    var = Value.sum([s**2 for s in xshift]) * (1.0 / d)
    rstd = (var + eps).sqrt() ** -1
    return [g * (s * rstd) + b for s, g, b in zip(xshift, gamma, beta)]
    # ---- 你的代码到此为止 ----


if __name__ == "__main__":
    import numpy as np

    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma, beta, dy = rng.normal(1.0, 2.0, 5), rng.uniform(0.5, 1.5, 5), rng.normal(size=5), rng.normal(size=5)
    eps = 1e-5

    def loss(xv: np.ndarray, gv: np.ndarray = gamma, bv: np.ndarray = beta) -> float:
        ys = layer_norm(
            [Value(float(v)) for v in xv], [Value(float(g)) for g in gv], [Value(float(b)) for b in bv], eps
        )
        return sum(y.data * g for y, g in zip(ys, dy))

    xs, gs, bs = [Value(float(v)) for v in x], [Value(float(g)) for g in gamma], [Value(float(b)) for b in beta]
    ys = layer_norm(xs, gs, bs, eps)
    print("y =", np.round([y.data for y in ys], 4))
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    print("你的梯度（沿你的计算图 backward 得到）与中心差分的比较：")
    report("dx", [v.grad for v in xs], numerical_gradient(loss, x))
    report("dgamma", [g.grad for g in gs], numerical_gradient(lambda g: loss(x, g, beta), gamma))
    report("dbeta", [b.grad for b in bs], numerical_gradient(lambda b: loss(x, gamma, b), beta))
