"""The lab's task: label points by what a fixed random "teacher" network says. Generated, never downloaded.

Each example is a vector of FEATURES standard normal numbers; its class is the
largest of CLASSES outputs of a small ReLU network with fixed random weights
(the teacher), shifted so that the classes are about equally common. A student
network can learn this exactly, but only with a hidden layer, and a dozen
seconds of NumPy are enough to watch it do so. The same seed gives the same
teacher and the same examples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CLASSES", "FEATURES", "Task", "teacher_task"]

CLASSES = 3
FEATURES = 16
TEACHER_WIDTH = 32


@dataclass(frozen=True)
class Task:
    """Training and held-out examples: x [N, FEATURES] float64, labels [N] in 0..CLASSES-1."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def teacher_task(seed: int = 0, n_train: int = 512, n_test: int = 512) -> Task:
    """The task for ``seed``: a teacher drawn from it, then training and held-out examples."""
    rng = np.random.default_rng([seed, 2016])
    w1 = rng.normal(size=(FEATURES, TEACHER_WIDTH)) / np.sqrt(FEATURES)  # F,H
    b1 = rng.normal(size=TEACHER_WIDTH)  # H
    w2 = rng.normal(size=(TEACHER_WIDTH, CLASSES))  # H,K

    def logits(x: np.ndarray) -> np.ndarray:
        return np.maximum(x @ w1 + b1, 0.0) @ w2  # N,K

    centre = logits(rng.normal(size=(4096, FEATURES))).mean(axis=0)  # K  so that no class dominates

    def examples(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.normal(size=(n, FEATURES))  # N,F
        return x, (logits(x) - centre).argmax(axis=1)

    (x_train, y_train), (x_test, y_test) = examples(n_train), examples(n_test)
    return Task(x_train, y_train, x_test, y_test)
