"""A demo's sentence whose formulas, written in backticks, never break at their own spaces.

A lesson's Markdown marks a formula or a command as inline code (`` `y = beta` ``) and the
renderer keeps it on one line (:mod:`microgradnorm.i18n.text`). A demo's caption or ✓ line is a
translated string, not Markdown: :func:`marked` gives its backticked parts the same inline-code mark,
so a caption such as ``"sqrt(var) + eps, built by hand"`` does not start a line with ``+ eps``. The
backticks themselves are not shown, as in the prose.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from microgradnorm.i18n.text import CJKText, cjk_text

# the mark the Markdown renderer gives inline code (i18n.text reads it when it wraps a line)
_CODE = Style(meta={"inline_code": True})


def marked(text: str, style: str = "") -> CJKText:
    """``text`` (already translated) with each `backticked` part marked as inline code, backticks dropped.

    An unpaired backtick is kept as it is, so a translation that loses one shows it rather than
    swallowing the rest of the sentence.
    """
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: no pairs to trust
        return cjk_text(text, style)
    out = Text(style=style)
    for i, part in enumerate(parts):
        out.append(part, style=_CODE if i % 2 else None)
    return cjk_text(out)
