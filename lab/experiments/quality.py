"""Quality: held-out bits per byte of the model under each routing condition.

The determinism experiments show what capacity does to a completion; this one shows what it costs
in quality, on the same footing: the same held-out windows (documents the model never trained on),
scored by `model.quality.teacher_forced` in batches of B windows, so each decode step's groups are
those of B running rows. Conditions: dropless (the reference), each capacity factor x capacity
floor grouped per batch, and per-sequence grouping, whose decode groups of one token cannot drop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lab.experiments.conditions import Condition, capacity, dropless
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool
from lab.experiments.tables import markdown_table, percent
from model.corpus import build_corpus
from model.quality import QualityResult, held_out_windows, teacher_forced

log = logging.getLogger(__name__)

#: Bytes of each window scored in one prefill step before decoding starts.
PREFILL = 64


@dataclass
class QualityRow:
    condition: Condition
    result: QualityResult


@dataclass
class QualityExperiment:
    settings: Settings
    rows: list[QualityRow]
    n_windows: int
    window: int

    def table(self) -> str:
        s = self.settings
        ref = self.rows[0].result
        header = ["condition", "bits/byte", "vs dropless", "decode bits/byte", "drops prefill / decode"]
        body = [[r.condition.name, f"{r.result.bits_per_byte:.4f}",
                 f"{r.result.bits_per_byte - ref.bits_per_byte:+.4f}", f"{r.result.decode_bits_per_byte:.4f}",
                 f"{percent(r.result.prefill_drop_share)} / {percent(r.result.decode_drop_share)}"]
                for r in self.rows]
        return "\n".join([
            f"Quality: held-out bits per byte of {self.n_windows} windows of {self.window} bytes, in batches "
            f"of {s.batch_sizes[0]} rows; the first {PREFILL} bytes of each window in one prefill step, "
            f"then one decode step per byte (teacher forcing: every condition scores the same text).", "",
            markdown_table(header, body), "",
            "drops: share of the chosen candidates of the prefill step / of the decode steps that their "
            "expert dropped.",
        ])


def quality_conditions(s: Settings) -> list[Condition]:
    mode = s.kernel_modes[0]
    out = [dropless(mode)]
    out += [capacity(p, cf, mode, min_capacity=m) for p in s.presets for cf in s.capacity_factors
            for m in s.min_capacities]
    out += [capacity(p, s.capacity_factors[0], mode, group_by="sequence", pads_counted=False)
            for p in s.presets]
    return out


def run_quality(settings: Settings, models: Models, pool: RequestPool,
                progress: ProgressFn = no_progress) -> QualityExperiment:
    """Score every condition on the same held-out windows; write the table into `settings.output`."""
    s = settings
    B = s.batch_sizes[0]
    window = PREFILL + s.max_new_tokens + 1
    n_windows = s.compositions * B
    windows = held_out_windows(build_corpus().held_out, n_windows, window)
    conditions = quality_conditions(s)
    rows = []
    total = len(conditions) * s.compositions
    done = 0
    for cond in conditions:
        result = QualityResult()
        for i in range(s.compositions):
            batch = windows[i * B:(i + 1) * B]
            result = result + teacher_forced(models.moe, batch, cond.policy, cond.kernel_mode, PREFILL)
            done += 1
            progress(done, total, f"quality: {cond.name}, batch {i + 1}")
        rows.append(QualityRow(cond, result))
    experiment = QualityExperiment(s, rows, n_windows, window)
    with Recording(s.output, models.moe, pool, experiment="quality", policy=conditions[1].policy,
                   kernel_mode=conditions[0].kernel_mode, seed=s.seed, **s.recording_logits) as rec:
        rec.write_table("quality_bits_per_byte", _columns(rows),
                        {"windows": n_windows, "window_bytes": window, "batch_size": B, "prefill": PREFILL})
    return experiment


def _columns(rows: list[QualityRow]) -> dict[str, list]:
    return {
        "condition": [r.condition.name for r in rows],
        "bits_per_byte": [r.result.bits_per_byte for r in rows],
        "decode_bits_per_byte": [r.result.decode_bits_per_byte for r in rows],
        "decode_drop_share": [r.result.decode_drop_share for r in rows],
        "prefill_drop_share": [r.result.prefill_drop_share for r in rows],
        "bytes": [r.result.prefill_bytes + r.result.decode_bytes for r in rows],
    }
