"""The measures of two rows' logits and routing, as plain array functions (docs/experiments.md).

Definitions, once for the whole project (the UI labels use the same words):

- **KL** at position t: KL(P_ref || P_other) of the two next-token distributions
  `softmax(logits[t])`, in nats, computed in float64.
- **max logit difference**: max over the vocabulary of |logits_ref[t] - logits_other[t]|.
- With top-k logits (`traces.toplogits`) the margin stays exact, KL becomes a lower bound and the
  max logit difference is taken over the ids both rows kept (`traces.analysis.next_token`).
- **logit margin**: the reference's top-1 minus top-2 logit at t. A greedy token flips only if the
  two logits involved move by a total of at least the margin, so a numeric flip is explained when
  the logit perturbation reaches the margin.
- **router margin**: z_(K) - z_(K+1), the gap between the K-th and (K+1)-th largest *router logits*
  of a token at a layer (K = experts per token). Logits, not probabilities: softmax keeps the order,
  the logit gap does not depend on the other experts, and it is directly comparable with a
  router-logit perturbation. Infinite when every expert is chosen (E == K).
- **drops**: dropped candidates of a token at a layer (chosen, `expert >= 0`, not kept).

Routing and logits are compared bitwise: a floating-point difference of one ulp counts.
"""

from __future__ import annotations

import numpy as np


def bitwise_differ(a: np.ndarray, b: np.ndarray, axis: int | tuple[int, ...] | None = -1) -> np.ndarray:
    """Whether `a` and `b` differ in any bit along `axis` (same shapes; dtypes may differ).

    Equal dtypes compare raw bits (so -0.0 vs 0.0 and NaN payloads count as differences); unequal
    float dtypes compare values in float64 with NaN equal to NaN.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {a.shape} and {b.shape}")
    if a.dtype == b.dtype and a.dtype.kind == "f":
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        differ = a.view(unsigned) != b.view(unsigned)
    elif a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        differ = (a64 != b64) & ~(np.isnan(a64) & np.isnan(b64))
    else:
        differ = a != b
    return differ if axis is None else differ.any(axis=axis)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, in float64."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def kl_divergence(ref_logits: np.ndarray, other_logits: np.ndarray) -> np.ndarray:
    """[...]: KL(P_ref || P_other) in nats of the next-token distributions `softmax(logits[..., V])`."""
    lp, lq = log_softmax(ref_logits), log_softmax(other_logits)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    return np.maximum(kl, 0.0)  # rounding can give -1e-17 for equal distributions


def max_logit_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[...]: max over the last axis of |a - b| (float64 result; differences in at least float32)."""
    a, b = np.asarray(a), np.asarray(b)
    dtype = np.result_type(a.dtype, b.dtype, np.float32)
    return np.abs(a.astype(dtype, copy=False) - b.astype(dtype, copy=False)).max(axis=-1).astype(np.float64)


def top_margin(scores: np.ndarray, k: int = 1) -> np.ndarray:
    """[...]: gap between the k-th and (k+1)-th largest values of the last axis (inf if it has k)."""
    x = np.asarray(scores, dtype=np.float64)
    n = x.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"k = {k} outside 1..{n}")
    if k == n:
        return np.full(x.shape[:-1], np.inf)
    part = -np.partition(-x, (k - 1, k), axis=-1)
    return part[..., k - 1] - part[..., k]


def logit_margin(logits: np.ndarray) -> np.ndarray:
    """[...]: top-1 minus top-2 logit (the margin a greedy argmax flip must overcome)."""
    return top_margin(logits, 1)


def router_margin(router_logits: np.ndarray, k: int) -> np.ndarray:
    """[..]: z_(k) - z_(k+1) of the router logits `[..., E]` (the router margin)."""
    return top_margin(router_logits, k)


def kept_sets(expert: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """[..., K]: the kept experts as a sorted set (dropped and missing candidates as -1)."""
    return np.sort(np.where(kept & (expert >= 0), expert, -1), axis=-1)


def drops(expert: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """[...]: dropped candidates per token (chosen but not kept) from `[..., K]` arrays."""
    return ((np.asarray(expert) >= 0) & ~np.asarray(kept, bool)).sum(axis=-1)
