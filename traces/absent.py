"""Stand-ins for the datasets a run does not hold because its engine does not give them.

A serving engine returns each token's chosen experts, not the router's logits or weights, and
runs its experts dropless without saying which requests shared a forward step
(`schema.ENGINE_OMITTABLE`, the run's `not_recorded` attribute). So that every reader of a run keeps
working, the reader hands out, for each dataset not recorded, what the run's own data determine:

- `kept`: every chosen expert was computed (`expert >= 0`): the engine's experts are dropless;
- `capacity`: dropless (`DROPLESS_CAPACITY`) in every step, one group per step;
- `requested`, `load_kept`: each step's count of chosen experts, from `expert` and `step`;
- `group`: 0 for every routed token (one group per step), `MISSING` past a row's end;
- `gate`, `router_logits`: NaN (unknown), `slot`: `MISSING`.

Readers that show probabilities check `Run.not_recorded` and say they were not recorded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traces import schema


class ConstantArray:
    """A read-only array of one value, of any shape, that allocates only what is indexed."""

    def __init__(self, shape: tuple[int, ...], dtype, value, dims: tuple[str, ...], where: str) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.dims = dims
        self.where = where
        self._value = self.dtype.type(value)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        return np.array(np.broadcast_to(self._value, self.shape)[key])

    def read(self) -> np.ndarray:
        return self[...]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.read()
        return out if dtype is None else out.astype(dtype)


class DerivedArray(ConstantArray):
    """A read-only array computed from a run's recorded arrays when first read (small: loads)."""

    def __init__(self, compute, shape, dtype, dims, where) -> None:
        super().__init__(shape, dtype, 0, dims, where)
        self._compute = compute
        self._data: np.ndarray | None = None

    def __getitem__(self, key) -> np.ndarray:
        if self._data is None:
            self._data = np.asarray(self._compute(), self.dtype)
        return np.array(self._data[key])


class ChosenArray(ConstantArray):
    """`kept` of a dropless engine: true wherever an expert was chosen, read through `expert`."""

    def __init__(self, expert, where: str) -> None:
        super().__init__(expert.shape, bool, False, expert.dims, where)
        self._expert = expert

    def __getitem__(self, key) -> np.ndarray:
        return np.asarray(self._expert[key]) >= 0


class OneGroupArray(ConstantArray):
    """`group` [L,B,T] of one group per step: 0 wherever `step` [B,T] routed a token, else MISSING."""

    def __init__(self, step, n_layers: int, where: str) -> None:
        super().__init__((n_layers, *step.shape), np.int32, 0, ("L", "B", "T"), where)
        self._step = step

    def __getitem__(self, key) -> np.ndarray:
        routed = np.broadcast_to(np.asarray(self._step[...]) >= 0, self.shape)[key]
        return np.where(routed, 0, schema.MISSING).astype(np.int32)


def stand_ins(run_where: str, not_recorded, expert, step, n_experts: int) -> dict:
    """Schema path -> stand-in for every path in `not_recorded`; `expert` [L,B,T,K] and `step` [B,T]
    are the run's lazy arrays, `n_experts` E."""
    L, B, T, K = expert.shape
    S = int(np.asarray(step[...]).max(initial=-1)) + 1

    def requested() -> np.ndarray:
        out = np.zeros((S, L, 1, n_experts), np.int32)
        steps, chosen = np.asarray(step[...]), np.asarray(expert[...])  # [B,T], [L,B,T,K]
        for layer in range(L):
            b, t, _k = np.nonzero(chosen[layer] >= 0)
            np.add.at(out, (steps[b, t], layer, 0, chosen[layer, b, t, _k]), 1)  # type: ignore[arg-type]
        return out

    shapes = {schema.GATE: ((L, B, T, K), np.float32, np.nan),
              schema.ROUTER_LOGITS: ((L, B, T, n_experts), np.float32, np.nan),
              schema.SLOT: ((L, B, T, K), np.int32, schema.MISSING),
              schema.LOAD_CAPACITY: ((S, L, 1), np.int32, schema.DROPLESS_CAPACITY)}
    out: dict[str, Any] = {}
    for path in not_recorded:
        spec, where = schema.DATASETS_BY_PATH[path], f"{run_where}/{path}"
        if path == schema.KEPT:
            out[path] = ChosenArray(expert, where)
        elif path == schema.GROUP:
            out[path] = OneGroupArray(step, L, where)
        elif path in (schema.LOAD_REQUESTED, schema.LOAD_KEPT):
            out[path] = DerivedArray(requested, (S, L, 1, n_experts), np.int32, spec.dims, where)
        else:
            shape, dtype, value = shapes[path]
            out[path] = ConstantArray(shape, dtype, value, spec.dims, where)
    return out
