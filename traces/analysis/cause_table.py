"""The one table of causes: each cause's name, meaning, kind, colour and whether it explains a split.

Every summary, view, export and CSV reads this table (docs/experiments.md, cause of a divergence), so
a cause is declared once. `kind` groups causes by mechanism: `capacity` (rows compete for expert
slots), `numeric` (floating-point differences of the kernels), `mixed` (a minimal set of events of
both), `random` (a seeded choice), `none` (nothing differs) and `unproven` (nothing is proven).
`explained` is False for the causes counted together as the unexplained share.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    """One cause of a divergence."""

    name: str
    meaning: str
    kind: str       # capacity, numeric, mixed, random, none, unproven
    colour: str     # '#rrggbb', the same in every view and figure
    explained: bool


_CAUSES = (
    Cause("capacity", "a candidate was dropped for lack of expert slots (capacity coupling with the batch)",
          "capacity", "#fdae6b", True),
    Cause("router_flip", "a numeric near-tie flipped the router's choice of experts", "numeric", "#9ecae1",
          True),
    Cause("seeded_random", "a seeded random choice of experts differs", "random", "#c7e9c0", True),
    Cause("renormalization", "the after-drop renormalization of the weights differs", "numeric", "#bcbddc",
          True),
    Cause("upstream_numeric", "a numeric difference upstream of the router (the router's input differs)",
          "numeric", "#6baed6", True),
    Cause("output_numeric", "routing is identical; a numeric difference in the expert or attention "
                            "reductions", "numeric", "#3182bd", True),
    Cause("mixed", "a minimal set of events that mixes capacity drops and numeric router changes carries "
                   "the split", "mixed", "#e6550d", True),
    Cause("unexplained", "the tokens differ but no routing or logit difference precedes them", "unproven",
          "#969696", False),
    Cause("unconfirmed", "the reruns point at a cause, but no event or minimal set of events is proven to "
                         "carry the split", "unproven", "#bdbdbd", False),
    Cause("not_reproduced", "the reruns took another decision than the recording, so they confirm nothing",
          "unproven", "#d9d9d9", False),
    Cause("identical", "the two runs agree on tokens, routing and logits", "none", "#f0f0f0", True),
)

#: Every cause by name, in the order summaries list them.
CAUSE_TABLE: dict[str, Cause] = {c.name: c for c in _CAUSES}

#: Names counted together as the unexplained share (the goal is 0).
UNEXPLAINED: tuple[str, ...] = tuple(c.name for c in _CAUSES if not c.explained)


def meaning(name: str) -> str:
    """What cause `name` means ('' for a name the table does not hold)."""
    cause = CAUSE_TABLE.get(name)
    return cause.meaning if cause is not None else ""


def colour(name: str) -> str:
    """The colour of cause `name` (grey for a name the table does not hold)."""
    cause = CAUSE_TABLE.get(name)
    return cause.colour if cause is not None else "#969696"
