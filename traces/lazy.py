"""Lazy arrays: numpy-style views of one HDF5 dataset that read only the slices asked for."""

from __future__ import annotations

import math
import numbers
from typing import Any

import h5py
import numpy as np

from traces.errors import TraceError


class LazyArray:
    """A read-only view of a dataset: `shape`, `dtype`, `dims` (letters) and `__getitem__`.

    Indexing accepts what numpy accepts for basic and advanced indexing (ints, slices with any step,
    Ellipsis, integer or boolean arrays); only the bounding box of the request is read from disk.
    Any failure while reading becomes `TraceError`.
    """

    def __init__(self, dataset: h5py.Dataset, file_path: str, where: str, dims: tuple[str, ...]) -> None:
        self._ds = dataset
        self._file_path = file_path
        self.where = where
        self.dims = dims
        self.shape: tuple[int, ...] = tuple(int(n) for n in dataset.shape)
        self.dtype = np.dtype(dataset.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        dims = " ".join(f"{d}={n}" for d, n in zip(self.dims, self.shape, strict=True))
        return f"<LazyArray {self.where} [{dims}] {self.dtype}>"

    def read(self) -> np.ndarray:
        """The whole dataset as an array (read straight into it: no index to plan)."""
        if not self.shape or 0 in self.shape:
            return self[...]
        out = np.empty(self.shape, dtype=self.dtype)
        try:
            self._ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out)
        except Exception as exc:  # as in __getitem__
            raise TraceError(self._file_path, self.where, f"readable data ({type(exc).__name__}: {exc})") \
                from exc
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.read()
        return out if dtype is None else out.astype(dtype)

    def _read_box(self, box) -> np.ndarray:
        """The box (per axis: an index, or a non-empty (start, stop, step) with step > 0) read as one
        hyperslab straight into its array: what `dataset[box]` gives, without h5py's selection
        machinery (most of a small read's cost, and reading a run's summary reads a few)."""
        start, count, stride = [], [], []
        for b in box:
            if isinstance(b, tuple):
                start.append(b[0])
                count.append(len(range(*b)))
                stride.append(b[2])
            else:
                start.append(b)
                count.append(1)
                stride.append(1)
        space = self._ds.id.get_space()
        space.select_hyperslab(tuple(start), tuple(count), tuple(stride))
        out = np.empty(tuple(count), dtype=self.dtype)
        self._ds.id.read(h5py.h5s.create_simple(tuple(count)), space, out)
        return out.reshape(tuple(c for c, b in zip(count, box, strict=True) if isinstance(b, tuple)))

    def __getitem__(self, key) -> np.ndarray:
        box, local = _plan(key, self.shape)
        if any(b[1] <= b[0] for b in box if isinstance(b, tuple)):  # empty: nothing to read
            return np.zeros(_box_shape(box), dtype=self.dtype)[tuple(local)] if local else \
                np.zeros(_box_shape(box), dtype=self.dtype)
        try:
            data = self._read_box(box) if self.shape and self.dtype.kind in "biuf" else \
                self._ds[tuple(slice(*b) if isinstance(b, tuple) else b for b in box)]
        except Exception as exc:  # h5py raises OSError, RuntimeError, KeyError, ... on damaged files
            raise TraceError(self._file_path, self.where, f"readable data ({type(exc).__name__}: {exc})") \
                from exc
        data = np.asarray(data)
        if data.dtype != self.dtype:
            raise TraceError(self._file_path, self.where, f"data of dtype {self.dtype}, read {data.dtype}")
        return data[tuple(local)] if local else data


def _box_shape(box) -> tuple[int, ...]:
    return tuple(len(range(*b)) for b in box if isinstance(b, tuple))


def _expand(key, ndim: int) -> tuple[list, tuple[int, int] | None]:
    """Key as a list with one entry per axis (Ellipsis expanded, missing axes filled with `:`), and
    where the Ellipsis was: (first axis, number of axes) it stands for, None without one."""
    key = list(key) if isinstance(key, tuple) else [key]
    if any(k is None for k in key):
        raise IndexError("np.newaxis is not supported by lazy arrays; index the result instead")
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    span = None
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        n_real = sum(_n_axes(k) for k in key if k is not Ellipsis)
        span = (sum(_n_axes(k) for k in key[:i]), max(ndim - n_real, 0))
        key[i:i + 1] = [slice(None)] * span[1]
    n_real = sum(_n_axes(k) for k in key)
    if n_real > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, "
                         f"but {n_real} were indexed")
    return key + [slice(None)] * (ndim - n_real), span


def _n_axes(k) -> int:
    """Axes an index entry covers: a boolean mask covers as many as it has dimensions."""
    return np.asarray(k).ndim if _is_bool_array(k) else 1


def _is_bool_array(k) -> bool:
    return isinstance(k, np.ndarray | list) and np.asarray(k).dtype == bool


def _plan(key, shape: tuple[int, ...]):
    """Split a numpy index into a bounding box to read (per axis: int or (start, stop, step)) and
    the index to apply to what was read (empty when the box alone is the answer)."""
    key, span = _expand(key, len(shape))
    # Boolean arrays become integer arrays (one per axis they cover), as numpy does.
    flat: list = []
    for k in key:
        if _is_bool_array(k):
            mask, axis = np.asarray(k), len(flat)
            if mask.shape != shape[axis:axis + mask.ndim]:
                raise IndexError(f"boolean index of shape {mask.shape} does not match the array's axes "
                                 f"{axis}.. of shape {shape[axis:axis + mask.ndim]}")
            flat.extend(np.nonzero(mask))
        else:
            flat.append(k)
    has_array = any(not isinstance(k, slice | numbers.Integral) for k in flat)
    box: list[Any] = []
    local: list[Any] = []
    needs_local = has_array
    for axis, (k, n) in enumerate(zip(flat, shape, strict=True)):
        if isinstance(k, numbers.Integral) and not isinstance(k, bool):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise IndexError(f"index {int(k)} is out of bounds for axis {axis} with size {n}")
            if has_array:  # keep the axis so numpy applies its advanced-indexing rules on `local`
                box.append((i, i + 1, 1))
                local.append(0)
            else:
                box.append(i)
        elif isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step > 0:
                box.append((start, max(start, stop), step))
                local.append(slice(None))
            else:  # h5py reads forward only: read the covered range, reverse locally
                count = len(range(start, stop, step))
                lo = start + step * (count - 1) if count else 0
                box.append((lo, lo + (start - lo + 1 if count else 0), 1))
                local.append(slice(None, None, step))
                needs_local = True
        else:
            idx = np.asarray(k)
            if idx.dtype.kind not in "iu":
                raise IndexError(f"arrays used as indices must be of integer or boolean type, "
                                 f"got {idx.dtype}")
            idx = np.where(idx < 0, idx + n, idx)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise IndexError(f"index out of bounds for axis {axis} with size {n}")
            lo = int(idx.min()) if idx.size else 0
            hi = int(idx.max()) + 1 if idx.size else 0
            box.append((lo, hi, 1))
            local.append(idx - lo)
    if has_array and span is not None:
        # numpy places advanced-index axes first when anything, even an empty Ellipsis, separates
        # two advanced indices: keep the Ellipsis in the local index so numpy decides the same way.
        start, count = span
        local[start:start + count] = [Ellipsis]
    return box, (local if needs_local else [])
