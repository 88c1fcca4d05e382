"""Next-token measures over both forms of the logits: full `[..., V]` arrays and top-k `TopLogits`.

With full logits every measure is exact. With top-k logits:

- logit margin (top-1 minus top-2), and so the near-tie test against a perturbation: exact (k >= 2);
- log p(following token): exact (`chosen - lse`);
- max logit difference: the max over the ids both lists hold, a lower bound of the max over V;
- KL(P_ref || P_other): a lower bound, the KL of the two distributions coarsened to the ids both
  lists hold plus one "rest" outcome (coarsening never increases KL);
- bitwise difference: of the ids, kept logits, log-sum-exp and following token's logit; a difference
  confined to logits outside both lists that leaves the log-sum-exp's float32 bits alone is missed.

Two rows in different forms are compared in the top-k form: the full one is reduced as the recorder
would (`TopLogits.from_full`), except its log-sum-exp, which rounds differently from the recorder's
and so is not compared bitwise.

A row whose values are log-probabilities only (`TopLogits.logprobs_only`: a serving engine returns no
logits) is compared like with like: both rows as log-probabilities (`value - lse`, restricted to the
recorded top-k), since logits are only defined up to a constant per position and subtracting a
log-probability from a logit measures that constant. Such a pair is not compared bitwise unless both
rows hold log-probabilities (two runs of one engine): the other side's were derived here, not by the
same operations.
"""

from __future__ import annotations

import numpy as np

from traces.analysis.measures import bitwise_differ, kl_divergence, logit_margin, max_logit_difference
from traces.toplogits import TopLogits

#: Mass outside the shared ids below this is rounding (the float32 log-sum-exp is good to about
#: 1e-7 relative) and counts as none: it would otherwise add a spurious p log(p / q) term.
REST_ROUNDING = 1e-6


def is_topk(logits) -> bool:
    return isinstance(logits, TopLogits)


def margin(logits) -> np.ndarray:
    """[...] top-1 minus top-2 logit."""
    if is_topk(logits):
        value = logits.value.astype(np.float64)
        return value[..., 0] - value[..., 1] if logits.k >= 2 else np.full(logits.lse.shape, np.nan)
    return logit_margin(logits)


def log_probs_only(logits) -> bool:
    """Whether these are log-probabilities only (an engine's), not logits."""
    return is_topk(logits) and logits.logprobs_only


def values_word(a, b) -> str:
    """What a pair's next-token values are compared as: "log-probability" when either row holds
    log-probabilities only, else "logit" (the word the sentences and labels use)."""
    return "log-probability" if log_probs_only(a) or log_probs_only(b) else "logit"


def bitwise_comparable(a, b) -> bool:
    """Whether the two rows' next-token values come from the same operations, so that a bitwise
    difference means something: not when one holds logits and the other log-probabilities only."""
    return log_probs_only(a) == log_probs_only(b)


def comparable(a, b, tokens_a: np.ndarray, tokens_b: np.ndarray):
    """`a` and `b` in one form: both full, or both top-k with the smaller k (`tokens_*` [T] are the
    rows' tokens, which the top-k form of full logits needs), both as log-probabilities when either
    holds log-probabilities only; and whether their log-sum-exps were computed alike (false when one
    was reduced here), for `differ`."""
    if not is_topk(a) and not is_topk(b):
        return a, b, True
    alike = is_topk(a) and is_topk(b)
    if not is_topk(a):
        a = TopLogits.from_full(a, tokens_a[:a.shape[0]], b.k)
    if not is_topk(b):
        b = TopLogits.from_full(b, tokens_b[:b.shape[0]], a.k)
    k = min(a.k, b.k)
    a, b = a.top(k), b.top(k)
    if a.logprobs_only or b.logprobs_only:
        a, b = a.as_log_probs(), b.as_log_probs()
    return a, b, alike


def _aligned(a: TopLogits, b: TopLogits):
    """For each of a's ids, whether b holds it too and b's logit for it: ([..., J] bool, [..., J])."""
    same = (a.index[..., :, None] == b.index[..., None, :]) & (a.index[..., :, None] >= 0)  # [..., J, J]
    shared = same.any(axis=-1)
    where = same.argmax(axis=-1)
    return shared, np.take_along_axis(b.value, where, axis=-1)


def max_difference(a, b) -> np.ndarray:
    """[...] max |a - b| over the vocabulary (top-k: over the ids both hold; NaN when none)."""
    if not is_topk(a):
        return max_logit_difference(a, b)
    shared, b_value = _aligned(a, b)
    dtype = np.result_type(a.value.dtype, b_value.dtype, np.float32)  # as max_logit_difference
    diff = np.abs(a.value.astype(dtype) - b_value.astype(dtype)).astype(np.float64)
    out = np.where(shared, diff, -np.inf).max(axis=-1)
    return np.where(shared.any(axis=-1), out, np.nan)


def kl(a, b) -> np.ndarray:
    """[...] KL(P_a || P_b) in nats (top-k: the coarsened lower bound, see the module docstring)."""
    if not is_topk(a):
        return kl_divergence(a, b)
    shared, b_value = _aligned(a, b)
    lp = a.value.astype(np.float64) - a.lse.astype(np.float64)[..., None]
    lq = b_value.astype(np.float64) - b.lse.astype(np.float64)[..., None]
    p, q = np.where(shared, np.exp(lp), 0.0), np.where(shared, np.exp(lq), 0.0)
    terms = np.where(shared, p * (lp - lq), 0.0).sum(axis=-1)
    p_rest = 1.0 - p.sum(axis=-1)
    q_rest = np.maximum(1.0 - q.sum(axis=-1), REST_ROUNDING)
    some = p_rest > REST_ROUNDING
    rest = np.where(some, np.where(some, p_rest, 1.0) * np.log(np.where(some, p_rest, 1.0) / q_rest), 0.0)
    return np.maximum(terms + rest, 0.0)


def differ(a, b, lse: bool = True) -> np.ndarray:
    """[...] whether the two positions' logits differ in any stored bit (`lse=False`: leave the
    log-sum-exps out, see `comparable`)."""
    if not is_topk(a):
        return bitwise_differ(a, b)
    out = bitwise_differ(a.index, b.index) | bitwise_differ(a.value, b.value)
    out |= bitwise_differ(a.chosen, b.chosen, axis=None)
    return out | bitwise_differ(a.lse, b.lse, axis=None) if lse else out
