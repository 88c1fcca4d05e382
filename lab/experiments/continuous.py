"""Continuous batching: the probe among 1 to 64 rows that arrive and leave while it decodes.

Static batches (E1) start every row at once. A server admits requests between decode steps, so the
probe shares its decode steps with rows at every stage: some prefilling, some decoding, some gone.
Each composition draws a batch size B, B - 1 partners and an arrival tick for every row (the probe
within the first half of the window, the partners anywhere in it, the window being `--new-tokens`
ticks), and runs it under each condition with `model.generate`'s `arrivals`; a row leaves after
its last token. Every probe completion is compared with the probe alone under dropless routing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from lab.experiments import ExperimentError
from lab.experiments.compositions import Composition, random_composition, solo
from lab.experiments.conditions import Condition, capacity, dropless
from lab.experiments.measures import DropCounts, completion_matrix, mean, unique_completions
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, check_lengths
from lab.experiments.tables import markdown_table, percent
from traces import schema

log = logging.getLogger(__name__)


@dataclass
class SizeResult:
    """What one batch size gave under one condition."""

    condition: str
    batch_size: int
    completions: list[np.ndarray] = field(default_factory=list)  # [n] probe's new tokens per run
    first_divergence: list[int] = field(default_factory=list)    # new-token index, -1 = the reference's
    concurrency: list[float] = field(default_factory=list)       # rows beside the probe per decode step
    drops: DropCounts = field(default_factory=DropCounts)        # the probe's, prompt / generated tokens


@dataclass
class ContinuousResult:
    settings: Settings
    cells: list[SizeResult]

    def table(self) -> str:
        s = self.settings
        n = s.max_new_tokens
        header = ["condition", "B", "U", "diverged", "median t*", "rows beside the probe",
                  "probe drops prompt / decode"]
        body = []
        for c in self.cells:
            u = unique_completions([np.asarray(t) for t in c.completions], 0, n).n_unique
            split = [t for t in c.first_divergence if t >= 0]
            body.append([c.condition, c.batch_size, u, f"{len(split)}/{len(c.first_divergence)}",
                         int(np.median(split)) if split else "-", f"{mean(c.concurrency):.1f}",
                         f"{percent(c.drops.prefill_share)} / {percent(c.drops.decode_share)}"])
        return "\n".join([
            f"Continuous batching: probe {s.probe!r}, {n} new tokens, {s.compositions} compositions per "
            f"batch size; rows arrive at random ticks within {n} ticks and leave after their last token. "
            f"U: distinct probe completions; diverged: runs whose completion leaves the probe alone "
            f"under dropless routing (t*: its first differing new token).", "",
            markdown_table(header, body), "",
            "rows beside the probe: mean number of other rows routed in the probe's decode steps. Probe "
            "drops are counted by position: its prompt (prefilled whenever it arrived) and its generated "
            "tokens.",
        ])


def continuous_conditions(s: Settings) -> list[Condition]:
    mode = s.kernel_modes[0]
    cf = s.capacity_factors[0]
    out = [dropless(mode)]
    out += [capacity(p, cf, mode, min_capacity=m) for p in s.presets for m in s.min_capacities]
    out += [capacity(p, cf, mode, group_by="sequence", pads_counted=False) for p in s.presets]
    return out


def arriving(rng: np.random.Generator, comp: Composition, window: int) -> Composition:
    """`comp` with arrival ticks: the probe within the first half of the window, partners anywhere."""
    ticks = rng.integers(0, max(window, 1), size=comp.batch_size)
    ticks[comp.probe_row] = rng.integers(0, max(window // 2, 1))
    ticks -= ticks.min()  # the batch starts when its first row arrives
    return Composition(comp.requests, comp.probe_row, tuple(int(t) for t in ticks))


def run_continuous(settings: Settings, models: Models, pool: RequestPool,
                   progress: ProgressFn = no_progress) -> ContinuousResult:
    s = settings
    n = s.max_new_tokens
    if not models.moe.admits_arrivals:
        raise ExperimentError("-e continuous: this model cannot admit rows into a running batch (a Hugging "
                              "Face model's cache holds one shared column per step); use the shipped model")
    check_lengths(pool, models.moe, n)
    rng = np.random.default_rng(s.seed)
    plan = [(B, arriving(rng, random_composition(rng, pool.n_partners, [B]), n))
            for B in s.batch_sizes for _ in range(s.compositions)]
    conditions = continuous_conditions(s)
    cells = {(c.name, B): SizeResult(c.name, B) for c in conditions for B in s.batch_sizes}
    total = 1 + len(plan) * len(conditions)
    with Recording(s.output, models.moe, pool, experiment="continuous", policy=conditions[1].policy,
                   kernel_mode=conditions[0].kernel_mode, seed=s.seed, **s.recording_logits) as rec:
        ref = rec.record("reference-solo-dropless", solo(), dropless(conditions[0].kernel_mode), n,
                         seed=s.seed)
        ref_new = completion_matrix([ref.probe_tokens], int(ref.prompt_len[0]), n)[0]
        progress(1, total, "continuous: the probe alone, dropless")
        done = 1
        for i, (B, comp) in enumerate(plan):
            for cond in conditions:
                name = f"B{B:02d}-c{i:03d}-{cond.slug}"
                run = rec.record(name, comp, cond, n, seed=s.seed, keep_arrays=True)
                cell = cells[(cond.name, B)]
                new = completion_matrix([run.probe_tokens], int(run.prompt_len[comp.probe_row]), n)[0]
                cell.completions.append(new)
                differs = np.flatnonzero(new != ref_new)
                cell.first_divergence.append(int(differs[0]) if differs.size else -1)
                cell.concurrency.append(_beside(run.arrays[schema.STEP], comp.probe_row))
                cell.drops += _probe_drops(run.arrays, comp.probe_row)
                done += 1
                progress(done, total, f"continuous B={B}: {cond.name}")
        result = ContinuousResult(s, [cells[(c.name, B)] for B in s.batch_sizes for c in conditions])
        rec.write_table("continuous_batching", _columns(result), {"probe": s.probe, "new_tokens": n})
    return result


def _probe_drops(arrays: dict[str, np.ndarray], row: int) -> DropCounts:
    """The probe row's drops at its prompt and at its generated tokens. By position, not by step: a
    row that arrives late is prefilled in a step > 0."""
    chosen = arrays[schema.EXPERT][:, row] >= 0                      # [L,T,K]
    dropped = chosen & ~arrays[schema.KEPT][:, row].astype(bool)
    P = int(arrays[schema.PROMPT_LEN][row])
    return DropCounts(int(chosen[:, :P].sum()), int(dropped[:, :P].sum()), int(chosen[:, P:].sum()),
                      int(dropped[:, P:].sum()))


def _beside(step: np.ndarray, probe_row: int) -> float:
    """Mean number of other rows routed in the steps that decoded the probe (step[B,T])."""
    mine = {int(x) for x in np.unique(step[probe_row]) if x > 0}
    if not mine:
        return 0.0
    others = np.delete(step, probe_row, axis=0)
    return float(np.mean([int((others == st).any(axis=1).sum()) for st in sorted(mine)]))


def _columns(result: ContinuousResult) -> dict[str, list]:
    cols: dict[str, list] = {"condition": [], "batch_size": [], "first_divergence": [], "rows_beside": []}
    for c in result.cells:
        for t, k in zip(c.first_divergence, c.concurrency, strict=True):
            cols["condition"].append(c.condition)
            cols["batch_size"].append(c.batch_size)
            cols["first_divergence"].append(t)
            cols["rows_beside"].append(k)
    return cols
