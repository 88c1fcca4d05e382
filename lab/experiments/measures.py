"""The measures the recorder prints, computed with `traces.analysis` so they match the inspector.

U(N) (docs/experiments.md) counts distinct completions of the probe by exact token match over the first n new
tokens. A completion that ended (EOS) before n tokens is compared as it is, padded with MISSING,
so it counts as distinct from any longer one. Drops are counted separately for the
prefill step (step 0) and the decode steps, where groups are one token per running row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traces import schema
from traces.analysis import Completions, count_completions
from traces.schema import MISSING


def completion_matrix(token_rows: Sequence[np.ndarray], prompt_len: int, n: int) -> np.ndarray:
    """[N, n] the first n new tokens of each row (prompt + generated, MISSING past its end)."""
    out = np.full((len(token_rows), n), MISSING, np.int64)
    for i, row in enumerate(token_rows):
        row = np.asarray(row)
        end = int(np.argmax(row == MISSING)) if (row == MISSING).any() else row.shape[0]
        new = row[prompt_len:end][:n]
        out[i, : new.shape[0]] = new
    return out


def unique_completions(token_rows: Sequence[np.ndarray], prompt_len: int, n: int) -> Completions:
    """U(N) and the mode share of the probe's completions over n new tokens."""
    return count_completions(completion_matrix(token_rows, prompt_len, n))


@dataclass(frozen=True)
class DropCounts:
    """Chosen and dropped candidates, at prefill (step 0) and at decode (steps >= 1)."""

    prefill_chosen: int = 0
    prefill_dropped: int = 0
    decode_chosen: int = 0
    decode_dropped: int = 0

    @property
    def prefill_share(self) -> float:
        return self.prefill_dropped / self.prefill_chosen if self.prefill_chosen else 0.0

    @property
    def decode_share(self) -> float:
        return self.decode_dropped / self.decode_chosen if self.decode_chosen else 0.0

    @property
    def share(self) -> float:
        chosen = self.prefill_chosen + self.decode_chosen
        return (self.prefill_dropped + self.decode_dropped) / chosen if chosen else 0.0

    def __add__(self, other: DropCounts) -> DropCounts:
        return DropCounts(self.prefill_chosen + other.prefill_chosen,
                          self.prefill_dropped + other.prefill_dropped,
                          self.decode_chosen + other.decode_chosen,
                          self.decode_dropped + other.decode_dropped)


def drop_counts(step: np.ndarray, expert: np.ndarray, kept: np.ndarray,
                rows: Sequence[int] | None = None) -> DropCounts:
    """Drops of the given rows (all when None) from a run's `step[B,T]`, `expert/kept[L,B,T,K]`."""
    if rows is not None:
        idx = np.asarray(list(rows), np.int64)
        step, expert, kept = step[idx], expert[:, idx], kept[:, idx]
    chosen = expert >= 0  # [L,B,T,K]
    dropped = chosen & ~kept.astype(bool)
    prefill = (step == 0)[None, :, :, None]  # [1,B,T,1]
    decode = (step > 0)[None, :, :, None]
    return DropCounts(int((chosen & prefill).sum()), int((dropped & prefill).sum()),
                      int((chosen & decode).sum()), int((dropped & decode).sum()))


def run_drops(arrays: dict[str, np.ndarray], rows: Sequence[int] | None = None) -> DropCounts:
    """`drop_counts` of a recorded run's arrays (schema paths as keys)."""
    return drop_counts(arrays[schema.STEP], arrays[schema.EXPERT], arrays[schema.KEPT], rows)


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


#: Bootstrap resamples of an interval, and the seed that makes a table reproducible.
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 0


def bootstrap_interval(cells: dict[int, list[float]], level: float = 0.95,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean over `cells` {probe: [value per repeat]}.

    Two-stage (cluster) resampling: probes with replacement, then each drawn probe's repeats with
    replacement, so the interval carries both the spread between probes and between repeats. U of
    one repeat is not resampled over its compositions: the number of distinct values of a resample
    is biased low (a resample of N distinct completions holds about 0.63 N of them). None with fewer
    than two values in all.
    """
    groups = [np.asarray(v, float) for v in cells.values() if len(v)]
    if sum(len(g) for g in groups) < 2:
        return None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    P = len(groups)
    means = np.empty(resamples)
    for i in range(resamples):
        picked = rng.integers(0, P, size=P)
        values = [groups[p][rng.integers(0, len(groups[p]), size=len(groups[p]))] for p in picked]
        means[i] = float(np.mean(np.concatenate(values)))
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)
