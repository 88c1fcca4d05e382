"""Aligning runs of a trace by request: which rows of which runs hold the same request.

Positions need no alignment (they are the sequence's own in every run); requests do: the same
request sits in different rows of different runs, sometimes in several rows of one run. These
helpers take a trace-like object (`trace.runs()` yielding run-like objects with `name`,
`request_ids`, `probe_row` and optionally `complete`) or plain (name, request_ids, probe_row) triples.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from traces.analysis.rows import RowTrace, row_trace

#: (run name, request id of each row, probe row) of one run.
RunRows = tuple[str, np.ndarray, int]


def _run_rows(trace_or_runs: Any) -> list[RunRows]:
    if hasattr(trace_or_runs, "runs"):
        runs = [r for r in trace_or_runs.runs() if getattr(r, "complete", True)]
        return [(r.name, np.asarray(r.request_ids), int(r.probe_row)) for r in runs]
    return [(str(n), np.asarray(ids), int(p)) for n, ids, p in trace_or_runs]


def request_rows(trace_or_runs: Any) -> dict[int, list[tuple[str, int]]]:
    """Every (run, row) holding each request, runs in write order, rows ascending."""
    out: dict[int, list[tuple[str, int]]] = {}
    for name, ids, _ in _run_rows(trace_or_runs):
        for b, request in enumerate(ids.tolist()):
            out.setdefault(int(request), []).append((name, b))
    return dict(sorted(out.items()))


def runs_by_request(trace_or_runs: Any) -> dict[int, list[tuple[str, int]]]:
    """`runs_of_request` of every request at once, in one pass over the runs (linear in the rows)."""
    out: dict[int, list[tuple[str, int]]] = {}
    for name, ids, probe in _run_rows(trace_or_runs):
        seen: set[int] = set()
        holds_probe = int(ids[probe]) if 0 <= probe < len(ids) else None
        if holds_probe is not None:
            out.setdefault(holds_probe, []).append((name, probe))
            seen.add(holds_probe)
        for b, request in enumerate(ids.tolist()):
            if int(request) not in seen:
                seen.add(int(request))
                out.setdefault(int(request), []).append((name, b))
    return out


def runs_of_request(trace_or_runs: Any, request: int) -> list[tuple[str, int]]:
    """One (run, row) per run holding `request`: the probe row when it holds it, else the first row."""
    out = []
    for name, ids, probe in _run_rows(trace_or_runs):
        rows = np.flatnonzero(ids == request)
        if rows.size:
            out.append((name, probe if probe in rows else int(rows[0])))
    return out


def requests_with_several_runs(trace_or_runs: Any) -> list[int]:
    """Requests held by more than one run (those a divergence analysis can compare), ascending."""
    counts: dict[int, int] = {}
    for _, ids, _ in _run_rows(trace_or_runs):
        for request in np.unique(ids).tolist():
            counts[int(request)] = counts.get(int(request), 0) + 1
    return sorted(r for r, n in counts.items() if n > 1)


def probe_request(trace_or_runs: Any) -> int | None:
    """The request most runs hold in their probe row (ties: the smallest id); None without probes."""
    counts: dict[int, int] = {}
    for _, ids, probe in _run_rows(trace_or_runs):
        if probe >= 0:
            counts[int(ids[probe])] = counts.get(int(ids[probe]), 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda r: (-counts[r], r))


def aligned_rows(trace: Any, request: int, *, logits: bool = True,
                 runs: Iterable[str] | None = None) -> list[RowTrace]:
    """The `RowTrace` of `request` in each run holding it (one row per run, see `runs_of_request`).

    `runs` restricts to the named runs (in the trace's order). Raises ValueError when no run holds
    the request.
    """
    pairs = runs_of_request(trace, request)
    if runs is not None:
        wanted = set(runs)
        pairs = [(n, b) for n, b in pairs if n in wanted]
    if not pairs:
        raise ValueError(f"no run holds request {request}")
    return [row_trace(trace.run(name), b, logits=logits) for name, b in pairs]
