"""Exercise 11: the gradient through a pre-LN residual block.

Transformers wrap each sublayer in a residual connection. In the pre-LN
arrangement the normalization sits inside the branch:

    h   = LN(x)            (over the last axis, with gamma and beta)
    out = x + h @ W        x, h, out: [N, D];  W: [D, D]

Backwards, dx has two parts: the identity path (the residual hands dy to x
unchanged) and the path through W and LayerNorm. Over a stack of such blocks,
with J_k the Jacobian of block k's branch, dx = (I + J_1)^T (I + J_2)^T ...
(I + J_L)^T dy, and expanded, that product always holds the term dy
itself: what the identity path guarantees is that this term reaches the
bottom, whatever the layers do. It does not guarantee a large
dx: the other terms can point against it and cancel part of it. Xiong et al.
(2020) showed that pre-LN Transformers can be trained without the learning-rate
warmup that post-LN ones need; in practice pre-LN models are still usually
trained with warmup.

Write the forward with a cache, and the backward returning dx, dgamma, dbeta
and dW. Here x is [N, D], N rows of D features (exercise 05's x was
[B, T, D]: the same rows, with two leading axes). Reuse your LayerNorm from
exercise 05 if you like (copy it in).

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 11_preln_residual.py
Grade:   microgradnorm exercise check 11
Stuck?   microgradnorm lesson 11 teaches what this exercise needs
"""

import numpy as np


def preln_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, W: np.ndarray, eps: float):
    """x: [N, D]; gamma, beta: [D]; W: [D, D]. Returns (out [N, D], cache)."""
    # ---- write your code here ----
    mean = x.mean(axis=-1, keepdims=True)  # N,1
    xshift = x - mean  # N,D
    rstd = 1.0 / np.sqrt((xshift * xshift).mean(axis=-1, keepdims=True) + eps)  # N,1
    xhat = xshift * rstd  # N,D
    h = gamma * xhat + beta  # N,D
    return x + h @ W, (xhat, rstd, gamma, h, W)
    # ---- end of your code ----


def preln_backward(dy: np.ndarray, cache) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """dy = dL/dy: [N, D]. Returns (dx [N, D], dgamma [D], dbeta [D], dW [D, D])."""
    # ---- write your code here ----
    xhat, rstd, gamma, h, W = cache
    dW = h.T @ dy  # D,D
    dh = dy @ W.T  # N,D
    dgamma = (dh * xhat).sum(axis=0)  # D
    dbeta = dh.sum(axis=0)  # D
    dxhat = dh * gamma  # N,D
    dx_ln = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dy + dx_ln, dgamma, dbeta, dW
    # ---- end of your code ----


if __name__ == "__main__":
    from microgradnorm.exercises.selfcheck import numerical_gradient, report

    rng = np.random.default_rng(0)
    x, gamma, beta = rng.normal(1.0, 2.0, (3, 4)), rng.uniform(0.5, 1.5, 4), rng.normal(size=4)
    W, dy, eps = rng.normal(0.0, 0.5, (4, 4)), rng.normal(size=(3, 4)), 1e-5
    dx, dgamma, dbeta, dW = preln_backward(dy, preln_forward(x, gamma, beta, W, eps)[1])
    print("Your gradients against central finite differences:")
    report("dx", dx, numerical_gradient(lambda x: np.sum(preln_forward(x, gamma, beta, W, eps)[0] * dy), x))
    report("dW", dW, numerical_gradient(lambda w: np.sum(preln_forward(x, gamma, beta, w, eps)[0] * dy), W))
    report("dgamma", dgamma, numerical_gradient(lambda g: np.sum(preln_forward(x, g, beta, W, eps)[0] * dy), gamma))
    report("dbeta", dbeta, numerical_gradient(lambda b: np.sum(preln_forward(x, gamma, b, W, eps)[0] * dy), beta))
