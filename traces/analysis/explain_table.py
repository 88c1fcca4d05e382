"""Explanation tables: verdicts as equal-length columns for `TraceWriter.write_table`, and back.

One record per (run, row) compared against a reference row of the same request. The counterfactual
reruns (docs/experiments.md: the same batch dropless, with batch-invariant kernels, and run B
forced to replay run A's routing) are filled in later by the explain command; until then their
columns hold -1. Table names are `explain_<label>`.

Version 3 adds the proven cause (`traces.analysis.proof`): the proof's kind, its (layer, position)
cells, how many events it holds, how many reruns it took, whether it is necessary, and its reach.
Tables of versions 1 and 2 are read with those columns empty (no proof stored).

Version 4 adds the root-event scan: how the root event changes its run (`proof_how`), which run is
changed (`proof_run`), how many candidate events were scanned, how many of them each suffice alone
and where (the alternatives), the placebo share at the root's cell (specificity), and the chain of
later cells that restores more of the completion (`traces.analysis.proof.chain_text`). Older tables
are read with those columns empty (-1, '').

Version 5 replaces the root-event scan, its placebo and its chain by the causal map
(`traces.analysis.causal_map`): the pair's logit differences at t* in both runs, the joint and summed
single-cell effects, the cells beating their position-matched null, whether the pair is a near-tie,
the null's flip rate, the chain back to the batch and the map's seconds. Each cell's effect is stored
in the table `explain_causal_map` beside it. The scan's columns (`candidates` .. `chain_end`) are
kept for older tables and hold their empty values (-1, '') in version 5. The first bitwise
difference's columns are named `first_kind`, `first_position`, `first_layer` (versions 1-4:
`root_kind`, `root_position`, `root_layer`, read under the new names).

Version 6 replaces `near_tie` (no cell beats its null: wrong both ways) by the map's outcome
(`traces.analysis.map_outcome`): `outcome` (near_tie, decisive, no_decisive_cell), each run's
near-tie share and its draws (`tie_share`, `tie_draws`; `_ref` for A), and the cell the outcome
names with its effect, percentile, corrected p, the count of cells it was corrected over and its
null's draws; `null_flip` is that cell's. A version-5 table is read with `outcome` '' (not stated:
its cells lack the near-tie share; `explain --redo` re-makes it) and its other map columns kept.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from traces.analysis.cause_table import CauseName, unexplained
from traces.analysis.map_outcome import Outcome, PairOutcome, TieTest
from traces.analysis.proof import EventKind, parse_cells
from traces.analysis.reproduction import Level
from traces.analysis.summary import CauseSummary, summarize_causes
from traces.analysis.verdict import Verdict

TABLE_PREFIX = "explain_"
TABLE_KIND = "explain"
TABLE_VERSION = 6
#: Columns a version-1 table lacks; `from_columns` fills them in (`_version1_defaults`).
_ADDED_IN_2 = ("reproduction", "drift", "keep_same", "withdraw_same", "logits_same", "sufficient", "scope",
               "proof_step", "proof_layer", "proof_position")
#: Columns a version-2 table lacks (`_version2_defaults`).
_ADDED_IN_3 = ("proof_kind", "proof_cells", "proof_size", "proof_reruns", "necessary", "reach", "reach_of")
#: Columns a version-3 table lacks (`_version3_defaults`).
_ADDED_IN_4 = ("proof_how", "proof_run", "candidates", "candidates_all", "alternatives", "alternative_cells",
               "placebo", "chain_cells", "chain_reach", "chain_end")
#: Columns a version-4 table lacks (`_version4_defaults`).
_ADDED_IN_5 = ("map_baseline", "map_baseline_ref", "map_joint", "map_joint_ref", "map_sum", "map_sum_ref",
               "map_cells", "map_exact", "decisive_cells", "null_flip", "concentration",
               "map_chain", "map_seconds")
#: Columns a version-5 table lacks (`_version5_defaults`); it held `near_tie` instead, which is dropped.
_ADDED_IN_6 = ("outcome", "tie_share", "tie_share_ref", "tie_draws", "tie_draws_ref", "outcome_cell",
               "outcome_effect", "outcome_percentile", "outcome_p", "outcome_cells", "outcome_draws")
#: Columns renamed in version 5 (old name -> new name).
_RENAMED_IN_5 = {"root_kind": "first_kind", "root_position": "first_position", "root_layer": "first_layer"}

#: Encoding of the counterfactual columns (int8): the rerun's completion equals the reference's.
COUNTERFACTUAL_CODES = {None: -1, False: 0, True: 1}


@dataclass(frozen=True)
class ExplainRecord:
    """One row of an explanation table (a flat, storable view of a `Verdict` plus counterfactuals)."""

    run: str
    row: int
    ref_run: str
    ref_row: int
    request: int
    probe: bool
    t_star: int            # first differing position, -1 none
    new_index: int         # t* among the new tokens, -1 none
    token: int
    ref_token: int
    cause: str
    position: int          # of the cause event
    layer: int             # of the cause event; -1 logits stage or none
    first_kind: str        # first bitwise difference ('' none)
    first_position: int
    first_layer: int
    rank: int              # choice rank at the event, -1 none
    router_margin: float
    router_delta: float
    logit_margin: float
    logit_delta: float
    dropped_in: str        # run that dropped the candidate (capacity), '' otherwise
    capacity: int          # of the dropped candidate's group, -1 n/a
    group: int
    step: int
    slot: int
    displacing_rows: str   # rows ahead of the dropped candidate in slot order, space separated
    sentence: str
    dropless_same: bool | None = None    # same batch, dropless: completion equals the reference's
    invariant_same: bool | None = None   # same batch, batch-invariant kernels
    replay_same: bool | None = None      # forced to replay the reference's routing
    confirmed_cause: str = ""            # cause the counterfactuals confirm ('' not yet settled)
    reproduction: str = ""               # level the reruns reproduced the runs at: bitwise, decisions,
                                         # not_reproduced ('' not rerun); see traces.analysis.reproduction
    drift: str = ""                      # float drift of those reruns ('' none or not rerun)
    keep_same: bool | None = None        # single event: keeping the dropped candidate removes the split
    withdraw_same: bool | None = None    # single event: withdrawing the displacing rows removes it
    logits_same: bool | None = None      # single event: the reference's router logits remove it
    sufficient: str = ""                 # the proven intervention(s) that remove the split, in words
    scope: str = ""                      # candidate, token, cell (one event), set (several); version 2
                                         # also step_layer and step ('' none found)
    proof_step: int = -1                 # the proof's lead event: forward step, MoE layer, position
    proof_layer: int = -1                # (-1 n/a); the event the views point at
    proof_position: int = -1
    proof_kind: str = ""                 # capacity, upstream_numeric, output_numeric, mixed ('' none)
    proof_cells: str = ""                # every event's 'layer:position', space separated
    proof_size: int = 0                  # events in the proof (1 single, more a 1-minimal set)
    proof_reruns: int = -1               # reruns the search took for this pair (-1 not recorded)
    necessary: bool | None = None        # the split stays with the reference's routing everywhere else
    reach: int = -1                      # new tokens agreeing with the other run after the intervention,
                                         # from the first on (-1 not measured)
    reach_of: int = -1                   # of how many new tokens
    proof_how: str = ""                  # how a single-event proof changes its run: keep, capacity,
                                         # withdraw, logits, cell ('' a set or none); version 4
    proof_run: str = ""                  # the run rerun with the change (it then gives the other's tokens)
    candidates: int = -1                 # candidate events the scan tried alone (-1 not stored)
    candidates_all: int = -1             # candidate events before t* (more than tried: the scan's budget)
    alternatives: int = -1               # of which each suffices alone (-1 not stored)
    alternative_cells: str = ""          # their 'layer:position' cells in time order, space separated
    placebo: float = -1.0                # share of random routings at the root's cell that also restore
                                         # (-1 not measured)
    chain_cells: str = ""                # the chain's links of later cells: "l:p+l:p l:p", in order
    chain_reach: str = ""                # reach after each of them, space separated
    chain_end: str = ""                  # whole, no_cells, budget ('' no chain searched)
    map_baseline: float = float("nan")   # causal map (version 5): B's logit difference at t*, A's token
                                         # minus its own, unpatched (nan: no map)
    map_baseline_ref: float = float("nan")   # A's, B's token minus its own
    map_joint: float = float("nan")      # effect on B's of all differing cells set to A's at once
    map_joint_ref: float = float("nan")  # on A's, all set to B's
    map_sum: float = float("nan")        # sum of B's single-cell effects
    map_sum_ref: float = float("nan")
    map_cells: int = -1                  # differing cells of B before t* (-1 no map; 0 none to map)
    map_exact: int = -1                  # cells of both runs patched exactly
    decisive_cells: str = ""             # cells beating their null, strongest first: "B:layer:position"
    null_flip: float = float("nan")      # share of the null's draws that flip the token at outcome_cell
    concentration: float = float("nan")  # share of B's summed |single effects| in its strongest cell
    map_chain: str = ""                  # the chain: "kind:layer:position:step" links, decisive cell first
    map_seconds: float = -1.0            # seconds the map took
    outcome: str = ""                    # the map's outcome (version 6): near_tie, decisive,
                                         # no_decisive_cell ('' no map, or a version-5 map: not stated)
    tie_share: float = float("nan")      # share of the null draws at B's strongest cell at least |B's
                                         # baseline| (at least 1/2: a near-tie of B's token)
    tie_share_ref: float = float("nan")  # A's
    tie_draws: int = 0                   # the draws of B's share
    tie_draws_ref: int = 0               # A's
    outcome_cell: str = ""               # the cell the outcome names: "B:layer:position" (the decisive
                                         # cell, the tied run's strongest, or the nearest to its null)
    outcome_effect: float = float("nan")     # its effect
    outcome_percentile: float = float("nan")
    outcome_p: float = float("nan")      # its corrected p
    outcome_cells: int = 0               # cells of its run the correction counts (-1: a version-5 map,
                                         # whose outcome was never tested)
    outcome_draws: int = 0               # its null's draws (those of null_flip)
    def map_outcome(self) -> PairOutcome | None:
        """The causal map's outcome as stored (None: no map, or no cell to map)."""
        if self.map_cells <= 0:
            return None
        ties = (TieTest(self.map_baseline, self.tie_share, self.tie_draws),
                TieTest(self.map_baseline_ref, self.tie_share_ref, self.tie_draws_ref))
        return PairOutcome(self.outcome, ties, self.outcome_cell, self.outcome_effect,
                           self.outcome_percentile, self.outcome_p, self.outcome_cells, self.null_flip,
                           self.outcome_draws)

    @property
    def outcome_untested(self) -> bool:
        """A map stored before its outcome was tested (a version-5 table): `explain --redo` states it."""
        return self.map_cells > 0 and self.outcome_cells < 0

    @property
    def proven(self) -> bool:
        """Whether an event or a minimal set of events is proven to carry the split."""
        return self.proof_size > 0 and self.proof_position >= 0

    @classmethod
    def from_verdict(cls, v: Verdict, vocab: list[str] | None = None) -> ExplainRecord:
        d = v.displacement
        root = v.root
        return cls(
            run=v.run, row=v.row, ref_run=v.ref_run, ref_row=v.ref_row, request=v.request, probe=v.is_probe,
            t_star=v.t_star, new_index=v.new_index, token=v.token, ref_token=v.ref_token, cause=v.cause,
            position=v.position, layer=v.layer, first_kind=root.kind if root else "",
            first_position=root.position if root else -1, first_layer=root.layer if root else -1,
            rank=v.rank, router_margin=v.router_margin, router_delta=v.router_delta,
            logit_margin=v.logit_margin, logit_delta=v.logit_delta, dropped_in=v.dropped_in,
            capacity=d.capacity if d else -1, group=d.group if d else -1, step=d.step if d else -1,
            slot=d.slot if d else -1, displacing_rows=" ".join(str(r) for r in d.ahead_rows) if d else "",
            sentence=v.describe(vocab),
        )

    @property
    def diverged(self) -> bool:
        return self.t_star >= 0


_FIELDS = dataclasses.fields(ExplainRecord)
#: Column order of the table.
COLUMNS: tuple[str, ...] = tuple(f.name for f in _FIELDS)
_KINDS = {"str": "str", "int": "int", "bool": "bool", "float": "float", "bool | None": "counterfactual"}


def _kind(name: str) -> str:
    field = next(f for f in _FIELDS if f.name == name)
    return _KINDS[str(field.type)]


def table_name(label: str) -> str:
    """`explain_<label>` with anything but letters, digits, '-', '.' and '_' turned into '_'."""
    clean = re.sub(r"[^A-Za-z0-9_.\-]+", "_", label.strip()).strip("_")
    if not clean:
        raise ValueError(f"table label {label!r} has no usable characters")
    return TABLE_PREFIX + clean


def table_attrs(**extra) -> dict:
    """Attributes stored with an explanation table (kind, version, counterfactual encoding, extras)."""
    return {"kind": TABLE_KIND, "version": TABLE_VERSION,
            "counterfactual_encoding": "1 same completion as the reference, 0 different, -1 not run",
            **extra}


def to_columns(records: Sequence[ExplainRecord]) -> dict[str, np.ndarray]:
    """Equal-length 1-D columns (str, int32, float64, bool; counterfactuals int8) in `COLUMNS` order."""
    columns: dict[str, np.ndarray] = {}
    for name in COLUMNS:
        values = [getattr(r, name) for r in records]
        kind = _kind(name)
        if kind == "str":
            columns[name] = np.array(values, dtype=np.str_) if values else np.zeros(0, dtype="<U1")
        elif kind == "int":
            columns[name] = np.array(values, dtype=np.int32)
        elif kind == "float":
            columns[name] = np.array(values, dtype=np.float64)
        elif kind == "bool":
            columns[name] = np.array(values, dtype=bool)
        else:
            columns[name] = np.array([COUNTERFACTUAL_CODES[v] for v in values], dtype=np.int8)
    return columns


def from_columns(columns: Mapping[str, np.ndarray]) -> list[ExplainRecord]:
    """Records from columns as `to_columns` writes them (or a reader returns them: str or bytes).

    Raises ValueError naming a missing column, unequal lengths or a bad counterfactual code.
    """
    columns = {_RENAMED_IN_5.get(name, name): values for name, values in columns.items()}
    added = (*_ADDED_IN_2, *_ADDED_IN_3, *_ADDED_IN_4, *_ADDED_IN_5, *_ADDED_IN_6)
    missing = [name for name in COLUMNS if name not in columns and name not in added]
    if missing:
        raise ValueError(f"explanation table lacks column(s) {', '.join(missing)}")
    columns = {**_version1_defaults(columns), **_version2_defaults(columns), **_version3_defaults(columns),
               **_version4_defaults(columns), **_version5_defaults(columns), **columns}
    lengths = {name: len(columns[name]) for name in COLUMNS}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"explanation table columns differ in length: {lengths}")
    decoded: dict[str, list] = {}
    for name in COLUMNS:
        kind = _kind(name)
        values = list(np.asarray(columns[name]).tolist())
        if kind == "str":
            decoded[name] = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]
        elif kind == "int":
            decoded[name] = [int(v) for v in values]
        elif kind == "float":
            decoded[name] = [float(v) for v in values]
        elif kind == "bool":
            decoded[name] = [bool(v) for v in values]
        else:
            bad = [v for v in values if v not in (-1, 0, 1)]
            if bad:
                raise ValueError(f"explanation column {name} holds {bad[0]}; expected -1, 0 or 1")
            decoded[name] = [None if v == -1 else bool(v) for v in values]
    # How an event changes its run, as one vocabulary: older spellings (remove_rows, router_logits) read
    # as today's; a name this version does not know is kept as stored.
    decoded["proof_how"] = [EventKind.read(v, v) for v in decoded["proof_how"]]
    # An outcome this version does not know reads as not stated.
    decoded["outcome"] = [str(Outcome.read(v, "")) for v in decoded["outcome"]]
    n = next(iter(lengths.values()))
    return [ExplainRecord(**{name: decoded[name][i] for name in COLUMNS}) for i in range(n)]


def _version1_defaults(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns a version-1 table lacks. Version 1 confirmed a cause only after both runs were
    reproduced bit for bit, so its confirmed records were reproduced `bitwise`."""
    confirmed = [c.decode() if isinstance(c, bytes) else str(c)
                 for c in np.asarray(columns["confirmed_cause"]).tolist()]
    level = ["" if c == "" else Level.NOT_REPRODUCED if c == CauseName.NOT_REPRODUCED else Level.BITWISE
             for c in confirmed]
    empty = np.array([""] * len(level), dtype=np.str_)
    not_run = np.full(len(level), -1, dtype=np.int8)
    none = np.full(len(level), -1, dtype=np.int32)
    return {"reproduction": np.array(level, dtype=np.str_), "drift": empty, "sufficient": empty,
            "scope": empty,
            "keep_same": not_run, "withdraw_same": not_run, "logits_same": not_run, "proof_step": none,
            "proof_layer": none, "proof_position": none}


def _version2_defaults(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns a version-2 (or 1) table lacks: no proof stored. A version-2 proof at one event
    keeps its `proof_step`, `proof_layer` and `proof_position`; its size is 1 where it names one."""
    n = len(np.asarray(columns["confirmed_cause"]))
    positions = np.asarray(columns.get("proof_position", np.full(n, -1)))
    scope = [v.decode() if isinstance(v, bytes) else str(v)
             for v in np.asarray(columns.get("scope", np.array([""] * n))).tolist()]
    size = [1 if p >= 0 and s in ("candidate", "token", "step_layer") else 0
            for p, s in zip(positions.tolist(), scope, strict=True)]
    empty = np.array([""] * n, dtype=np.str_)
    return {"proof_kind": empty, "proof_cells": empty, "proof_size": np.array(size, dtype=np.int32),
            "proof_reruns": np.full(n, -1, dtype=np.int32), "necessary": np.full(n, -1, dtype=np.int8),
            "reach": np.full(n, -1, dtype=np.int32), "reach_of": np.full(n, -1, dtype=np.int32)}


def _version3_defaults(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns a version-3 (or older) table lacks: no root-event scan stored."""
    n = len(np.asarray(columns["confirmed_cause"]))
    empty = np.array([""] * n, dtype=np.str_)
    none = np.full(n, -1, dtype=np.int32)
    tried = np.asarray(columns.get("candidates", none))   # a table written before the scan's budget
    return {"proof_how": empty, "proof_run": empty, "candidates": none, "candidates_all": tried,
            "alternatives": none,
            "alternative_cells": empty, "placebo": np.full(n, -1.0), "chain_cells": empty,
            "chain_reach": empty, "chain_end": empty}


def _version4_defaults(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns a version-4 (or older) table lacks: no causal map stored."""
    n = len(np.asarray(columns["confirmed_cause"]))
    nan = np.full(n, np.nan)
    empty = np.array([""] * n, dtype=np.str_)
    none = np.full(n, -1, dtype=np.int32)
    return {"map_baseline": nan, "map_baseline_ref": nan, "map_joint": nan, "map_joint_ref": nan,
            "map_sum": nan, "map_sum_ref": nan, "map_cells": none, "map_exact": none, "decisive_cells": empty,
            "null_flip": nan, "concentration": nan, "map_chain": empty, "map_seconds": np.full(n, -1.0)}


def _version5_defaults(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns a version-5 (or older) table lacks: the map's outcome is not stated."""
    n = len(np.asarray(columns["confirmed_cause"]))
    nan = np.full(n, np.nan)
    empty = np.array([""] * n, dtype=np.str_)
    zero = np.zeros(n, dtype=np.int32)
    return {"outcome": empty, "tie_share": nan, "tie_share_ref": nan, "tie_draws": zero,
            "tie_draws_ref": zero,
            "outcome_cell": empty, "outcome_effect": nan, "outcome_percentile": nan, "outcome_p": nan,
            "outcome_cells": np.full(n, -1, dtype=np.int32), "outcome_draws": zero}


def outcome_fields(o: PairOutcome | None) -> dict[str, Any]:
    """The version-6 columns of a map's outcome (their empty values for None: nothing tested)."""
    if o is None:
        return {name: getattr(ExplainRecord, name) for name in _ADDED_IN_6} | {"null_flip": float("nan")}
    b, a = o.ties
    return {"outcome": o.kind, "tie_share": b.share, "tie_share_ref": a.share, "tie_draws": b.draws,
            "tie_draws_ref": a.draws, "outcome_cell": o.cell, "outcome_effect": o.effect,
            "outcome_percentile": o.percentile, "outcome_p": o.p_value, "outcome_cells": o.cells,
            "outcome_draws": o.null_draws, "null_flip": o.null_flip}


def with_counterfactuals(record: ExplainRecord, *, dropless_same: bool | None = None,
                         invariant_same: bool | None = None, replay_same: bool | None = None,
                         confirmed_cause: str | None = None) -> ExplainRecord:
    """A copy of `record` with the counterfactual results given (the others kept)."""
    changes: dict[str, Any]
    changes = {k: v for k, v in (("dropless_same", dropless_same), ("invariant_same", invariant_same),
                                 ("replay_same", replay_same), ("confirmed_cause", confirmed_cause))
               if v is not None}
    return dataclasses.replace(record, **changes)


def evidence_rank(record: ExplainRecord) -> int:
    """How strong a record's confirmation is: 0 nothing confirmed (not rerun, not reproduced, or
    unexplained); else 2 for a cause confirmed on bitwise reruns, 1 on reruns that took the same
    decisions with float drift, plus 2 when an event is proven, and 2 more when the proof comes from
    the complete search (version 3: every single event, then a minimal set, with necessity and reach),
    and 8 more with a causal map (version 5). A proof weighs more than bitwise reruns without one, a
    map more than a proof without one. A rerun never replaces a record of a higher rank."""
    if not record.confirmed_cause or record.confirmed_cause in unexplained():
        return 0
    level = 1 if record.reproduction == Level.DECISIONS else 2
    mapped = 8 if record.map_cells >= 0 else 0
    if not record.proven:
        return level + mapped
    return level + (4 if record.proof_reruns >= 0 else 2) + mapped


def proof_cells(record: ExplainRecord) -> list[tuple[int, int]]:
    """(layer, position) of every event of the record's proof (the lead event for a version-2 one)."""
    if record.proof_cells:
        return parse_cells(record.proof_cells)
    return [(record.proof_layer, record.proof_position)] if record.proven and record.proof_layer >= 0 else []


def summarize_records(records: Sequence[ExplainRecord]) -> CauseSummary:
    """Cause summary of a table: the confirmed cause where the counterfactuals settled one."""
    return summarize_causes((r.confirmed_cause or r.cause for r in records), (r.diverged for r in records))
