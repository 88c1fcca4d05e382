"""All runs of one request at once: U(N), t*, the prefix tree and the cause of every divergence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traces.analysis.causes import explain_pair_with_differences
from traces.analysis.curves import PairCurves, RoutingDifferences, pair_curves
from traces.analysis.divergence import (
    BranchNode,
    BranchPoint,
    Completions,
    branch_points,
    count_completions,
    first_divergence,
    new_tokens,
    prefix_tree,
)
from traces.analysis.rows import RowTrace
from traces.analysis.summary import CauseSummary, summarize
from traces.analysis.verdict import Verdict
from traces.prompts import PromptMismatch, differs


@dataclass(frozen=True, eq=False)
class RequestAnalysis:
    """Divergence of N runs of one request against the reference run `reference` (an index into `rows`)."""

    rows: Sequence[RowTrace]  # may read each row on demand (a large request): never copied whole
    reference: int
    completions: Completions     # U(N), mode share, over `completions.n_new_tokens` new tokens
    new: np.ndarray              # [N, n_new] the compared new tokens
    first_divergence: np.ndarray  # [N] new-token index of t* against the reference, -1 none
    tree: BranchNode
    verdicts: tuple[Verdict, ...]  # one per run; the reference's own is `identical`
    differences: tuple[RoutingDifferences, ...]  # of each run against the reference, shared prefix
    lengths: np.ndarray | None = None  # [N] valid positions of each row (prompt and completion)

    @property
    def request(self) -> int:
        return self.rows[0].request

    @property
    def prompt_len(self) -> int:
        return self.rows[0].prompt_len

    @property
    def t_star(self) -> np.ndarray:
        """[N] absolute position of the first differing token, -1 none."""
        return np.where(self.first_divergence >= 0, self.first_divergence + self.prompt_len, -1)

    @property
    def branch_points(self) -> list[BranchPoint]:
        return branch_points(self.tree)

    def summary(self) -> CauseSummary:
        return summarize(self.verdicts)

    def curves(self, i: int, length: int | None = None) -> PairCurves:
        """Per-position curves of run i against the reference (shared prefix by default)."""
        known = self.differences[i] if length is None else None
        return pair_curves(self.rows[self.reference], self.rows[i], length, differences=known)


def analyse_request(rows: Sequence[RowTrace], reference: int = 0,
                    n_new: int | None = None) -> RequestAnalysis:
    """U(N), first divergences and causes (docs/experiments.md) for the runs `rows` of one request.

    `n_new` is the number of new tokens compared for U(N) and t* (default: the shortest completion);
    the causes compare each pair over its whole shared prefix.

    Each row is read once, in order, and compared with the reference's as it is read: `rows` may be a
    sequence that reads rows on demand (`len` and indexing), which then never holds them all.
    """
    rows = rows if isinstance(rows, Sequence) else tuple(rows)
    if not len(rows):
        raise ValueError("no runs given")
    if not 0 <= reference < len(rows):
        raise ValueError(f"reference {reference} is not one of the {len(rows)} runs")
    ref = rows[reference]
    tokens, prompt_lens, pairs = [], [], []
    for i in range(len(rows)):
        row = ref if i == reference else rows[i]
        if row.request != ref.request:
            raise ValueError(f"rows hold several requests {sorted({ref.request, row.request})}: give "
                             f"the runs of one request")
        wrong = differs(ref.tokens[:ref.prompt_len], row.tokens[:row.prompt_len], row.request,
                        f"run {ref.run} row {ref.row}", f"run {row.run} row {row.row}")
        if wrong:
            raise PromptMismatch(wrong)
        tokens.append(row.tokens)
        prompt_lens.append(row.prompt_len)
        pairs.append(explain_pair_with_differences(ref, row))
    new = new_tokens(tokens, prompt_lens, n_new)
    return RequestAnalysis(
        rows=rows, reference=reference, completions=count_completions(new), new=new,
        first_divergence=first_divergence(new, reference), tree=prefix_tree(new),
        verdicts=tuple(v for v, _ in pairs), differences=tuple(d for _, d in pairs),
        lengths=np.array([len(t) for t in tokens], dtype=np.int64),
    )
