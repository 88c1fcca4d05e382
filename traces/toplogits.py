"""The top-k form of next-token logits: the J largest logits with their ids, the log-sum-exp of all V
logits, and the logit of the token that follows.

At V = 152k one position's float32 logits are 608 KB; the top-64 form is 64 ids, 64 logits and two
numbers (520 bytes). It keeps exactly what margins, near-tie tests and bounds on the next-token
distribution need: `log p(v) = value - lse` for every kept id, the probability mass outside them,
and the generated (or prompt) token's log-probability even when it is not among them.

`TopLogits` holds the arrays in memory; indexing it indexes the leading (B, T) axes of all four
(`top[b, :T]`, `top[t]`). `LazyTopLogits` is the reader's view, reading only what is indexed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.schema import LOGITS_FORMS, MISSING

INDEX, VALUE, LSE, CHOSEN = LOGITS_FORMS["topk"]


@dataclass(frozen=True, eq=False)
class TopLogits:
    """J largest next-token logits per position, largest first (ties: smaller id first)."""

    index: np.ndarray   # [..., J] int32 vocabulary ids, MISSING where no logits were computed
    value: np.ndarray   # [..., J] their logits
    lse: np.ndarray     # [...] log-sum-exp over the whole vocabulary
    chosen: np.ndarray  # [...] logit of the token that follows
    vocab_size: int | None = None  # V, when known
    #: True when the values are log-probabilities (lse = 0): the logits themselves are not known (an
    #: engine returns log-probabilities only), so they compare with others as log-probabilities only.
    logprobs_only: bool = False

    def __post_init__(self) -> None:
        for name in ("index", "value", "lse", "chosen"):
            object.__setattr__(self, name, np.asarray(getattr(self, name)))
        lead = self.lse.shape
        if self.index.shape != self.value.shape or self.index.shape[:-1] != lead or \
                self.chosen.shape != lead:
            raise ValueError(f"top-k logits: index {self.index.shape}, value {self.value.shape}, lse "
                             f"{self.lse.shape} and chosen {self.chosen.shape} do not agree")

    @property
    def shape(self) -> tuple[int, ...]:
        """Leading axes and J (the stored shape of `index` and `value`)."""
        return self.index.shape

    @property
    def ndim(self) -> int:
        return self.index.ndim

    @property
    def k(self) -> int:
        return int(self.index.shape[-1])

    def __len__(self) -> int:
        return len(self.lse)

    def __getitem__(self, key) -> TopLogits:
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis or k is None for k in key) or len(key) > self.lse.ndim:
            raise IndexError("top-k logits index only their leading axes (no Ellipsis, no J axis)")
        return TopLogits(self.index[key], self.value[key], self.lse[key], self.chosen[key], self.vocab_size,
                         self.logprobs_only)

    def top(self, k: int) -> TopLogits:
        """The k largest of these (k <= J): the same as recording with k."""
        if not 1 <= k <= self.k:
            raise ValueError(f"k = {k} outside 1..{self.k}")
        return TopLogits(self.index[..., :k], self.value[..., :k], self.lse, self.chosen, self.vocab_size,
                         self.logprobs_only)

    def as_log_probs(self) -> TopLogits:
        """These values as log-probabilities (`value - lse`, lse 0): what a pair with a run that holds
        log-probabilities only compares (`traces.analysis.next_token.comparable`)."""
        if self.logprobs_only:
            return self
        lse = self.lse.astype(np.float64)
        value = np.where(self.index >= 0, self.value.astype(np.float64) - lse[..., None], 0.0)
        return TopLogits(self.index, value, np.zeros_like(lse), self.chosen.astype(np.float64) - lse,
                         self.vocab_size, True)

    @property
    def log_probs(self) -> np.ndarray:
        """[..., J] float64 log-probabilities of the kept ids."""
        return self.value.astype(np.float64) - self.lse.astype(np.float64)[..., None]

    def schema_arrays(self) -> dict[str, np.ndarray]:
        return {INDEX: self.index, VALUE: self.value, LSE: self.lse, CHOSEN: self.chosen}

    @classmethod
    def from_schema(cls, arrays, vocab_size: int | None = None, logprobs_only: bool = False) -> TopLogits:
        return cls(arrays[INDEX], arrays[VALUE], arrays[LSE], arrays[CHOSEN], vocab_size, logprobs_only)

    @classmethod
    def from_full(cls, logits: np.ndarray, tokens: np.ndarray, k: int,
                  valid: np.ndarray | None = None) -> TopLogits:
        """The top-k form of full logits `[..., T, V]` of rows `tokens [..., T]` (what the recorder
        stores): the token after position t is `tokens[t + 1]`; the last position's is its greedy
        choice, the largest logit. Positions where `valid [..., T]` is false hold the fill values."""
        logits = np.asarray(logits)
        V = logits.shape[-1]
        k = min(k, V)
        part = np.argpartition(-logits, k - 1, axis=-1)[..., :k] if k < V else \
            np.broadcast_to(np.arange(V), logits.shape)
        vals = np.take_along_axis(logits, part, axis=-1)
        order = np.lexsort((part, -vals.astype(np.float64)), axis=-1)  # largest first, then smaller id
        index = np.take_along_axis(part, order, axis=-1).astype(np.int32)
        value = np.take_along_axis(vals, order, axis=-1)
        x = logits.astype(np.float64)
        top = x.max(axis=-1, keepdims=True)
        lse = (top[..., 0] + np.log(np.exp(x - top).sum(axis=-1))).astype(np.float32)
        nxt = np.concatenate([np.asarray(tokens)[..., 1:], np.full(tokens.shape[:-1] + (1,), MISSING)], -1)
        follows = nxt >= 0
        picked = np.take_along_axis(logits, np.where(follows, nxt, 0)[..., None], axis=-1)[..., 0]
        chosen = np.where(follows, picked, value[..., 0]).astype(logits.dtype)
        if valid is not None:
            index[~valid], value[~valid], lse[~valid], chosen[~valid] = MISSING, 0, 0, 0
        return cls(index, value, lse, chosen, V)


class LazyTopLogits:
    """The reader's top-k logits of one run: indexing reads those positions of the four datasets."""

    def __init__(self, arrays: dict, vocab_size: int, logprobs_only: bool = False) -> None:
        self._arrays = arrays  # schema path -> LazyArray
        self.vocab_size = vocab_size
        self.logprobs_only = logprobs_only  # the values are log-probabilities (`TopLogits.logprobs_only`)
        self.shape = arrays[INDEX].shape
        self.dims = arrays[INDEX].dims

    @property
    def k(self) -> int:
        return int(self.shape[-1])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> TopLogits:
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis or k is None for k in key) or len(key) > 2:
            raise IndexError("top-k logits index only their leading axes B and T")
        a = self._arrays
        return TopLogits(a[INDEX][key], a[VALUE][key], a[LSE][key], a[CHOSEN][key], self.vocab_size,
                         self.logprobs_only)

    def read(self) -> TopLogits:
        return self[:]

    def __repr__(self) -> str:
        return f"<LazyTopLogits [B={self.shape[0]} T={self.shape[1]} J={self.shape[2]}]>"
