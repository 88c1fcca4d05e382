"""Position-matched nulls for the causal map: what a random routing change of the same size does at
cells where the two runs agree, in the same position class.

A cell's class is `prefill` (every prompt position is routed in one step: no time order) or its
decode distance to t* (t*-1, t*-2, ...): a change at t*-1 moves the logits far more than one in the
prompt, so a pooled null would hide every prefill cell and flatter every cell at t*-1. A draw picks
a cell of the class where A and B agree (a decode class with none draws at its own cells, among
experts neither run chose there) and gives `changed` of its candidates random other experts (kept;
gates as the policy gives them from the row's scores), the same number of candidates the tested
cell changes. Draws are seeded by the patched run and row, t*, the class and the size: a rerun, or
the pair with A and B swapped, draws the same changes.

Decode classes up to `EXACT_NULL_DISTANCE` are drawn exactly where the caller can rerun (a draw
at t*-d reruns d decode steps from a kept state): a cell at t*-1 is patched exactly, and routing
downstream of it reacts, which a first-order estimate holding routing fixed cannot follow, so its
exact effect is tested against exact draws. Prefill classes and farther decode classes test the
cell's estimate against estimated draws (a prefill rerun repeats the whole prefill;
`bench/causal_map.py` checks the estimates against exact patching).

A cell's p-value is the share of draws at least as large in magnitude ((1 + hits) / (1 + draws)),
corrected by weighted Bonferroni: alpha is split equally over the position classes the pair's
cells fall in, then over the cells of each class (factor classes x cells in the class; the factors'
reciprocals sum to 1 over all cells). Its percentile is the share of draws below it; its
near-tie share (`NullTest.exceed`) the share of draws at least |baseline| in magnitude, the patched
run's own margin at t* (`traces.analysis.map_outcome`). Draws per
class: `max(MIN_DRAWS, DRAWS_PER_CELL * factor)`, at most `MAX_DRAWS` (`MAX_EXACT_DRAWS` exact),
so that the smallest corrected p-value can reach `traces.analysis.causal_map.ALPHA`.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass

import numpy as np

from lab.counterfactual.estimate import effects

MIN_DRAWS = 200
DRAWS_PER_CELL = 25
MAX_DRAWS = 4000
#: Exact draws per decode class, at most.
MAX_EXACT_DRAWS = 640
#: Decode distances to t* whose nulls are drawn exactly (a draw at t*-d reruns d steps: exact draws at
#: every distance of a late split would cost the square of its length); farther classes are estimated.
EXACT_NULL_DISTANCE = 2


@dataclass(frozen=True)
class NullTest:
    percentile: float
    p_value: float      # corrected for the cells tested
    flip_rate: float    # share of draws that would flip the token (effect above -baseline)
    draws: int
    exact: bool = False     # the draws (and the cell's effect tested) are exact reruns
    exceed: float = math.nan    # share of draws at least |baseline| in magnitude (the near-tie test)


def position_class(position: int, t_star: int, prompt_len: int) -> int:
    """0 for prefill, else the decode distance t* - position (1 is t*-1)."""
    return 0 if position < prompt_len else t_star - position


@dataclass(frozen=True)
class Draws:
    """Random changes: cells (layer[n], position[n]), their new experts and kept flags [n,K], and
    their estimated effects [n]."""

    layer: np.ndarray
    position: np.ndarray
    expert: np.ndarray
    kept: np.ndarray
    effect: np.ndarray


def null_draws(model, policy, lin, side, klass: int, size: int, n: int, t_star: int,
               prompt_len: int) -> Draws:
    """`n` random changes of `size` candidates at agreeing cells of `klass`, with estimated effects.
    A decode class whose cells all differ draws at its own cells, among experts neither run chose
    there."""
    own_e = np.asarray(side.own.expert)
    own_k = np.asarray(side.own.kept)
    other_e = np.asarray(side.other.expert)
    L, _, K = own_e.shape
    E = int(lin.probs[0].shape[-1])
    differ = {(c[0], c[1]) for c in side.cells}
    agree = [(layer, p) for p in range(t_star) for layer in range(L) if (layer, p) not in differ]
    pool = _in_class(agree, klass, t_star, prompt_len)
    if not pool and klass > 0:
        pool = [(layer, t_star - klass) for layer in range(L)]
    if not pool:
        empty = np.zeros(0, dtype=int)
        return Draws(empty, empty, np.zeros((0, K), dtype=int), np.zeros((0, K), dtype=bool), np.zeros(0))
    rng = np.random.default_rng([t_star, zlib.crc32(side.run.encode()), side.row, klass, size])
    picks = rng.integers(len(pool), size=n)
    cells = np.array(pool, dtype=int)[picks]                      # [n,2]
    layers, positions = cells[:, 0], cells[:, 1]
    expert = own_e[layers, positions].copy()                      # [n,K]
    kept = own_k[layers, positions].copy()
    expert, kept = _redraw(rng, expert, kept, other_e[layers, positions], size, E)
    out = np.zeros(n)
    for layer in np.unique(layers):
        idx = np.nonzero(layers == layer)[0]
        out[idx] = effects(model, lin, int(layer), positions[idx], expert[idx], kept[idx], None, policy.norm)
    return Draws(layers, positions, expert, kept, out)


def _redraw(rng: np.random.Generator, expert: np.ndarray, kept: np.ndarray, other: np.ndarray, size: int,
            E: int) -> tuple[np.ndarray, np.ndarray]:
    """Each draw's expert[n,K] with `size` random candidates (distinct ranks) given random experts
    among those neither the row (expert) nor the other run (other[n,K]) chose there, distinct and
    kept; with too few such experts, among those the row did not choose (as many as there are)."""
    n, K = expert.shape
    m = min(size, K)
    slots = np.argsort(rng.random((n, K)), axis=1)[:, :m]                           # [n,m] distinct ranks
    choice = np.arange(E)
    mine = (expert[:, :, None] == choice).any(1)                                   # [n,E]
    free = ~(mine | (other[:, :, None] == choice).any(1))
    few = free.sum(1) < m
    free[few] = ~mine[few]
    count = np.minimum(free.sum(1), m)                                             # [n] candidates changed
    keys = np.where(free, rng.random((n, E)), np.inf)
    picked = np.argsort(keys, axis=1, kind="stable")[:, :m]                        # [n,m] distinct free
    rows, cols = np.nonzero(np.arange(m) < count[:, None])
    expert, kept = expert.copy(), kept.copy()
    expert[rows, slots[rows, cols]] = picked[rows, cols]
    kept[rows, slots[rows, cols]] = True
    return expert, kept


def _in_class(cells: list[tuple[int, int]], klass: int, t_star: int,
              prompt_len: int) -> list[tuple[int, int]]:
    if klass == 0:
        return [c for c in cells if c[1] < prompt_len]
    return [c for c in cells if c[1] >= prompt_len and t_star - c[1] == klass]


def null_test(model, policy, lin, side, estimate: np.ndarray, t_star: int, prompt_len: int,
              baseline: float, exact: np.ndarray | None = None,
              rerun=None) -> tuple[list[NullTest], dict[tuple[int, int], Draws]]:
    """The null test of each of the side's cells, and the draws of each (class, size).

    Where `rerun(draws) -> effects` is given, decode classes draw exactly (a rerun of a few decode
    steps per draw) and test the cells' `exact` effects; prefill classes, and every class without it,
    test the cells' estimates against estimated draws."""
    klass = [position_class(p, t_star, prompt_len) for _, p, _ in side.cells]
    classes = sorted(set(klass))
    draws_of: dict[tuple[int, int], Draws] = {}
    tests = []
    for i, (_, _, changed) in enumerate(side.cells):
        k = klass[i]
        factor = len(classes) * klass.count(k)     # weighted Bonferroni: alpha split over the classes
        exactly = (rerun is not None and 0 < k <= EXACT_NULL_DISTANCE and exact is not None
                   and not math.isnan(exact[i]))
        key = (k, changed)
        if key not in draws_of:
            n = min(MAX_EXACT_DRAWS if exactly else MAX_DRAWS, max(MIN_DRAWS, DRAWS_PER_CELL * factor))
            d = null_draws(model, policy, lin, side, k, changed, n, t_star, prompt_len)
            if exactly:
                d = dataclasses.replace(d, effect=rerun(d))
            draws_of[key] = d
        null = draws_of[key].effect
        v = exact[i] if exactly else estimate[i]
        if not null.size or math.isnan(v):
            tests.append(NullTest(math.nan, math.nan, math.nan, 0))
            continue
        size = np.abs(null)
        hits = int((size >= abs(v)).sum())
        p_value = min(1.0, (1 + hits) / (1 + null.size) * factor)
        tests.append(NullTest(100.0 * float((size < abs(v)).mean()), p_value,
                              float((null > -baseline).mean()), int(null.size), exactly,
                              float((size >= abs(baseline)).mean())))
    return tests, draws_of
