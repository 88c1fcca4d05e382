"""The causal map view's data: how much each routing cell where runs A and B differ moves B's split,
read from the trace's explanation tables (`explain` stores them; `traces.analysis.causal_map`).

One pair: run B's row (`sel.run`, `sel.row`; default the first divergent pair with a map) against
its reference A. `effect[S, L, T]` holds, for S = 0 (B patched toward A) and S = 1 (A toward B), the
change of the logit difference at t* of setting each differing cell (layer, position < t*) to the
other run's decision (nan where the runs agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from traces.analysis.causal_map import MAP_TABLE, CellEffect, cells_from_columns
from traces.analysis.explain_table import ExplainRecord, from_columns
from traces.analysis.map_outcome import OUTCOME_WORDS, Outcome, PairOutcome, outcome_text

#: The explanation table the maps belong to (`lab.counterfactual.store.TABLE`).
EXPLAIN_TABLE = "explain_counterfactual"
#: The two directions, in the order of `CausalMapData.effect`.
SIDES = ("B", "A")


@dataclass
class CausalMapData:
    """One pair's map (`effect` nan where A and B agree); `message` says why a map is empty."""

    run: str
    row: int
    ref_run: str
    ref_row: int
    request: int
    t_star: int
    prompt_len: int
    n_layers: int
    labels: list[str]                       # [T] token text of positions 0..t*-1
    cells: dict[str, list[CellEffect]] = field(default_factory=dict)   # "B"/"A" -> cells
    effect: np.ndarray = field(default_factory=lambda: np.zeros((2, 0, 0)))   # [2, L, T]
    baseline: tuple[float, float] = (math.nan, math.nan)
    chain: list[tuple[str, int, int, int]] = field(default_factory=list)   # (kind, layer, position, step)
    outcome: PairOutcome | None = None      # the map's outcome (kind '' where the table predates it)
    message: str = ""

    @property
    def n_positions(self) -> int:
        return len(self.labels)

    def cell(self, side: str, layer: int, position: int) -> CellEffect | None:
        return next((c for c in self.cells.get(side, ()) if (c.layer, c.position) == (layer, position)), None)

    def limit(self) -> float:
        """The colour scale's half range: the largest |effect| (at least 0.01)."""
        finite = np.abs(self.effect[np.isfinite(self.effect)])
        return max(float(finite.max()) if finite.size else 0.0, 0.01)


def chain_side(data: CausalMapData) -> str:
    """The run whose cells the chain runs through: that of the strongest cell beating its null (the
    chain starts from it), B where none does."""
    beating = [c for side in SIDES for c in data.cells.get(side, ()) if c.beats_null]
    return max(beating, key=lambda c: abs(c.effect)).patched if beating else "B"


def describe_cell(data: CausalMapData, side: str, layer: int, position: int) -> str | None:
    """The hover text of one cell (None where the runs agree)."""
    c = data.cell(side, layer, position)
    if c is None:
        return None
    patched, other = (data.run, data.ref_run) if side == "B" else (data.ref_run, data.run)
    how = "exact" if c.exact else "estimated (first order)"
    kind = "exact" if c.null_exact else "estimated"
    beats = ", beats it" if c.beats_null else ""
    null = (f"above {c.percentile:.1f}% of its null's {c.null_draws} {kind} draws (corrected p "
            f"{c.p_value:.3g}{beats})")
    queue = "" if math.isnan(c.queue) else f"; the queue alone: {c.queue:+.3g}"
    token = data.labels[position] if 0 <= position < len(data.labels) else ""
    return (f"position {position} {token!r}, layer {layer}: {other}'s decision in {patched} moves the logit "
            f"difference at t*={data.t_star} by {c.effect:+.3g} ({how}){queue}; {null}; {c.changed} of the "
            f"candidates changed{'; prompt' if c.prefill else ''}")


def map_records(trace) -> tuple[list[ExplainRecord], dict]:
    """The explanation table's records that hold a map, and the map table's cells by pair key."""
    names = trace.table_names
    if EXPLAIN_TABLE not in names or MAP_TABLE not in names:
        return [], {}
    try:
        records = from_columns(trace.read_table(EXPLAIN_TABLE)[0])
        cells = cells_from_columns(trace.read_table(MAP_TABLE)[0])
    except ValueError as exc:
        raise ValueError(f"{trace.path}: its causal map tables are unreadable ({exc})") from None
    return [r for r in records if r.diverged and r.map_cells >= 0], cells


def outcome_words(o: PairOutcome) -> str:
    """'a near-tie of B's token', 'decisive', 'no decisive cell' (short: a title's)."""
    if o.kind != Outcome.NEAR_TIE:
        return OUTCOME_WORDS[Outcome(o.kind)]
    whose = o.tied()
    return f"a near-tie of {' and '.join(whose)}'s token" if len(whose) == 1 else "a near-tie of both tokens"


def map_stem(data: CausalMapData) -> list[object]:
    return [data.run, f"row{data.row}", f"ref-{data.ref_run}"] if data.ref_run else [data.run]


def map_caption(data: CausalMapData) -> list[str]:
    """The figure in words."""
    if data.message:
        return [data.message]
    b = data.cells.get("B", [])
    beats = [c for c in b if c.beats_null]
    lines = [f"Causal map of run {data.run} row {data.row} (B) against run {data.ref_run} row "
             f"{data.ref_row} (A), split at position {data.t_star}: {len(b)} routing cells differ before it."]
    o = data.outcome
    if o is not None and o.kind:
        said = outcome_text(o, "A", "B")
        lines.append(f"Outcome: {outcome_words(o)}." + (f" {said}" if said else ""))
    elif o is not None:
        lines.append("Outcome not stated: this map predates the near-tie test (`moe-inspector explain TRACE "
                     "--redo` states it).")
    if beats:
        top = max(beats, key=lambda c: abs(c.effect))
        lines.append(f"B's strongest cell beating its null: layer {top.layer}, position {top.position}, "
                     f"{top.effect:+.3g} ({'exact' if top.exact else 'estimated'}).")
    if data.chain:
        lines.append("Chain (decisive cell first): " + ", ".join(f"{k} {layer}:{p} (step {s})"
                                                                 for k, layer, p, s in data.chain) + ".")
    return lines
