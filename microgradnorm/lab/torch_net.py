"""The lab's MLP in PyTorch, from the same starting weights and on the same minibatches as the NumPy one.

Imported only for a run that uses PyTorch (``pip install "microgradnorm[torch]"``);
nothing else in the lab needs torch. The norm layer is a parameter, so one
training run can use ``torch.nn.LayerNorm``, ``microgradnorm.torch.LayerNorm``
or a learner's pair through ``microgradnorm.torch.layer_norm_function``.
Everything is float64, so that two runs that compute the same maths agree to
rounding and a real difference cannot hide in float32 noise.

torch is imported inside the functions that use it, not with this module, so
that importing the lab never loads PyTorch (``microgradnorm.torch`` is the one
module that imports it at import time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from microgradnorm.lab.net import NetSpec, initial_weights
from microgradnorm.lab.pairs import NormPair
from microgradnorm.lab.task import Task
from microgradnorm.lab.train import Run, TrainConfig, batches, learning_rate

if TYPE_CHECKING:
    import torch

__all__ = ["learner_layer", "mlp", "train_torch"]


def learner_layer(pair: NormPair) -> tuple[Callable[[int], torch.nn.Module], str | None]:
    """A LayerNorm factory that runs ``pair`` in PyTorch, and the gradient check's refusal (None when it passes).

    The pair goes through ``layer_norm_function(check=True)``: torch.autograd.gradcheck
    in float64, with a message naming the wrong entries. A refused pair still
    trains (``check=False``), so the lab can show what the wrong backward does
    to the curve beside the message saying what is wrong.
    """
    import torch

    import microgradnorm.torch as mt

    fn = mt.layer_norm_function(*pair, check=True)
    refusal = None
    try:
        fn.check()
    except mt.GradientCheckError as exc:
        fn, refusal = mt.layer_norm_function(*pair, check=False), str(exc)
    return (lambda width: mt.LayerNorm(width, dtype=torch.float64, function=fn)), refusal


def mlp(spec: NetSpec, seed: int, norm: Callable[[int], torch.nn.Module]) -> torch.nn.Sequential:
    """The MLP of ``spec`` (blocks Linear -> norm -> ReLU, then the head) with :func:`initial_weights`."""
    import torch

    if spec.kind != "mlp":
        raise ValueError(f"spec: the PyTorch version builds the MLP only, got kind {spec.kind!r}")
    layers: list[torch.nn.Module] = []
    weights = initial_weights(spec, seed)
    for k, (w, b) in enumerate(weights):
        linear = torch.nn.Linear(w.shape[1], w.shape[0], dtype=torch.float64)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(w))
            linear.bias.copy_(torch.from_numpy(b))
        layers.append(linear)
        if k < len(weights) - 1:
            layers += [norm(spec.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def train_torch(model: torch.nn.Module, task: Task, cfg: TrainConfig) -> Run:
    """The NumPy :func:`~microgradnorm.lab.train.train`, step for step, with torch.optim.Adam (or SGD)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small run fastest on one thread (and the machine may be shared)
    try:
        return _train(model, task, cfg)
    finally:
        torch.set_num_threads(threads)


def _train(model: torch.nn.Module, task: Task, cfg: TrainConfig) -> Run:
    import torch

    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr) if cfg.optimizer == "adam" else torch.optim.SGD(params, lr=cfg.lr)
    x_train, y_train = torch.from_numpy(task.x_train), torch.from_numpy(task.y_train)
    run = Run()
    for step, idx in enumerate(batches(len(task.y_train), cfg)):
        for group in opt.param_groups:
            group["lr"] = learning_rate(cfg, step)
        index = torch.from_numpy(idx)
        loss = torch.nn.functional.cross_entropy(model(x_train[index]), y_train[index])
        run.losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(task.x_test))
        run.test_loss = float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(task.y_test)))
    model.train()
    return run
