"""What an export shows: the `Selection` of run, row, layer, positions and colours that the
`export` command's options (or a view's state) name, and how it is found in a trace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.text import SHADE_MODES
from traces.run_like import RunLike

#: Short names of the text strip's shading modes (the command line's --shade).
SHADE_BY_NAME = dict(zip(("drops", "layer-drops", "margin"), SHADE_MODES, strict=True))


class SelectionError(ValueError):
    """A selection the trace cannot satisfy (unknown run, row or layer out of range, ...)."""


@dataclass(frozen=True)
class Selection:
    """What to draw: every option of the `export` command; each view uses the ones it needs."""

    run: str | None = None                 # default: the first complete run (holding `request`)
    request: int | None = None             # pick the run and row holding this request
    row: int | None = None                 # default: the row holding `request`, else the probe row
    layer: int = 0                         # MoE layer
    range: tuple[int, int] | None = None   # positions [T0, T1) shown and tabulated; None: all
    step: int = 0                          # forward step of the load figure (0 = prefill)
    group: int | None = None               # group of the load figure; None: the probe's
    pair: tuple[str, str] | None = None    # runs A (reference) and B of the side-by-side figure
    condition: str | None = None           # runs view: the condition compared ('' = all)
    colormap: str = "viridis"              # router probability colour map
    levels: tuple[float, float] = (0.0, 1.0)  # colour bar limits of router probabilities
    shade: str = SHADE_MODES[0]            # shading of the text strip

    def positions(self, n: int) -> tuple[int, int]:
        """[T0, T1) of a row of `n` positions: the range cut to the row, or all of it."""
        if self.range is None:
            return 0, n
        t0, t1 = self.range
        if not 0 <= t0 < n:
            raise SelectionError(f"range {t0}:{t1} starts outside the row's positions 0..{n - 1}")
        return t0, min(t1, n)


# -- picking the run and row ----------------------------------------------------------------------

def pick_run(trace, sel: Selection) -> RunLike:
    """The run of `sel`: named, else the first complete run holding `sel.request`, else the first."""
    if sel.run is not None:
        if sel.run not in trace.run_names:
            incomplete = " (it is incomplete)" if sel.run in trace.incomplete_runs else ""
            raise SelectionError(f"no run {sel.run!r} in {trace.path}{incomplete}; runs: "
                                 f"{', '.join(trace.run_names) or 'none'}")
        return trace.run(sel.run)
    if not trace.run_names:
        raise SelectionError(f"{trace.path} holds no complete run")
    if sel.request is None:
        return trace.run(trace.run_names[0])
    for name in trace.run_names:
        run = trace.run(name)
        if sel.request in np.asarray(run.request_ids).tolist():
            return run
    raise SelectionError(f"no run of {trace.path} holds request {sel.request}")


def pick_row(run: RunLike, sel: Selection) -> int:
    """The row of `sel` in `run`: given, else the one holding `sel.request` (the probe row first),
    else the probe row (row 0 without a probe)."""
    ids = np.asarray(run.request_ids).tolist()
    B = len(ids)
    if sel.row is not None:
        if not 0 <= sel.row < B:
            raise SelectionError(f"row {sel.row} outside 0..{B - 1} of run {run.name}")
        if sel.request is not None and ids[sel.row] != sel.request:
            raise SelectionError(f"row {sel.row} of run {run.name} holds request {ids[sel.row]}, "
                                 f"not {sel.request}")
        return sel.row
    probe = int(run.probe_row)
    if sel.request is None:
        return max(probe, 0)
    if 0 <= probe < B and ids[probe] == sel.request:
        return probe
    if sel.request not in ids:
        raise SelectionError(f"run {run.name} does not hold request {sel.request}")
    return ids.index(sel.request)


def check_layer(run: RunLike, layer: int) -> int:
    L = int(run.dims["L"])
    if not 0 <= layer < L:
        raise SelectionError(f"layer {layer} outside 0..{L - 1} of run {run.name}")
    return layer


# -- tables ---------------------------------------------------------------------------------------

def with_context(context: Mapping[str, object], columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`columns` preceded by constant columns naming what they belong to (run, row, layer...); a
    value None is an empty field."""
    n = len(next(iter(columns.values()))) if columns else 0
    out = {}
    for name, value in context.items():
        if value is None:
            out[name] = np.ma.masked_all(n, dtype=object)
        else:
            out[name] = np.full(n, value, dtype=object if isinstance(value, str) else None)
    out.update(columns)
    return out


def in_range(columns: dict[str, np.ndarray], sel: Selection, key: str = "position") -> dict[str, np.ndarray]:
    """The rows whose `key` lies in the selection's range (every row without a range)."""
    if sel.range is None or key not in columns:
        return columns
    t0, t1 = sel.range
    keep = (columns[key] >= t0) & (columns[key] < t1)
    return {name: values[keep] for name, values in columns.items()}


