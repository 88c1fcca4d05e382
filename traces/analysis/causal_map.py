"""The causal map of a divergent pair as data: graded effects of routing cells on the split, their
nulls, the chain back to the batch, and the words for them.

The map is computed by `lab.counterfactual.causal_map`; its data (`CellEffect`, `ChainLink`,
`PairMap`) is `traces.analysis.map_cells`; this module stores, reads and words it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np

from traces.analysis.map_cells import CellEffect, ChainLink, PairMap
from traces.analysis.map_outcome import Outcome, PairOutcome, outcome_text, pair_outcome
from traces.analysis.verdict_text import RunLabel, run_label


def map_text(m: PairMap, run: str, ref_run: str, label: RunLabel = run_label) -> str:
    """The map and its outcome in plain words, naming run A (`ref_run`) and B (`run`)."""
    a, b = label(ref_run), label(run)
    if not m.cells:
        return "Causal map: no routing decision differs before the split."
    base = m.baseline.get("B", math.nan)
    head = (f"Causal map: at the split (position {m.t_star}) {b} prefers its own token by "
            f"{-base:.3g} logits over {a}'s.")
    o = pair_outcome(m)
    if o is None:
        return f"{head} No null was tested, so no outcome is stated. {joint_text(m)}".strip()
    beating = m.decisive()
    said = outcome_text(o, a, b, (f"{beating[0].patched}:{beating[0].where()}", beating[0].p_value)
                        if beating else None)
    if o.kind == Outcome.DECISIVE:
        said = f"Decisive. {chain_text(m, a, b)} {said}"
    return f"{head} {said} {joint_text(m)}".strip()


def chain_text(m: PairMap, a: str, b: str) -> str:
    """The chain from the batch to the token in words ('' when there is none)."""
    top = m.decisive()[0]
    patched, other = (b, a) if top.patched == "B" else (a, b)
    tested = sum(1 for c in m.cells if c.patched == top.patched and not math.isnan(c.p_value))
    head = (f"The decisive cell is layer {top.layer}, position {top.position}: {other}'s decision there "
            f"moves {patched}'s logit difference by {top.effect:+.3g} "
            f"({'exact' if top.exact else 'estimated'}, above {top.percentile:.1f}% of its null's "
            f"{top.null_draws} draws, corrected p {top.p_value:.2g} over {patched}'s {tested} cells).")
    if not m.chain:
        return head
    steps = []
    for link in m.chain[1:]:
        if link.kind == "capacity":
            steps.append(f"at step {link.step}, layer {link.layer}, the batch's queue decided position "
                         f"{link.position} differently (a capacity event)")
        elif link.kind == "first":
            steps.append(f"layer {link.layer}, position {link.position} is where the decisions first differ")
        else:
            steps.append(f"layer {link.layer}, position {link.position} moves the next router margin by "
                         f"{link.effect:+.2g}")
    if not steps:
        return head
    end = " It reaches a capacity event of the batch." if m.reaches_batch() else ""
    return f"{head} Back from it (estimated): {'; '.join(steps)}.{end}"


def joint_text(m: PairMap) -> str:
    j, s = m.joint.get("B", math.nan), m.sum_singles.get("B", math.nan)
    if math.isnan(j):
        return ""
    return f"All differing cells together move it by {j:+.3g} (the single cells sum to {s:+.3g})."


#: The table of every pair's cells, beside the explanation table (`MAP_TABLE`).
MAP_TABLE = "explain_causal_map"
#: Its columns: the pair, then `CellEffect`'s fields.
PAIR_COLUMNS = ("run", "row", "ref_run", "ref_row")
CELL_COLUMNS = PAIR_COLUMNS + tuple(f.name for f in dataclasses.fields(CellEffect))
#: The map table's version, and the column version 1 lacks (read as nan).
MAP_VERSION = 2
ADDED_IN_2 = ("null_exceed",)
_INT = ("row", "ref_row", "layer", "position", "step", "changed", "null_draws")
_BOOL = ("prefill", "exact", "null_exact")
_STR = ("run", "ref_run", "patched")

#: What each column of the map's table says (stored with it; docs/export.md).
CELL_MEANING = {
    "patched": "the run whose row is patched: B (the divergent run) toward A's decisions, or A toward B's",
    "layer": "MoE layer of the cell", "position": "token position of the cell in its own sequence",
    "step": "forward step that routed it in the patched run", "prefill": "routed in the prompt's step",
    "changed": "candidates whose expert or kept flag differ between the runs",
    "estimate": "first-order estimate of the effect (gradient times the patch's change of the MoE output)",
    "effect": "change of the logit difference at t* (other run's token minus own) when the cell's decision "
              "is set to the other run's: exact where `exact`, else the estimate",
    "exact": "the effect is an exact rerun (teacher-forced, recorded batch and steps)",
    "queue": "exact effect of the queue patch alone (kept flags as the other batch's queue set them; "
             "nan: not applicable or not run)",
    "percentile": "share of the position-matched null's draws smaller in magnitude (percent)",
    "p_value": "share of null draws at least as large, corrected (weighted Bonferroni: classes, cells)",
    "null_flip": "share of the null's draws that flip the token", "null_draws": "null draws",
    "null_exact": "the null's draws are exact reruns (decode cells), else first-order estimates",
    "null_exceed": "share of the null's draws at least as large in magnitude as the patched run's margin at "
                   "t* (|baseline|): at least one half at the strongest cell makes the pair a near-tie "
                   "(version 2; nan: no null, or an older table)",
}


def cell_columns(maps: Sequence[tuple[tuple[str, int, str, int], PairMap]]) -> dict[str, np.ndarray]:
    """Columns of the map table for (pair key, map) items."""
    rows = [(key, c) for key, m in maps for c in m.cells]
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(PAIR_COLUMNS):
        out[name] = _column(name, [key[i] for key, _ in rows])
    for name in CELL_COLUMNS[len(PAIR_COLUMNS):]:
        out[name] = _column(name, [getattr(c, name) for _, c in rows])
    return out


def _column(name: str, values: list) -> np.ndarray:
    if name in _STR:
        return np.array(values, dtype=np.str_) if values else np.zeros(0, dtype="<U1")
    if name in _INT:
        return np.array(values, dtype=np.int32)
    if name in _BOOL:
        return np.array(values, dtype=bool)
    return np.array(values, dtype=np.float64)


PairKey = tuple[str, int, str, int]


def cells_from_columns(columns: Mapping[str, np.ndarray]) -> dict[PairKey, list[CellEffect]]:
    """The map table's cells by pair key; ValueError naming a missing column or unequal lengths."""
    if ADDED_IN_2[0] not in columns and len(columns):     # version 1: no near-tie share stored
        n = len(np.asarray(next(iter(columns.values()))))
        columns = {**columns, ADDED_IN_2[0]: np.full(n, np.nan)}
    missing = [c for c in CELL_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"causal map table lacks column(s) {', '.join(missing)}")
    lengths = {len(columns[c]) for c in CELL_COLUMNS}
    if len(lengths) > 1:
        raise ValueError("causal map table columns differ in length")
    values: dict[str, list] = {}
    for name in CELL_COLUMNS:
        raw = np.asarray(columns[name]).tolist()
        if name in _STR:
            values[name] = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in raw]
        elif name in _INT:
            values[name] = [int(v) for v in raw]
        elif name in _BOOL:
            values[name] = [bool(v) for v in raw]
        else:
            values[name] = [float(v) for v in raw]
    out: dict[tuple[str, int, str, int], list[CellEffect]] = {}
    for i in range(lengths.pop() if lengths else 0):
        key = cast("tuple[str, int, str, int]", tuple(values[n][i] for n in PAIR_COLUMNS))
        cell = CellEffect(**{n: values[n][i] for n in CELL_COLUMNS[len(PAIR_COLUMNS):]})
        out.setdefault(key, []).append(cell)
    return out


def format_decisive(m: PairMap) -> str:
    """'B:3:28 A:1:28': the cells beating their null, strongest first."""
    return " ".join(f"{c.patched}:{c.layer}:{c.position}" for c in m.decisive())


def format_links(links: Sequence[ChainLink]) -> str:
    """'decisive:3:28:1 router:1:28:1 capacity:0:28:1' (kind:layer:position:step)."""
    return " ".join(f"{k.kind}:{k.layer}:{k.position}:{k.step}" for k in links)


def parse_links(text: str) -> list[tuple[str, int, int, int]]:
    """(kind, layer, position, step) of each link of a `map_chain` column."""
    out = []
    for part in text.split():
        kind, layer, position, step = part.split(":")
        out.append((kind, int(layer), int(position), int(step)))
    return out


#: What a map stored before its outcome was tested says instead (an explanation table of version 5).
UNSTATED = ("whether the pair is a near-tie is not stated: this map predates that test "
            "(`moe-inspector explain TRACE --redo` states it)")


def record_headline(o: PairOutcome | None, decisive_cells: str, map_chain: str) -> str:
    """The causal map of a stored record in plain words with A and B ('' when it holds no map): the
    chain from the batch to the token of a decisive pair, or the outcome."""
    if o is None:
        return ""
    if not o.kind and o.cells >= 0:     # mapped, but no null was tested (a model without estimates)
        return "Causal map: no null was tested, so no outcome is stated."
    if o.kind and o.kind != Outcome.DECISIVE:
        beats = (decisive_cells.split()[0], math.nan) if decisive_cells else None
        return f"Causal map: {outcome_text(o, 'A', 'B', beats, brief=True)}"
    if not decisive_cells:
        return f"Causal map: no cell beats its null; {UNSTATED}." if not o.kind else ""
    run, layer, position = decisive_cells.split()[0].split(":")
    other = "A" if run == "B" else "B"
    links = parse_links(map_chain)
    words = []
    for kind, link_layer, link_position, step in reversed(links):
        if kind == "capacity":
            words.append(f"at step {step}, layer {link_layer}, the batch's queue decided {run}'s position "
                         f"{link_position} differently from {other}'s (a capacity event)")
        elif kind == "first" and (link_layer, link_position) != (int(layer), int(position)):
            words.append(f"{run}'s routing first differs from {other}'s at position {link_position}, layer "
                         f"{link_layer}")
        elif kind == "router":
            words.append(f"that moved {run}'s router at position {link_position}, layer {link_layer}")
    lead = "so " if words else ""
    tested = (f" (by {o.effect:+.3g} logits, corrected p {o.p_value:.2g} over {run}'s {o.cells} cells, "
              f"{o.null_draws} draws)") if o.kind and o.cell == decisive_cells.split()[0] else ""
    words.append(f"{lead}{run}'s routing of position {position}, layer {layer} differs from {other}'s, and "
                 f"{other}'s there would move {run}'s token toward {other}'s more than a random change does"
                 f"{tested}")
    text = "; ".join(words)
    after = f" {outcome_text(o, 'A', 'B')}" if o.kind else f" {UNSTATED[0].upper()}{UNSTATED[1:]}."
    return f"Causal map: decisive. {text[0].upper()}{text[1:]}.{after}"
