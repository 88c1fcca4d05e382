"""The causal map of a divergent pair as data: `CellEffect` (one differing routing cell, one direction),
`ChainLink` (one link of the chain from the decisive cell back to a capacity event of the batch or to
the first difference) and `PairMap` (a pair's map). Effects are changes of the logit difference at t*
(the other run's token minus the patched run's own): positive moves the patched run toward the
other's token, and an effect above -baseline flips it.

Computed by `lab.counterfactual.causal_map`; stored and put in words by `traces.analysis.causal_map`;
the pair's outcome is `traces.analysis.map_outcome`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: A cell beats its null when its p-value, corrected for the number of cells tested, is at most this.
ALPHA = 0.05


@dataclass(frozen=True)
class CellEffect:
    """The effect of one differing routing cell of the patched run ("A" or "B")."""

    patched: str
    layer: int
    position: int
    step: int
    prefill: bool
    changed: int            # candidates whose (expert, kept) differ between the runs
    estimate: float         # first-order estimate (nan: none)
    effect: float           # the exact effect where `exact`, else the estimate
    exact: bool
    queue: float            # exact effect of the queue patch (nan: not applicable or not run)
    percentile: float       # of |effect| among the position-matched null's |effects| (0..100)
    p_value: float          # share of null draws at least as large, corrected for the cells tested
    null_flip: float        # share of the null's draws that flip the token
    null_draws: int
    null_exact: bool = False    # the null's draws are exact reruns (decode cells), else estimates
    null_exceed: float = math.nan   # share of the null's draws at least |baseline| in magnitude (nan:
                                    # no null, or a map table of version 1)

    @property
    def beats_null(self) -> bool:
        return not math.isnan(self.p_value) and self.p_value <= ALPHA

    @property
    def capacity(self) -> bool:
        """Whether the queue patch alone carries the cell's effect (half of it or more, same sign)."""
        return not math.isnan(self.queue) and self.effect != 0 and self.queue / self.effect >= 0.5

    def where(self) -> str:
        return f"{self.layer}:{self.position}"


#: How a chain ends (`ChainLink.kind` of its last link).
LINK_KINDS = {
    "decisive": "the decisive cell: its decision moves the logit difference at t*",
    "router": "a cell whose decision moves the router margin of the next link",
    "capacity": "a capacity event of the batch: the queue at that step alone gives the other decision",
    "first": "the first difference: no earlier differing cell moves it",
}


@dataclass(frozen=True)
class ChainLink:
    """One link, from the decisive cell back: its cell, what it moves (the logit difference at t* for
    the first link, the next link's router margin for the others) and by how much (estimated)."""

    kind: str               # LINK_KINDS
    layer: int
    position: int
    step: int
    effect: float           # on the quantity the previous link depends on
    margin: float           # the router margin of this cell between the two runs' experts (nan: n/a)
    beats_null: bool

    def where(self) -> str:
        return f"{self.layer}:{self.position}"


@dataclass
class PairMap:
    """A pair's map: cells of both directions, baselines, joint effects, the chain and its cost."""

    t_star: int
    prompt_len: int
    cells: list[CellEffect] = field(default_factory=list)
    baseline: dict[str, float] = field(default_factory=dict)     # "A"/"B" -> unpatched logit difference
    joint: dict[str, float] = field(default_factory=dict)        # effect of all differing cells at once
    sum_singles: dict[str, float] = field(default_factory=dict)
    chain: list[ChainLink] = field(default_factory=list)
    seconds: float = 0.0

    def decisive(self, patched: str | None = None) -> list[CellEffect]:
        """Cells beating their null, strongest first."""
        cells = [c for c in self.cells if c.beats_null and (patched is None or c.patched == patched)]
        return sorted(cells, key=lambda c: -abs(c.effect))

    def strongest(self, patched: str = "B") -> CellEffect | None:
        cells = [c for c in self.cells if c.patched == patched and not math.isnan(c.effect)]
        return max(cells, key=lambda c: abs(c.effect)) if cells else None

    def concentration(self, patched: str = "B") -> float:
        """Share of the summed |single effects| carried by the strongest cell (nan: none)."""
        cells = [abs(c.effect) for c in self.cells if c.patched == patched and not math.isnan(c.effect)]
        total = sum(cells)
        return max(cells) / total if total > 0 else math.nan

    def reaches_batch(self) -> bool:
        return bool(self.chain) and self.chain[-1].kind == "capacity"
