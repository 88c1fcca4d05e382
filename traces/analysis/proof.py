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

from traces.analysis.cause_table import CauseName
from traces.analysis.verdict_text import RunLabel, run_label
from traces.vocabulary import Vocabulary


class ProofKind(Vocabulary):
    """The kind of one event, or of a proof: a capacity decision (a kept set), a numeric one (router
    logits or experts), output numeric (no routing event; the kernels' numerics after the router), or
    mixed (a set with events of both kinds). Spelled as the causes they confirm (`cause`)."""

    CAPACITY = "capacity"
    UPSTREAM_NUMERIC = "upstream_numeric"
    OUTPUT_NUMERIC = "output_numeric"
    MIXED = "mixed"

    @property
    def cause(self) -> CauseName:
        """The cause a proof of this kind confirms."""
        return CauseName(self.value)


#: Kinds of one event: a capacity decision (a kept set) or a numeric one (router logits or experts).
CAPACITY_KIND = ProofKind.CAPACITY
NUMERIC_KIND = ProofKind.UPSTREAM_NUMERIC
#: Kinds of a proof.
PROOF_KINDS = tuple(ProofKind)


class EventKind(Vocabulary):
    """How an event of a proof changes its run: the kind of a single-event intervention
    (`model.intervention`), or `cell`, the other row's routing of one (layer, position) replayed.
    The values are the `proof_how` column's; `read` also takes the spellings interventions had
    before the two were one vocabulary (`remove_rows`, `router_logits`)."""

    KEEP = "keep"            # a dropped candidate kept
    CAPACITY = "capacity"    # its group given the other run's capacity
    WITHDRAW = "withdraw"    # the rows that took the slots ahead withdrawn from the queue
    LOGITS = "logits"        # the row given the other run's router logits
    CELL = "cell"            # the other row's routing of the cell replayed

    @classmethod
    def _missing_(cls, value):
        return {"remove_rows": cls.WITHDRAW, "router_logits": cls.LOGITS}.get(value)

    @property
    def changes_router(self) -> bool:
        """Whether the event changes the router's choice rather than a kept set."""
        return self in (EventKind.LOGITS, EventKind.CELL)


#: What the views say when no proof is stored.
NO_PROOF = "first difference (no proof yet)"

#: Random routings the placebo gives the root event's cell (`lab.counterfactual.search`).
PLACEBO_TRIALS = 10
#: A root event whose placebo share is above this is weak: its cell is a near-tie that most changes
#: flip, not a specific event.
WEAK_PLACEBO = 0.2

#: What an event changes, by how it is changed (the `proof_how` column).
EVENT_WORDS = {
    EventKind.KEEP: "a capacity decision: a dropped candidate kept",
    EventKind.CAPACITY: "a capacity decision: its group's capacity",
    EventKind.WITHDRAW: "a capacity decision: the rows that took the slots withdrawn",
    EventKind.LOGITS: "the router's choice: its input logits",
    EventKind.CELL: "the router's choice: the experts routed to",
}
#: Events that change the router's choice rather than a kept set.
ROUTER_EVENTS = tuple(k for k in EventKind if k.changes_router)


def meaning_of_event(kind: str) -> str:
    """What a proven router-choice event of proof kind `kind` means (a drop is not what it changes)."""
    if kind == CAPACITY_KIND:
        return ("the router chose other experts there because earlier capacity decisions of the batch had "
                "changed its input; the proven event is that choice, not a drop")
    if kind == NUMERIC_KIND:
        return "the router chose other experts there because the kernels rounded its input differently"
    return "the router chose other experts there"


def set_kind(kinds: Iterable[str]) -> ProofKind | str:
    """The kind of a set of events: their common kind, mixed when they differ, '' when empty."""
    distinct = {ProofKind(k) for k in kinds}
    if not distinct:
        return ""
    return distinct.pop() if len(distinct) == 1 else ProofKind.MIXED


def parse_cells(text: str) -> list[tuple[int, int]]:
    """'layer:position' pairs separated by spaces (the `proof_cells` column) as (layer, position)."""
    cells = []
    for part in text.split():
        layer, _, position = part.partition(":")
        cells.append((int(layer), int(position)))
    return cells


def format_cells(cells: Iterable[tuple[int, int]], distinct: bool = False) -> str:
    """'layer:position' pairs separated by spaces (with `distinct`, each cell once, in order)."""
    cells = list(dict.fromkeys(cells)) if distinct else list(cells)
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


def proof_sentence(events: str, size: int, kind: str, t_star: int, new_index: int, changed: str = "",
                   other: str = "", how: str = "", label: RunLabel = run_label) -> str:
    """'Proven cause: keeping ... alone makes run X give run Y's tokens through the first split
    (position 31, new token 0).' for one event, or the minimal set's words for several. `changed` is
    the run rerun with the change, `other` the run whose tokens it then gives ('' when not stored:
    "the other run's tokens"), both named by `label`; `how` the event's kind of change
    (`EVENT_WORDS`)."""
    split = f"through the first split (position {t_star}, new token {new_index})"
    gives = (f"makes {label(changed)} give {label(other)}'s tokens" if changed and other
             else "restores the other run's tokens")
    if size <= 1:
        what = f" ({EVENT_WORDS[EventKind(how)]})" if how in EVENT_WORDS else ""
        return f"Proven cause: {events}{what} alone {gives} {split}."
    gives = gives.replace("makes", "make").replace("restores", "restore")
    return (f"Proven cause: a 1-minimal set of {size} events ({kind.replace('_', ' ')}): {events}. Together "
            f"they {gives} {split}; no one of them alone does, and leaving any one out does not.")


def alternatives_text(count: int, candidates: int, cells: str, root: tuple[int, int],
                      candidates_all: int = -1) -> str:
    """'Root event: the earliest of 3 of 104 candidate events that each suffice alone (at layer:position
    0:27 0:28); the latest cell, position 28, layer 0, is the proximate trigger.' ('' when the scan was
    not stored). `cells` are the sufficient events' distinct cells in time order; past the scan's
    budget (`candidates_all` more than `candidates`) the count is of the earliest events tried."""
    if count < 0 or candidates <= 0:
        return ""
    scanned = f"{candidates} candidate events"
    if candidates_all > candidates:
        scanned = f"the earliest {candidates} of {candidates_all} candidate events (the scan's budget)"
    if count == 0:
        return f"No single one of {scanned} suffices alone."
    if count == 1:
        return f"Root event: the only one of {scanned} that suffices alone."
    where = parse_cells(cells)
    at = (f"all at layer {where[0][0]}, position {where[0][1]}" if len(where) == 1
          else f"at {len(where)} cells, layer:position {cells}")
    text = f"Root event: the earliest of {count} of {scanned} that each suffice alone ({at})"
    latest = max(where, key=lambda c: (c[1], c[0]))
    if (latest[1], latest[0]) != (root[1], root[0]):
        text += f"; the latest cell, position {latest[1]}, layer {latest[0]}, is the proximate trigger"
    return text + "."


def placebo_text(share: float) -> str:
    """What the placebo at the root's cell found ('' when not measured)."""
    if share < 0:
        return ""
    n = round(share * PLACEBO_TRIALS)
    said = f"{n} of {PLACEBO_TRIALS} random routings at that cell restore the tokens too"
    if share > WEAK_PLACEBO:
        return f"Weak: {said} (a near-tie)."
    return f"Specific: {said}."


def is_weak(share: float) -> bool:
    """Whether a measured placebo share makes the root event weak."""
    return share > WEAK_PLACEBO


#: Why a chain ended (the `chain_end` column).
CHAIN_ENDS = {
    "whole": "the whole completion agrees",
    "no_cells": "no set of the cells before the next split was found to restore it",
    "budget": "its budget of reruns was spent",
}


def chain_links(cells: str) -> list[list[tuple[int, int]]]:
    """The `chain_cells` column as links: space-separated links of '+'-joined 'layer:position' cells."""
    return [parse_cells(link.replace("+", " ")) for link in cells.split()]


def format_chain(links: Iterable[Iterable[tuple[int, int]]]) -> str:
    return " ".join("+".join(f"{layer}:{position}" for layer, position in link) for link in links)


def chain_text(cells: str, reaches: str, end: str, first_reach: int, n_new: int, brief: bool = False) -> str:
    """'Chain: 3 events restore all 64 new tokens (the proof, then layer:position 1:31 0:35; reach 2,
    7, 64).' or where the chain stopped ('' when no chain was searched or none was needed); `brief`
    leaves out the cells and reaches."""
    if not end or n_new < 0 or first_reach < 0:
        return ""
    links = chain_links(cells)
    reach = [first_reach] + [int(x) for x in reaches.split()]
    events = 1 + sum(len(link) for link in links)
    if not links:
        if end == "whole":
            return ""   # the proof alone restores the whole completion (the reach says so)
        return f"Chain: stops after the proof ({CHAIN_ENDS.get(end, end)})."
    said = "" if brief else (f" (the proof, then layer:position {cells}; reach "
                             f"{', '.join(str(r) for r in reach)} of {n_new})")
    if end == "whole":
        return f"Chain: {events} events restore all {n_new} new tokens{said}."
    return (f"Chain: {events} events restore the first {reach[-1]} of {n_new} new tokens{said}; it stops "
            f"there: {CHAIN_ENDS.get(end, end)}.")
