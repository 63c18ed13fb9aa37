"""Page a step taller than the terminal, the way ``less`` pages a file.

The runner renders a step once, at the console's width, to a list of lines
(:func:`to_lines`), and shows a :class:`Window` onto them: the step's header
(the lesson's rule and "Step k of n · title") stays on screen above it, and
the keys move the window down and up. Nothing here reads keys or prints; a
Window is a value, and each move returns a new one, so the paging arithmetic
is tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.console import Console, RenderableType

__all__ = ["MIN_ROWS", "OVERLAP", "Window", "to_lines"]

MIN_ROWS = 3  # in a terminal too small for the header and the footer, still show this many lines of the step
OVERLAP = 2  # lines a page down keeps from the page before, so the eye finds its place


def to_lines(console: Console, renderable: RenderableType) -> list[str]:
    """``renderable`` as ``console`` would print it now (its width, colours, styles), one string per line."""
    with console.capture() as captured:
        console.print(renderable)
    text = captured.get()
    return text.removesuffix("\n").split("\n") if text else []


@dataclass(frozen=True)
class Window:
    """``rows`` lines of a ``total``-line body, starting at line ``top`` (0-based)."""

    total: int
    rows: int
    top: int = 0

    def __post_init__(self) -> None:
        if self.rows < 1:
            raise ValueError(f"rows: expected at least 1 line to show, got {self.rows}")
        # no further down than the top that shows the body's last line, no further up than its first
        object.__setattr__(self, "top", max(0, min(self.top, self.total - self.rows)))

    @property
    def bottom(self) -> int:
        """One past the last line shown."""
        return min(self.total, self.top + self.rows)

    @property
    def remaining(self) -> int:
        """Lines below the window."""
        return self.total - self.bottom

    @property
    def at_end(self) -> bool:
        return self.remaining == 0

    @property
    def at_top(self) -> bool:
        return self.top == 0

    def moved(self, lines: int) -> Window:
        """The window ``lines`` further down (negative: up), kept inside the body."""
        return replace(self, top=self.top + lines)

    def paged(self, pages: int = 1) -> Window:
        """The window ``pages`` screens further down (negative: up), keeping :data:`OVERLAP` lines."""
        return self.moved(pages * max(1, self.rows - OVERLAP))

    def resized(self, total: int, rows: int) -> Window:
        """The same top line over ``total`` lines in ``rows`` rows (the step re-rendered, the terminal resized)."""
        return Window(total, rows, self.top)

    def visible(self, lines: list[str]) -> list[str]:
        """The lines of ``lines`` (the body) that the window shows."""
        return lines[self.top : self.bottom]
