"""The lab's NumPy network against the same network in PyTorch: same weights, same batches, same curve.

PyTorch's autograd and torch.optim are the oracle for the lab's hand-written
backward passes and optimizer. Skipped without torch.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from microgradnorm.lab import experiments as E  # noqa: E402
from microgradnorm.lab.net import EPS, Net, NetSpec  # noqa: E402
from microgradnorm.lab.torch_net import mlp, train_torch  # noqa: E402
from microgradnorm.lab.train import TrainConfig, train  # noqa: E402

TORCH_LAYERS = {
    "none": lambda w: torch.nn.Identity(),
    "layernorm": lambda w: torch.nn.LayerNorm(w, eps=EPS, dtype=torch.float64),
    "rmsnorm": lambda w: torch.nn.RMSNorm(w, eps=EPS, dtype=torch.float64),
    "batchnorm": lambda w: torch.nn.BatchNorm1d(w, eps=EPS, momentum=0.1, dtype=torch.float64),
}


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("norm", list(TORCH_LAYERS))
def test_the_numpy_network_trains_exactly_as_pytorch_does(norm, optimizer):
    spec = NetSpec("mlp", depth=3, width=16, norm=norm)
    cfg = TrainConfig(steps=40, batch=16, lr=1e-2 if optimizer == "adam" else 0.1, optimizer=optimizer, seed=2)
    task = E.task_for(2)
    ours = train(Net(spec, 4), task, cfg)
    theirs = train_torch(mlp(spec, 4, TORCH_LAYERS[norm]), task, cfg)
    assert len(ours.losses) == len(theirs.losses) == cfg.steps
    assert np.max(np.abs(np.subtract(ours.losses, theirs.losses))) <= E.CURVE_ATOL
    assert abs(ours.test_loss - theirs.test_loss) <= E.CURVE_ATOL  # eval mode: BatchNorm's running statistics
    assert ours.losses[-1] < ours.losses[0]  # it trained: the two are compared on a moving target


def test_the_torch_version_builds_only_the_mlp():
    with pytest.raises(ValueError, match="builds the MLP only"):
        mlp(NetSpec("residual", 2, 8), 0, TORCH_LAYERS["layernorm"])
