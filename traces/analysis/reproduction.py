"""How faithfully a rerun gives back a recorded run: bitwise, the same decisions, or not reproduced.

Float results of one model differ between CPU types, thread counts and GPUs (other kernels, other
reduction orders) by a few ulps, while every decision the model takes on them (which token, which
experts, which candidates a capacity keeps, which slot) usually agrees. So a rerun is judged at three
levels:

- `bitwise`: every recorded dataset equal bit for bit;
- `decisions`: every integer and boolean dataset equal (tokens, steps, experts, kept flags, slots,
  groups, loads, capacities); the float datasets may drift, and the largest |difference| of each is
  reported. The ids of the top-k logits are float results too (drift may swap two near-equal
  logits), so they count with the floats: equal for `bitwise`, free for `decisions`;
- `not_reproduced`: a decision differs; the first one is named.

A cause confirmed by counterfactual reruns needs the `decisions` level: the reruns then follow the
recorded trajectory, and what they show about it holds whatever the floats' last bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from traces import schema
from traces.vocabulary import Vocabulary

#: Integer datasets whose values come from float comparisons, not from decisions.
FLOAT_DERIVED = (schema.TOPK_INDEX,)


class Level(Vocabulary):
    """How faithfully a rerun gave back its recording, strongest first (a level, not a cause: the
    cause a pair gets when its runs are not reproduced is `CauseName.NOT_REPRODUCED`)."""

    BITWISE = "bitwise"
    DECISIONS = "decisions"
    NOT_REPRODUCED = "not_reproduced"


BITWISE = Level.BITWISE
DECISIONS = Level.DECISIONS
NOT_REPRODUCED = Level.NOT_REPRODUCED
#: Reproduction levels, strongest first.
LEVELS = tuple(Level)


@dataclass(frozen=True)
class Reproduction:
    """How a rerun of run `run` compares with its recording."""

    run: str
    level: Level
    drift: dict[str, float] = field(default_factory=dict)   # float dataset -> max |rerun - recorded|
    difference: str = ""                              # the first differing decision (not_reproduced)

    @property
    def reproduced(self) -> bool:
        """Whether the rerun took every recorded decision (bitwise or decisions level)."""
        return self.level != NOT_REPRODUCED

    def drift_text(self) -> str:
        """'routing/gate 1.4e-06, logits 2.6e-05' (the datasets that drifted), '' when none did."""
        return ", ".join(f"{path} {value:.2g}" for path, value in self.drift.items() if value > 0)

    def describe(self) -> str:
        """One clause for reports: 'bitwise', 'decisions (float drift: ...)' or 'not reproduced: ...'."""
        if self.level == BITWISE:
            return "reproduced bitwise"
        if self.level == DECISIONS:
            return f"reproduced at the decisions level (float drift: {self.drift_text() or 'none'})"
        return f"not reproduced: {self.difference}"


def weakest(levels) -> Level:
    """The weakest of some reproduction levels (`bitwise` for none)."""
    levels = [Level(x) for x in levels]
    return max(levels, key=LEVELS.index) if levels else BITWISE


def compare_run(run, arrays: Mapping[str, np.ndarray]) -> Reproduction:
    """Compare a rerun's `arrays` (by schema path) with the recorded datasets of reader run `run`.

    Every decision dataset is checked before any float is looked at, so a `not_reproduced` names the
    first decision that differs (in schema order), not a float that drifted ahead of it.
    """
    pairs = []
    for path, recorded_array in _recorded(run):
        recorded = np.asarray(recorded_array[...])
        if path not in arrays:
            return Reproduction(run.name, NOT_REPRODUCED, difference=f"{path}: not produced by the rerun")
        rerun = np.asarray(arrays[path])
        if recorded.shape != rerun.shape:
            shapes = f"shape {rerun.shape} in the rerun, {recorded.shape} recorded"
            return Reproduction(run.name, NOT_REPRODUCED, difference=f"{path}: {shapes}")
        pairs.append((path, recorded, rerun.astype(recorded.dtype, copy=False)))
    for path, recorded, rerun in pairs:
        if recorded.dtype.kind != "f" and path not in FLOAT_DERIVED:
            differs = recorded != rerun
            if differs.any():
                where = tuple(int(i) for i in np.argwhere(differs)[0])
                return Reproduction(run.name, NOT_REPRODUCED, difference=(
                    f"{path}{list(where)}: {rerun[where]!r} in the rerun, {recorded[where]!r} recorded"))
    drift = {}
    for path, recorded, rerun in pairs:
        if recorded.dtype.kind == "f":
            drift[path] = _max_abs_difference(recorded, rerun)
    floats = [(r, x) for p, r, x in pairs if r.dtype.kind == "f" or p in FLOAT_DERIVED]
    level = BITWISE if all(_bitwise_equal(r, x) for r, x in floats) else DECISIONS
    return Reproduction(run.name, level, drift)


def _recorded(run):
    """(schema path, recorded lazy array) of every dataset the run holds."""
    arrays = run.arrays  # the reader's run: a dict of what the file holds; `RunArrays`: a method
    return list((arrays if isinstance(arrays, dict) else arrays()).items())


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit patterns equal (-0.0 differs from 0.0, NaN equals the same NaN)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return bool(np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")))


def _max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| over the finite pairs (inf when one side is non-finite where the other is not)."""
    if a.size == 0:
        return 0.0
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    mismatch = np.isfinite(a64) != np.isfinite(b64)
    if mismatch.any():
        return float("inf")
    return float(np.max(np.abs(a64[finite] - b64[finite]), initial=0.0))
