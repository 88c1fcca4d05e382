"""Divergence curves (docs/experiments.md) per position (and layer) over the shared prefix of two runs:
the routing differences of two rows and the measures of `traces.analysis.measures` along them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from traces import schema
from traces.analysis import next_token
from traces.analysis.measures import bitwise_differ, kept_sets, max_logit_difference
from traces.analysis.verdict_record import DIFFERENCE_KINDS, DifferenceKind

if TYPE_CHECKING:  # rows.py uses the measures for its per-row caches
    from traces.analysis.rows import RowTrace


#: The dataset behind each kind of difference a serving engine may not record.
RECORDED_AS = {"router_logits": schema.ROUTER_LOGITS, "gate": schema.GATE}


@dataclass(frozen=True, eq=False)
class RoutingDifferences:
    """[L, T] masks of two rows over positions 0..T-1 (False where either row was not routed)."""

    routed: np.ndarray         # [T] both rows routed the token (step >= 0 in both)
    router_logits: np.ndarray  # [L, T] router logits differ bitwise
    expert: np.ndarray         # [L, T] chosen experts differ (choice order counts)
    kept: np.ndarray           # [L, T] kept sets differ (as sets of experts)
    gate: np.ndarray           # [L, T] applied weights differ bitwise
    logits: np.ndarray | None  # [T] next-token logits differ bitwise; None when either lacks logits or
    #                            they are not comparable bitwise (logits against log-probabilities)
    #: The kinds of `DIFFERENCE_KINDS` compared: router logits and weights only when both rows hold
    #: them, the logits only when bitwise comparable. A kind left out is all False above.
    compared: tuple[DifferenceKind, ...] = DIFFERENCE_KINDS

    @property
    def decision(self) -> np.ndarray:
        """[L, T] a discrete routing decision differs (experts or kept set)."""
        return self.expert | self.kept

    @property
    def routing(self) -> np.ndarray:
        """[L, T] anything stored about routing differs."""
        return self.router_logits | self.expert | self.kept | self.gate


def routing_differences(a: RowTrace, b: RowTrace, length: int | None = None) -> RoutingDifferences:
    """Bitwise differences of rows `a` and `b` over positions 0..length-1 (default: the shorter row)."""
    T = min(a.length, b.length) if length is None else length
    if not 0 <= T <= min(a.length, b.length):
        raise ValueError(f"length {T} beyond the rows ({a.length} and {b.length} positions)")
    if a.n_layers != b.n_layers or a.expert.shape[2] != b.expert.shape[2]:
        raise ValueError(f"{a.label} and {b.label} have different L or K: "
                         f"{a.expert.shape} vs {b.expert.shape}")
    routed = (a.step[:T] >= 0) & (b.step[:T] >= 0)  # [T]
    ea, eb = a.expert[:, :T], b.expert[:, :T]
    ka, kb = a.kept[:, :T], b.kept[:, :T]
    expert = (ea != eb).any(axis=-1)  # [L, T]
    # Same experts in the same order: the kept sets differ iff a kept flag does. Compare as sets
    # only where the choices differ (rare), which saves sorting every token.
    kept = (ka != kb).any(axis=-1) & ~expert
    if expert.any():
        kept[expert] = (kept_sets(ea[expert], ka[expert]) != kept_sets(eb[expert], kb[expert])).any(axis=-1)
    both = {kind: a.recorded(path) and b.recorded(path) for kind, path in RECORDED_AS.items()}
    none = np.zeros_like(expert)
    masks = {
        "router_logits": bitwise_differ(a.router_logits[:, :T], b.router_logits[:, :T])
        if both["router_logits"] else none,
        "expert": expert,
        "kept": kept,
        "gate": bitwise_differ(a.gate[:, :T], b.gate[:, :T]) if both["gate"] else none,
    }
    masks = {k: v & routed[None, :] for k, v in masks.items()}
    logits = None
    if a.logits is not None and b.logits is not None and next_token.bitwise_comparable(a.logits, b.logits):
        la, lb, alike = next_token.comparable(a.logits[:T], b.logits[:T], a.tokens, b.tokens)
        logits = next_token.differ(la, lb, lse=alike) & routed
    compared = [k for k in DIFFERENCE_KINDS[:-1] if both.get(k, True)]
    compared += [DifferenceKind.LOGITS] if logits is not None else []
    return RoutingDifferences(routed=routed, logits=logits, compared=tuple(compared), **masks)


@dataclass(frozen=True, eq=False)
class PairCurves:
    """Per-position (and per-layer) divergence of run `other` against `ref` over positions 0..length-1.

    Next-token quantities are NaN where either row has no logits or did not compute the token.
    """

    length: int
    differences: RoutingDifferences
    kl: np.ndarray                  # [T] KL(P_ref || P_other), nats
    max_logit_diff: np.ndarray      # [T] max |logits_ref - logits_other|
    logit_margin: np.ndarray        # [T] the reference's top-1 minus top-2 logit
    router_margin_ref: np.ndarray   # [L, T] z_(K) - z_(K+1) in the reference
    router_margin_other: np.ndarray  # [L, T]
    router_delta: np.ndarray        # [L, T] max |router logit difference|
    #: False when a row holds top-k logits: `kl` is then a lower bound and `max_logit_diff` the
    #: max over the ids both rows kept (`traces.analysis.next_token`); the margin stays exact.
    exact_logits: bool = True
    #: What the next-token values are compared as: "logit", or "log-probability" when a row holds
    #: log-probabilities only (an engine's); `max_logit_diff` is then a log-probability difference.
    values: str = "logit"


def pair_curves(ref: RowTrace, other: RowTrace, length: int | None = None,
                differences: RoutingDifferences | None = None) -> PairCurves:
    """KL, logit difference, margins and drops for two rows of one request over their shared prefix.

    `length` defaults to the shared prefix: positions before the first differing token (beyond it
    the inputs differ, so nothing is comparable), or the shorter row when the tokens never differ.
    `differences` may pass `routing_differences(ref, other, length)` when already computed.
    """
    if length is None:
        length = shared_prefix(ref, other)
    diff = routing_differences(ref, other, length) if differences is None else differences
    if diff.routed.shape[0] != length:
        raise ValueError(f"differences cover {diff.routed.shape[0]} positions, not {length}")
    T = length
    routed = diff.routed
    nan_t = np.full(T, np.nan)
    kl, dmax, margin = nan_t, nan_t.copy(), nan_t.copy()
    exact = True
    # The rows cache their log-probabilities and margins: a reference is shared by many pairs.
    lp, lq, probs, ref_margin = ref.log_probs, other.log_probs, ref.probs, ref.logit_margin
    if isinstance(ref.logits, np.ndarray) and isinstance(other.logits, np.ndarray) and lp is not None \
            and lq is not None and probs is not None and ref_margin is not None:
        lp, lq = lp[:T], lq[:T]
        kl = np.where(routed, np.maximum((probs[:T] * (lp - lq)).sum(axis=-1), 0.0), np.nan)
        dmax = np.where(routed, max_logit_difference(ref.logits[:T], other.logits[:T]), np.nan)
        margin = np.where(routed, ref_margin[:T], np.nan)
    elif ref.logits is not None and other.logits is not None and ref_margin is not None:
        la, lb, _ = next_token.comparable(ref.logits[:T], other.logits[:T], ref.tokens, other.tokens)
        kl = np.where(routed, next_token.kl(la, lb), np.nan)
        dmax = np.where(routed, next_token.max_difference(la, lb), np.nan)
        margin = np.where(routed, ref_margin[:T], np.nan)
        exact = False
    values = next_token.values_word(ref.logits, other.logits)
    za, zb = ref.router_logits[:, :T], other.router_logits[:, :T]
    return PairCurves(
        length=T, differences=diff, kl=kl, max_logit_diff=dmax, logit_margin=margin,
        router_margin_ref=ref.router_margin[:, :T], router_margin_other=other.router_margin[:, :T],
        router_delta=np.where(routed, max_logit_difference(za, zb), np.nan),
        exact_logits=exact, values=values,
    )


def shared_prefix(a: RowTrace, b: RowTrace) -> int:
    """Positions before the first token where the rows differ (the shorter length when none)."""
    T = min(a.length, b.length)
    differs = a.tokens[:T] != b.tokens[:T]
    return int(np.argmax(differs)) if differs.any() else T
