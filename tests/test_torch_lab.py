"""The lab's NumPy network against the same network in PyTorch: same weights, same batches, same curve.

PyTorch's autograd and torch.optim are the oracle for the lab's hand-written
backward passes and optimizer. Skipped without torch.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from microgradnorm.i18n import _  # noqa: E402
from microgradnorm.lab import experiments as E  # noqa: E402
from microgradnorm.lab import pairs  # noqa: E402
from microgradnorm.lab.net import EPS, Net, NetSpec  # noqa: E402
from microgradnorm.lab.torch_net import learner_layer, mlp, train_torch  # noqa: E402
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


@pytest.mark.parametrize("mistake", list(pairs.MISTAKES))
def test_a_wrong_learner_backward_is_named_by_the_check_and_still_trains(mistake):
    right, refusal_right = learner_layer(pairs.reference_pair())
    wrong, refusal = learner_layer(pairs.mistake_pair(mistake))
    assert refusal_right is None
    assert "fails torch.autograd.gradcheck" in refusal and "dx wrong at" in refusal
    spec = NetSpec("mlp", depth=2, width=8, norm="layernorm")
    cfg = TrainConfig(steps=30, batch=16, lr=1e-2, optimizer="adam", seed=1)
    task = E.task_for(1)
    right_run, wrong_run = (train_torch(mlp(spec, 1, layer), task, cfg) for layer in (right, wrong))
    assert wrong_run.losses[-1] < wrong_run.losses[0]  # it trains: only the check says it is wrong
    assert right_run.losses != wrong_run.losses


def test_the_yours_experiment_shows_the_checks_message_for_a_wrong_backward(monkeypatch):
    monkeypatch.setattr(E.pairs, "reference_pair", lambda: pairs.mistake_pair(next(iter(pairs.MISTAKES))))
    E._reference_yours.cache_clear()
    try:
        result = E.yours(5, use_torch=True)
    finally:
        E._reference_yours.cache_clear()
    assert any("fails torch.autograd.gradcheck" in str(note) for note in result.notes)
    assert len(result.curves) == 3  # the curves are still drawn
    # the note says what the lab did with it, not only what Python code could do (check=False)
    trained = _("{refusal}. The lab trained with it anyway, to draw its curve.").split("{refusal}")[1]
    assert any(str(note).endswith(trained) for note in result.notes)
    # check=False is named as the Python argument it is (the command takes no such option), and said once
    note = next(str(n) for n in result.notes if "gradcheck" in str(n))
    assert "in your own code, `layer_norm_function(forward, backward, check=False)` trains with it" in note
    assert note.count("anyway") == 1


def test_the_status_row_names_every_layer_the_bridge_exports():
    """Read independently of the demo: every nn.Module class microgradnorm.torch exports (GroupNorm included)."""
    import microgradnorm.torch as mt
    from microgradnorm.lessons.demos import LessonParams, run_demo
    from tests.helpers import flat

    text = flat(run_demo("lab_torch_status", LessonParams()).renderable, 200)
    layers = [n for n in dir(mt) if isinstance(getattr(mt, n), type) and issubclass(getattr(mt, n), torch.nn.Module)]
    assert "GroupNorm" in layers and all(name in text for name in layers)
