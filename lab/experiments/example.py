"""The shipped example trace: one probe in N batch compositions, with the controls that explain it.

Runs, in this order: the probe alone under dropless routing (the reference); the N compositions
grouped per batch at the first capacity factor with native kernels (where the probe diverges); and,
on the first `CONTROLS` compositions, the same batches at every other capacity factor, dropless,
with batch-invariant kernels, and grouped per sequence with batch-invariant kernels (the
combination that must give one completion). Sized to stay small: modest batches and new tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lab.experiments.compositions import random_compositions, solo
from lab.experiments.conditions import Condition, capacity, dropless
from lab.experiments.measures import unique_completions
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, RunRecord, check_lengths
from lab.experiments.tables import markdown_table, ranges

log = logging.getLogger(__name__)

CONTROLS = 4  # compositions rerun under each control condition (logits [B,T,V] dominate the size)


@dataclass
class ExampleResult:
    settings: Settings
    rows: list[tuple[str, int, int, float]]  # condition, runs, U, mode share
    size_bytes: int

    def table(self) -> str:
        s = self.settings
        body = [[name, n, f"{u}", f"{share:.0%}"] for name, n, u, share in self.rows]
        return "\n".join([
            f"Example trace {s.output} ({self.size_bytes / 1e6:.1f} MB): probe {s.probe!r}, "
            f"{s.max_new_tokens} new tokens, batch sizes {ranges(s.batch_sizes)}, seed {s.seed}.", "",
            markdown_table(["condition", "runs", "U", "mode share"], body)])


def example_conditions(settings: Settings) -> tuple[Condition, list[Condition]]:
    """The main condition (batch groups, first cf, native) and the controls."""
    preset, cfs = settings.presets[0], settings.capacity_factors
    main = capacity(preset, cfs[0], "native")
    controls = [capacity(preset, cf, "native") for cf in cfs[1:]]
    controls += [dropless("native"), capacity(preset, cfs[0], "batch_invariant"),
                 capacity(preset, cfs[0], "batch_invariant", group_by="sequence", pads_counted=False)]
    return main, controls


def run_example(settings: Settings, models: Models, pool: RequestPool,
                progress: ProgressFn = no_progress) -> ExampleResult:
    """Record the example trace into `settings.output`."""
    s = settings
    model = models.moe
    n = s.max_new_tokens
    check_lengths(pool, model, n)
    main, controls = example_conditions(s)
    comps = random_compositions(s.seed, s.compositions, pool.n_partners, s.batch_sizes)
    k = min(CONTROLS, len(comps))
    total = 1 + len(comps) + k * len(controls)
    by_condition: dict[str, list[RunRecord]] = {}
    done = 0
    with Recording(s.output, model, pool, experiment="example", policy=main.policy, kernel_mode="native",
                   seed=s.seed, **s.recording_logits) as rec:
        ref_cond = dropless("native")
        ref = rec.record("alone-dropless", solo(), ref_cond, n, seed=s.seed)
        done += 1
        progress(done, total, "example: the probe alone, dropless")
        plan = [(i, comp, main) for i, comp in enumerate(comps)]
        plan += [(i, comps[i], cond) for cond in controls for i in range(k)]
        for i, comp, cond in plan:
            run = rec.record(f"c{i:02d}-{cond.slug}", comp, cond, n, seed=s.seed)
            by_condition.setdefault(cond.name, []).append(run)
            done += 1
            progress(done, total, f"example composition {i + 1}: {cond.name}")
    rows = [("probe alone, " + ref_cond.name, 1, 1, 1.0)]
    for name, runs in by_condition.items():
        u = unique_completions([r.probe_tokens for r in runs], int(ref.prompt_len[0]), n)
        rows.append((name, len(runs), u.n_unique, u.mode_share))
    return ExampleResult(s, rows, s.output.stat().st_size)
