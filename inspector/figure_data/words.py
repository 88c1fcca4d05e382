"""The words a reader sees for the spellings of the closed vocabularies (the causes, kinds of event
and difference, reproduction levels): `router_flip` is stored, "router flip" is shown. No Qt here.

Every sentence, title, key and table cell of the app and of an exported figure or caption names a
vocabulary member through `as_words`; the CSV keeps the stored spelling (a reader's program compares
it), and docs/glossary.md explains each word.
"""

from __future__ import annotations

from traces.analysis.cause_table import CauseName

#: Members whose words are not their spelling with spaces.
WORDS = {CauseName.TOKEN_NEAR_TIE.value: "token near-tie"}


def as_words(name: object) -> str:
    """`name` (a vocabulary member or its spelling) as words."""
    text = str(name)
    return WORDS.get(text, text.replace("_", " "))


def causes_line(summary) -> str:
    """'12 of 30 runs diverge: capacity 9 (75%), router flip 3 (25%); unexplained 0%.' of a
    `traces.analysis.summary.CauseSummary`, its causes in words."""
    text = summary.describe()
    head = f"{summary.n_divergent} of {summary.n_runs} runs diverge"
    if not summary.n_divergent:
        return text
    body = ", ".join(f"{as_words(c)} {n} ({s:.0%})" for c, n, s in summary.rows())
    return f"{head}: {body};{text.rsplit(';', 1)[1]}"
