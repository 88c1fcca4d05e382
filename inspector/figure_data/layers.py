"""Data of the layers view (All layers tab): layers x positions for one row, top-1 expert and drops."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.table import INTEGER, LAYER, MODEL_LAYER, POSITION_COLUMNS, Column
from inspector.figure_data.tokens import token_labels
from traces.analysis.layers import model_layer
from traces.analysis.rows import RowTrace


@dataclass(frozen=True)
class LayersData:
    """Top-1 expert and dropped candidates per (layer, position) of one row. `T` = row length."""

    run: str
    row: int
    request: int
    n_experts: int
    model_layers: list[int]  # [L] model layer number of each MoE layer
    labels: list[str]        # [T]
    tokens: np.ndarray       # [T] token ids
    prompt_len: int
    top1: np.ndarray         # [L, T] first-choice expert, image in row-major order (y = layer)
    expert: np.ndarray       # [L, T, K] chosen experts
    kept: np.ndarray         # [L, T, K]
    n_dropped: np.ndarray    # [L, T] number of dropped candidates

    @property
    def n_layers(self) -> int:
        return int(self.top1.shape[0])

    @property
    def n_positions(self) -> int:
        return int(self.top1.shape[1])

    def drop_points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, layers, counts) of every (layer, position) with at least one drop."""
        l, t = np.nonzero(self.n_dropped > 0)
        return t.astype(np.int64), l.astype(np.int64), self.n_dropped[l, t]

    def to_columns(self) -> dict[str, np.ndarray]:
        """One row per (layer, position): the values of `COLUMNS`."""
        L, T = self.top1.shape
        return {
            "layer": np.repeat(np.arange(L), T),
            "model_layer": np.repeat(np.asarray(self.model_layers, dtype=np.int64), T),
            "position": np.tile(np.arange(T), L),
            "generated": np.tile(np.arange(T) >= self.prompt_len, L),
            "token_id": np.tile(np.asarray(self.tokens, dtype=np.int64), L),
            "token": np.tile(np.array(self.labels, dtype=object), L),
            "top1_expert": self.top1.reshape(-1),
            "n_dropped": self.n_dropped.reshape(-1),
        }


#: The layers table's columns after its context: one row per (layer, position).
COLUMNS = (
    LAYER, MODEL_LAYER, *POSITION_COLUMNS,
    Column("top1_expert", INTEGER, "the token's first-choice expert at the layer"),
    Column("n_dropped", INTEGER, "the token's chosen experts that refused it at the layer (dropped "
                                 "candidates)"),
)


def layers_figure_data(row: RowTrace, *, vocab: Sequence[str],
                       moe_layers: Sequence[int] | None = None) -> LayersData:
    """The layers data of one row (`traces.analysis.rows.RowTrace`): every MoE layer's choices.
    `moe_layers` gives the model layer of each MoE layer (default the MoE index itself)."""
    expert = np.asarray(row.expert, dtype=np.int64)
    kept = np.asarray(row.kept, dtype=bool)
    return LayersData(
        run=row.run, row=row.row, request=row.request, n_experts=int(row.router_logits.shape[2]),
        model_layers=[model_layer(moe_layers, l) for l in range(row.n_layers)],
        labels=token_labels(vocab, row.tokens), tokens=np.asarray(row.tokens), prompt_len=row.prompt_len,
        top1=np.ascontiguousarray(expert[:, :, 0]), expert=expert, kept=kept,
        n_dropped=(~kept).sum(axis=-1).astype(np.int64),
    )


def read_layers(trace, row: RowTrace) -> LayersData:
    """The layers data of `row`, read from a run of `trace`."""
    return layers_figure_data(row, vocab=trace.vocab, moe_layers=trace.moe_layers)


def describe_layers_cell(data: LayersData, t: int, l: int) -> str | None:
    """The hover text of cell (position t, layer l), or None outside the image."""
    if not (0 <= t < data.n_positions and 0 <= l < data.n_layers):
        return None
    part = "prompt" if t < data.prompt_len else "generation"
    pairs = zip(data.expert[l, t], data.kept[l, t], strict=True)
    choices = ", ".join(f"{int(e)} {'kept' if k else 'DROPPED'}" for e, k in pairs)
    return "\n".join([
        f"position {t} ({part}): {data.labels[t]!r}",
        f"layer {l} (model layer {data.model_layers[l]})",
        f"top-1 expert {int(data.top1[l, t])}",
        f"choices: {choices}",
    ])
