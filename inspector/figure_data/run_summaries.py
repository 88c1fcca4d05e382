"""The run browser's summary of many runs (attributes, drops, completion), in worker processes.

Summarising a run is a few dozen small HDF5 reads: some milliseconds, nearly all of them holding
the interpreter lock. For a trace of thousands of runs the work goes to worker processes (their own
interpreters, their own cores), so the window's thread never waits for the lock; each worker opens
the trace once and summarises runs in chunks, and the results come back in write order. No Qt here.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

from inspector.figure_data.browser import RunInfo, RunStats, run_info, run_stats
from traces import Trace, TraceError, open_trace

#: (run, its info and stats, or None and why it cannot be shown).
Summary = tuple[str, RunInfo | None, RunStats | None, str | None]

#: Runs summarised in the calling thread below this count (starting processes costs more).
IN_THREAD_MAX = 200
#: Runs one worker summarises per task, and tasks in flight per worker.
CHUNK = 32
IN_FLIGHT = 2


def summarise(trace: Trace, names: Sequence[str]) -> list[Summary]:
    """The summary of each run of `names` (a run that fails its checks gets why)."""
    out: list[Summary] = []
    for name in names:
        try:
            run = trace.run(name)
            info = run_info(run)
            out.append((name, info, run_stats(run, trace.vocab, info.focus_row), None))
        except TraceError as exc:
            out.append((name, None, None, str(exc)))
        except Exception as exc:  # a run the reader accepts but that does not add up
            out.append((name, None, None, f"{trace.path}: /runs/{name}: could not be summarised "
                                          f"({type(exc).__name__}: {exc})"))
    return out


#: In a worker process: the trace it summarises, opened on its first task.
_worker_trace: dict[str, Trace] = {}


def _summarise_in_worker(path: str, names: list[str]) -> list[Summary]:
    if path not in _worker_trace:
        _worker_trace[path] = open_trace(path)
    return summarise(_worker_trace[path], names)


def workers() -> int:
    """Worker processes for a large trace: the CPUs this process may use, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def summaries_in_workers(path: str, names: Sequence[str], cancelled: Callable[[], bool],
                         n_workers: int | None = None) -> Iterator[Summary]:
    """The summaries of `names`, in order, computed by worker processes (each opens `path` once);
    stops early when `cancelled()`. Raises BrokenProcessPool when the workers cannot run."""
    chunks = deque(list(names[i:i + CHUNK]) for i in range(0, len(names), CHUNK))
    n = n_workers or workers()
    pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
    pending: deque[Future] = deque()
    try:
        while chunks or pending:
            while chunks and len(pending) < n * IN_FLIGHT:
                pending.append(pool.submit(_summarise_in_worker, path, chunks.popleft()))
            results = pending.popleft().result()
            yield from results
            if cancelled():
                return
    finally:
        pool.shutdown(wait=False, cancel_futures=True)

