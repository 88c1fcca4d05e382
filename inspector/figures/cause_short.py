"""The cause of a pair of runs in two short lines, for a figure a journal column holds: the headline's
first clause and the proven event in a sentence that names the runs A and B, e.g. "Proven cause:
capacity — at position 28 (new token 0), layer 0." and "Withdrawing rows 0, 1 from expert 3's queue
for row 2 at new token 0, layer 0 of A alone restores the split."."""

from __future__ import annotations

import html
import re

from inspector.figure_data.divergence_cause import CauseText, as_letters
from inspector.figures.style import FigureStyle


def short_headline(cause: CauseText) -> str:
    """The headline's first clause, without the aside on the first difference."""
    text = re.split(r" \(the first difference|\. ", cause.headline, maxsplit=1)[0].rstrip(".")
    return f"{text}."


def short_sentence(cause: CauseText, run_a: str, run_b: str) -> str:
    """The proven event and that it alone restores the split, naming the runs A and B; without a
    proof, the first sentence of the first difference."""
    proven = dict(cause.facts).get("proven cause", "") if cause.proven else ""
    if proven:
        event = proven.split(": ", 1)[-1]
        text = f"{event} alone restores the split."
    else:
        text = re.split(r"(?<=[a-z0-9)'])\. ", cause.sentence, maxsplit=1)[0].rstrip(".") + "."
    text = as_letters(text, run_a, run_b)   # the cause text letters them already; a fallback
    return text[:1].upper() + text[1:]


def short_cause_html(cause: CauseText, style: FigureStyle, run_a: str, run_b: str,
                     names: str = "") -> str:
    """The short headline in bold, the short sentence under it; `names` (HTML), when given, first."""
    color = "#1b7f3b" if cause.confirmed else "#8a4b00"
    head = f'<p style="margin: 0 0 2px 0;">{names}</p>' if names else ""
    return (f'<div style="color: {style.foreground};">{head}<p style="margin: 0 0 2px 0;">'
            f'<b style="color: {color};">'
            f'{html.escape(short_headline(cause))}</b></p><p style="margin: 0;">'
            f'{html.escape(short_sentence(cause, run_a, run_b))}</p></div>')
