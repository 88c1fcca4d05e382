"""Data of the routing heatmap: one run, one MoE layer, one batch row.

Experts on y, positions on x, colour = router probability (softmax of the router logits), the
chosen candidates with their kept/dropped outcome, slot, capacity, group and step per token. A run
whose engine did not record the router's logits (`Run.not_recorded`) is coloured by choice rank
instead (1st choice brightest), and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.table import (
    BOOLEAN,
    INTEGER,
    NOT_RECORDED,
    NUMBER,
    POSITION_COLUMNS,
    Column,
    missing,
    not_recorded,
)
from inspector.figure_data.tokens import token_labels
from traces import schema
from traces.analysis.displacement import capacity_text
from traces.analysis.layers import model_layer
from traces.analysis.rows import RowTrace
from traces.schema import DROPLESS_CAPACITY


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax in float64 (stable: the max is subtracted first), returned as float32."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - np.max(z, axis=axis, keepdims=True)
    p = np.exp(z)
    return (p / np.sum(p, axis=axis, keepdims=True)).astype(np.float32)


@dataclass(frozen=True)
class RoutingData:
    """Everything the routing heatmap of one (run, layer, row) shows. `T` = the row's length."""

    run: str
    row: int
    layer: int               # MoE layer index l in [0, L)
    model_layer: int         # the model's own layer number of that MoE layer
    request: int             # request id of the row
    labels: list[str]        # [T] display text of each token
    tokens: np.ndarray       # [T] token ids
    prompt_len: int
    probs: np.ndarray        # [E, T] router probability, row-major image (y = expert, x = position)
    expert: np.ndarray       # [T, K] chosen experts in choice order
    gate: np.ndarray         # [T, K] weight applied (0 when dropped)
    kept: np.ndarray         # [T, K] candidate kept
    slot: np.ndarray         # [T, K] rank in the expert's queue within its group
    group: np.ndarray        # [T] group id within its step
    step: np.ndarray         # [T] forward step that routed the token (0 = prefill)
    capacity: np.ndarray     # [T] capacity of the token's group; -2 dropless, -1 unknown
    probabilities: bool = True  # False: the router's logits were not recorded; `probs` holds choice ranks
    cached: int = 0          # prompt tokens an engine served from its prefix cache (-1 unknown)

    @property
    def colour_label(self) -> str:
        return "router probability" if self.probabilities else "expert choice"

    @property
    def n_positions(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_experts(self) -> int:
        return int(self.probs.shape[0])

    def candidates(self, kept: bool) -> tuple[np.ndarray, np.ndarray]:
        """(positions, experts) of the kept (or dropped) candidates, in position order."""
        t, k = np.nonzero(self.kept == kept)
        return t.astype(np.int64), self.expert[t, k].astype(np.int64)

    def to_columns(self) -> dict[str, np.ndarray]:
        """One row per (position, expert): the values of `COLUMNS`."""
        E, T = self.probs.shape
        t, k = np.nonzero(self.expert >= 0)  # every chosen candidate
        e = self.expert[t, k]
        chosen, kept = np.zeros((T, E), dtype=bool), np.zeros((T, E), dtype=bool)
        choice, slot = np.zeros((T, E), np.int64), np.zeros((T, E), np.int64)
        gate = np.zeros((T, E), self.gate.dtype)
        chosen[t, e], choice[t, e], kept[t, e] = True, k + 1, self.kept[t, k]
        gate[t, e], slot[t, e] = self.gate[t, k], self.slot[t, k]
        no_router = np.full((T, E), not self.probabilities)
        no_gate, no_slot = chosen & np.isnan(gate), chosen & (slot < 0)
        capacity = np.repeat(self.capacity, E)
        return {
            "position": np.repeat(np.arange(T), E),
            "generated": np.repeat(np.arange(T) >= self.prompt_len, E),
            "token_id": np.repeat(np.asarray(self.tokens, dtype=np.int64), E),
            "token": np.repeat(np.array(self.labels, dtype=object), E),
            "expert": np.tile(np.arange(E), T),
            "probability": missing(self.probs.T, no_router).reshape(-1),
            "choice": missing(choice, ~chosen).reshape(-1),
            "kept": (chosen & kept).reshape(-1),
            "dropped": (chosen & ~kept).reshape(-1),
            "gate": missing(gate, ~chosen | no_gate).reshape(-1),
            "slot": missing(slot, ~chosen | no_slot).reshape(-1),
            "step": np.repeat(self.step, E),
            "group": np.repeat(self.group, E),
            "capacity": missing(capacity, capacity < 0),
            "dropless": capacity == DROPLESS_CAPACITY,
            "not_recorded": not_recorded({schema.ROUTER_LOGITS: no_router.reshape(-1),
                                          schema.GATE: no_gate.reshape(-1),
                                          schema.SLOT: no_slot.reshape(-1)}),
        }


#: The routing table's columns after its context: one row per (position, expert).
COLUMNS = (
    *POSITION_COLUMNS,
    Column("expert", INTEGER, "expert id"),
    Column("probability", NUMBER, "router probability of the expert for the token (softmax of the "
                                  "router logits, float32)",
           empty="the run's router logits were not recorded"),
    Column("choice", INTEGER, "the expert's rank among the token's chosen experts (1 = first choice)",
           empty="the expert was not chosen for the token"),
    Column("kept", BOOLEAN, "the expert was chosen for the token and computed it"),
    Column("dropped", BOOLEAN, "the expert was chosen for the token but refused it: its queue was full "
                               "(slot >= capacity)"),
    Column("gate", NUMBER, "weight of the expert's output in the token's sum (0 when dropped)",
           empty="the expert was not chosen, or the run's gates were not recorded"),
    Column("slot", INTEGER, "the candidate's place in the expert's queue within its group (0 = first)",
           empty="the expert was not chosen, or the run's slots were not recorded"),
    Column("step", INTEGER, "forward step that routed the token (0 = the prompt's)"),
    Column("group", INTEGER, "the token's capacity group within its step"),
    Column("capacity", INTEGER, "capacity of the token's group: candidates each expert keeps",
           empty="the group has no capacity (dropless) or its capacity is unknown"),
    Column("dropless", BOOLEAN, "the token's group keeps every candidate (no capacity)"),
    NOT_RECORDED,
)


def routing_figure_data(row: RowTrace, layer: int, *, vocab: Sequence[str], capacity: np.ndarray,
                        moe_layers: Sequence[int] | None = None) -> RoutingData:
    """The heatmap data of MoE layer `layer` of one row (`traces.analysis.rows.RowTrace`).

    `capacity` is the run's [S, G] capacity table at that layer; `moe_layers` the model layer of each
    MoE layer (default the MoE index itself). Where the router's logits were not recorded
    (`RowTrace.router_recorded`) the image holds each chosen expert's rank: (K - k) / K for choice k.
    """
    if not 0 <= layer < row.n_layers:
        raise ValueError(f"MoE layer {layer} outside 0..{row.n_layers - 1}")
    router_logits, expert, step = row.router_logits[layer], row.expert[layer], row.step
    group = np.asarray(row.group[layer], dtype=np.int64)
    T, E = router_logits.shape
    probabilities = row.router_recorded
    if probabilities:
        probs = softmax(router_logits, axis=-1).T  # [E, T]
    else:
        probs = np.zeros((E, T), np.float32)
        K = expert.shape[1]
        for k in range(K):
            t = np.nonzero(expert[:, k] >= 0)[0]
            probs[expert[t, k], t] = (K - k) / K
    capacity = np.asarray(capacity)
    S, G = capacity.shape
    ok = (step >= 0) & (step < S) & (group >= 0) & (group < G)
    cap = np.full(T, -1, dtype=np.int64)
    cap[ok] = capacity[step[ok], group[ok]]
    return RoutingData(
        run=row.run, row=row.row, layer=layer, model_layer=model_layer(moe_layers, layer),
        request=row.request,
        labels=token_labels(vocab, row.tokens), tokens=np.asarray(row.tokens), prompt_len=row.prompt_len,
        probs=np.ascontiguousarray(probs), expert=np.asarray(expert, dtype=np.int64),
        gate=np.asarray(row.gate[layer], dtype=np.float32), kept=np.asarray(row.kept[layer], dtype=bool),
        slot=np.asarray(row.slot[layer], dtype=np.int64), group=group,
        step=np.asarray(step, dtype=np.int64), capacity=cap, probabilities=probabilities,
        cached=row.cached_tokens,
    )


def read_routing(trace, run, row: RowTrace, layer: int) -> RoutingData:
    """The heatmap data of `row` (read from `run` of `trace`) at MoE layer `layer`."""
    return routing_figure_data(row, layer, vocab=trace.vocab, capacity=run.capacity[:, layer, :],
                               moe_layers=trace.moe_layers)


def describe_cell(data: RoutingData, t: int, e: int) -> str | None:
    """The hover text of cell (position t, expert e), or None outside the heatmap."""
    if not (0 <= t < data.n_positions and 0 <= e < data.n_experts):
        return None
    part = "prompt" if t < data.prompt_len else "generation"
    if t < data.cached:
        part = "prompt, from the prefix cache: routed when another request first computed it"
    lines = [
        f"position {t} ({part}): {data.labels[t]!r}",
        f"layer {data.layer} (model layer {data.model_layer}) · expert {e}",
        f"probability {data.probs[e, t]:.4f}" if data.probabilities else "probability not recorded",
    ]
    K = data.expert.shape[1]
    choices = np.nonzero(data.expert[t] == e)[0]
    cap = int(data.capacity[t])
    if choices.size:
        k = int(choices[0])
        slot = int(data.slot[t, k])
        if data.kept[t, k]:
            outcome = f"KEPT · gate {data.gate[t, k]:.4f}" if data.probabilities else "computed"
            relation = "<" if cap >= 0 else "vs"
        else:
            outcome = "DROPPED"
            relation = "≥" if cap >= 0 else "vs"
        lines.append(f"choice {k + 1} of {K} · {outcome}")
        lines.append(f"slot {slot} {relation} {capacity_text(cap)}")
    else:
        lines.append(f"not chosen ({capacity_text(cap)})")
    lines.append(f"group {int(data.group[t])} · step {int(data.step[t])}"
                 + (" (prefill)" if int(data.step[t]) == 0 else ""))
    return "\n".join(lines)
