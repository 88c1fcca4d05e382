"""Token ids to display strings: every character visible, nothing that breaks a label's line."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Characters that would move the text around or vanish in a label, shown as visible glyphs.
_VISIBLE = {"\n": "↵", "\r": "⏎", "\t": "→", " ": "·"}


def display_token(text: str, *, show_spaces: bool = False) -> str:
    """`text` with line breaks, tabs and other control characters made visible.

    Spaces stay spaces unless `show_spaces` (axis labels show `·` so a lone space is not blank).
    """
    out = []
    for ch in text:
        if ch in _VISIBLE and (ch != " " or show_spaces):
            out.append(_VISIBLE[ch])
        elif ch != " " and not ch.isprintable():
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) if out else "∅"


def token_text(vocab: Sequence[str], token_id: int) -> str:
    """The vocabulary string of one id, or a placeholder naming an id outside the vocabulary."""
    if 0 <= token_id < len(vocab):
        return vocab[token_id]
    return f"<{token_id}>"


def token_labels(vocab: Sequence[str], ids: np.ndarray, *, show_spaces: bool = False) -> list[str]:
    """Display strings of a 1-D array of token ids."""
    return [display_token(token_text(vocab, int(i)), show_spaces=show_spaces) for i in ids]


def preview(vocab: Sequence[str], ids: np.ndarray, max_chars: int = 80) -> str:
    """One-line text of a token sequence, cut to `max_chars` with an ellipsis."""
    text = display_token("".join(token_text(vocab, int(i)) for i in ids))
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
