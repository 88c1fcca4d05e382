"""Capacity-limited routing: one vectorized routine for every system of docs/routing.md.

`route(router_logits[B,T,E], valid[B,T], policy)` chooses each token's candidates, orders a group's
candidates by the policy's priority, gives each its slot in its expert's queue, keeps those with
`slot < C` and weights the survivors. No Python loop runs over tokens or experts; every tie is broken
by an explicit secondary key (stable sorts of exact int64 keys, first-index argmax; never
`torch.topk`, whose order among equal values differs between CPU and CUDA).

Tie-break rules (recorded here because traces depend on them):
- a token's choice order: score descending, then expert index ascending;
- inside an expert's queue: the priority key, then arrival position (flatten order), then choice
  rank j.

Expert choice (Zhou et al. 2022): K = E. Candidate j of a token is its j-th best expert by score
(same tie-break as above); it is kept when that expert's top-C tokens of the group include the token.
A token may thus be kept by 0..E experts; `slot` is the token's rank in that expert's preference.
There `top_k` only enters the capacity formula (the average number of experts per token).

Random priority draws one key per (b, t, j) of the step's [B,T,K] tensor from a generator on the
input's device seeded with (policy.seed, seed_offset), as DeepSpeed draws over its whole token
tensor: the same batch gives the same draw, but the draw depends on the batch's layout, even per
sequence, and CPU and CUDA generators give different streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from model.routing_policy import DROPLESS_CAPACITY, PRESETS, RoutingPolicy

__all__ = ["DROPLESS_CAPACITY", "PRESETS", "RoutingDecision", "RoutingPolicy", "route", "router_scores"]


@dataclass(frozen=True)
class RoutingDecision:
    """What the router decided for one forward step of one MoE layer.

    Tokens not routed in this step (pads unless `pads_routed`, tokens routed in an earlier step)
    have expert = slot = -1, gate = 0, kept = False and group = -1.
    """

    expert: torch.Tensor        # [B,T,K] int64 chosen experts in choice order
    gate: torch.Tensor          # [B,T,K] float32 weight applied (0 when dropped)
    kept: torch.Tensor          # [B,T,K] bool candidate kept
    slot: torch.Tensor          # [B,T,K] int64 rank in that expert's queue within its group
    group: torch.Tensor         # [B,T] int64 group id within the step
    capacity: torch.Tensor      # [G] int64 capacity C per group, -2 for dropless
    requested: torch.Tensor     # [G,E] int64 candidates sent to each expert
    kept_count: torch.Tensor    # [G,E] int64 candidates each expert accepted
    group_tokens: torch.Tensor  # [G] int64 tokens S counted in each group (the S of the formula)
    probs: torch.Tensor         # [B,T,E] float32 router scores used

    @property
    def routed(self) -> torch.Tensor:
        """[B,T] bool: tokens routed in this step."""
        return self.group >= 0

    @property
    def dropped(self) -> torch.Tensor:
        """[B,T,K] bool: candidates that exist but were dropped."""
        return (self.expert >= 0) & ~self.kept


def router_scores(router_logits: torch.Tensor, score_fn: str) -> torch.Tensor:
    """Scores p[B,T,E] in float32: softmax over experts, or an elementwise sigmoid (DeepSeek-V3)."""
    z = router_logits.float()
    return torch.softmax(z, dim=-1) if score_fn == "softmax" else torch.sigmoid(z)


def route(
    router_logits: torch.Tensor,
    valid: torch.Tensor,
    policy: RoutingPolicy,
    *,
    pad: torch.Tensor | None = None,
    seed_offset: int = 0,
    chosen: tuple[torch.Tensor, torch.Tensor] | None = None,
    compiled: ModuleType | None = None,
    copies: int = 1,
) -> RoutingDecision:
    """Route the tokens marked `valid[B,T]` given `router_logits[B,T,E]` under `policy`.

    `pad[B,T]` (optional, disjoint from `valid`) marks pad positions of this step: they are routed
    when `policy.pads_routed` and counted in their group's S when `policy.pads_count_toward_capacity`.
    `seed_offset` (e.g. a layer and step index) is mixed into `policy.seed` for random priority.
    Runs on the device of `router_logits`.

    `chosen` = (expert[B,T,K], weight[B,T,K]): the candidates a model's own router picked (the Hugging
    Face adapters of `model.hf`). The policy then only orders and keeps them: experts, choice order and
    gates are the model's (`probs` holds the weights at the chosen experts, 0 elsewhere); `none` and
    `before_drop` leave the weights as the model normalised them, `after_drop` renormalises the survivors.

    `compiled`: a model's compiled kernels (`model.experts.Kernels.module`), which decide a small step of
    a position priority on the host (the same decision, bit for bit).

    `copies`: the B rows are that many copies of a batch of B0 = B / copies rows, stacked copy-major
    (copy i holds rows i*B0..(i+1)*B0-1), each routed as if it were alone: its own groups (a batch
    group per copy, fixed groups counted inside each copy), capacities and random priorities (each
    copy draws the one-copy stream). Every decision of copy i is the one-copy batch's, bit for bit.
    Group ids run copy-major: copy i's groups are i*G0..(i+1)*G0-1.
    """
    _check_inputs(router_logits, valid, pad, policy, seed_offset)
    _check_copies(router_logits.shape[0], copies)
    B, T, E = router_logits.shape
    K = policy.candidates_per_token(E)
    if chosen is not None:
        return _route_chosen(router_logits, valid, policy, pad, seed_offset, chosen, copies)
    probs = router_scores(router_logits, policy.score_fn)  # [B,T,E]
    return _dispatch(probs, valid, pad, policy, K, seed_offset, compiled=compiled, copies=copies)


def _dispatch(probs, valid, pad, policy, K: int, seed_offset: int, expert=None,
              compiled=None, copies: int = 1) -> RoutingDecision:
    """Which tokens are routed and counted (the policy's pad knobs), then the sort-free position path
    where it applies, else the general one; `expert` [B,T,K] keeps a model router's own candidates.
    Copies of a batch grouped per batch take the general path (a group per copy); groups per sequence
    are the same in any stack of copies."""
    routed, counted = _routed_counted(valid, pad, policy)
    N = probs.shape[0] * probs.shape[1]
    by_position = policy.group_by == "sequence" or (policy.group_by == "batch" and copies == 1)
    if N > 0 and policy.priority in _POSITION and by_position:
        if N <= SMALL_TOKENS and K <= 2 and probs.device.type == "cpu" and not probs.requires_grad:
            plan = compiled_plan(policy, routed, counted, probs.shape[-1]) \
                if expert is None and compiled is not None else None
            if plan is not None and probs.dtype == torch.float32:
                out = compiled.route_position(probs, *plan)
            else:
                out = None
            if out is not None:
                return RoutingDecision(*out, probs=probs)  # type: ignore[misc]  # (the fields but probs)
            if bool(np.isfinite(probs.numpy()).all()):
                return _route_small(probs, routed, counted, policy, K, expert=expert)
        return _route_by_position(probs, routed, counted, policy, K, expert=expert)
    return _route_general(probs, routed, counted, policy, K, seed_offset, expert=expert, copies=copies)


def _route_chosen(router_logits, valid, policy, pad, seed_offset, chosen, copies=1) -> RoutingDecision:
    """`route` over candidates a model's router chose: expert/weight[B,T,K] (see `route`)."""
    expert, weight = chosen
    B, T, E = router_logits.shape
    if policy.priority == "expert_choice":
        raise ValueError("route: expert_choice priority picks its own candidates; it cannot keep a "
                         "model router's choices")
    if tuple(expert.shape) != (B, T, policy.top_k) or expert.shape != weight.shape:
        raise ValueError(f"route: chosen expert and weight must be [B,T,K] = {(B, T, policy.top_k)}, got "
                         f"{tuple(expert.shape)} and {tuple(weight.shape)}")
    expert = expert.to(torch.int64)
    probs = torch.zeros(B, T, E, dtype=torch.float32, device=router_logits.device)
    probs.scatter_(-1, expert, weight.float())  # [B,T,E] the model's weights at its chosen experts
    return _dispatch(probs, valid, pad, policy, policy.top_k, seed_offset, expert=expert, copies=copies)


def _route_general(probs, routed, counted, policy, K, seed_offset, expert=None, copies=1) -> RoutingDecision:
    """`route` for every priority and grouping, in the flattened token stream (of `copies` stacked
    batches: see `route`)."""
    B, T, E = probs.shape
    N = B * T
    seq_major = policy.flatten == "seq_major"
    chosen = expert is not None

    # Everything below works on the token stream in arrival order n (flatten order).
    p = _to_stream(probs, seq_major)                  # [N,E]
    routed_n = _to_stream(routed, seq_major)          # [N]
    counted_n = _to_stream(counted, seq_major)        # [N]
    if chosen:  # [N,K] the model's own choice order, and the scores of the chosen experts
        expert = _to_stream(expert, seq_major)
        raw = p.gather(-1, expert)
    else:  # score desc then expert index asc
        expert, raw = _top_experts(p, K)

    group, G = _groups(counted_n, B, T, seq_major, policy, copies)   # [N]
    S = _bucket_count(torch.where(counted_n, group, G), G + 1)[:G]  # [G]
    capacity = policy.capacity(S, E)                  # [G]

    gate0 = raw / raw.sum(-1, keepdim=True).clamp_min(_TINY) if policy.norm == "before_drop" and not chosen \
        else raw
    # Candidates that are not routed go to a spare bucket G*E so they never take a slot.
    ge = torch.where(routed_n[:, None], group[:, None] * E + expert, G * E)  # [N,K]
    slot = _slots(ge, raw, gate0, policy, G * E + 1, seed_offset, B, T, seq_major, copies)  # [N,K]

    if policy.dropless:
        kept = routed_n[:, None].expand(N, K)
    else:
        kept = routed_n[:, None] & (slot < capacity[group.clamp(0, G - 1)][:, None])
    gate = torch.where(kept, gate0, torch.zeros_like(gate0))
    if policy.norm == "after_drop":
        gate = gate / gate.sum(-1, keepdim=True).clamp_min(_TINY)

    requested = _bucket_count(ge.reshape(-1), G * E + 1)[: G * E].view(G, E)
    kept_ge = torch.where(kept, ge, G * E)
    kept_count = _bucket_count(kept_ge.reshape(-1), G * E + 1)[: G * E].view(G, E)

    missing = torch.full_like(expert, -1)
    return RoutingDecision(
        expert=_from_stream(torch.where(routed_n[:, None], expert, missing), B, T, seq_major),
        gate=_from_stream(gate, B, T, seq_major),
        kept=_from_stream(kept.contiguous(), B, T, seq_major),
        slot=_from_stream(torch.where(routed_n[:, None], slot, missing), B, T, seq_major),
        group=_from_stream(torch.where(routed_n, group, -1), B, T, seq_major),
        capacity=capacity,
        requested=requested,
        kept_count=kept_count,
        group_tokens=S,
        probs=probs,
    )


_TINY = torch.finfo(torch.float32).tiny  # guards 0/0 only: a token with every candidate dropped
_POSITION = ("kmajor_position", "token_major_position")


def _route_by_position(probs, routed, counted, policy, K, expert=None) -> RoutingDecision:
    """`route` for position priorities with batch or sequence groups, without a sort.

    Same decision, bit for bit, as the general path. Under a position priority a candidate's slot
    is the number of routed candidates of its (group, expert) that come before it in the group's
    order (j, n) or (n, j); both orders are a cumulative sum of a one-hot [K,B,T,E] laid out in
    that order. Works in [B,T] layout: only the cumulative sum depends on the flatten order.
    """
    B, T, E = probs.shape
    chosen = expert is not None
    if not chosen:
        expert, raw = (t.view(B, T, K) for t in _top_experts(probs.view(B * T, E), K))  # [B,T,K] each
    else:
        raw = probs.gather(-1, expert)                              # [B,T,K] scores of the chosen
    by_seq = policy.group_by == "sequence"
    G = B if by_seq else 1
    S = counted.sum(1) if by_seq else counted.sum().view(1)         # [G] int64
    capacity = policy.capacity(S, E)                                # [G]
    gate0 = raw / raw.sum(-1, keepdim=True).clamp_min(_TINY) if policy.norm == "before_drop" and not chosen \
        else raw

    # one-hot of routed candidates [K,B,T,E]; an unrouted token's candidates match no expert
    target = torch.where(routed[..., None], expert, E).permute(2, 0, 1)  # [K,B,T]
    onehot = target[..., None] == torch.arange(E, device=probs.device)
    if policy.priority == "token_major_position":
        onehot = onehot.any(0, keepdim=True)  # a token's experts are distinct: one count per token
    # Put the group's dimension first and its order's dimensions next (self-inverse permutations).
    if by_seq:  # group b, order (j, t) whatever the flatten
        perm = (1, 0, 2, 3)
    elif policy.flatten == "seq_major":  # order (j, t, b)
        perm = (0, 2, 1, 3)
    else:  # order (j, b, t)
        perm = (0, 1, 2, 3)
    ordered = onehot.permute(perm)
    # int32 counts are exact below 2**31 candidates and sum several times faster than int64
    count_type = torch.int32 if onehot.numel() < 2**31 else torch.int64
    cum = torch.cumsum(ordered.reshape(G, -1, E), 1, dtype=count_type)  # [G,L,E] inclusive counts
    requested = cum[:, -1].to(torch.int64)                          # [G,E]
    back = cum.view(ordered.shape).permute(perm).permute(1, 2, 0, 3)  # [B,T,K or 1,E]
    slot = back.expand(B, T, K, E).gather(-1, expert[..., None]).squeeze(-1).to(torch.int64) - 1

    if policy.dropless:
        kept = routed[..., None].expand(B, T, K).contiguous()
        kept_count = requested.clone()
    else:
        cap = capacity.view(G, 1, 1) if by_seq else capacity.view(1, 1, 1)
        kept = routed[..., None] & (slot < cap)
        # a bucket's slots are 0..requested-1, so it keeps min(requested, C) candidates
        kept_count = torch.minimum(requested, capacity[:, None])
    gate = torch.where(kept, gate0, torch.zeros_like(gate0))
    if policy.norm == "after_drop":
        gate = gate / gate.sum(-1, keepdim=True).clamp_min(_TINY)

    routed_k = routed[..., None]
    group = (torch.where(routed, torch.arange(B, device=probs.device)[:, None], -1) if by_seq
             else routed.to(torch.int64) - 1)
    return RoutingDecision(
        expert=torch.where(routed_k, expert, -1),
        gate=gate,
        kept=kept,
        slot=torch.where(routed_k, slot, -1),
        group=group,
        capacity=capacity,
        requested=requested,
        kept_count=kept_count,
        group_tokens=S,
        probs=probs,
    )



#: Steps of at most this many tokens (B*T; a decode step is one token a row) route on the host.
SMALL_TOKENS = 64


def _route_small(probs, routed, counted, policy, K, expert=None) -> RoutingDecision:
    """`_route_by_position` for a small step (a decode step), in numpy on the host: the same steps on
    the same float32 values, so the same decision bit for bit (`tests/test_model_routing_small.py`),
    without the ~140 small torch operators whose fixed cost dominates at a few tokens. Capacity is
    host integer arithmetic (`RoutingPolicy.capacity_host`). K <= 2, so a sum over a token's
    candidates is one IEEE addition in any library."""
    B, T, E = probs.shape
    p = probs.numpy()                                       # [B,T,E] float32
    r, c = routed.numpy(), counted.numpy()                           # [B,T] bool
    # score desc, then expert index asc (a stable sort keeps equal scores in index order)
    ex = np.argsort(-p, axis=-1, kind="stable")[..., :K] if expert is None else expert.numpy()  # [B,T,K]
    rows = np.arange(B * T)[:, None]
    raw = p.reshape(B * T, E)[rows, ex.reshape(B * T, K)].reshape(B, T, K)  # [B,T,K]
    by_seq = policy.group_by == "sequence"
    G = B if by_seq else 1
    S = c.sum(1, dtype=np.int64) if by_seq else np.array([c.sum()], dtype=np.int64)  # [G]
    capacity = policy.capacity_host(S, E)                            # [G]
    tiny = np.float32(_TINY)
    gate0 = raw / np.maximum(raw.sum(-1, keepdims=True), tiny) if policy.norm == "before_drop" \
        and expert is None else raw

    target = np.where(r[..., None], ex, E).transpose(2, 0, 1)       # [K,B,T]
    onehot = target[..., None] == np.arange(E)                       # [K,B,T,E]
    if policy.priority == "token_major_position":
        onehot = onehot.any(0, keepdims=True)
    if by_seq:
        perm = (1, 0, 2, 3)
    elif policy.flatten == "seq_major":
        perm = (0, 2, 1, 3)
    else:
        perm = (0, 1, 2, 3)
    ordered = onehot.transpose(perm)
    cum = np.cumsum(ordered.reshape(G, -1, E), 1, dtype=np.int64)   # [G,L,E] inclusive counts
    requested = cum[:, -1].copy()                                    # [G,E]
    back = cum.reshape(ordered.shape).transpose(perm).transpose(1, 2, 0, 3)  # [B,T,K or 1,E]
    back = np.broadcast_to(back, (B, T, K, E)).reshape(B * T, K, E)
    slot = back[rows, np.arange(K), ex.reshape(B * T, K)].reshape(B, T, K) - 1

    if policy.dropless:
        kept = np.broadcast_to(r[..., None], (B, T, K)).copy()
        kept_count = requested.copy()
    else:
        cap = capacity.reshape(G, 1, 1) if by_seq else capacity.reshape(1, 1, 1)
        kept = r[..., None] & (slot < cap)
        kept_count = np.minimum(requested, capacity[:, None])
    gate = np.where(kept, gate0, np.float32(0))
    if policy.norm == "after_drop":
        gate = gate / np.maximum(gate.sum(-1, keepdims=True), tiny)
    group = np.where(r, np.arange(B)[:, None], -1) if by_seq else r.astype(np.int64) - 1
    t = torch.from_numpy
    return RoutingDecision(
        expert=t(np.where(r[..., None], ex, -1).astype(np.int64)),
        gate=t(gate.astype(np.float32, copy=False)),
        kept=t(kept),
        slot=t(np.where(r[..., None], slot, -1)),
        group=t(group.astype(np.int64, copy=False)),
        capacity=t(capacity),
        requested=t(requested),
        kept_count=t(kept_count),
        group_tokens=t(S),
        probs=probs,
    )


def _routed_counted(valid, pad, policy) -> tuple[torch.Tensor, torch.Tensor]:
    """[B,T] tokens routed and tokens counted in their group's S (the policy's pad knobs)."""
    routed, counted = valid, valid
    if pad is not None:
        if policy.pads_routed:
            routed = valid | pad
        if policy.pads_count_toward_capacity:
            counted = valid | pad
    return routed, counted


class StepPlan:
    """The compiled router's arguments after the scores (`model.native` `route_position`) under one
    policy with E experts: routed, counted, capacity, K, by_seq, seq_major, token_major, norm, dropless.
    The policy's part is read once (a model keeps its plan while the policy stays the same object); a
    step adds its masks and its groups' capacities (host integers, each set of group sizes computed once).
    It takes the same integer steps and float operations as `_route_small` and `_route_by_position`, so
    the same decision bit for bit (a non-finite score: the kernel returns None). `limit`: the most tokens
    a step it plans may have (None: any number, as the compiled step routes a prefill in microseconds
    where the tensor path's operators take a millisecond at 2048 tokens)."""

    def __init__(self, policy: RoutingPolicy, E: int, limit: int | None = SMALL_TOKENS):
        self.policy = policy
        self.E = E
        self.limit = limit
        self.applies = policy.priority in _POSITION and policy.group_by in ("batch", "sequence") \
            and policy.top_k <= 2
        self.by_seq = policy.group_by == "sequence"
        self.flags = (policy.top_k, self.by_seq, policy.flatten == "seq_major",
                      policy.priority == "token_major_position", _NORMS[policy.norm], policy.dropless)
        self._capacity: dict[tuple[int, ...], torch.Tensor] = {}  # group sizes S -> C[G]

    def args(self, routed: torch.Tensor, counted: torch.Tensor) -> tuple | None:
        """The arguments for a step's routed/counted [B,T] masks; None where the compiled router does not
        decide it: a priority other than a position, groups other than batch or sequence, K > 2, more
        tokens than the plan's limit, not the CPU."""
        B, T = routed.shape
        N = B * T
        if not self.applies or N == 0 or (self.limit is not None and self.limit < N) or not routed.is_cpu:
            return None
        if self.policy.dropless:  # C does not depend on S
            S: tuple[int, ...] = (0,) * (B if self.by_seq else 1)
        else:
            c = counted.numpy()
            S = tuple(c.sum(1).tolist()) if self.by_seq else (int(c.sum()),)
        capacity = self._capacity.get(S)
        if capacity is None:
            if len(self._capacity) > 256:
                self._capacity.clear()
            capacity = torch.from_numpy(self.policy.capacity_host(np.array(S, dtype=np.int64), self.E))
            self._capacity[S] = capacity
        return (routed, counted, capacity, *self.flags)

    def step(self, valid: torch.Tensor, pad: torch.Tensor | None) -> tuple | None:
        """`args` of a step from its valid and pad masks, for a router with softmax scores."""
        if self.policy.score_fn != "softmax":
            return None
        return self.args(*_routed_counted(valid, pad, self.policy))


def compiled_plan(policy: RoutingPolicy, routed: torch.Tensor, counted: torch.Tensor, E: int) -> tuple | None:
    """`StepPlan.args` of one step (a plan made for it alone)."""
    return StepPlan(policy, E).args(routed, counted)


_NORMS = {"none": 0, "before_drop": 1, "after_drop": 2}


def _check_inputs(logits, valid, pad, policy, seed_offset) -> None:
    if not isinstance(policy, RoutingPolicy):
        raise ValueError(f"route: policy must be a RoutingPolicy, got {type(policy).__name__}")
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or not logits.is_floating_point():
        raise ValueError("route: router_logits must be a floating tensor [B,T,E], got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)} of shape "
                         f"{tuple(getattr(logits, 'shape', ()))}")
    B, T, E = logits.shape
    for name, mask in (("valid", valid), ("pad", pad)):
        if mask is None and name == "pad":
            continue
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (B, T):
            raise ValueError(f"route: {name} must be a bool tensor of shape {(B, T)} (B, T), got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)} of shape "
                             f"{tuple(getattr(mask, 'shape', ()))}")
        if mask.device != logits.device:
            raise ValueError(f"route: {name} is on {mask.device}, router_logits on {logits.device}")
    if E < 1 or (policy.priority != "expert_choice" and policy.top_k > E):
        raise ValueError(f"route: top_k = {policy.top_k} needs at least that many experts, got E = {E}")
    if isinstance(seed_offset, bool) or not isinstance(seed_offset, int):
        raise ValueError(f"route: seed_offset must be an integer, got {seed_offset!r}")


def _check_copies(B: int, copies: int) -> None:
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1 or B % copies:
        raise ValueError(f"route: copies must be a positive integer dividing the batch's {B} rows, "
                         f"got {copies!r}")


def _to_stream(x: torch.Tensor, seq_major: bool) -> torch.Tensor:
    """[B,T,...] -> [N,...] in arrival order: b*T+t (batch-major) or t*B+b (seq-major)."""
    if seq_major:
        x = x.transpose(0, 1)
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def _from_stream(x: torch.Tensor, B: int, T: int, seq_major: bool) -> torch.Tensor:
    """Inverse of `_to_stream`: [N,...] -> [B,T,...]."""
    if seq_major:
        return x.reshape(T, B, *x.shape[1:]).transpose(0, 1).contiguous()
    return x.reshape(B, T, *x.shape[1:])


def _top_experts(p: torch.Tensor, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The K best experts of each row of p[N,E] (score desc, then index asc): indices [N,K] and
    their scores [N,K]."""
    if K > 4:  # expert choice or a large k: one stable sort
        neg, index = torch.sort(-p, dim=-1, stable=True)
        return index[:, :K], -neg[:, :K]
    # A few max passes beat a full sort over E; max returns the first (lowest) index among equal
    # maxima, which is the tie-break wanted, and the score with it (several times faster than
    # argmax over a short last axis). Scores are >= 0, so -1 removes a chosen expert.
    q = p.clone()
    experts, scores = [], []
    for _ in range(K):  # loop over choice ranks only
        score, e = q.max(-1, keepdim=True)
        experts.append(e)
        scores.append(score)
        q.scatter_(-1, e, -1.0)
    return torch.cat(experts, -1), torch.cat(scores, -1)


def _groups(counted: torch.Tensor, B: int, T: int, seq_major: bool, policy: RoutingPolicy,
            copies: int = 1) -> tuple[torch.Tensor, int]:
    """Group id of each stream position [N] and the number of groups G (copy-major over `copies`)."""
    N = B * T
    n = torch.arange(N, device=counted.device)
    if policy.group_by == "sequence":
        return (n % B if seq_major else n // T), B
    if policy.group_by == "batch":
        if copies == 1:
            return torch.zeros_like(n), 1
        return (n % B if seq_major else n // T) // (B // copies), copies
    # fixed: consecutive chunks of group_size counted tokens of each copy's stream (T5X, V-MoE)
    size = int(policy.group_size or 0)  # set when group_by is fixed (RoutingPolicy checks it)
    if copies == 1:
        rank = torch.cumsum(counted.to(torch.int64), 0) - 1
        total = int(counted.sum())  # the one host sync: G sets output shapes
        return rank.clamp_min(0) // size, max(1, -(-total // size))
    B0 = B // copies
    per_copy = _copy_streams(counted.to(torch.int64), B0, T, copies, seq_major)   # [D,N0]
    rank = torch.cumsum(per_copy, 1) - 1
    G0 = max(1, -(-int(per_copy.sum(1).max()) // size))
    group = rank.clamp_min(0) // size + torch.arange(copies, device=counted.device)[:, None] * G0
    return _from_copy_streams(group, B0, T, copies, seq_major), copies * G0


def _copy_streams(x: torch.Tensor, B0: int, T: int, copies: int, seq_major: bool) -> torch.Tensor:
    """A stream [N] of `copies` stacked batches as each copy's own stream [D,N0] (its order alone)."""
    if seq_major:  # n = t*B + i*B0 + b
        return x.view(T, copies, B0).transpose(0, 1).reshape(copies, T * B0)
    return x.view(copies, B0 * T)


def _from_copy_streams(x: torch.Tensor, B0: int, T: int, copies: int, seq_major: bool) -> torch.Tensor:
    """Inverse of `_copy_streams`: [D,N0] -> [N]."""
    if seq_major:
        return x.view(copies, T, B0).transpose(0, 1).reshape(-1)
    return x.reshape(-1)


def _bucket_count(index: torch.Tensor, size: int) -> torch.Tensor:
    """Occurrences of each value in [0, size) (like bincount, without a device sync)."""
    counts = torch.zeros(size, dtype=torch.int64, device=index.device)
    return counts.index_add_(0, index, torch.ones_like(index, dtype=torch.int64))


def _seed(policy: RoutingPolicy, seed_offset: int) -> int:
    # Spread seed and offset apart so (seed, offset) pairs give distinct streams.
    return (policy.seed * 0x9E3779B97F4A7C15 + seed_offset) % 2**63


def _descending(x: torch.Tensor) -> torch.Tensor:
    """int64 key in [0, 2**31) that sorts float32 scores x >= 0 from the highest down.

    The bit pattern of a non-negative float32 read as int32 grows with the value, so the key is
    exact: equal scores give equal keys and fall back to the next key (arrival order).
    """
    x = torch.where(x > 0, x, torch.zeros_like(x)).to(torch.float32).contiguous()  # no -0.0
    return (0x7FFFFFFF - x.view(torch.int32)).to(torch.int64)


def _slots(ge, raw, gate0, policy, buckets, seed_offset, B, T, seq_major, copies=1) -> torch.Tensor:
    """Slot [N,K] of each candidate: higher-priority candidates of the same (group, expert) bucket.

    Candidates start in arrival order (n, then j); one stable sort by an int64 key packing
    (bucket, priority) orders them by (bucket, priority, n, j). K-major priorities put j right after
    the bucket, so the 2nd-choice queue of an expert starts after all its 1st-choice requests, kept
    or not (`slot2 = cumsum(mask2) - 1 + sum(mask1)`).
    """
    N, K = ge.shape
    M = N * K
    j = torch.arange(K, device=ge.device).expand(N, K)
    prio = policy.priority
    if prio == "kmajor_position":
        key = ge * K + j
    elif prio == "token_major_position":
        key = ge
    elif prio == "kmajor_score":  # Batch Prioritized Routing: by the token's top score
        key = ((ge * K + j) << 31) + _descending(raw[:, :1]).expand(N, K)
    elif prio == "probs":  # by the candidate's gate at drop time (Megatron: normalised)
        key = (ge << 31) + _descending(gate0)
    elif prio == "expert_choice":  # each expert prefers its highest-scoring tokens
        key = (ge << 31) + _descending(raw)
    else:  # random token selection (DeepSpeed RTS), k-major, seeded
        gen = torch.Generator(device=ge.device)
        gen.manual_seed(_seed(policy, seed_offset))
        noise = torch.randint(0, 2**31, (B // copies, T, K), generator=gen, device=ge.device)
        noise = noise.repeat(copies, 1, 1)  # each copy draws the one-copy batch's stream
        key = ((ge * K + j) << 31) + _to_stream(noise, seq_major)
    order = torch.sort(key.reshape(M), stable=True).indices
    bucket = ge.reshape(M)
    counts = _bucket_count(bucket, buckets)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty(M, dtype=torch.int64, device=ge.device)
    slot[order] = torch.arange(M, device=ge.device) - starts[bucket[order]]
    return slot.view(N, K)
