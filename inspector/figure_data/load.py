"""Data of the expert-load figure: who filled each expert's buffer at one (step, layer, group).

The numbers come from `traces.analysis.load` (requested against kept per expert from the stored
loads, each row's share from the per-token routing); this module picks one group and lays the
counts out as [B, E] for stacked bars.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inspector.figure_data.table import BOOLEAN, INTEGER, REQUEST, Column, missing
from traces.analysis.load import ExpertLoad, expert_load
from traces.analysis.rows import LayerArrays
from traces.schema import ABSENT_GROUP, DROPLESS_CAPACITY


@dataclass(frozen=True)
class LoadData:
    """Load of every expert in one group of one step at one layer."""

    run: str
    step: int
    layer: int
    group: int
    groups: list[int]        # groups present at this (step, layer)
    probe_row: int           # -1 when the run has no probe
    request_ids: np.ndarray  # [B]
    requested: np.ndarray    # [E] candidates sent to each expert (load tables)
    kept: np.ndarray         # [E] candidates each expert accepted (load tables)
    capacity: int            # C of this group; -2 dropless
    row_kept: np.ndarray     # [B, E] kept candidates of each row (routing arrays)
    row_dropped: np.ndarray  # [B, E] dropped candidates of each row (routing arrays)

    @property
    def n_experts(self) -> int:
        return int(self.requested.shape[0])

    @property
    def dropped(self) -> np.ndarray:
        """[E] candidates each expert refused."""
        return self.requested - self.kept

    @property
    def consistent(self) -> bool:
        """Whether the routing arrays add up to the load tables (they must, for a sound trace)."""
        return bool(np.array_equal(self.row_kept.sum(axis=0), self.kept)
                    and np.array_equal((self.row_kept + self.row_dropped).sum(axis=0), self.requested))

    def to_columns(self) -> dict[str, np.ndarray]:
        """One row per (row, expert) with the expert's totals: the values of `COLUMNS`."""
        B, E = self.row_kept.shape
        dropless = self.capacity == DROPLESS_CAPACITY
        return {
            "row": np.repeat(np.arange(B), E),
            "request": np.repeat(np.asarray(self.request_ids, dtype=np.int64), E),
            "probe": np.repeat(np.arange(B) == self.probe_row, E),
            "expert": np.tile(np.arange(E), B),
            "row_kept": self.row_kept.reshape(-1),
            "row_dropped": self.row_dropped.reshape(-1),
            "expert_requested": np.tile(self.requested, B),
            "expert_kept": np.tile(self.kept, B),
            "capacity": missing(np.full(B * E, self.capacity, dtype=np.int64),
                                np.full(B * E, self.capacity < 0)),
            "dropless": np.full(B * E, dropless),
        }


#: The load table's columns after its context: one row per (batch row, expert).
COLUMNS = (
    Column("row", INTEGER, "batch row"),
    REQUEST,
    Column("probe", BOOLEAN, "the row is the run's probe"),
    Column("expert", INTEGER, "expert id"),
    Column("row_kept", INTEGER, "the row's candidates the expert kept in this group and step"),
    Column("row_dropped", INTEGER, "the row's candidates the expert dropped in this group and step"),
    Column("expert_requested", INTEGER, "candidates sent to the expert in this group and step, all rows "
                                        "(the trace's load tables)"),
    Column("expert_kept", INTEGER, "candidates the expert kept in this group and step, all rows"),
    Column("capacity", INTEGER, "the group's capacity: candidates each expert keeps",
           empty="the group has no capacity (dropless)"),
    Column("dropless", BOOLEAN, "the group keeps every candidate (no capacity)"),
)


def load_figure_data(load: ExpertLoad, group: int) -> LoadData:
    """The figure of one group of a step's loads (`traces.analysis.load.ExpertLoad`)."""
    groups = [int(g) for g in load.groups]
    if group not in range(load.capacity.shape[0]):
        raise ValueError(f"group {group} outside 0..{load.capacity.shape[0] - 1}")
    kept_be = load.kept_by_row[group].T                                     # [B, E]
    dropped_be = (load.requested_by_row[group] - load.kept_by_row[group]).T  # [B, E]
    return LoadData(
        run=load.run, step=int(load.step), layer=int(load.layer), group=int(group), groups=groups,
        probe_row=int(load.probe_row), request_ids=np.asarray(load.request_ids),
        requested=np.asarray(load.requested[group], dtype=np.int64),
        kept=np.asarray(load.kept[group], dtype=np.int64), capacity=int(load.capacity[group]),
        row_kept=np.ascontiguousarray(kept_be, dtype=np.int64),
        row_dropped=np.ascontiguousarray(dropped_be, dtype=np.int64),
    )


def default_group(layer: LayerArrays, step: int, row: int) -> int:
    """The group of `row`'s first token routed at `step`, else the step's first group present."""
    if 0 <= row < layer.step.shape[0]:
        t = np.flatnonzero(layer.step[row] == step)
        if t.size and layer.group[row, t[0]] >= 0:
            return int(layer.group[row, t[0]])
    present = np.flatnonzero(layer.capacity[step] != ABSENT_GROUP)
    return int(present[0]) if present.size else 0


def load_data(layer: LayerArrays, step: int, group: int | None = None) -> LoadData:
    """Load figure of one MoE layer of a run (`traces.analysis.rows.layer_routing`) at `step`;
    `group` None means the probe's group (row 0's when there is no probe)."""
    if group is None:
        group = default_group(layer, step, max(layer.probe_row, 0))
    return load_figure_data(expert_load(layer, step), group)


def step_positions(layer: LayerArrays, row: int, step: int) -> np.ndarray:
    """Positions of `row` routed at `step` (the whole prompt at prefill, one token per decode step)."""
    return np.flatnonzero(layer.step[row] == step)
