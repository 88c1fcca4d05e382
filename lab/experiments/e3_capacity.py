"""E3, the capacity sweep: cf x capacity floor x batch size x priority x probe row x partners (random
or crowding).

Every cell runs the probe in one batch grouped per batch and counts the probe's dropped candidates
separately at prefill (one group of every prompt token in the batch) and at decode (one group of a
token per running row: the small groups where capacity bites). Its completion is compared with the
probe's own completion alone under dropless routing, the reference. Crowding partners are the pool's
prompts whose tokens ask most for the experts the probe's tokens ask for (from one dropless
prefill of the whole pool).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from lab.experiments import ExperimentError
from lab.experiments.compositions import Composition, crowding_order, place, solo
from lab.experiments.conditions import Condition, capacity, dropless
from lab.experiments.measures import DropCounts, completion_matrix
from lab.experiments.options import Settings
from lab.experiments.progress import ProgressFn, no_progress
from lab.experiments.session import Models, Recording, RequestPool, check_lengths, generate_batch
from lab.experiments.tables import markdown_table, percent, ranges
from model.recorder import Recorder
from traces import schema

log = logging.getLogger(__name__)

ROWS = ("first", "last")
PARTNERS = ("random", "crowding")


@dataclass(frozen=True)
class Cell:
    """One run of the sweep and what it measured."""

    preset: str
    cf: float
    min_capacity: int
    batch_size: int
    priority: str
    kernel_mode: str
    row: str
    partners: str
    draw: int
    run: str
    probe: DropCounts
    batch: DropCounts
    first_divergence: int  # new-token index where the probe's completion leaves the reference, -1 none


@dataclass
class E3Result:
    settings: Settings
    cells: list[Cell]
    notes: list[str]

    def table(self) -> str:
        s = self.settings
        n = s.max_new_tokens
        grid = [[c.preset, f"{c.cf:g}", c.min_capacity, c.batch_size, c.priority, c.kernel_mode, c.row,
                 c.partners,
                 percent(c.probe.prefill_share), percent(c.probe.decode_share),
                 percent(c.batch.prefill_share), percent(c.batch.decode_share),
                 c.first_divergence if c.first_divergence >= 0 else "-"]
                for c in self.cells]
        header = ["preset", "cf", "floor", "B", "priority", "kernels", "probe row", "partners",
                  "probe drops prefill", "probe drops decode", "batch drops prefill", "batch drops decode",
                  "t* (new token)"]
        lines = [f"E3: probe {s.probe!r}, {n} new tokens, batch sizes {ranges(s.batch_sizes)}, grouped per "
                 f"batch; t*: first new token differing from the probe alone under dropless routing.", "",
                 markdown_table(header, grid), "", "Marginals (mean over the cells at each level):", "",
                 markdown_table(["factor", "level", "runs", "probe drops prefill", "probe drops decode",
                                 "diverged"], self.marginals()), *self.notes]
        return "\n".join(lines)

    def marginals(self) -> list[list[object]]:
        out = []
        for factor, key in (("cf", lambda c: f"{c.cf:g}"), ("floor", lambda c: c.min_capacity),
                            ("B", lambda c: c.batch_size),
                            ("priority", lambda c: c.priority), ("probe row", lambda c: c.row),
                            ("partners", lambda c: c.partners), ("kernels", lambda c: c.kernel_mode),
                            ("preset", lambda c: c.preset)):
            groups: dict[object, list[Cell]] = defaultdict(list)
            for c in self.cells:
                groups[key(c)].append(c)
            if len(groups) < 2:
                continue
            for level, cells in groups.items():
                total = sum((c.probe for c in cells), DropCounts())
                diverged = sum(c.first_divergence >= 0 for c in cells)
                out.append([factor, level, len(cells), percent(total.prefill_share),
                            percent(total.decode_share), f"{diverged}/{len(cells)}"])
        return out


def expert_loads(model, pool: RequestPool, kernel_mode: str = "native") -> np.ndarray:
    """[R, L, E] candidates each request's prompt sends to each expert (one dropless prefill)."""
    requests = tuple(range(len(pool.texts)))
    recorder = Recorder(logits=None)
    result = generate_batch(model, pool, Composition(requests, 0), dropless(kernel_mode), 0, recorder)
    expert = recorder.arrays(result)[schema.EXPERT]  # [L,R,T,K]
    L, R, T, K = expert.shape
    E = model.config.n_experts
    loads = np.zeros((R, L, E), np.int64)
    for r in range(R):
        for layer in range(L):
            chosen = expert[layer, r][expert[layer, r] >= 0]
            loads[r, layer] = np.bincount(chosen, minlength=E)
    return loads


def _composition(rng: np.random.Generator, B: int, row: str, partners: str, crowding: list[int],
                 n_partners: int) -> Composition:
    if partners == "crowding":
        chosen = crowding[: B - 1]
        chosen = [chosen[i % len(chosen)] for i in range(B - 1)] if chosen else []
    else:
        chosen = [int(p) for p in rng.choice(np.arange(1, n_partners + 1), size=B - 1,
                                             replace=n_partners < B - 1)]
    return place(0 if row == "first" else B - 1, chosen)


def run_e3(settings: Settings, models: Models, pool: RequestPool,
           progress: ProgressFn = no_progress) -> E3Result:
    """Record the sweep into `settings.output` and return its cells."""
    s = settings
    model = models.moe
    n = s.max_new_tokens
    check_lengths(pool, model, n)
    sizes = [B for B in s.batch_sizes if B >= 2]
    notes = [] if len(sizes) == len(s.batch_sizes) else [
        "Batch size 1 left out: a probe alone has no partners."]
    if not sizes:
        raise ExperimentError("--batch-sizes: e3 needs batch sizes of 2 or more (partners share the batch)")
    crowding = [int(i) + 1 for i in crowding_order(*_split(expert_loads(model, pool)))]
    plan = [(p, cf, m, B, prio, mode, row, partners, d)
            for p in s.presets for cf in s.capacity_factors for m in s.min_capacities for B in sizes
            for prio in s.priorities
            for mode in s.kernel_modes for row in ROWS for partners in PARTNERS
            for d in range(s.compositions if partners == "random" else 1)]
    total = len(plan) + 1
    cells: list[Cell] = []
    rng = np.random.default_rng(s.seed)
    default_policy = capacity(s.presets[0], s.capacity_factors[0], "native").policy
    with Recording(s.output, model, pool, experiment="E3", policy=default_policy, kernel_mode="native",
                   seed=s.seed, **s.recording_logits) as rec:
        ref = rec.record("reference-solo-dropless", solo(), dropless("native"), n, seed=s.seed)
        ref_new = completion_matrix([ref.probe_tokens], int(ref.prompt_len[0]), n)[0]
        progress(1, total, "E3 reference: the probe alone, dropless")
        for i, (p, cf, m, B, prio, mode, row, partners, d) in enumerate(plan):
            comp = _composition(rng, B, row, partners, crowding, pool.n_partners)
            cond: Condition = capacity(p, cf, mode, priority=prio, min_capacity=m)
            floor = f"-min{m}" if m else ""
            name = f"{p}-cf{cf:g}{floor}-B{B}-{prio}-{mode}-{row}-{partners}-{d}"
            run = rec.record(name, comp, cond, n, seed=s.seed)
            new = completion_matrix([run.probe_tokens], int(run.prompt_len[comp.probe_row]), n)[0]
            differs = np.flatnonzero(new != ref_new)
            cells.append(Cell(p, cf, m, B, prio, mode, row, partners, d, name, run.probe_drops,
                              run.batch_drops, int(differs[0]) if differs.size else -1))
            progress(i + 2, total, f"E3 {name}")
        result = E3Result(s, cells, notes)
        rec.write_table("e3_capacity", _columns(cells), {"probe": s.probe, "new_tokens": n})
    return result


def _split(loads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return loads[0], loads[1:]


def _columns(cells: list[Cell]) -> dict[str, list]:
    return {
        "run": [c.run for c in cells], "preset": [c.preset for c in cells], "cf": [c.cf for c in cells],
        "min_capacity": [c.min_capacity for c in cells],
        "batch_size": [c.batch_size for c in cells], "priority": [c.priority for c in cells],
        "kernel_mode": [c.kernel_mode for c in cells], "probe_row": [c.row for c in cells],
        "partners": [c.partners for c in cells],
        "probe_prefill_drop_share": [c.probe.prefill_share for c in cells],
        "probe_decode_drop_share": [c.probe.decode_share for c in cells],
        "batch_prefill_drop_share": [c.batch.prefill_share for c in cells],
        "batch_decode_drop_share": [c.batch.decode_share for c in cells],
        "first_divergence": [c.first_divergence for c in cells],
    }
