"""Single-event interventions: one routing decision of one run changed, nothing else.

A whole-routing replay shows that a row's routing carries a divergence; it does not show which
decision does. An `Intervention` names one event (run, forward step, MoE layer, row, position) and
one change, which `model.generate.generate` applies in that step and layer only:

- `keep`: the dropped candidate (rank j, its expert) is kept, as if its expert had one more slot for
  it in that group; its gate is what the policy's normalization gives with it kept. Every other
  candidate keeps its decision.
- `capacity`: the group gets capacity C' (the other run's, when larger) at that step and layer: its
  candidates are kept exactly when their slot is below C'; nothing else changes. Capacity is a
  property of the group (its size S enters the formula), so this is the event "this batch's group
  had another C" tested alone.
- `withdraw`: the candidates of the displacing rows in that expert's queue (same step, layer,
  group, expert) are withdrawn from it; the queue's remaining candidates move up by the withdrawn
  candidates ahead of them and are kept when their new slot is below the capacity. Withdrawn
  candidates contribute nothing, as dropped ones do.
- `logits`: the row's router logits at that position and layer are replaced by the given ones
  (the other run's recorded logits) before routing: a numeric difference at the router removed.

`SetKept` is the queue patch of the causal map (`lab.counterfactual.causal_map`): the row's own
candidates at one cell kept or dropped as another batch's queue decided, gates renormalized.

The kinds are `traces.analysis.proof.EventKind`, the vocabulary of the proof's events (`cell`, a
replayed cell, is no intervention); the spellings `remove_rows` and `router_logits` read as
`withdraw` and `logits`.

The edit is a value; the MoE block calls `before_route` and `after_route` of the `LayerEdit` that the
generation loop resolves for the step (the token's column in that step's input). An `InterventionSet`
applies several events in one rerun (a minimal set of events, `lab.counterfactual.search`): each
step resolves to the `StepEdits` of its events, applied layer by layer in the set's order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from model.routing import RoutingDecision
from traces.analysis.proof import EventKind

#: The events an intervention changes (a replayed cell is a replay, not an intervention).
KINDS = (EventKind.KEEP, EventKind.CAPACITY, EventKind.WITHDRAW, EventKind.LOGITS)
_TINY = torch.finfo(torch.float32).tiny


@dataclass(frozen=True)
class Intervention:
    """One change to one event of one run (see the module docstring for each kind)."""

    kind: EventKind
    step: int                        # forward step S that routed the token
    layer: int                       # MoE layer index (0..L-1)
    row: int                         # row b of the run
    position: int                    # the token's position in its own sequence
    rank: int = -1                   # choice rank j of the candidate (keep, withdraw)
    expert: int = -1                 # its expert (keep, withdraw)
    group: int = -1                  # its group in that step and layer (capacity, withdraw)
    capacity: int = -1               # the queue's new capacity C' (capacity)
    rows: tuple[int, ...] = ()       # displacing rows to withdraw (withdraw)
    logits: tuple[float, ...] = ()   # router logits [E] to give the token (logits)

    def __post_init__(self):
        kind = EventKind.read(self.kind, None)
        if kind not in KINDS:
            raise ValueError(f"intervention kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "kind", kind)
        if kind == EventKind.WITHDRAW and not self.rows:
            raise ValueError(f"{kind} needs the displacing rows")
        if kind == EventKind.CAPACITY and self.capacity < 0:
            raise ValueError(f"{kind} needs the new capacity")
        if kind == EventKind.LOGITS and not self.logits:
            raise ValueError(f"{kind} needs the logits to give")

    def describe(self, new_index: int | None = None) -> str:
        """'keeping expert 1 (2nd choice) for row 0 at position 12, layer 2' and the like."""
        where = f"row {self.row} at position {self.position}"
        if new_index is not None and new_index >= 0:
            where = f"row {self.row} at new token {new_index}"
        where += f", layer {self.layer}"
        if self.kind == EventKind.KEEP:
            return f"keeping expert {self.expert} ({_ordinal(self.rank)} choice) for {where}"
        if self.kind == EventKind.CAPACITY:
            return f"giving the group capacity {self.capacity} (as in the other run) for {where}"
        if self.kind == EventKind.WITHDRAW:
            rows = ", ".join(str(r) for r in self.rows)
            return f"withdrawing row{'s' if len(self.rows) > 1 else ''} {rows} from expert {self.expert}'s " \
                   f"queue for {where}"
        return f"giving {where} the reference's router logits"

    def for_step(self, step: int, positions: torch.Tensor, valid: torch.Tensor) -> LayerEdit | None:
        """The edit of forward step `step` whose inputs sit at positions/valid[B,Ts]; None when this
        step does not route the token."""
        if step != self.step:
            return None
        hit = (positions[self.row] == self.position) & valid[self.row]
        cols = torch.nonzero(hit).flatten().tolist()
        if not cols:
            raise ValueError(f"step {step} does not route row {self.row} position {self.position}")
        return LayerEdit(self, cols[0])


@dataclass(frozen=True)
class LayerEdit:
    """An intervention resolved to one step: the token is column `col` of the step's input."""

    intervention: Intervention
    col: int

    @property
    def layer(self) -> int:
        return self.intervention.layer

    def for_layer(self, layer: int) -> LayerEdit | None:
        """This edit when it acts in MoE layer `layer`, else None."""
        return self if layer == self.layer else None

    def before_route(self, router_logits: torch.Tensor) -> torch.Tensor:
        """router_logits[B,Ts,E], with the token's replaced for a `logits` intervention."""
        iv = self.intervention
        if iv.kind != EventKind.LOGITS:
            return router_logits
        out = router_logits.clone()
        out[iv.row, self.col] = torch.tensor(iv.logits, dtype=out.dtype, device=out.device)
        return out

    def after_route(self, d: RoutingDecision, norm: str) -> RoutingDecision:
        """The decision with the intervention's candidates kept or withdrawn; gates renormalized as
        the policy's `norm` does."""
        iv = self.intervention
        if iv.kind == EventKind.KEEP:
            kept = d.kept.clone()
            if int(d.expert[iv.row, self.col, iv.rank]) != iv.expert:
                raise ValueError(f"the candidate of rank {iv.rank} goes to expert "
                                 f"{int(d.expert[iv.row, self.col, iv.rank])}, not {iv.expert}")
            kept[iv.row, self.col, iv.rank] = True
            return _with_kept(d, kept, norm)
        if iv.kind == EventKind.CAPACITY:
            members = (d.expert >= 0) & (d.group[..., None] == iv.group)    # [B,T,K]
            return _with_kept(d, torch.where(members, d.slot < iv.capacity, d.kept), norm)
        if iv.kind == EventKind.WITHDRAW:
            return _withdraw(d, iv, norm)
        return d


@dataclass(frozen=True)
class InterventionSet:
    """Several interventions applied in one rerun (at most one per token, step and layer matters:
    each sees the decision the earlier ones left)."""

    interventions: tuple[Intervention, ...]

    def for_step(self, step: int, positions: torch.Tensor, valid: torch.Tensor) -> StepEdits | None:
        edits = tuple(e for e in (iv.for_step(step, positions, valid) for iv in self.interventions)
                      if e is not None)
        return StepEdits(edits) if edits else None


@dataclass(frozen=True)
class StepEdits:
    """The edits of one forward step; `for_layer` gives those of one MoE layer as one edit."""

    edits: tuple[LayerEdit, ...]

    def for_layer(self, layer: int) -> StepEdits | None:
        here = tuple(e for e in self.edits if e.layer == layer)
        return StepEdits(here) if here else None

    def before_route(self, router_logits: torch.Tensor) -> torch.Tensor:
        for e in self.edits:
            router_logits = e.before_route(router_logits)
        return router_logits

    def after_route(self, d: RoutingDecision, norm: str) -> RoutingDecision:
        for e in self.edits:
            d = e.after_route(d, norm)
        return d


@dataclass(frozen=True)
class SetKept:
    """The row's kept flags at one (step, layer, position) set to `kept` [K] (its experts unchanged):
    what another batch's queue decided for the same candidates; gates renormalized by the policy."""

    step: int
    layer: int
    row: int
    position: int
    kept: tuple[bool, ...]

    def for_step(self, step: int, positions: torch.Tensor, valid: torch.Tensor) -> KeptEdit | None:
        if step != self.step:
            return None
        cols = torch.nonzero((positions[self.row] == self.position) & valid[self.row]).flatten().tolist()
        if not cols:
            raise ValueError(f"step {step} does not route row {self.row} position {self.position}")
        return KeptEdit(self, cols[0])


@dataclass(frozen=True)
class KeptEdit:
    """A `SetKept` resolved to one step: the token is column `col` of the step's input."""

    change: SetKept
    col: int

    @property
    def layer(self) -> int:
        return self.change.layer

    def for_layer(self, layer: int) -> KeptEdit | None:
        return self if layer == self.layer else None

    def before_route(self, router_logits: torch.Tensor) -> torch.Tensor:
        return router_logits

    def after_route(self, d: RoutingDecision, norm: str) -> RoutingDecision:
        c = self.change
        kept = d.kept.clone()
        kept[c.row, self.col] = torch.tensor(c.kept, dtype=torch.bool, device=kept.device)
        return _with_kept(d, kept, norm)


def _with_kept(d: RoutingDecision, kept: torch.Tensor, norm: str) -> RoutingDecision:
    """Decision `d` with kept flags `kept`; gates recomputed from the router scores as in `route`."""
    expert = d.expert.clamp_min(0)
    raw = d.probs.gather(-1, expert) * (d.expert >= 0)          # [B,T,K] scores of the chosen experts
    gate0 = raw / raw.sum(-1, keepdim=True).clamp_min(_TINY) if norm == "before_drop" else raw
    gate = torch.where(kept, gate0, torch.zeros_like(gate0))
    if norm == "after_drop":
        gate = gate / gate.sum(-1, keepdim=True).clamp_min(_TINY)
    changed = (kept != d.kept) | (gate != d.gate)
    gate = torch.where(changed, gate, d.gate)  # untouched tokens keep their bits
    return dataclasses.replace(d, kept=kept, gate=gate)


def _withdraw(d: RoutingDecision, iv: Intervention, norm: str) -> RoutingDecision:
    """Withdraw the displacing rows' candidates from one (group, expert) queue and move the rest up."""
    queue = (d.expert == iv.expert) & (d.group[..., None] == iv.group)        # [B,T,K]
    rows = torch.zeros(d.expert.shape[0], dtype=torch.bool, device=d.expert.device)
    rows[list(iv.rows)] = True
    withdrawn = queue & rows[:, None, None]
    stay = queue & ~withdrawn
    capacity = int(d.capacity[iv.group])
    w_slots = d.slot[withdrawn]                                              # [n_w]
    ahead = (w_slots[None, :] < d.slot[..., None]).sum(-1)                   # [B,T,K] withdrawn ahead
    new_slot = d.slot - ahead
    kept = d.kept.clone()
    kept[withdrawn] = False
    if capacity >= 0:
        kept = torch.where(stay, new_slot < capacity, kept)
    return _with_kept(d, kept, norm)


def _ordinal(rank: int) -> str:
    n = rank + 1
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")
