"""The causal map of a divergent pair: how much each differing routing cell moves the split.

Pair (A, B) with first split t*: the metric is the *logit difference at t** of the patched run's
row, the other run's token at t* minus its own, read at position t*-1 (negative unpatched: its own
token wins). For every routing cell (layer, position) before t* where the two rows' decisions
differ, in both directions (B patched toward A, and A toward B), in the recorded batch and step
structure with every row's tokens teacher-forced (`lab.counterfactual.forced`):

- *decision*: the row's decision at the cell (experts, kept flags, gates) set to the other run's;
- *queue*: the row's kept flags set as the other batch's queue decided them for the same experts
  (the rows that took the slots ahead withdrawn or added); not applicable where no shared expert's
  kept flag differs.

A first-order estimate of every cell (`lab.counterfactual.estimate`) orders the exact reruns: every
decode cell is patched exactly (a few decode steps each), prefill cells in the estimate's order
until the estimated effect left is small or `MAX_EXACT_PREFILL` reruns per direction are spent
(each prefill rerun repeats the whole prefill); each cell says whether its effect is exact or
estimated. The joint effect of all differing cells is measured exactly beside the sum of the
singles. A direction's exact patches, and the exact null draws of each class, go to
`ForcedRun.logit_differences` together: those resuming from one kept state run as stacked copies
of the batch, one forward per step.

Nulls (`lab.counterfactual.nulls`) are matched by position class and change size; the chain back
from the decisive cell is `lab.counterfactual.chain`.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from lab.counterfactual.chain import follow_chain
from lab.counterfactual.estimate import effects, gates, linearize, supports_estimates
from lab.counterfactual.forced import Change, ForcedRun
from lab.counterfactual.nulls import null_test
from lab.counterfactual.reruns import replay_cells
from model.intervention import SetKept
from model.replay import ReplayRouting
from traces.analysis.causal_map import CellEffect, ChainLink, PairMap

#: Exact decision patches of prefill cells per direction, at most, in the estimate's order (every
#: decode cell is patched exactly: its rerun is a few decode steps).
MAX_EXACT_PREFILL = 4
#: Exact patching stops once the estimated effect of the cells left is below this share of |baseline|.
REMAINING_SHARE = 0.05


@dataclass
class Side:
    """One direction: run X's row patched toward run Y's decisions and token."""

    name: str                  # "A" or "B"
    run: str
    row: int
    own: ReplayRouting         # X's recorded routing of the row
    other: ReplayRouting       # Y's
    own_token: int
    other_token: int
    forced: ForcedRun
    tokens: list[int]          # the row's tokens 0..t*-1
    cells: list[tuple[int, int, int]] = field(default_factory=list)   # (layer, position, changed)


def differing_cells(own: ReplayRouting, other: ReplayRouting, t_star: int) -> list[tuple[int, int, int]]:
    """(layer, position, candidates changed) of every cell before t* whose decisions differ."""
    e0, k0 = np.asarray(own.expert)[:, :t_star], np.asarray(own.kept)[:, :t_star]
    e1, k1 = np.asarray(other.expert)[:, :t_star], np.asarray(other.kept)[:, :t_star]
    out = []
    L, T, K = e0.shape
    for p in range(T):
        for layer in range(L):
            a = set(zip(e0[layer, p].tolist(), k0[layer, p].tolist(), strict=True))
            b = set(zip(e1[layer, p].tolist(), k1[layer, p].tolist(), strict=True))
            if a != b:
                out.append((layer, p, K - len(a & b)))
    return out


def queue_kept(own: ReplayRouting, other: ReplayRouting, layer: int, p: int) -> tuple[bool, ...] | None:
    """The row's own candidates kept as the other batch's queue kept the same experts; None when that
    changes nothing (no shared expert whose kept flag differs)."""
    e0, k0 = np.asarray(own.expert)[layer, p], np.asarray(own.kept)[layer, p]
    e1, k1 = np.asarray(other.expert)[layer, p], np.asarray(other.kept)[layer, p]
    theirs = dict(zip(e1.tolist(), k1.tolist(), strict=True))
    kept = tuple(bool(theirs.get(int(e), bool(k))) for e, k in zip(e0, k0, strict=True))
    return None if kept == tuple(bool(k) for k in k0) else kept


def causal_map(side_b: Side, side_a: Side, t_star: int, prompt_len: int, model, policy, *,
               exact_all: bool = False, chain: bool = True) -> PairMap:
    """The map of one pair, both directions (see the module docstring); level 1 alone (no chain)
    without `chain`."""
    started = time.perf_counter()
    cells: list[CellEffect] = []
    result = PairMap(t_star=t_star, prompt_len=prompt_len)
    for side in (side_b, side_a):
        side.cells = differing_cells(side.own, side.other, t_star)
        _direction(side, t_star, prompt_len, model, policy, result, cells, exact_all)
    result.cells = cells
    result.chain = _chain(side_b, side_a, result, t_star, prompt_len, model, policy) if chain else []
    result.seconds = time.perf_counter() - started
    return result


def _direction(side: Side, t_star: int, prompt_len: int, model, policy, result: PairMap,
               cells: list[CellEffect], exact_all: bool) -> None:
    f, row, q = side.forced, side.row, t_star - 1
    plus, minus = side.other_token, side.own_token
    baseline = f.logit_difference(row, q, plus, minus)
    result.baseline[side.name] = baseline
    if not side.cells:
        result.joint[side.name] = 0.0
        result.sum_singles[side.name] = 0.0
        return
    n = len(side.cells)
    lin = None
    estimate = np.full(n, math.nan)
    if supports_estimates(model):
        lin = linearize(model, policy, side.tokens, side.own,
                        lambda logits, router: logits[q, plus] - logits[q, minus])
        for layer in {c[0] for c in side.cells}:
            idx = [i for i, c in enumerate(side.cells) if c[0] == layer]
            pos = np.array([side.cells[i][1] for i in idx])
            estimate[idx] = effects(model, lin, layer, pos, np.asarray(side.other.expert)[layer, pos],
                                    np.asarray(side.other.kept)[layer, pos],
                                    np.asarray(side.other.gate)[layer, pos], policy.norm)
    exact = np.full(n, math.nan)
    queue = np.full(n, math.nan)
    # every exact patch of the direction in one call: those resuming from one kept state run together
    everything = [(c[0], c[1]) for c in side.cells]
    changes = [Change({row: replay_cells(side.other, everything)})]     # the joint patch first
    slots: list[tuple[np.ndarray, int]] = []
    for i in _exact_order(side.cells, estimate, prompt_len, baseline, exact_all or lin is None):
        layer, p, _ = side.cells[i]
        changes.append(Change({row: replay_cells(side.other, [(layer, p)])}))
        slots.append((exact, i))
        kept = queue_kept(side.own, side.other, layer, p)
        if kept is not None:
            changes.append(Change(edits=(SetKept(f.step_of(row, p), layer, row, p, kept),)))
            slots.append((queue, i))
    values = f.logit_differences(row, q, plus, minus, changes) - baseline
    result.joint[side.name] = float(values[0])
    for (target, i), v in zip(slots, values[1:], strict=True):
        target[i] = v
    value = np.where(np.isnan(exact), estimate, exact)
    result.sum_singles[side.name] = float(np.nansum(value))
    rerun = functools.partial(_exact_draws, side, lin, q, policy.norm, baseline)
    tests = null_test(model, policy, lin, side, estimate, t_star, prompt_len, baseline, exact=exact,
                      rerun=rerun)[0] if lin else None
    for i, (layer, p, changed) in enumerate(side.cells):
        t = tests[i] if tests else None
        cells.append(CellEffect(
            patched=side.name, layer=layer, position=p, step=f.step_of(row, p), prefill=p < prompt_len,
            changed=changed, estimate=float(estimate[i]), effect=float(value[i]),
            exact=not math.isnan(exact[i]), queue=float(queue[i]),
            percentile=t.percentile if t else math.nan, p_value=t.p_value if t else math.nan,
            null_flip=t.flip_rate if t else math.nan, null_draws=t.draws if t else 0,
            null_exact=t.exact if t else False, null_exceed=t.exceed if t else math.nan))


def _exact_draws(side: Side, lin, q: int, norm: str, baseline: float, draws) -> np.ndarray:
    """Exact effects of null draws, rerun together as stacked copies of the batch
    (`ForcedRun.logit_differences`)."""
    changes = draw_changes(side, lin, norm, draws)
    return side.forced.logit_differences(side.row, q, side.other_token, side.own_token, changes) - baseline


def draw_changes(side: Side, lin, norm: str, draws) -> list[Change]:
    """Each null draw as a change of the side's row: its cell replayed with its random decision, gates
    as the policy gives them from the row's scores."""
    L, T, K = np.asarray(side.own.expert).shape
    n = len(draws.effect)
    gate = np.zeros((n, K), dtype=np.float32)
    for layer in np.unique(draws.layer):
        idx = np.nonzero(draws.layer == layer)[0]
        e = torch.as_tensor(draws.expert[idx]).long()
        gate[idx] = gates(lin.probs[int(layer)][draws.position[idx]], e, torch.as_tensor(draws.kept[idx]),
                          norm).numpy()
    changes = []
    for i in range(n):
        layer, p = int(draws.layer[i]), int(draws.position[i])
        expert = np.full((L, T, K), -1, dtype=np.int64)
        kept = np.zeros((L, T, K), dtype=bool)
        gates_i = np.zeros((L, T, K), dtype=np.float32)
        expert[layer, p], kept[layer, p], gates_i[layer, p] = draws.expert[i], draws.kept[i], gate[i]
        changes.append(Change({side.row: ReplayRouting(expert, kept, gates_i)}))
    return changes


def _exact_order(cells, estimate: np.ndarray, prompt_len: int, baseline: float, every: bool) -> list[int]:
    """The cells to patch exactly: every one with `every`; else every decode cell (a rerun of a few
    steps) and the prefill cells in the estimate's order, at most `MAX_EXACT_PREFILL`, until their
    estimated effect left is below `REMAINING_SHARE` of |baseline|."""
    if every:
        return list(range(len(cells)))
    decode = [i for i, c in enumerate(cells) if c[1] >= prompt_len]
    prefill = sorted((i for i, c in enumerate(cells) if c[1] < prompt_len),
                     key=lambda i: -abs(np.nan_to_num(estimate[i])))
    left = float(np.nansum(np.abs(estimate[prefill]))) if prefill else 0.0
    chosen = []
    for i in prefill[:MAX_EXACT_PREFILL]:
        if left < REMAINING_SHARE * abs(baseline):
            break
        chosen.append(i)
        left -= abs(np.nan_to_num(estimate[i]))
    return decode + chosen


def _chain(side_b: Side, side_a: Side, result: PairMap, t_star: int, prompt_len: int, model,
           policy) -> list[ChainLink]:
    """The chain of the strongest cell beating its null, of either direction (none: empty)."""
    decisive = [c for c in result.cells if c.beats_null]
    if not decisive or not supports_estimates(model):
        return []
    top = max(decisive, key=lambda c: abs(c.effect))
    side = side_b if top.patched == "B" else side_a
    return follow_chain(model, policy, side, top, t_star, prompt_len)


class MapRunner:
    """Causal maps of the pairs of one trace: one teacher-forced rerun (`ForcedRun`) per run, whose
    kept states every pair it belongs to resumes from. `edits` maps a run generated with interventions
    (a planted event) to them: its reruns apply them too."""

    def __init__(self, reruns, *, exact_all: bool = False, edits: dict[str, tuple] | None = None,
                 chain: bool = True, stack: bool = True):
        self.reruns = reruns            # `lab.counterfactual.reruns.Reruns`: settings and the model
        self.exact_all = exact_all
        self.chain = chain              # level 2 too (the chain back to the batch)
        self.stack = stack              # reruns stacked as copies of the batch (False: one per change)
        self.edits = edits or {}
        self._forced: dict[str, ForcedRun] = {}
        self._scratch: list = [None]    # the stacked caches' memory, shared by the runs' reruns

    def forced(self, name: str) -> ForcedRun:
        if name not in self._forced:
            s = self.reruns.settings(name)
            self._forced[name] = ForcedRun(self.reruns.model, self.reruns.trace.run(name), s.policy,
                                           s.kernel_mode, self.edits.get(name, ()), self._scratch)
            self._forced[name].stack = self.stack
        return self._forced[name]

    def side(self, name: str, run: str, row: int, other_run: str, other_row: int, t_star: int) -> Side:
        trace = self.reruns.trace
        tokens = np.asarray(trace.run(run).tokens[row, : t_star + 1]).astype(int).tolist()
        other_token = int(np.asarray(trace.run(other_run).tokens[other_row, t_star]))
        return Side(name, run, row, self.reruns.reference_routing(run, row),
                    self.reruns.reference_routing(other_run, other_row), tokens[t_star], other_token,
                    self.forced(run), tokens[:t_star])

    def pair(self, v) -> PairMap:
        """The map of verdict `v`'s pair: B is `v.run`'s row, A the reference's."""
        b = self.side("B", v.run, v.row, v.ref_run, v.ref_row, v.t_star)
        a = self.side("A", v.ref_run, v.ref_row, v.run, v.row, v.t_star)
        s = self.reruns.settings(v.run)
        return causal_map(b, a, v.t_star, v.prompt_len, self.reruns.model, s.policy, exact_all=self.exact_all,
                          chain=self.chain)
