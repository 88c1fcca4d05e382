"""E7, the cost of each mitigation: wall-clock time against the native batch-grouped run.

All conditions run the same compositions in one process, interleaved (each composition runs every
condition back to back, and the order rotates each repeat), so machine load affects them alike; the
ratios are what is reported, never seconds alone. Nothing is recorded during timing (the recorder's
copies would be counted); the trace holds the timing table only.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass

import torch

from lab.experiments.compositions import random_compositions
from lab.experiments.conditions import Condition, e7_conditions
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, check_lengths, generate_batch
from lab.experiments.tables import markdown_table, ranges

log = logging.getLogger(__name__)

WARM_UP_TOKENS = 8
LABELS = ("native batch-grouped (baseline)", "batch-invariant kernels", "dropless routing",
          "per-sequence grouping", "per-sequence grouping + batch-invariant kernels")
ANCHORS = ("Thinking Machines (2025), batch-invariant kernels: +61.5% (unoptimized +111.5%); "
           "SGLang batch-invariant mode: +34% on average (24-55%).")


@dataclass
class E7Result:
    settings: Settings
    conditions: list[Condition]
    seconds: dict[str, list[float]]  # condition name -> total seconds per repeat
    tokens: int                      # new tokens generated per repeat per condition
    threads: int

    def ratios(self, name: str) -> list[float]:
        base = self.seconds[self.conditions[0].name]
        return [t / b for t, b in zip(self.seconds[name], base, strict=True)]

    def table(self) -> str:
        s = self.settings
        rows = []
        for label, cond in zip(LABELS, self.conditions, strict=True):
            r = self.ratios(cond.name)
            med = statistics.median(r)
            spread = f" ({min(r):.2f}-{max(r):.2f})" if len(r) > 1 else ""
            tps = self.tokens / statistics.median(self.seconds[cond.name])
            rows.append([label, cond.name, f"{med:.2f}{spread}", f"{100 * (med - 1):+.0f}%", f"{tps:.0f}"])
        lines = [f"E7: {s.compositions} compositions (batch sizes {ranges(s.batch_sizes)}), "
                 f"{s.max_new_tokens} new tokens each, {s.repeats} repeats interleaved, "
                 f"{self.threads} torch thread{'s' if self.threads != 1 else ''}, device {s.device}; "
                 f"ratio = median over repeats of (condition's time / baseline's time), range in brackets.",
                 "",
                 markdown_table(["mitigation", "condition", "wall-clock ratio", "extra cost", "tokens/s"],
                                rows),
                 "", ANCHORS]
        return "\n".join(lines)


def run_e7(settings: Settings, models: Models, pool: RequestPool,
           progress: ProgressFn = no_progress) -> E7Result:
    """Time every condition on the same compositions; store the timings as a table in the trace."""
    s = settings
    model = models.moe
    n = s.max_new_tokens
    check_lengths(pool, model, n)
    conditions = e7_conditions(s.presets[0], s.capacity_factors[0])
    comps = random_compositions(s.seed, s.compositions, pool.n_partners, s.batch_sizes)
    for cond in conditions:  # warm-up: first calls pay for allocations and lazy initialisation
        generate_batch(model, pool, comps[0], cond, WARM_UP_TOKENS)
    seconds = {c.name: [0.0] * s.repeats for c in conditions}
    tokens = 0
    total = s.repeats * len(comps) * len(conditions)
    done = 0
    for r in range(s.repeats):
        for i, comp in enumerate(comps):
            k = (r + i) % len(conditions)
            for cond in conditions[k:] + conditions[:k]:
                result = generate_batch(model, pool, comp, cond, n)
                seconds[cond.name][r] += result.wall_time_s
                if r == 0 and cond is conditions[0]:
                    tokens += sum(len(t) for t in result.new_tokens)
                done += 1
                progress(done, total, f"E7 repeat {r + 1}, composition {i + 1}: {cond.name}")
    out = E7Result(s, conditions, seconds, tokens, torch.get_num_threads())
    cols: dict[str, list] = {"condition": [], "repeat": [], "seconds": [], "ratio": []}
    for cond in conditions:
        for r, (t, q) in enumerate(zip(seconds[cond.name], out.ratios(cond.name), strict=True)):
            cols["condition"].append(cond.name)
            cols["repeat"].append(r)
            cols["seconds"].append(t)
            cols["ratio"].append(q)
    with Recording(s.output, model, pool, experiment="E7", policy=conditions[0].policy, kernel_mode="native",
                   seed=s.seed, **s.recording_logits) as rec:
        rec.write_table("e7_mitigation_cost", cols, {"threads": out.threads, "new_tokens": n,
                                                     "compositions": s.compositions})
    return out
