"""The training lab: small networks that really train, with each claim checked on the run.

The experiments (:mod:`.experiments`) train a small MLP or residual network on
a task the package generates (:mod:`.task`), with the network written by hand in
NumPy on this package's vectorized norms (:mod:`.net`, :mod:`.train`), or, for
the comparison with PyTorch, in PyTorch (:mod:`.torch_net`, which alone needs
``pip install "microgradnorm[torch]"``). The command ``microgradnorm lab`` and
lessons 15 to 18 show them (:mod:`.show`).

This module imports nothing beyond the standard library (and :mod:`microgradnorm.i18n`,
which imports nothing else), so that the command's ``--help`` is instant: it only
names the experiments, in the reader's language (``lazy_gettext``).
"""

from __future__ import annotations

from microgradnorm.i18n import lazy_gettext

__all__ = ["CATALOG", "NEEDS_TORCH"]

# name -> what it shows (one line for --help and the lessons)
CATALOG = {
    "yours": lazy_gettext("train with your own LayerNorm backward and see its curve against PyTorch's"),
    "wrong": lazy_gettext("two wrong backward passes that still train, and the gradient check that catches them"),
    "depth": lazy_gettext(
        "post-LN vs pre-LN at depth: gradients per block at the start, training with and without warmup"
    ),
    "norms": lazy_gettext("no norm vs BatchNorm vs LayerNorm vs RMSNorm on the same network, with plain SGD"),
    "batch": lazy_gettext("BatchNorm at batch sizes 2, 8 and 32, and the gap between batch and running statistics"),
}
# name -> what needs PyTorch in it (the others run in NumPy only)
NEEDS_TORCH = {
    "yours": lazy_gettext("its PyTorch curves need [torch]; without it, your backward runs against the NumPy one")
}
