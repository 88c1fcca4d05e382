"""What the causal maps of an explanation table add up to: how many splits are near-ties, decisive or
without a decisive cell (`traces.analysis.map_outcome`), how many
chains reach a capacity event of the batch, where the decisive cells lie, how concentrated and how
additive the effects are, and what a map cost.

Read from the stored records alone (`ExplainRecord`, version 5 columns), so the numbers the command
line prints, the docs quote and a test checks are the same computation. `chain_events` reads the
chains of older tables (version 4, before the map).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from traces.analysis.causal_map import parse_links
from traces.analysis.explain_table import ExplainRecord
from traces.analysis.map_outcome import Outcome
from traces.analysis.proof import chain_links


@dataclass(frozen=True)
class MapSummary:
    """The causal maps of a table (records with a map)."""

    mapped: int                 # divergent pairs with a map
    near_ties: int              # outcome near_tie: a run's margin is within what random changes do
    decisive: int               # outcome decisive: not a near-tie, a cell beats its null
    no_decisive: int            # outcome no_decisive_cell: neither
    unstated: int               # maps without an outcome: stored before it (explanation table version
                                # 5), or with no null tested (a model without first-order estimates)
    untested: int               # of which stored before the outcome (`explain --redo` states it)
    borderline: int             # stated outcomes whose near-tie test's interval holds one half
    reach_batch: int            # chains ending at a capacity event of the batch
    located: int                # decisive pairs (version 5: pairs with a cell beating its null)
    chains: int                 # of which with a chain
    just_before: int            # decisive cells (strongest of each pair) at t*-1
    in_prefill: int             # ... in the prompt
    layers: dict[int, int]      # layer of the strongest decisive cell -> pairs
    median_concentration: float  # share of B's summed |single effects| in its strongest cell (median)
    median_joint_ratio: float   # joint effect / sum of single effects of B (median; 1 additive)
    median_seconds: float
    most_seconds: float

    def describe(self) -> str:
        """One paragraph ('' when no map is stored)."""
        if not self.mapped:
            return ""
        layers = ", ".join(f"layer {k}: {v}" for k, v in sorted(self.layers.items()))
        if self.unstated == self.mapped:
            why = ("the table predates the near-tie test: `explain --redo`" if self.untested == self.mapped
                   else "no null was tested: the nulls need the first-order estimates of the project's "
                   "own model" if not self.untested
                   else f"{self.untested} predate the near-tie test (`explain --redo`), the others have "
                   "no null")
            outcome = f"their outcome is not stated ({why}); {self.located} hold a cell beating its null: "
        else:
            outcome = (f"{self.near_ties} near-ties (a run's margin at t* is within what most random changes "
                       f"of the strongest cell's size at its position do), {self.decisive} decisive (a cell "
                       f"beats its null and alone flips its run's token), {self.no_decisive} with no "
                       f"decisive cell" + (f", {self.unstated} not stated" if self.unstated else "")
                       + f"; in {self.borderline} the near-tie test is borderline (the share's 95% interval "
                       f"holds one half); of the {self.located} decisive pairs, ")
        where = (f"the strongest cell beating its null lies at t*-1 in {self.just_before}, in the prompt in "
                 f"{self.in_prefill} ({layers}); {self.reach_batch} of {self.chains} chains reach a capacity "
                 f"event of the batch. ") if self.located else "none. "
        return (f"Causal maps of {self.mapped} divergent pairs: {outcome}{where}"
                f"The strongest cell carries {self.median_concentration:.0%} of B's summed single-cell "
                f"effects (median); all cells together give {self.median_joint_ratio:.2f} times their sum "
                f"(median). A map took {self.median_seconds:.1f} s (median), {self.most_seconds:.1f} s at "
                f"most.")


def _median(values: list[float]) -> float:
    """The median of the values that are not nan (the mean of the middle two of an even count)."""
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return math.nan
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _borderline(r: ExplainRecord) -> bool:
    o = r.map_outcome()
    return o is not None and any(t.borderline for t in o.ties)


def map_summary(records: Sequence[ExplainRecord]) -> MapSummary:
    mapped = [r for r in records if r.diverged and r.map_cells > 0]
    # Where decisive cells lie and where chains lead: of decisive pairs (a near-tie's cells beating their
    # null are not its cause); a version-5 table, without outcomes, counts every pair with such a cell.
    decisive = [r for r in mapped if r.outcome == Outcome.DECISIVE or (not r.outcome and r.decisive_cells)]
    chained = [r for r in decisive if r.map_chain]
    tops = []
    for r in decisive:
        if r.decisive_cells:
            _, layer_text, position_text = r.decisive_cells.split()[0].split(":")
            tops.append((r, int(layer_text), int(position_text)))
    layers: dict[int, int] = {}
    for _, layer, _ in tops:
        layers[layer] = layers.get(layer, 0) + 1
    ratios = [r.map_joint / r.map_sum for r in mapped if r.map_sum and not math.isnan(r.map_sum)]
    seconds = [r.map_seconds for r in mapped if r.map_seconds >= 0]
    return MapSummary(
        mapped=len(mapped),
        near_ties=sum(1 for r in mapped if r.outcome == Outcome.NEAR_TIE),
        decisive=sum(1 for r in mapped if r.outcome == Outcome.DECISIVE),
        no_decisive=sum(1 for r in mapped if r.outcome == Outcome.NO_DECISIVE_CELL),
        unstated=sum(1 for r in mapped if not r.outcome),
        untested=sum(1 for r in mapped if not r.outcome and r.outcome_untested),
        borderline=sum(1 for r in mapped if r.outcome and _borderline(r)),
        reach_batch=sum(1 for r in chained if parse_links(r.map_chain)[-1][0] == "capacity"),
        located=len(decisive),
        chains=len(chained),
        just_before=sum(1 for r, _, p in tops if p == r.t_star - 1),
        in_prefill=sum(1 for r, _, p in tops if p < r.t_star - r.new_index),
        layers=layers,
        median_concentration=_median([r.concentration for r in mapped]),
        median_joint_ratio=_median(ratios),
        median_seconds=_median(seconds),
        most_seconds=max(seconds, default=math.nan),
    )


def chain_events(record: ExplainRecord) -> int:
    """Events in a version-4 record's chain: the proof's, then every link's cells."""
    return record.proof_size + sum(len(link) for link in chain_links(record.chain_cells))
