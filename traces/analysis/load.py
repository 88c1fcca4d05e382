"""Expert load of one forward step at one layer: requested vs kept per expert, and who took the slots.

The stored loads (`load/requested`, `load/kept`, `load/capacity`) are what the router counted;
the share of each expert's requests and slots taken by each row is derived from the per-token
`step`, `group`, `expert` and `kept` arrays. The two can differ only by candidates the trace does
not hold (pads routed or counted toward capacity), which `unattributed_*` reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.analysis.rows import LayerArrays, layer_routing
from traces.run_like import RunLike
from traces.schema import ABSENT_GROUP, DROPLESS_CAPACITY


@dataclass(frozen=True, eq=False)
class ExpertLoad:
    """Loads of run `run` at forward step `step`, MoE layer `layer`, per group G and expert E."""

    run: str
    step: int
    layer: int
    probe_row: int               # row highlighted in the view, -1 none
    request_ids: np.ndarray      # [B]
    capacity: np.ndarray         # [G] C per group; -1 absent group, -2 dropless
    requested: np.ndarray        # [G, E] candidates sent to each expert (stored)
    kept: np.ndarray             # [G, E] candidates each expert accepted (stored)
    requested_by_row: np.ndarray  # [G, E, B] of them, from each row
    kept_by_row: np.ndarray      # [G, E, B]

    @property
    def groups(self) -> np.ndarray:
        """Indices of the groups present in this step."""
        return np.flatnonzero(self.capacity != ABSENT_GROUP)

    @property
    def dropless(self) -> bool:
        return bool((self.capacity[self.groups] == DROPLESS_CAPACITY).all())

    @property
    def dropped(self) -> np.ndarray:
        """[G, E] candidates each expert refused."""
        return self.requested - self.kept

    @property
    def requested_share(self) -> np.ndarray:
        """[G, E, B] share of each expert's requests that came from each row (0 where none came)."""
        return _share(self.requested_by_row, self.requested)

    @property
    def kept_share(self) -> np.ndarray:
        """[G, E, B] share of each expert's kept slots that each row took (0 where none was kept)."""
        return _share(self.kept_by_row, self.kept)

    @property
    def unattributed_requested(self) -> np.ndarray:
        """[G, E] requests the trace holds no token for (pads routed or counted)."""
        return self.requested - self.requested_by_row.sum(axis=-1)

    @property
    def unattributed_kept(self) -> np.ndarray:
        return self.kept - self.kept_by_row.sum(axis=-1)

    @property
    def over_capacity(self) -> np.ndarray:
        """[G, E] experts asked for more than C (never in a dropless group)."""
        C = self.capacity[:, None]
        return (C >= 0) & (self.requested > C)

    def probe_requested(self) -> np.ndarray:
        """[G, E] requests of the probe row (zeros when there is no probe)."""
        return self._row(self.requested_by_row)

    def probe_kept(self) -> np.ndarray:
        return self._row(self.kept_by_row)

    def _row(self, by_row: np.ndarray) -> np.ndarray:
        if self.probe_row < 0:
            return np.zeros(by_row.shape[:2], by_row.dtype)
        return by_row[..., self.probe_row]


def _share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    whole = whole[..., None].astype(np.float64)
    return np.divide(part, whole, out=np.zeros(part.shape, np.float64), where=whole > 0)


def expert_load(layer: LayerArrays, step: int) -> ExpertLoad:
    """Loads of `layer` (one MoE layer of a whole run) at forward step `step`."""
    S, G = layer.capacity.shape
    if not 0 <= step < S:
        raise ValueError(f"run {layer.run!r} has forward steps 0..{S - 1}, not {step}")
    B, T, K = layer.expert.shape
    E = layer.requested.shape[-1]
    candidate = (layer.step == step)[..., None] & (layer.expert >= 0) & (layer.group >= 0)[..., None]
    rows = np.broadcast_to(np.arange(B)[:, None, None], (B, T, K))
    groups = np.broadcast_to(layer.group[..., None], (B, T, K))
    # One bincount over a flat (group, expert, row) index: no loop over tokens.
    flat = (groups.astype(np.int64) * E + layer.expert) * B + rows
    bad = candidate & ((groups >= G) | (layer.expert >= E))
    if bad.any():
        b, t, k = (int(i[0]) for i in np.nonzero(bad))
        raise ValueError(f"run {layer.run!r} layer {layer.layer}: row {b} position {t} names group "
                         f"{int(layer.group[b, t])}, expert {int(layer.expert[b, t, k])} "
                         f"outside G={G}, E={E}")
    by_row = np.bincount(flat[candidate], minlength=G * E * B).reshape(G, E, B)
    kept_by_row = np.bincount(flat[candidate & layer.kept], minlength=G * E * B).reshape(G, E, B)
    return ExpertLoad(
        run=layer.run, step=step, layer=layer.layer, probe_row=layer.probe_row, request_ids=layer.request_ids,
        capacity=np.asarray(layer.capacity[step]), requested=np.asarray(layer.requested[step]),
        kept=np.asarray(layer.load_kept[step]), requested_by_row=by_row, kept_by_row=kept_by_row,
    )


def run_expert_load(run: RunLike, step: int, layer: int) -> ExpertLoad:
    """Loads of a run-like object (reader `Run` or `RunArrays`) at forward step `step`, MoE layer `layer`."""
    return expert_load(layer_routing(run, layer), step)


def drop_rate(expert: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """[L] share of chosen candidates that were dropped, per layer, from `[L, ...]` arrays (drops)."""
    chosen = np.asarray(expert) >= 0
    dropped = chosen & ~np.asarray(kept, bool)
    axes = tuple(range(1, chosen.ndim))
    n = chosen.sum(axis=axes)
    return np.divide(dropped.sum(axis=axes), n, out=np.zeros(n.shape, np.float64), where=n > 0)
