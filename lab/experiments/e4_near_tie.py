"""E4, the near-tie study: dropless routing, so no capacity coupling; only numerics can differ.

The probe runs alone (the reference) and in random compositions at each batch size; batch sizes are
chosen across the kernel classes E0 finds (1 alone; 2, 3, 4 and more in others). Each run's probe
row is compared with the reference by `traces.analysis.explain_pair`: whether any bit differs,
where the completion leaves the reference (t*), and why: a router flip (a near-tie in the router's
top-k) or an output flip (a near-tie in the next-token argmax), with the margins that were crossed.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import numpy as np

from lab.experiments.compositions import random_compositions, solo
from lab.experiments.conditions import dropless
from lab.experiments.measures import unique_completions
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, RunRecord, check_lengths
from lab.experiments.tables import markdown_table, ranges
from traces.analysis import RunArrays, Verdict, explain_pair, row_trace
from traces.analysis.cause_table import ROUTER_FLIP

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SizeResult:
    """The runs at one batch size against the reference."""

    batch_size: int
    kernel_mode: str
    verdicts: tuple[Verdict, ...]

    @property
    def bitwise_equal(self) -> int:
        return sum(v.root is None for v in self.verdicts)

    @property
    def diverged(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.diverged]

    def row(self) -> list[object]:
        div = self.diverged
        causes = Counter(v.cause for v in div)
        t_star = [v.new_index for v in div]
        margins = [v.router_margin for v in div if v.cause == ROUTER_FLIP and np.isfinite(v.router_margin)]
        logit = [v.logit_margin for v in div if np.isfinite(v.logit_margin)]
        return [self.batch_size, self.kernel_mode, len(self.verdicts), self.bitwise_equal, len(div),
                f"{int(np.median(t_star))}" if t_star else "-",
                ", ".join(f"{c} {k}" for c, k in causes.most_common()) or "-",
                f"{min(margins):.2e}" if margins else "-", f"{min(logit):.2e}" if logit else "-"]


@dataclass
class E4Result:
    settings: Settings
    sizes: list[SizeResult]
    unique: dict[str, tuple[int, int, float]]  # kernel mode -> (U, N, mode share) over every run

    def table(self) -> str:
        s = self.settings
        header = ["B", "kernels", "runs", "bitwise equal to alone", "diverged", "median t* (new token)",
                  "causes", "min router margin crossed", "min logit margin crossed"]
        lines = [f"E4: probe {s.probe!r}, dropless routing, {s.max_new_tokens} new tokens, "
                 f"{s.compositions} random compositions per batch size ({ranges(s.batch_sizes)}); the "
                 f"reference is the probe alone with the same kernels.", "",
                 markdown_table(header, [r.row() for r in self.sizes]), ""]
        for mode, (u, n, share) in self.unique.items():
            lines.append(f"{mode}: U({n}) = {u} over every run and the reference; mode share {share:.0%}.")
        return "\n".join(lines)


def _row(run: RunRecord):
    arrays = run.arrays
    ra = RunArrays.from_schema(run.name, arrays, request_ids=np.asarray(run.composition.requests),
                               probe_row=run.composition.probe_row)
    return row_trace(ra, run.composition.probe_row)


def run_e4(settings: Settings, models: Models, pool: RequestPool,
           progress: ProgressFn = no_progress) -> E4Result:
    """Record the study into `settings.output` and explain every run against the reference."""
    s = settings
    model = models.moe
    n = s.max_new_tokens
    check_lengths(pool, model, n)
    sizes = list(s.batch_sizes)
    plans = {B: [solo()] if B == 1 else random_compositions(s.seed + B, s.compositions, pool.n_partners, [B])
             for B in sizes}
    total = len(s.kernel_modes) * (1 + sum(len(p) for p in plans.values()))
    done = 0
    results: list[SizeResult] = []
    unique: dict[str, tuple[int, int, float]] = {}
    with Recording(s.output, model, pool, experiment="E4", policy=dropless().policy,
                   kernel_mode=s.kernel_modes[0], seed=s.seed, **s.recording_logits) as rec:
        for mode in s.kernel_modes:
            cond = dropless(mode)
            ref = rec.record(f"reference-{cond.slug}", solo(), cond, n, seed=s.seed, keep_arrays=True)
            ref_row = _row(ref)
            done += 1
            progress(done, total, f"E4 reference, {mode}")
            tokens = [ref.probe_tokens]
            for B in sizes:
                verdicts = []
                for i, comp in enumerate(plans[B]):
                    run = rec.record(f"B{B}-c{i:02d}-{cond.slug}", comp, cond, n, seed=s.seed + B,
                                     keep_arrays=True)
                    verdicts.append(explain_pair(ref_row, _row(run)))
                    tokens.append(run.probe_tokens)
                    done += 1
                    progress(done, total, f"E4 B={B} composition {i + 1}, {mode}")
                results.append(SizeResult(B, mode, tuple(verdicts)))
            comp_u = unique_completions(tokens, int(ref.prompt_len[0]), n)
            unique[mode] = (comp_u.n_unique, comp_u.n_runs, comp_u.mode_share)
        out = E4Result(s, results, unique)
        rec.write_table("e4_near_tie", _columns(results), {"probe": s.probe, "new_tokens": n})
    return out


def _columns(results: list[SizeResult]) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in ("run", "batch_size", "kernel_mode", "bitwise_equal", "t_star",
                                             "cause", "router_margin", "logit_margin", "logit_delta")}
    for r in results:
        for v in r.verdicts:
            for key, value in (("run", v.run), ("batch_size", r.batch_size), ("kernel_mode", r.kernel_mode),
                               ("bitwise_equal", v.root is None), ("t_star", v.t_star), ("cause", v.cause),
                               ("router_margin", v.router_margin), ("logit_margin", v.logit_margin),
                               ("logit_delta", v.logit_delta)):
                cols[key].append(value)
    return cols
