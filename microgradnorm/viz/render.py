"""Running Graphviz's ``dot`` on DOT source, and the errors a drawing can meet on the way.

The one place that touches the ``graphviz`` Python package (imported when a picture is asked for, so that DOT
output needs neither it nor the ``dot`` program). A picture that cannot be made raises a
:class:`DrawingError` whose message says why and, when ``dot`` is missing, how to install it.
"""

from __future__ import annotations

import shutil

from microgradnorm.i18n import _, lazy_gettext

INSTALL_HINT = lazy_gettext(
    "install Graphviz (Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install graphviz; "
    "conda: conda install -c conda-forge graphviz)"
)


class DrawingError(RuntimeError):
    """The picture could not be made; the DOT source can still be written (see :func:`microgradnorm.output.draw`)."""


class GraphvizNotFoundError(DrawingError):
    """The Graphviz ``dot`` program is not on PATH; the message says how to install it."""


class RenderError(DrawingError):
    """``dot`` ran but failed; the message carries the first line of what it printed."""


def has_dot() -> bool:
    """Whether the Graphviz ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def pipe(dot: str, fmt: str) -> bytes:
    """Run ``dot -T<fmt>`` on ``dot`` and return the output bytes."""
    import graphviz

    try:
        return graphviz.pipe("dot", fmt, dot.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFoundError(
            _("the Graphviz 'dot' program was not found on PATH; {hint}").format(hint=INSTALL_HINT)
        ) from None
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else str(exc.stderr or "")
        first = stderr.strip().splitlines()[0] if stderr.strip() else _("exit code {code}").format(code=exc.returncode)
        raise RenderError(_("dot -T{fmt} failed: {first}").format(fmt=fmt, first=first)) from None
