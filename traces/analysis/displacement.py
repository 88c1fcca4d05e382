"""Who displaced me: the candidates that took an expert's slots ahead of a dropped candidate.

A candidate's slot is the number of higher-priority candidates of the same (step, group, expert)
(docs/routing.md), counted whether they were kept or not. So the candidates ahead of slot s are exactly
the candidates of that run with the same step, group and expert and a smaller slot; a candidate is
dropped when `slot >= C`. Nothing beyond `step`, `group`, `expert` and `slot` is needed, which is
why the trace stores nothing more (docs/trace-format.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.analysis.rows import LayerArrays
from traces.schema import DROPLESS_CAPACITY


@dataclass(frozen=True)
class Candidate:
    """One candidate of a run at a layer: a token (row, position) and its choice rank."""

    row: int
    position: int
    rank: int
    slot: int
    kept: bool


@dataclass(frozen=True)
class Displacement:
    """The candidate (row, position, rank) of `run` at `layer`, its queue, and who was ahead of it.

    `ahead` lists every candidate with a smaller slot in the same queue, ordered by slot. When the
    trace lacks some of them (pads counted toward capacity are not stored), `len(ahead) < slot`.
    """

    run: str
    layer: int
    row: int
    position: int
    rank: int            # choice rank j (0 = first choice)
    expert: int
    step: int
    group: int
    slot: int
    capacity: int        # C of the group; -2 dropless, -1 unknown group
    kept: bool
    is_probe: bool
    ahead: tuple[Candidate, ...]

    @property
    def ahead_rows(self) -> tuple[int, ...]:
        return tuple(c.row for c in self.ahead)

    @property
    def missing_ahead(self) -> int:
        """Candidates ahead that the trace does not hold (e.g. counted pads)."""
        return max(0, self.slot - len(self.ahead))

    def describe_ahead(self, limit: int = 12) -> str:
        """'rows 3, 3, 7 took slots 0-2 ahead of it' (counted per row when more than `limit`)."""
        if self.slot <= 0:
            return "no candidate was ahead of it"
        slots = "slot 0" if self.slot == 1 else f"slots 0-{self.slot - 1}"
        if not self.ahead:
            return f"{slots} went to candidates not in the trace"
        rows = self.ahead_rows
        if len(rows) <= limit:
            who = ("row " if len(rows) == 1 else "rows ") + ", ".join(str(r) for r in rows)
        else:
            values, counts = np.unique(np.asarray(rows), return_counts=True)
            order = np.lexsort((values, -counts))
            who = "rows " + ", ".join(f"{values[i]} (x{counts[i]})" for i in order)
        tail = f" ({self.missing_ahead} not in the trace)" if self.missing_ahead else ""
        return f"{who}{tail} took {slots} ahead of it"


def displacement(layer: LayerArrays, row: int, position: int, rank: int) -> Displacement:
    """The queue position of candidate (row, position, rank) in `layer` and every candidate ahead."""
    B, T, K = layer.expert.shape
    if not (0 <= row < B and 0 <= position < T and 0 <= rank < K):
        raise ValueError(f"candidate (row {row}, position {position}, rank {rank}) outside "
                         f"run {layer.run!r} (B={B}, T={T}, K={K})")
    e = int(layer.expert[row, position, rank])
    s = int(layer.step[row, position])
    g = int(layer.group[row, position])
    slot = int(layer.slot[row, position, rank])
    if e < 0 or s < 0:
        raise ValueError(f"run {layer.run!r} layer {layer.layer}: row {row} position {position} "
                         f"has no candidate of rank {rank} (not routed)")
    S, G = layer.capacity.shape
    capacity = int(layer.capacity[s, g]) if 0 <= s < S and 0 <= g < G else -1
    same_queue = ((layer.expert == e) & (layer.step == s)[..., None] & (layer.group == g)[..., None]
                  & (layer.slot >= 0) & (layer.slot < slot))  # [B, T, K]
    rows, positions, ranks = np.nonzero(same_queue)
    slots = layer.slot[rows, positions, ranks]
    order = np.argsort(slots, kind="stable")
    ahead = tuple(
        Candidate(row=int(rows[i]), position=int(positions[i]), rank=int(ranks[i]), slot=int(slots[i]),
                  kept=bool(layer.kept[rows[i], positions[i], ranks[i]]))
        for i in order
    )
    return Displacement(
        run=layer.run, layer=layer.layer, row=row, position=position, rank=rank, expert=e, step=s,
        group=g, slot=slot, capacity=capacity, kept=bool(layer.kept[row, position, rank]),
        is_probe=(row == layer.probe_row), ahead=ahead,
    )


def capacity_text(capacity: int) -> str:
    """'capacity 4', 'dropless' or 'capacity unknown'."""
    if capacity == DROPLESS_CAPACITY:
        return "dropless"
    return f"capacity {capacity}" if capacity >= 0 else "capacity unknown"
