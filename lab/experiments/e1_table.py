"""E1, the 152334H table: a probe in N random batch compositions, U(N) per condition.

Each repeat draws N fresh compositions (batch size, probe row, partners) from seed + repeat; every
condition runs the same compositions, so rows of the table differ only in the condition. With
several probes (`--probes`) each probe runs the same draws into its own trace, and the table gives
the mean U over probes and repeats with its two-stage bootstrap 95% interval. Only the
longest `--new-tokens` is generated: greedy decoding of one batch is deterministic, so the first n
tokens of a longer run are exactly what a run of n tokens gives, and U at each shorter length is
measured on that prefix. The dense control is another model, so its runs go to their own trace.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from lab.experiments.compositions import random_compositions
from lab.experiments.conditions import e1_conditions
from lab.experiments.measures import DropCounts, bootstrap_interval, mean, unique_completions
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, RunRecord, check_lengths
from lab.experiments.tables import markdown_table, percent, ranges

log = logging.getLogger(__name__)

#: 152334H (2023): unique completions of 30 calls at temperature 0 (128 and 256 new tokens).
ANCHORS = (("gpt-4", "11.67 (12, 11, 12)", "30"), ("gpt-3.5-turbo", "3.67", "9"),
           ("text-davinci-003", "3.0", "5"), ("text-davinci-001", "2.0", "2"), ("davinci", "1", "-"))


@dataclass
class ConditionResult:
    """U(N) and mode share per new-token count and repeat, and the probe's drops, of one condition."""

    name: str
    unique: dict[int, list[int]] = field(default_factory=dict)  # n new tokens -> U per (probe, repeat)
    mode_share: dict[int, list[float]] = field(default_factory=dict)
    probe_drops: DropCounts = field(default_factory=DropCounts)
    cells: list[tuple[int, int]] = field(default_factory=list)   # (probe, repeat) of each U, in order

    def by_probe(self, n: int) -> dict[int, list[int]]:
        """{probe: [U per repeat]} at n new tokens."""
        out: dict[int, list[int]] = {}
        for (p, _r), u in zip(self.cells, self.unique.get(n, []), strict=False):
            out.setdefault(p, []).append(u)
        return out

    def interval(self, n: int) -> tuple[float, float] | None:
        return bootstrap_interval(self.by_probe(n))


@dataclass
class E1Result:
    settings: Settings
    n_partners: int
    conditions: list[ConditionResult]
    paths: list[Path]
    notes: list[str]

    @property
    def n_probes(self) -> int:
        return len(self.settings.all_probes)

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
                cell = _number(mean(us)) if us else "-"
                interval = c.interval(n)
                if interval is not None and self.n_probes > 1:
                    cell += f" [{_number(interval[0])}, {_number(interval[1])}]"
                elif len(us) > 1:
                    cell += f" ({', '.join(map(str, us))})"
                row += [cell, percent(mean(c.mode_share.get(n, [])), 0) if us else "-"]
            d = c.probe_drops
            has_routing = d.prefill_chosen + d.decode_chosen > 0  # the dense control has no experts
            row.append(f"{percent(d.prefill_share)} / {percent(d.decode_share)}" if has_routing else "-")
            rows.append(row)
        if self.n_probes > 1:
            what = (f"{self.n_probes} probes ({', '.join(repr(p) for p in s.all_probes)})")
            how = (f"U is the mean over the {self.n_probes} probes x {s.repeats} repeats, with its "
                   f"two-stage bootstrap 95% interval (probes, then repeats) in brackets")
        else:
            what = f"probe {s.probe!r}"
            how = "U is the mean over repeats, each in brackets"
        lines = [
            f"E1: {what}; N = {N} compositions per repeat (batch size from "
            f"{ranges(s.batch_sizes)}, probe row and partners from {self.n_partners} at random), greedy, "
            f"seed {s.seed}, {s.repeats} repeat{'s' if s.repeats > 1 else ''} ({how}); max new tokens "
            f"{max(s.new_tokens)} (bytes: a GPT-4 token is about 4 bytes of English text).",
            "",
            markdown_table(header, rows),
            "",
        ]
        if self.n_probes > 1:
            lines += ["U per probe (mean over repeats):", "", self.per_probe_table(), ""]
        if len(s.new_tokens) > 1:
            lines.append(f"U at fewer than {max(s.new_tokens)} tokens is measured on the prefix of the "
                         f"{max(s.new_tokens)}-token runs (greedy generation of a batch is deterministic).")
        lines += [f"Mode share: share of the {N} runs that gave the most common completion.", *self.notes,
                  "", "152334H (2023), hosted models, 30 calls at temperature 0:", "",
                  markdown_table(["model", "U(30) at 128 tokens", "U(30) at 256 tokens"], ANCHORS)]
        lines += ["", "Traces: " + ", ".join(str(p) for p in self.paths)]
        return "\n".join(lines)


    def per_probe_table(self) -> str:
        s = self.settings
        header = ["condition"] + [f"probe {i + 1} at {n}" for n in s.new_tokens
                                  for i in range(self.n_probes)]
        rows = [[c.name] + [_number(mean(c.by_probe(n).get(i, []))) for n in s.new_tokens
                            for i in range(self.n_probes)] for c in self.conditions]
        return markdown_table(header, rows)


def _number(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def probe_trace_path(output: Path, index: int) -> Path:
    """`e1.h5` for the first probe, `e1-probe2.h5` for the second, and so on."""
    suffix = output.suffix or ".h5"
    return output if index == 0 else output.with_name(f"{output.stem}-probe{index + 1}{suffix}")


def dense_trace_path(output: Path) -> Path:
    """`e1.h5` -> `e1-dense.h5`: the dense control's own trace beside the MoE one."""
    return output.with_name(f"{output.stem}-dense{output.suffix or '.h5'}")


def run_e1(settings: Settings, models: Models, pool: RequestPool,
           progress: ProgressFn = no_progress) -> E1Result:
    """Record E1 into `settings.output` (one trace per probe, and the dense control's beside each) and
    return the table's data."""
    s = settings
    n_max = s.max_new_tokens
    pools = [pool if p == pool.texts[0] else RequestPool.build(p, list(pool.texts[1:])) for p in s.all_probes]
    for probe_pool in pools:
        check_lengths(probe_pool, models.moe, n_max)
    conditions = e1_conditions(s.presets, s.capacity_factors, s.kernel_modes, models.dense is not None,
                               s.min_capacities)
    draws = [random_compositions(s.seed + r, s.compositions, pool.n_partners, s.batch_sizes)
             for r in range(s.repeats)]
    results = {c.name: ConditionResult(c.name) for c in conditions}
    total = len(pools) * s.repeats * s.compositions * len(conditions)
    notes = [models.dense_note] if models.dense_note else []
    paths: list[Path] = []
    done = 0
    for p, probe_pool in enumerate(pools):
        output = probe_trace_path(s.output, p)
        paths.append(output)
        probe_rows: dict[tuple[str, int], list[RunRecord]] = {}
        with _Recordings(output, models, probe_pool, conditions, s.seed, s.recording_logits) as recs:
            if recs.dense is not None:
                paths.append(recs.dense.path)
            for r, comps in enumerate(draws):
                for i, comp in enumerate(comps):
                    for cond in conditions:
                        rec = recs.dense if cond.dense else recs.moe
                        run = rec.record(f"r{r}-c{i:02d}-{cond.slug}", comp, cond, n_max, seed=s.seed + r)
                        probe_rows.setdefault((cond.name, r), []).append(run)
                        results[cond.name].probe_drops += run.probe_drops
                        done += 1
                        progress(done, total, f"E1 probe {p + 1}, repeat {r + 1}, composition {i + 1}: "
                                              f"{cond.name}")
            for (name, r), runs in probe_rows.items():
                results[name].cells.append((p, r))
                for n in s.new_tokens:
                    comp = unique_completions([run.probe_tokens for run in runs], int(runs[0].prompt_len[
                        runs[0].composition.probe_row]), n)
                    results[name].unique.setdefault(n, []).append(comp.n_unique)
                    results[name].mode_share.setdefault(n, []).append(comp.mode_share)
            out = E1Result(s, pool.n_partners, [results[c.name] for c in conditions], paths, notes)
            recs.moe.write_table("e1_unique_completions", _columns(out, p), {"probe": probe_pool.texts[0],
                                                                             "N": s.compositions})
    return E1Result(s, pool.n_partners, [results[c.name] for c in conditions], paths, notes)


class _Recordings:
    """The MoE trace of one probe and, when the conditions hold the dense control, its own trace."""

    def __init__(self, output: Path, models: Models, pool: RequestPool, conditions, seed: int, logits: dict):
        capacity_policy = next(c.policy for c in conditions if c.policy is not None and not c.policy.dropless)
        self.moe = Recording(output, models.moe, pool, experiment="E1", policy=capacity_policy,
                             kernel_mode="native", seed=seed, **logits)
        self.dense = None
        if any(c.dense for c in conditions):
            try:
                self.dense = Recording(dense_trace_path(output), models.dense, pool, experiment="E1",
                                       policy=None, kernel_mode="native", seed=seed, **logits)
            except BaseException:
                self.moe.close()
                raise

    def __enter__(self) -> _Recordings:
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.dense is not None:
                self.dense.close()
        finally:
            self.moe.close()


def _columns(result: E1Result, probe: int) -> dict[str, list]:
    """The table of one probe's trace: U and mode share per condition, new-token count and repeat."""
    cols: dict[str, list] = {"condition": [], "new_tokens": [], "repeat": [], "unique": [], "mode_share": []}
    for c in result.conditions:
        for n, us in c.unique.items():
            for (p, r), u, share in zip(c.cells, us, c.mode_share[n], strict=True):
                if p != probe:
                    continue
                cols["condition"].append(c.name)
                cols["new_tokens"].append(n)
                cols["repeat"].append(r)
                cols["unique"].append(u)
                cols["mode_share"].append(share)
    return cols
