"""The one table of causes: each cause's name, meaning, kind, colour and whether it explains a split.

Every summary, view, export and CSV reads this table (docs/experiments.md, cause of a divergence), so
a cause is declared once. `kind` groups causes by mechanism: `capacity` (rows compete for expert
slots), `numeric` (floating-point differences of the kernels), `mixed` (a minimal set of events of
both), `random` (a seeded choice), `none` (nothing differs) and `unproven` (nothing is proven).
`explained` is False for the causes counted together as the unexplained share; `observed` is True for
the causes the first-difference walk (`traces.analysis.causes.explain_pair`) names, False for those
only `explain`'s reruns settle on.

Everything derived (the summary's order, the unexplained share, the unsettled causes, the numeric
causes acting through the router) is read from `CAUSE_TABLE` when asked, so a cause added to the
table reaches every summary, view and CSV.
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.vocabulary import Vocabulary


#: The name of each cause, the one spelling every module imports; the values are the spellings stored
#: in traces and explanation tables.
class CauseName(Vocabulary):
    CAPACITY = "capacity"
    ROUTER_FLIP = "router_flip"
    SEEDED_RANDOM = "seeded_random"
    RENORMALIZATION = "renormalization"
    UPSTREAM_NUMERIC = "upstream_numeric"
    OUTPUT_NUMERIC = "output_numeric"
    NUMERIC_ROUTING = "numeric_routing"
    TOKEN_NEAR_TIE = "token_near_tie"
    MIXED = "mixed"
    UNEXPLAINED = "unexplained"
    UNCONFIRMED = "unconfirmed"
    NOT_REPRODUCED = "not_reproduced"
    IDENTICAL = "identical"


class Mechanism(Vocabulary):
    """How a cause acts (a cause's `kind`): the groups the summaries and colours follow."""

    CAPACITY = "capacity"   # rows compete for expert slots
    NUMERIC = "numeric"     # floating-point differences of the kernels
    MIXED = "mixed"         # a minimal set of events of both
    RANDOM = "random"       # a seeded choice
    NONE = "none"           # nothing differs
    UNPROVEN = "unproven"   # nothing is proven


CAPACITY = CauseName.CAPACITY
ROUTER_FLIP = CauseName.ROUTER_FLIP
SEEDED_RANDOM = CauseName.SEEDED_RANDOM
RENORMALIZATION = CauseName.RENORMALIZATION
UPSTREAM_NUMERIC = CauseName.UPSTREAM_NUMERIC
OUTPUT_NUMERIC = CauseName.OUTPUT_NUMERIC
NUMERIC_ROUTING = CauseName.NUMERIC_ROUTING
TOKEN_NEAR_TIE = CauseName.TOKEN_NEAR_TIE
MIXED = CauseName.MIXED
UNEXPLAINED = CauseName.UNEXPLAINED
UNCONFIRMED = CauseName.UNCONFIRMED
NOT_REPRODUCED = CauseName.NOT_REPRODUCED
IDENTICAL = CauseName.IDENTICAL

#: The kind of the causes that are floating-point differences of the kernels.
NUMERIC = Mechanism.NUMERIC


@dataclass(frozen=True)
class Cause:
    """One cause of a divergence."""

    name: CauseName
    meaning: str
    kind: Mechanism
    colour: str     # '#rrggbb', the same in every view and figure
    explained: bool
    observed: bool  # the first-difference walk can name it (else only the reruns settle on it)


_CAUSES = (
    Cause(CAPACITY, "a candidate was dropped for lack of expert slots (capacity coupling with the batch)",
          Mechanism.CAPACITY, "#fdae6b", True, True),
    Cause(ROUTER_FLIP, "a numeric near-tie flipped the router's choice of experts", NUMERIC, "#9ecae1",
          True, True),
    Cause(SEEDED_RANDOM, "a seeded random choice of experts differs", Mechanism.RANDOM, "#c7e9c0", True,
          True),
    Cause(RENORMALIZATION, "the after-drop renormalization of the weights differs", NUMERIC, "#bcbddc",
          True, True),
    Cause(UPSTREAM_NUMERIC, "a numeric difference upstream of the router (the router's input differs)",
          NUMERIC, "#6baed6", True, True),
    Cause(OUTPUT_NUMERIC, "routing is identical; a numeric difference in the expert or attention "
                          "reductions", NUMERIC, "#3182bd", True, True),
    Cause(NUMERIC_ROUTING, "routing changed without a capacity limit (numeric): the chosen experts "
                           "differ in a dropless engine whose router logits were not recorded", NUMERIC,
          "#08519c", True, True),
    Cause(TOKEN_NEAR_TIE, "next-token near-tie: routing identical up to the split, the token choice "
                          "flipped (router logits not recorded)", NUMERIC, "#2171b5", True, True),
    Cause(MIXED, "a minimal set of events that mixes capacity drops and numeric router changes carries "
                 "the split", Mechanism.MIXED, "#e6550d", True, False),
    Cause(UNEXPLAINED, "the tokens differ but no routing or logit difference precedes them",
          Mechanism.UNPROVEN, "#969696", False, True),
    Cause(UNCONFIRMED, "the reruns point at a cause, but no event or minimal set of events is proven to "
                       "carry the split", Mechanism.UNPROVEN, "#bdbdbd", False, False),
    Cause(NOT_REPRODUCED, "the reruns took another decision than the recording, so they confirm nothing",
          Mechanism.UNPROVEN, "#d9d9d9", False, False),
    Cause(IDENTICAL, "the two runs agree on tokens, routing and logits", Mechanism.NONE, "#f0f0f0", True,
          True),
)

#: Every cause by name, in the order summaries list them.
CAUSE_TABLE: dict[str, Cause] = {c.name: c for c in _CAUSES}
if list(CAUSE_TABLE) != list(CauseName):   # a cause is a member of CauseName and one row here
    raise ImportError(f"the cause table and CauseName differ: {sorted(set(CauseName) ^ set(CAUSE_TABLE))}")



def first_difference_causes() -> tuple[str, ...]:
    """The causes the first-difference walk names, in the order summaries list them."""
    return tuple(name for name, c in CAUSE_TABLE.items() if c.observed)


def unexplained() -> tuple[str, ...]:
    """The causes counted together as the unexplained share (the goal is 0)."""
    return tuple(name for name, c in CAUSE_TABLE.items() if not c.explained)


def unsettled() -> tuple[str, ...]:
    """Confirmed causes that confirm nothing: the reruns' verdicts that are no cause ('unconfirmed',
    'not_reproduced'), as opposed to 'unexplained', which the first difference itself can be."""
    return tuple(name for name, c in CAUSE_TABLE.items() if not c.explained and not c.observed)


def settles(confirmed_cause: str) -> bool:
    """Whether a stored confirmed cause settles its pair ('' is: not rerun yet)."""
    return bool(confirmed_cause) and confirmed_cause not in unsettled()


def router_numeric() -> tuple[str, ...]:
    """The numeric causes that act through the router (all numeric ones but the output's)."""
    return tuple(name for name, c in CAUSE_TABLE.items() if c.kind == NUMERIC and name != OUTPUT_NUMERIC)


def meaning(name: str) -> str:
    """What cause `name` means ('' for a name the table does not hold)."""
    cause = CAUSE_TABLE.get(name)
    return cause.meaning if cause is not None else ""


def colour(name: str) -> str:
    """The colour of cause `name` (grey for a name the table does not hold)."""
    cause = CAUSE_TABLE.get(name)
    return cause.colour if cause is not None else "#969696"
