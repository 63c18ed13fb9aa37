"""Which backend runs a call: "numpy", "fused" or "reference", chosen per call, per program or by environment.

``backend="auto"`` (the default) means fused when numba can be imported and
numpy otherwise. :func:`set_backend` sets it for the program, :func:`use_backend`
for a ``with`` block, the environment variable ``MICROGRADNORM_BACKEND`` when
neither is set; :func:`backend_info` says which one is in use and why.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from microgradnorm.i18n import _

BACKENDS = ("auto", "numpy", "fused", "reference")
ENV_VAR = "MICROGRADNORM_BACKEND"


class BackendUnavailable(ValueError):
    """The fused backend was asked for, but numba cannot be imported."""


_setting: str | None = None  # None: not set by set_backend, read the environment variable


def _check_backend_name(name: object, what: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise ValueError(
            _("{what}: expected one of {names}, got {name!r}").format(what=what, names=", ".join(BACKENDS), name=name)
        )
    return name.strip().lower()


def set_backend(name: str | None) -> None:
    """Use ``name`` ("auto", "numpy", "fused" or "reference") for every later call without ``backend=``.

    ``None`` forgets the setting, so the environment variable (or "auto") applies again.
    """
    global _setting
    if name is None:
        _setting = None
        return
    name = _check_backend_name(name, "backend")
    if name == "fused":
        require_fused()
    _setting = name


def get_backend() -> str:
    """The backend setting as chosen ("auto" unless set), before "auto" is resolved."""
    if _setting is not None:
        return _setting
    return _check_backend_name(os.environ.get(ENV_VAR, "auto"), _("environment variable {name}").format(name=ENV_VAR))


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """``with use_backend("numpy"): ...`` -- the setting inside the block, restored after it."""
    global _setting
    before = _setting
    set_backend(name)
    try:  # restore exactly what was there, including "not set"
        yield
    finally:
        _setting = before


def fused_module():
    """microgradnorm.fused, imported on first use."""
    from microgradnorm import fused  # imports numba when it is installed (about half a second)

    return fused


def require_fused():
    """microgradnorm.fused, or BackendUnavailable when numba cannot be imported."""
    fused = fused_module()
    if not fused.AVAILABLE:
        raise BackendUnavailable(f"backend: 'fused' needs numba, which is unavailable: {fused.UNAVAILABLE_REASON}")
    return fused


def resolve_backend(backend: str | None = None) -> str:
    """The backend a call with ``backend=`` (None: the global setting) actually runs."""
    name = get_backend() if backend is None else _check_backend_name(backend, "backend")
    if name == "auto":
        return "fused" if fused_module().AVAILABLE else "numpy"
    if name == "fused":
        require_fused()
    return name


@dataclass(frozen=True)
class BackendInfo:
    """Which backend runs, and why (for ``microgradnorm bench`` and for curious users)."""

    setting: str
    active: str
    numba_version: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.active} ({self.reason})"


def backend_info() -> BackendInfo:
    """The backend setting, the backend it resolves to and the reason."""
    setting = get_backend()
    fused = fused_module()
    version = getattr(fused.numba, "__version__", None) if fused.AVAILABLE else None
    active = resolve_backend() if (setting != "fused" or fused.AVAILABLE) else "unavailable"
    if setting == "auto" and fused.AVAILABLE:
        reason = _("auto: numba {version} is installed").format(version=version)
    elif setting == "auto":
        reason = _("auto: {why}").format(why=fused.UNAVAILABLE_REASON)
    else:
        reason = _("set to {setting}").format(setting=repr(setting))
    return BackendInfo(setting, active, version, reason)
