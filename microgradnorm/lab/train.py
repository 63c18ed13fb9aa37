"""Training in NumPy: minibatches, SGD or Adam (as torch.optim computes them), a learning-rate warmup.

:func:`batches` fixes the order examples are seen in, so a PyTorch run
(:mod:`microgradnorm.lab.torch_net`) can see the very same minibatches.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from microgradnorm.lab.net import Net, cross_entropy
from microgradnorm.lab.task import Task

__all__ = ["Adam", "Run", "TrainConfig", "batches", "learning_rate", "train"]


@dataclass(frozen=True)
class TrainConfig:
    """``steps`` minibatches of ``batch`` examples; ``optimizer`` "adam" or "sgd" at ``lr``, reached
    linearly over the first ``warmup`` steps; ``seed`` orders the examples."""

    steps: int = 150
    batch: int = 32
    lr: float = 1e-2
    optimizer: str = "adam"
    warmup: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer: expected 'adam' or 'sgd', got {self.optimizer!r}")


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """The rate at ``step`` (0-based): ``lr * (step + 1) / warmup`` during the warmup, ``lr`` after it."""
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup) if cfg.warmup else cfg.lr


def batches(n: int, cfg: TrainConfig) -> Iterator[np.ndarray]:
    """Indices of each step's examples: a fresh shuffle of all ``n`` examples each epoch."""
    rng = np.random.default_rng([cfg.seed, 3])
    order: list[int] = []
    for _ in range(cfg.steps):
        if len(order) < cfg.batch:
            order += list(rng.permutation(n))
        yield np.array(order[: cfg.batch])
        del order[: cfg.batch]


class Adam:
    """torch.optim.Adam's update (betas 0.9 and 0.999, eps 1e-8, bias-corrected), or plain SGD."""

    def __init__(self, params: list[np.ndarray], sgd: bool = False) -> None:
        self.params, self.sgd, self.t = params, sgd, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads: list[np.ndarray], lr: float) -> None:
        self.t += 1
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            if self.sgd:
                p -= lr * g
                continue
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            mhat = m / (1 - 0.9**self.t)
            vhat = v / (1 - 0.999**self.t)
            p -= lr * mhat / (np.sqrt(vhat) + 1e-8)


@dataclass
class Run:
    """One training run: the loss of each step's minibatch, and the held-out loss at the end."""

    losses: list[float] = field(default_factory=list)
    test_loss: float = math.nan


def train(net: Net, task: Task, cfg: TrainConfig) -> Run:
    """Train ``net`` in place; a loss that is not finite ends the run there (it diverged)."""
    opt = Adam(net.parameters(), sgd=cfg.optimizer == "sgd")
    run = Run()
    for step, idx in enumerate(batches(len(task.y_train), cfg)):
        loss, dlogits = cross_entropy(net.forward(task.x_train[idx]), task.y_train[idx])
        run.losses.append(loss)
        if not math.isfinite(loss):
            break
        net.backward(dlogits)
        opt.step(net.gradients(), learning_rate(cfg, step))
    net.train(False)  # the held-out loss in eval mode
    run.test_loss, _ = cross_entropy(net.forward(task.x_test), task.y_test)
    net.train(True)
    return run
