"""The cause of the first divergence between two runs of one request (docs/experiments.md).

Why the walk order finds a root cause. In a causal decoder the state of token p at layer l depends
only on states (p' <= p, l' < l) of the same sequence, plus, through capacity, on the other
candidates of its (step, group) at the same layer. The next-token logits at p come after every
layer at p, and the token at p + 1 is fed from them. So ordering the comparisons by position, then
layer, then the next-token logits as a last stage is a topological order of the computation: the
lexicographically first (position, layer) where two runs differ has no differing predecessor in
its own sequence. Whatever changed it came from outside the sequence (another row of the batch, a
differently shaped reduction, a seed), which is what the classification names. Only positions
before the first differing token t* are compared; from t* on the inputs themselves differ.

At one (position, layer) the checks run in the order of the router's own computation:

- router logits differ bitwise: the router's input differs (weights are the same, so different
  logits mean a different hidden state): `upstream_numeric`; if the chosen experts change there as
  well, a numeric near-tie flipped the top-k: `router_flip` (the router margin says how near);
- same router logits, different experts: `seeded_random` (random expert choice, seeded per run);
- same experts, different kept set: `capacity` (the displacing candidates are named);
- same kept set, different weights: `renormalization` (the after-drop renormalization differs);
- identical routing up to t*, different next-token logits: `output_numeric` (expert or attention
  reductions; a logit near-tie flipped the argmax);
- nothing differs: `identical` (or `unexplained` when the tokens differ anyway).

Runs whose router logits were not recorded (a serving engine's, `Run.not_recorded`: the reader gives
NaN) cannot tell a near-tie flip from anything else at the router, and such engines route dropless:
a first difference in the chosen experts is `numeric_routing` (routing changed without a capacity
limit, so by a numeric difference), and tokens that split with identical routing before them are a
`token_near_tie` (the recorded log-probability margins say how near).

Two places are reported: `root`, the first bitwise difference of any kind, and the *cause* event,
the first place where a discrete routing decision (experts or kept set) differs, since that is the
mechanism that turns noise or batch composition into a different computation. Without any
decision difference the cause is the root's numeric kind. With batch-invariant kernels both
coincide; with native kernels the root is often a one-ulp router-logit difference at position 0
while the cause is a later capacity drop or router flip.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traces.analysis import next_token
from traces.analysis.cause_table import (
    CAPACITY,
    IDENTICAL,
    NUMERIC_ROUTING,
    OUTPUT_NUMERIC,
    RENORMALIZATION,
    ROUTER_FLIP,
    SEEDED_RANDOM,
    TOKEN_NEAR_TIE,
    UNEXPLAINED,
    UPSTREAM_NUMERIC,
)
from traces.analysis.curves import RoutingDifferences, routing_differences, shared_prefix
from traces.analysis.displacement import displacement
from traces.analysis.measures import max_logit_difference, router_margin
from traces.analysis.rows import RowTrace
from traces.analysis.verdict import DIFFERENCE_KINDS, LOGITS_LAYER, Difference, Verdict
from traces.analysis.verdict_record import DifferenceKind


def explain_pair(ref: RowTrace, other: RowTrace) -> Verdict:
    """The verdict for row `other` against the reference row `ref` (rows of the same request).

    For a capacity cause the displacing candidates are named when the rows carry a layer source
    (rows from `row_trace` do); otherwise the verdict holds the slots but no displacement.
    """
    return explain_pair_with_differences(ref, other)[0]


def explain_pair_with_differences(ref: RowTrace, other: RowTrace) -> tuple[Verdict, RoutingDifferences]:
    """`explain_pair`, and the routing differences over the shared prefix it walked (for the curves)."""
    _check_pair(ref, other)
    T = min(ref.length, other.length)
    compared = shared_prefix(ref, other)
    t_star = compared if compared < T else -1
    diff = routing_differences(ref, other, compared)
    L = ref.n_layers
    stages = np.concatenate([diff.routing.T, _column(diff.logits, compared)], axis=1)  # [T, L + 1]
    root = None
    if stages.any():
        p, s = np.unravel_index(int(np.argmax(stages)), stages.shape)
        root = _root(diff, int(p), int(s), L)
    first_logits = _first(diff.logits) if diff.logits is not None else -1
    fields: dict[str, Any]  # the Verdict's fields
    fields = dict(run=other.run, row=other.row, ref_run=ref.run, ref_row=ref.row, request=ref.request,
                  is_probe=other.is_probe, ref_is_probe=ref.is_probe,
                  prompt_len=ref.prompt_len, compared=compared, t_star=t_star,
                  token=int(other.tokens[t_star]) if t_star >= 0 else -1,
                  ref_token=int(ref.tokens[t_star]) if t_star >= 0 else -1,
                  root=root, parts=diff.compared, values=next_token.values_word(ref.logits, other.logits),
                  **_token_flip(ref, other, t_star))
    decision, routing = diff.decision.T, diff.routing.T  # [T, L] in (position, layer) order
    if not ref.router_recorded or not other.router_recorded:
        return _engine_verdict(ref, other, diff, decision, first_logits, t_star, fields), diff
    if decision.any():
        p, l = np.unravel_index(int(np.argmax(decision)), decision.shape)
        return _routing_event(ref, other, diff, int(p), int(l), fields), diff
    if routing.any():
        p, l = np.unravel_index(int(np.argmax(routing)), routing.shape)
        return _routing_event(ref, other, diff, int(p), int(l), fields), diff
    if first_logits >= 0:
        return Verdict(cause=OUTPUT_NUMERIC, position=first_logits, layer=LOGITS_LAYER, **fields), diff
    cause = UNEXPLAINED if t_star >= 0 else IDENTICAL
    return Verdict(cause=cause, position=-1, layer=-1, **fields), diff


def _engine_verdict(ref: RowTrace, other: RowTrace, diff, decision: np.ndarray, first_logits: int,
                    t_star: int, fields: dict) -> Verdict:
    """The verdict of runs without router logits: the first differing expert set, else the token split.
    Router logits, weights and kept sets are not compared (one run at least does not hold them)."""
    logits_root = Difference(first_logits, LOGITS_LAYER, DifferenceKind.LOGITS) if first_logits >= 0 else None
    fields = {**fields, "root": logits_root}
    if decision.any():
        p, l = (int(i) for i in np.unravel_index(int(np.argmax(decision)), decision.shape))
        fields["root"] = Difference(p, l, DifferenceKind.EXPERT)
        ea, eb = ref.expert[l, p], other.expert[l, p]
        return Verdict(cause=NUMERIC_ROUTING, position=p, layer=l, experts=_ints(eb), ref_experts=_ints(ea),
                       kept=_bools(other.kept[l, p]), ref_kept=_bools(ref.kept[l, p]),
                       rank=int(np.argmax(ea != eb)), **fields)
    if t_star >= 0:
        return Verdict(cause=TOKEN_NEAR_TIE, position=t_star - 1, layer=LOGITS_LAYER, **fields)
    if first_logits >= 0:
        return Verdict(cause=OUTPUT_NUMERIC, position=first_logits, layer=LOGITS_LAYER, **fields)
    return Verdict(cause=IDENTICAL, position=-1, layer=-1, **fields)


def _check_pair(ref: RowTrace, other: RowTrace) -> None:
    if ref.request != other.request:
        raise ValueError(f"{ref.label} holds request {ref.request}, {other.label} request {other.request}: "
                         f"only runs of one request can be compared")
    P = ref.prompt_len
    if other.prompt_len != P or not np.array_equal(ref.tokens[:P], other.tokens[:P]):
        raise ValueError(f"{ref.label} and {other.label} hold request {ref.request} with different prompts")
    if ref.router_logits.shape[2] != other.router_logits.shape[2]:
        raise ValueError(f"{ref.label} and {other.label} have different numbers of experts")


def _column(mask: np.ndarray | None, T: int) -> np.ndarray:
    return np.zeros((T, 1), bool) if mask is None else mask[:, None]


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask)) if mask.any() else -1


def _root(diff, p: int, stage: int, L: int) -> Difference:
    if stage == L:
        return Difference(position=p, layer=LOGITS_LAYER, kind=DifferenceKind.LOGITS)
    for kind in DIFFERENCE_KINDS[:-1]:
        if getattr(diff, kind)[stage, p]:
            return Difference(position=p, layer=stage, kind=kind)
    raise AssertionError("a differing stage with no differing part")


def _token_flip(ref: RowTrace, other: RowTrace, t_star: int) -> dict:
    """Margin, perturbation and KL of the next-token logits that produced t* (at t* - 1)."""
    q = t_star - 1
    if t_star < 1 or ref.logits is None or other.logits is None:
        return {}
    la, lb, _ = next_token.comparable(ref.logits[q:q + 1], other.logits[q:q + 1], ref.tokens[q:],
                                      other.tokens[q:])
    return {"logit_margin": float(next_token.margin(la)[0]),
            "logit_delta": float(next_token.max_difference(la, lb)[0]), "kl": float(next_token.kl(la, lb)[0])}


def _routing_event(ref: RowTrace, other: RowTrace, diff, p: int, l: int, fields: dict) -> Verdict:
    """Classify the differing (position p, layer l) and collect the numbers that explain it."""
    ea, eb = ref.expert[l, p], other.expert[l, p]
    ka, kb = ref.kept[l, p], other.kept[l, p]
    za, zb = ref.router_logits[l, p], other.router_logits[l, p]
    K = ea.shape[0]
    event: dict[str, Any]
    event = dict(position=p, layer=l, experts=_ints(eb), ref_experts=_ints(ea), kept=_bools(kb),
                 ref_kept=_bools(ka), gates=_floats(other.gate[l, p]), ref_gates=_floats(ref.gate[l, p]),
                 slots=_ints(other.slot[l, p]), ref_slots=_ints(ref.slot[l, p]),
                 router_delta=float(max_logit_difference(za, zb)))
    if diff.expert[l, p]:
        rank = int(np.argmax(ea != eb))
        cause = ROUTER_FLIP if diff.router_logits[l, p] else SEEDED_RANDOM
        ranked = np.sort(np.asarray(za, np.float64))[::-1]
        margin = float(ranked[rank] - ranked[rank + 1]) if rank + 1 < ranked.size else float("inf")
        return Verdict(cause=cause, rank=rank, router_margin=margin, **event, **fields)
    margin = float(router_margin(za, K))
    if diff.kept[l, p]:
        rank = int(np.argmax(ka != kb))
        dropper, keeper = (other, ref) if ka[rank] else (ref, other)
        dropped, kept = _displacements(dropper, keeper, l, p, rank)
        return Verdict(cause=CAPACITY, rank=rank, router_margin=margin, displacement=dropped,
                       counterpart=kept, **event, **fields)
    cause = UPSTREAM_NUMERIC if diff.router_logits[l, p] else RENORMALIZATION
    return Verdict(cause=cause, router_margin=margin, **event, **fields)


def _displacements(dropper: RowTrace, keeper: RowTrace, l: int, p: int, rank: int):
    """The dropped candidate with everyone ahead of it, and the same candidate in the other run."""
    if dropper.layer_source is None or keeper.layer_source is None:
        return None, None
    return (displacement(dropper.layer(l), dropper.row, p, rank),
            displacement(keeper.layer(l), keeper.row, p, rank))


def _ints(x) -> tuple[int, ...]:
    return tuple(int(v) for v in x)


def _bools(x) -> tuple[bool, ...]:
    return tuple(bool(v) for v in x)


def _floats(x) -> tuple[float, ...]:
    return tuple(float(v) for v in x)
