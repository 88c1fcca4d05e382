"""Batch compositions: which requests share the probe's batch, how many, and in which row it sits.

The hosted-API setting of 152334H is modelled by sampling, per call, a batch size, the probe's row
and its partners from a pool, all from one seeded generator, so a recording is reproducible. Request
id 0 is always the probe; partners are ids 1..P of the pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.experiments import ExperimentError
from lab.experiments.prompt_file import read_prompt_file

PROBE = 0  # request id of the probe in every recording's pool
MAX_DRAWS = 1000  # redraws allowed to find a composition not drawn before


@dataclass(frozen=True)
class Composition:
    """One batch: the request id in each row and the probe's row."""

    requests: tuple[int, ...]  # [B] request id of each row
    probe_row: int
    arrivals: tuple[int, ...] = ()  # [B] tick each row joins the batch (continuous batching); () all at 0

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("a composition needs at least one row")
        if not 0 <= self.probe_row < len(self.requests) or self.requests[self.probe_row] != PROBE:
            raise ValueError(f"probe_row {self.probe_row} does not hold the probe in {self.requests}")
        if self.arrivals and (len(self.arrivals) != len(self.requests) or min(self.arrivals) < 0):
            raise ValueError(f"arrivals {self.arrivals} must give one tick >= 0 per row")

    @property
    def batch_size(self) -> int:
        return len(self.requests)

    @property
    def label(self) -> str:
        """`B=4, probe in row 2, partners 7 3 12`."""
        partners = [r for b, r in enumerate(self.requests) if b != self.probe_row]
        tail = f", partners {' '.join(map(str, partners))}" if partners else ", alone"
        if self.arrivals:
            tail += f", arriving at ticks {' '.join(map(str, self.arrivals))}"
        return f"B={self.batch_size}, probe in row {self.probe_row}{tail}"


def read_partners(path: str | Path) -> list[str]:
    """Partner prompts of a pool file (`lab.experiments.prompt_file`: one per line, comments only
    before the first prompt)."""
    return read_prompt_file(path, "--partners")


def solo() -> Composition:
    """The probe alone in a batch of one."""
    return Composition((PROBE,), 0)


def place(probe_row: int, partners: Sequence[int]) -> Composition:
    """The probe at `probe_row` with the partners filling the other rows in order."""
    rows = list(partners)
    rows.insert(probe_row, PROBE)
    return Composition(tuple(int(r) for r in rows), probe_row)


def random_composition(rng: np.random.Generator, n_partners: int, batch_sizes: Sequence[int]) -> Composition:
    """A batch size from `batch_sizes`, a probe row, and B - 1 partners from ids 1..n_partners.

    Partners are drawn without replacement while the pool allows it (a hosted batch rarely holds the
    same prompt twice), with replacement when B - 1 exceeds the pool.
    """
    B = int(rng.choice(np.asarray(batch_sizes)))
    probe_row = int(rng.integers(B))
    replace = n_partners < B - 1
    if n_partners == 0 and B > 1:
        raise ExperimentError("--partners: the pool is empty but batch sizes above 1 need partners")
    partners = rng.choice(np.arange(1, n_partners + 1), size=B - 1, replace=replace) if B > 1 else []
    return place(probe_row, [int(p) for p in partners])


def random_compositions(seed: int, n: int, n_partners: int, batch_sizes: Sequence[int]) -> list[Composition]:
    """`n` distinct random compositions from one seeded generator (see `random_composition`).

    Raises ExperimentError when the batch sizes and pool cannot give `n` distinct compositions.
    """
    rng = np.random.default_rng(seed)
    out: list[Composition] = []
    seen: set[Composition] = set()
    draws = 0
    while len(out) < n:
        comp = random_composition(rng, n_partners, batch_sizes)
        draws += 1
        if comp not in seen:
            seen.add(comp)
            out.append(comp)
        elif draws > MAX_DRAWS + n:
            raise ExperimentError(f"-n/--compositions: only {len(out)} distinct compositions found for "
                                  f"batch sizes {list(batch_sizes)} and {n_partners} partners; ask for fewer")
    return out


def crowding_order(probe_load: np.ndarray, partner_loads: np.ndarray) -> np.ndarray:
    """Partner indices, most crowding first: those whose tokens ask most for the probe's experts.

    `probe_load[L, E]` and `partner_loads[P, L, E]` count the candidates each request sends to each
    expert. A partner's score is the sum over layers of the dot product of the two requests' expert
    shares: the expected number of the partner's candidates competing for each of the probe's.
    Ties go to the lower index (stable sort).
    """
    probe = probe_load / np.maximum(probe_load.sum(-1, keepdims=True), 1)  # [L,E]
    partners = partner_loads / np.maximum(partner_loads.sum(-1, keepdims=True), 1)  # [P,L,E]
    tokens = partner_loads.sum(-1).mean(-1)  # [P] candidates per layer: longer partners crowd more
    score = (partners * probe[None]).sum(axis=(1, 2)) * tokens  # [P]
    return np.argsort(-score, kind="stable")
