"""The causal map view's reader and export table: the pair a selection names, read from the trace's
explanation tables (`inspector.figure_data.causal_map` holds the data and its words)."""

from __future__ import annotations

import numpy as np

from inspector.figure_data.causal_map import SIDES, CausalMapData, chain_side, map_records
from inspector.figure_data.table import (
    BOOLEAN,
    INTEGER,
    LAYER,
    NUMBER,
    POSITION,
    TEXT,
    Column,
    TableSpec,
    finite,
    missing,
)
from inspector.figure_data.tokens import token_labels
from inspector.specs.selection import Selection, SelectionError
from traces.analysis.causal_map import CellEffect, parse_links


def read_causal_map(trace, sel: Selection) -> CausalMapData:
    """The map of run `sel.run`'s row `sel.row` (default: the first pair with a map)."""
    try:
        records, cells = map_records(trace)
    except ValueError as exc:
        raise SelectionError(str(exc)) from None
    if sel.run is not None and sel.run not in trace.run_names:
        raise SelectionError(f"no run {sel.run!r} in {trace.path}")
    chosen = [r for r in records if (sel.run is None or r.run == sel.run)
              and (sel.row is None or r.row == sel.row) and (sel.request is None or r.request == sel.request)]
    if not chosen:
        run = sel.run or (trace.run_names[0] if trace.run_names else "")
        return CausalMapData(run, sel.row or 0, "", -1, sel.request or 0, 0, 0, 0, [],
                             message=f"no causal map stored for {'run ' + run if run else 'this trace'}"
                                     f"{'' if sel.row is None else f' row {sel.row}'}: run "
                                     f"`moe-inspector explain TRACE` to map its splits")
    r = chosen[0]
    key = (r.run, r.row, r.ref_run, r.ref_row)
    found = cells.get(key, [])
    L = max([c.layer + 1 for c in found] + [len(trace.meta.get("moe_layers") or []) or 1])
    T = r.t_star
    effect = np.full((2, L, T), np.nan)
    by_side: dict[str, list[CellEffect]] = {s: [] for s in SIDES}
    for c in found:
        if c.patched in by_side and 0 <= c.position < T:
            by_side[c.patched].append(c)
            effect[SIDES.index(c.patched), c.layer, c.position] = c.effect
    tokens = np.asarray(trace.run(r.run).tokens[r.row, :T]).astype(int).tolist()
    labels = token_labels(trace.vocab, np.asarray(tokens), show_spaces=True)
    data = CausalMapData(r.run, r.row, r.ref_run, r.ref_row, r.request, T, T - r.new_index, L, labels,
                         by_side, effect, (r.map_baseline, r.map_baseline_ref), parse_links(r.map_chain),
                         r.map_outcome())
    sel.positions(max(T, 1))
    return data



MAP_COLUMNS = (
    Column("run", TEXT, "run B: the divergent run of the pair"),
    Column("row", INTEGER, "its batch row"),
    Column("ref_run", TEXT, "run A: its reference"),
    Column("ref_row", INTEGER, "A's batch row"),
    Column("t_star", INTEGER, "first position whose token differs (the split)"),
    Column("patched", TEXT, "B: B's cell set to A's decision; A: A's set to B's"),
    LAYER,
    POSITION,
    Column("step", INTEGER, "forward step that routed the cell in the patched run"),
    Column("prefill", BOOLEAN, "a prompt position (routed in the prompt's step)"),
    Column("changed", INTEGER, "candidates whose expert or kept flag differ between A and B"),
    Column("effect", NUMBER, "change of the patched run's logit difference at t* (the other run's token "
                             "minus its own) when the cell takes the other run's decision"),
    Column("exact", BOOLEAN, "the effect is an exact rerun (false: a first-order estimate)"),
    Column("estimate", NUMBER, "first-order estimate of the effect", empty="no estimate"),
    Column("queue", NUMBER, "exact effect of the queue patch alone (kept flags as the other batch's queue "
                            "set them)", empty="no shared expert's kept flag differs, or not run"),
    Column("percentile", NUMBER, "share of the position-matched null's draws smaller in magnitude (percent)",
           empty="no null"),
    Column("p_value", NUMBER, "corrected p-value against the null (weighted Bonferroni)", empty="no null"),
    Column("beats_null", BOOLEAN, "p_value at most 0.05"),
    Column("null_flip", NUMBER, "share of the null's draws that flip the token", empty="no null"),
    Column("null_exact", BOOLEAN, "the null's draws are exact reruns (else first-order estimates)"),
    Column("null_exceed", NUMBER, "share of the null's draws at least as large in magnitude as the patched "
                                  "run's margin at t* (at its strongest cell, one half or more: a near-tie)",
           empty="no null, or a map stored before this share"),
    Column("chain_link", INTEGER, "the cell's place in the chain from the decisive cell back (0 = decisive)",
           empty="not on the chain"),
)


def _map_values(data: CausalMapData, sel: Selection) -> dict[str, np.ndarray]:
    cells = [c for side in SIDES for c in data.cells.get(side, ())]
    t0, t1 = sel.positions(max(data.n_positions, 1)) if data.n_positions else (0, 0)
    cells = [c for c in cells if t0 <= c.position < t1]
    side_of_chain = chain_side(data)
    link = {(layer, position): i for i, (_, layer, position, _) in enumerate(data.chain)}
    n = len(cells)

    def col(values, dtype):
        return np.array(values, dtype=dtype) if n else np.zeros(0, dtype=dtype)

    chain = [link.get((c.layer, c.position), -1) if c.patched == side_of_chain else -1 for c in cells]
    return {
        "run": col([data.run] * n, object), "row": col([data.row] * n, np.int64),
        "ref_run": col([data.ref_run] * n, object), "ref_row": col([data.ref_row] * n, np.int64),
        "t_star": col([data.t_star] * n, np.int64),
        "patched": col([c.patched for c in cells], object),
        "layer": col([c.layer for c in cells], np.int64),
        "position": col([c.position for c in cells], np.int64),
        "step": col([c.step for c in cells], np.int64), "prefill": col([c.prefill for c in cells], bool),
        "changed": col([c.changed for c in cells], np.int64), "effect": col([c.effect for c in cells], float),
        "exact": col([c.exact for c in cells], bool),
        "estimate": finite(col([c.estimate for c in cells], float)),
        "queue": finite(col([c.queue for c in cells], float)),
        "percentile": finite(col([c.percentile for c in cells], float)),
        "p_value": finite(col([c.p_value for c in cells], float)),
        "beats_null": col([c.beats_null for c in cells], bool),
        "null_flip": finite(col([c.null_flip for c in cells], float)),
        "null_exact": col([c.null_exact for c in cells], bool),
        "null_exceed": finite(col([c.null_exceed for c in cells], float)),
        "chain_link": missing(col(chain, np.int64), col([x < 0 for x in chain], bool)),
    }


map_columns = TableSpec(MAP_COLUMNS, "one row per differing (run patched, layer, position) cell", _map_values)
