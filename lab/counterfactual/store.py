"""The explanation table in the trace: reading an earlier call's records, writing this call's.

The reruns go to `/tables/explain_counterfactual` (columns of `traces.analysis.explain_table`). A
call keeps the records of an earlier call made with the same checkpoint, so `--request`, `--limit`
and an interrupted call complete one table step by step; two calls on one file take turns to write
(the trace's one-writer lock) and each keeps the records the other stored meanwhile. The write
itself holds Ctrl-C back until the table is complete: the file is never left with the old table
deleted and the new one half done.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Sequence

from lab.counterfactual.source import portable_checkpoint
from traces import TraceError, TraceWriter, open_trace
from traces.analysis import ExplainRecord
from traces.analysis.causal_map import CELL_MEANING, MAP_TABLE, MAP_VERSION, cell_columns, cells_from_columns
from traces.analysis.explain_table import from_columns, table_attrs, table_name, to_columns

log = logging.getLogger(__name__)

#: Name of the table the reruns are stored in.
TABLE = table_name("counterfactual")

#: What each counterfactual column says (stored with the table).
COUNTERFACTUAL_MEANING = {
    "dropless_same": "the request's completions in the two batches agree when both are rerun dropless",
    "invariant_same": "they agree when both batches are rerun with batch-invariant kernels",
    "replay_same": "the divergent row, rerun in its batch with the reference's recorded routing forced, "
                   "gives the reference's tokens through the first divergence t*",
    "keep_same": "keeping the first difference's dropped candidate (or giving its group the other run's "
                 "capacity) alone removes the split (-1 when the search did not reach it)",
    "withdraw_same": "withdrawing the displacing rows' candidates from that expert's queue at the first "
                     "difference alone removes the split",
    "logits_same": "giving the row the reference's router logits at the first difference alone removes "
                   "the split",
    "sufficient": "the proven cause: the intervention(s) that alone give the other row's tokens through "
                  "the first split, in words (scope candidate, token or cell: one event; set: a "
                  "1-minimal set found by delta debugging)",
    "proof_kind": "capacity, upstream_numeric, output_numeric or mixed",
    "proof_cells": "layer:position of every event of the proof",
    "necessary": "the split stays when the row replays the reference's routing everywhere except at the "
                 "proof's events",
    "reach": "new tokens that agree with the other row's completion, from the first on, after the "
             "proven intervention (of reach_of)",
    "proof_how": "how the root event changes its run: keep, capacity, withdraw (capacity decisions), "
                 "logits or cell (the router's choice)",
    "proof_run": "the run rerun with the change; it then gives the other run's tokens",
    "alternatives": "of the candidate events before the split (candidates), tried alone in time order, "
                    "how many each suffice; the root event is the earliest (alternative_cells lists them)",
    "map_baseline": "the causal map: B's logit difference at t* (A's token minus B's own), unpatched; "
                    "map_baseline_ref A's (B's token minus A's own)",
    "map_joint": "effect on it of all of B's differing cells set to A's decisions at once (map_joint_ref: "
                 "A's set to B's); map_sum the sum of the single cells' effects",
    "decisive_cells": "cells beating their position-matched null (run:layer:position, strongest first); the "
                      "table explain_causal_map holds every cell",
    "outcome": "near_tie: a run's margin at t* is at most what most random changes of its strongest cell's "
               "size at its position do (tie_share, the share of such null draws at least as large, is at "
               "least 1/2; B's, tie_share_ref A's); decisive: not a near-tie, and the strongest cell beating "
               "its null alone flips its run's token; no_decisive_cell: neither. outcome_cell names the "
               "decisive cell, the tied run's strongest, or the strongest cell beating its null, else the "
               "cell nearest to beating it, with its effect, percentile, corrected p (over "
               "outcome_cells cells), null_flip and outcome_draws",
    "map_chain": "the chain from the decisive cell back: kind:layer:position:step links (decisive, router, "
                 "capacity: a capacity event of the batch, first: the first difference)",
}

#: How the reference of each row is chosen (`lab.counterfactual.pairs`).
REFERENCE_RULE = "first run of each request and condition, in write order"

Key = tuple[str, int, str, int]


def record_key(r: ExplainRecord) -> Key:
    """(run, row, reference run, reference row): one record per compared pair."""
    return (r.run, r.row, r.ref_run, r.ref_row)


def same_checkpoint(attrs: dict, checkpoint: str, digest: str = "") -> bool:
    """Whether a table's attributes name the checkpoint `checkpoint` (content `digest`, '' unknown): the
    same content wherever it lies, or else the same portable name where neither side's content
    differs."""
    stored = str(attrs.get("checkpoint_sha256", ""))
    if stored and digest:
        return stored == digest
    return portable_checkpoint(str(attrs.get("checkpoint"))) == portable_checkpoint(checkpoint)


def earlier_records(trace, checkpoint: str, digest: str = "") -> dict[Key, ExplainRecord]:
    """The records an earlier call stored with the same checkpoint (`same_checkpoint`), for runs the
    trace still holds."""
    if TABLE not in trace.table_names:
        return {}
    columns, attrs = trace.read_table(TABLE)
    if not same_checkpoint(attrs, checkpoint, digest):
        log.info("%s: replacing the explanations made with checkpoint %s", trace.path,
                 attrs.get("checkpoint"))
        return {}
    try:
        records = from_columns(columns)
    except ValueError as exc:
        log.info("%s: replacing an unreadable explanation table (%s)", trace.path, exc)
        return {}
    known = set(trace.run_names)
    return {record_key(r): r for r in records if r.run in known and r.ref_run in known}


def store(path: str, records: Sequence[ExplainRecord], maps: dict | None = None, **attrs) -> None:
    """Write the table (replacing the old one) with `table_attrs` plus `attrs`, and the causal maps'
    cells (`maps`: pair key -> `PairMap`) to `MAP_TABLE`, keeping the stored cells of the other pairs."""
    import torch

    full = table_attrs(torch_version=str(torch.__version__), reference=REFERENCE_RULE,
                       counterfactuals=COUNTERFACTUAL_MEANING, decision="lab.counterfactual.decide",
                       **attrs)
    maps = maps or {}
    with interrupts_deferred(), _one_writer(path) as writer:
        # Another call may have stored its records since this one read the table: keep them.
        with open_trace(path) as trace:
            stored = earlier_records(trace, str(attrs.get("checkpoint", "")),
                                     str(attrs.get("checkpoint_sha256", "")))
            cells = stored_cells(trace) if stored else {}
        merged = {**stored, **{record_key(r): r for r in records}}
        writer.write_table(TABLE, to_columns(list(merged.values())), full)
        kept = {key: _Cells(c) for key, c in cells.items() if key in merged and key not in maps}
        writer.write_table(MAP_TABLE, cell_columns([*kept.items(), *maps.items()]),
                           {"kind": "causal_map", "version": MAP_VERSION, "explain_table": TABLE,
                            "columns": CELL_MEANING})
    log.info("stored %d explanations in %s /tables/%s (%d kept from another call)", len(merged), path,
             TABLE, len(merged) - len(records))


class _Cells:
    """Stored cells of one pair, as `cell_columns` reads a map."""

    def __init__(self, cells):
        self.cells = cells


def stored_cells(trace) -> dict:
    """The causal maps' cells stored in the trace, by pair key (empty when none or unreadable)."""
    if MAP_TABLE not in trace.table_names:
        return {}
    try:
        return cells_from_columns(trace.read_table(MAP_TABLE)[0])
    except ValueError as exc:
        log.info("%s: replacing an unreadable causal map table (%s)", trace.path, exc)
        return {}


#: Seconds a call waits for another call's write to the same trace before it gives up.
WAIT_FOR_WRITER_S = 600.0


@contextlib.contextmanager
def _one_writer(path: str):
    """The trace's writer, waiting while another process writes it (two `explain` calls on one file
    take turns; the second stores its records beside the first's)."""
    deadline = time.monotonic() + WAIT_FOR_WRITER_S
    while True:
        try:
            writer = TraceWriter.append(path)
            break
        except TraceError as exc:
            if "another process is writing" not in exc.expected or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with writer:
        yield writer


@contextlib.contextmanager
def interrupts_deferred():
    """Hold Ctrl-C back until the block ends (main thread only), then raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
