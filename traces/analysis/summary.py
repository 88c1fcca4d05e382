"""Causes over an experiment (E5 attribution, docs/experiments.md): divergent runs per cause."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from traces.analysis.cause_table import first_difference_causes, unexplained, unsettled
from traces.analysis.verdict import Verdict


@dataclass(frozen=True)
class CauseSummary:
    """Counts and shares of causes over the divergent runs of an experiment.

    `n_runs` counts every verdict given, `n_divergent` those whose tokens differ from their
    reference; shares are of `n_divergent`. Causes the first-difference walk does not name
    (`cause_table.first_difference_causes`) follow, counted under their own name.
    """

    n_runs: int
    n_divergent: int
    counts: dict[str, int]   # every first-difference cause (0 when absent), then any other names seen

    @property
    def shares(self) -> dict[str, float]:
        n = self.n_divergent
        return {cause: (count / n if n else 0.0) for cause, count in self.counts.items()}

    @property
    def unexplained_share(self) -> float:
        """Share of divergent runs nothing explains (`traces.analysis.cause_table.unexplained`):
        `unexplained`; `unconfirmed` (no event and no minimal set of events is proven to carry the
        split); and `not_reproduced` (reruns that took another decision than the recording confirm
        nothing). The goal is 0."""
        shares = self.shares
        return sum(shares.get(cause, 0.0) for cause in unexplained())

    def rows(self) -> list[tuple[str, int, float]]:
        """(cause, count, share) for every cause with a non-zero count, most common first."""
        shares = self.shares
        ranked = sorted(((c, n) for c, n in self.counts.items() if n), key=lambda cn: -cn[1])
        return [(c, n, shares[c]) for c, n in ranked]

    def describe(self) -> str:
        """'12 of 30 runs diverge: capacity 9 (75%), router_flip 3 (25%); unexplained 0%.'"""
        head = f"{self.n_divergent} of {self.n_runs} runs diverge"
        if not self.n_divergent:
            return head + "."
        body = ", ".join(f"{c} {n} ({s:.0%})" for c, n, s in self.rows())
        tail = f"unexplained {self.unexplained_share:.0%}"
        if any(self.counts.get(cause) for cause in unsettled()):
            tail += " (unconfirmed and not reproduced count as unexplained)"
        return f"{head}: {body}; {tail}."


def summarize_causes(causes: Iterable[str], diverged: Iterable[bool]) -> CauseSummary:
    """Summary from parallel sequences of cause names and divergence flags."""
    causes, diverged = list(causes), [bool(d) for d in diverged]
    if len(causes) != len(diverged):
        raise ValueError(f"{len(causes)} causes but {len(diverged)} divergence flags")
    counts = dict.fromkeys(first_difference_causes(), 0)
    for cause, d in zip(causes, diverged, strict=True):
        if d:
            counts[cause] = counts.get(cause, 0) + 1
    return CauseSummary(n_runs=len(causes), n_divergent=sum(diverged), counts=counts)


def summarize(verdicts: Sequence[Verdict]) -> CauseSummary:
    """Cause counts and shares over the divergent verdicts (the reference's own verdict included in N)."""
    return summarize_causes((v.cause for v in verdicts), (v.diverged for v in verdicts))
