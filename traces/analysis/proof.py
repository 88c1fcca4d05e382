"""The proven cause of a divergent pair in words: its event(s), kind, necessity and reach.

Two things are kept apart everywhere (docs/experiments.md):

- the *first difference*: observed, the first routing decision that differs between the two rows,
  walking positions then layers (`traces.analysis.explain_pair`); it proves nothing by itself;
- the *proven cause*: the event, or the 1-minimal set of events, whose intervention alone removes
  the split: the rerun with only that changed gives the other row's tokens *through the first split*
  (sufficiency). Whether it is also *necessary* (the reference's routing everywhere else leaves the
  split) and how far it carries (*reach*: new tokens that then agree, from the first on) are stored
  with it.

The explanation table stores these in its version-3 columns (`traces.analysis.explain_table`).
"""

from __future__ import annotations

from collections.abc import Iterable

from traces.analysis.cause_table import CAPACITY, MIXED, OUTPUT_NUMERIC, UPSTREAM_NUMERIC

#: Kinds of one event: a capacity decision (a kept set) or a numeric one (router logits or experts).
CAPACITY_KIND = CAPACITY
NUMERIC_KIND = UPSTREAM_NUMERIC
#: Kinds of a proof: capacity, upstream numeric, output numeric (no routing event; the kernels'
#: numerics after the router), or mixed (a set with events of both kinds).
PROOF_KINDS = (CAPACITY_KIND, NUMERIC_KIND, OUTPUT_NUMERIC, MIXED)

#: What the views say when no proof is stored.
NO_PROOF = "first difference (no proof yet)"


def set_kind(kinds: Iterable[str]) -> str:
    """The kind of a set of events: their common kind, 'mixed' when they differ, '' when empty."""
    distinct = set(kinds)
    if not distinct:
        return ""
    return distinct.pop() if len(distinct) == 1 else MIXED


def parse_cells(text: str) -> list[tuple[int, int]]:
    """'layer:position' pairs separated by spaces (the `proof_cells` column) as (layer, position)."""
    cells = []
    for part in text.split():
        layer, _, position = part.partition(":")
        cells.append((int(layer), int(position)))
    return cells


def format_cells(cells: Iterable[tuple[int, int]]) -> str:
    return " ".join(f"{layer}:{position}" for layer, position in cells)


def necessity_text(necessary: bool | None) -> str:
    """'' when not tested."""
    if necessary is None:
        return ""
    if necessary:
        return ("Necessary as well: with the reference's routing everywhere else, the tokens still split "
                "without it.")
    return ("Not necessary: the reference's routing everywhere else restores the tokens without it too "
            "(another event or set also suffices).")


def reach_text(reach: int, n_new: int) -> str:
    """'Reach: restores the whole completion (64 of 64 new tokens).' or 'Reach: restores the first
    split; the completion then agrees for its first 2 of 64 new tokens.' ('' when not measured)."""
    if reach < 0 or n_new < 0:
        return ""
    if reach >= n_new:
        return f"Reach: restores the whole completion ({n_new} of {n_new} new tokens)."
    return (f"Reach: restores the first split; the completion then agrees for its first {reach} of {n_new} "
            f"new tokens.")


def proof_sentence(events: str, size: int, kind: str, t_star: int, new_index: int) -> str:
    """'Proven cause: keeping ... alone restores the reference's tokens through the first split
    (position 31, new token 0).' for one event, or the minimal set's words for several."""
    split = f"through the first split (position {t_star}, new token {new_index})"
    if size <= 1:
        return f"Proven cause: {events} alone restores the other run's tokens {split}."
    return (f"Proven cause: a 1-minimal set of {size} events ({kind.replace('_', ' ')}): {events}. Together "
            f"they restore the other run's tokens {split}; no one of them alone does, and leaving any one "
            f"out does not.")
