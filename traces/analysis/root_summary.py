"""What the root-event scans of an explanation table add up to: where the root events lie, how
many events each suffice, how many are weak, and which run the proofs change.

Read from the stored records alone (`ExplainRecord`), so the numbers the command line prints, the
docs quote and a test checks are the same computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from traces.analysis.explain_table import ExplainRecord
from traces.analysis.proof import chain_links, is_weak


@dataclass(frozen=True)
class RootSummary:
    """Root-event scans of a table (single-event proofs whose scan is stored)."""

    scanned: int            # single-event proofs with a stored scan
    just_before: int        # of which the root event lies at t*-1 (the proximate position)
    unique: int             # of which exactly one candidate event suffices
    median_alternatives: int
    most_alternatives: int
    weak: int               # placebo above the threshold
    placebo_measured: int
    change_reference: int   # proofs that change the reference run A (it then gives B's tokens)
    chains: int = 0         # proofs whose chain was searched
    chains_whole: int = 0   # of which the chain restores the whole completion
    median_chain: int = 0   # events in a chain (the proof's, then every link's cells), median

    def describe(self) -> str:
        """One sentence ('' when nothing was scanned)."""
        if not self.scanned:
            return ""
        return (f"Root events: {self.just_before} of {self.scanned} at the position just before the split "
                f"(t*-1); {self.unique} the only event that suffices, median {self.median_alternatives} "
                f"events that each suffice (at most {self.most_alternatives}); {self.weak} of "
                f"{self.placebo_measured} weak (random routings at the cell restore too); "
                f"{self.change_reference} change the reference run A, {self.scanned - self.change_reference} "
                f"the divergent run B." + self._chains())

    def _chains(self) -> str:
        if not self.chains:
            return ""
        return (f" Chains: {self.chains_whole} of {self.chains} restore the whole completion; a chain holds "
                f"{self.median_chain} events (median).")


def root_summary(records: Sequence[ExplainRecord]) -> RootSummary:
    scanned = [r for r in records if r.proven and r.proof_size == 1 and r.alternatives > 0]
    counts = sorted(r.alternatives for r in scanned)
    measured = [r for r in scanned if r.placebo >= 0]
    chained = [r for r in records if r.proven and r.chain_end]
    lengths = sorted(chain_events(r) for r in chained)
    return RootSummary(
        scanned=len(scanned),
        just_before=sum(1 for r in scanned if r.proof_position == r.t_star - 1),
        unique=sum(1 for r in scanned if r.alternatives == 1),
        median_alternatives=counts[len(counts) // 2] if counts else 0,
        most_alternatives=counts[-1] if counts else 0,
        weak=sum(1 for r in measured if is_weak(r.placebo)),
        placebo_measured=len(measured),
        change_reference=sum(1 for r in scanned if r.proof_run == r.ref_run),
        chains=len(chained),
        chains_whole=sum(1 for r in chained if r.chain_end == "whole"),
        median_chain=lengths[len(lengths) // 2] if lengths else 0,
    )


def chain_events(record: ExplainRecord) -> int:
    """Events in a record's chain: the proof's, then every link's cells."""
    return record.proof_size + sum(len(link) for link in chain_links(record.chain_cells))
