"""E1, the 152334H table: one probe in N random batch compositions, U(N) per condition.

Each repeat draws N fresh compositions (batch size, probe row, partners) from seed + repeat; every
condition runs the same compositions, so rows of the table differ only in the condition. Only the
longest `--new-tokens` is generated: greedy decoding of one batch is deterministic, so the first n
tokens of a longer run are exactly what a run of n tokens gives, and U at each shorter length is
measured on that prefix. The dense control is another model, so its runs go to their own trace.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from model.experiments.compositions import random_compositions
from model.experiments.conditions import e1_conditions
from model.experiments.measures import DropCounts, mean, unique_completions
from model.experiments.options import Settings
from model.experiments.progress import ProgressFn, no_progress
from model.experiments.session import Models, Recording, RequestPool, RunRecord, check_lengths
from model.experiments.tables import markdown_table, percent, ranges

log = logging.getLogger(__name__)

#: 152334H (2023): unique completions of 30 calls at temperature 0 (128 and 256 new tokens).
ANCHORS = (("gpt-4", "11.67 (12, 11, 12)", "30"), ("gpt-3.5-turbo", "3.67", "9"),
           ("text-davinci-003", "3.0", "5"), ("text-davinci-001", "2.0", "2"), ("davinci", "1", "-"))


@dataclass
class ConditionResult:
    """U(N) and mode share per new-token count and repeat, and the probe's drops, of one condition."""

    name: str
    unique: dict[int, list[int]] = field(default_factory=dict)  # n new tokens -> U per repeat
    mode_share: dict[int, list[float]] = field(default_factory=dict)
    probe_drops: DropCounts = field(default_factory=DropCounts)


@dataclass
class E1Result:
    settings: Settings
    n_partners: int
    conditions: list[ConditionResult]
    paths: list[Path]
    notes: list[str]

    def table(self) -> str:
        """The results table in the blog's format, with the setting stated above it."""
        s = self.settings
        N = s.compositions
        header = ["condition"]
        for n in s.new_tokens:
            header += [f"U({N}) at {n} tokens", "mode share"]
        header.append("probe drops prefill / decode")
        rows = []
        for c in self.conditions:
            row = [c.name]
            for n in s.new_tokens:
                us = c.unique.get(n, [])
                cell = f"{mean(us):.2f}".rstrip("0").rstrip(".") if us else "-"
                if len(us) > 1:
                    cell += f" ({', '.join(map(str, us))})"
                row += [cell, percent(mean(c.mode_share.get(n, [])), 0) if us else "-"]
            d = c.probe_drops
            has_routing = d.prefill_chosen + d.decode_chosen > 0  # the dense control has no experts
            row.append(f"{percent(d.prefill_share)} / {percent(d.decode_share)}" if has_routing else "-")
            rows.append(row)
        lines = [
            f"E1: probe {s.probe!r}; N = {N} compositions per repeat (batch size from "
            f"{ranges(s.batch_sizes)}, probe row and partners from {self.n_partners} at random), greedy, "
            f"seed {s.seed}, {s.repeats} repeat{'s' if s.repeats > 1 else ''} (U is the mean over repeats, "
            f"each in brackets); max new tokens {max(s.new_tokens)}.",
            "",
            markdown_table(header, rows),
            "",
        ]
        if len(s.new_tokens) > 1:
            lines.append(f"U at fewer than {max(s.new_tokens)} tokens is measured on the prefix of the "
                         f"{max(s.new_tokens)}-token runs (greedy generation of a batch is deterministic).")
        lines += [f"Mode share: share of the {N} runs that gave the most common completion.", *self.notes,
                  "", "152334H (2023), hosted models, 30 calls at temperature 0:", "",
                  markdown_table(["model", "U(30) at 128 tokens", "U(30) at 256 tokens"], ANCHORS)]
        lines += ["", "Traces: " + ", ".join(str(p) for p in self.paths)]
        return "\n".join(lines)


def dense_trace_path(output: Path) -> Path:
    """`e1.h5` -> `e1-dense.h5`: the dense control's own trace beside the MoE one."""
    return output.with_name(f"{output.stem}-dense{output.suffix or '.h5'}")


def run_e1(settings: Settings, models: Models, pool: RequestPool,
           progress: ProgressFn = no_progress) -> E1Result:
    """Record E1 into `settings.output` (and the dense control's trace) and return the table's data."""
    s = settings
    n_max = s.max_new_tokens
    check_lengths(pool, models.moe, n_max)
    conditions = e1_conditions(s.presets, s.capacity_factors, s.kernel_modes, models.dense is not None)
    draws = [random_compositions(s.seed + r, s.compositions, pool.n_partners, s.batch_sizes)
             for r in range(s.repeats)]
    results = {c.name: ConditionResult(c.name) for c in conditions}
    probe_rows: dict[tuple[str, int], list[RunRecord]] = {}
    total = s.repeats * s.compositions * len(conditions)
    notes = [models.dense_note] if models.dense_note else []
    capacity_policy = next(c.policy for c in conditions if c.policy is not None and not c.policy.dropless)
    paths = [s.output]
    dense_rec = None
    with Recording(s.output, models.moe, pool, experiment="E1", policy=capacity_policy,
                   kernel_mode="native", seed=s.seed) as moe_rec:
        try:
            if any(c.dense for c in conditions):
                paths.append(dense_trace_path(s.output))
                dense_rec = Recording(paths[-1], models.dense, pool, experiment="E1", policy=None,
                                      kernel_mode="native", seed=s.seed)
            done = 0
            for r, comps in enumerate(draws):
                for i, comp in enumerate(comps):
                    for cond in conditions:
                        rec = dense_rec if cond.dense else moe_rec
                        run = rec.record(f"r{r}-c{i:02d}-{cond.slug}", comp, cond, n_max, seed=s.seed + r)
                        probe_rows.setdefault((cond.name, r), []).append(run)
                        results[cond.name].probe_drops += run.probe_drops
                        done += 1
                        progress(done, total, f"E1 repeat {r + 1}, composition {i + 1}: {cond.name}")
        finally:
            if dense_rec is not None:
                dense_rec.close()
        for (name, _r), runs in probe_rows.items():
            for n in s.new_tokens:
                comp = unique_completions([run.probe_tokens for run in runs], int(runs[0].prompt_len[
                    runs[0].composition.probe_row]), n)
                results[name].unique.setdefault(n, []).append(comp.n_unique)
                results[name].mode_share.setdefault(n, []).append(comp.mode_share)
        out = E1Result(s, pool.n_partners, [results[c.name] for c in conditions], paths, notes)
        moe_rec.write_table("e1_unique_completions", _columns(out), {"probe": s.probe, "N": s.compositions})
    return out


def _columns(result: E1Result) -> dict[str, list]:
    cols: dict[str, list] = {"condition": [], "new_tokens": [], "repeat": [], "unique": [], "mode_share": []}
    for c in result.conditions:
        for n, us in c.unique.items():
            for r, u in enumerate(us):
                cols["condition"].append(c.name)
                cols["new_tokens"].append(n)
                cols["repeat"].append(r)
                cols["unique"].append(u)
                cols["mode_share"].append(c.mode_share[n][r])
    return cols
