"""The verdict on two runs of one request: where they first differ and why (`Verdict`), and the
places where they differ (`Difference`). `traces.analysis.causes` walks two rows to reach one."""

from __future__ import annotations

from traces.analysis.verdict_record import DIFFERENCE_KINDS, LOGITS_LAYER, Difference, VerdictRecord
from traces.analysis.verdict_text import RunLabel, describe_verdict, run_label

__all__ = ["DIFFERENCE_KINDS", "LOGITS_LAYER", "Difference", "Verdict"]


class Verdict(VerdictRecord):
    """A `VerdictRecord` that says itself in words (`describe`)."""

    def describe(self, vocab: list[str] | None = None, label: RunLabel = run_label) -> str:
        """A plain-language account of the divergence (token ids become strings through `vocab`, runs
        named by `label`)."""
        return describe_verdict(self, vocab, label)
