"""The run browser's summary of many runs (attributes, drops, completion), in worker processes.

Summarising a run is a few dozen small HDF5 reads: some milliseconds, nearly all of them holding
the interpreter lock. For a trace of thousands of runs the work goes to worker processes (their own
interpreters, their own cores), so the window's thread never waits for the lock; each worker opens
the trace once and summarises runs in chunks, and the results come back in write order. No Qt here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence

from inspector.figure_data.browser import RunInfo, RunStats, run_info, run_stats
from traces import Trace, TraceError, open_trace
from traces.heap import remember_scan, scanned

#: (run, its info and stats, or None and why it cannot be shown).
Summary = tuple[str, RunInfo | None, RunStats | None, str | None]

#: Runs summarised in the calling thread below this count (starting processes costs more).
IN_THREAD_MAX = 200
#: Runs one worker summarises per answer.
CHUNK = 32


def summarise(trace: Trace, names: Sequence[str]) -> list[Summary]:
    """The summary of each run of `names` (a run that fails its checks gets why)."""
    out: list[Summary] = []
    for name in names:
        try:
            run = trace.run(name)
            info = run_info(run)
            out.append((name, info, run_stats(run, trace.vocab), None))
        except TraceError as exc:
            out.append((name, None, None, str(exc)))
        except Exception as exc:  # a run the reader accepts but that does not add up
            out.append((name, None, None, f"{trace.path}: /runs/{name}: could not be summarised "
                                          f"({type(exc).__name__}: {exc})"))
    return out


def workers() -> int:
    """Worker processes for a large trace: the CPUs this process may use, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


class Workers:
    """Worker processes for summarising the runs of the trace at `path`, started ahead of the work:
    their interpreters import while the window opens the trace (about a second on a loaded machine).

    `submit(names)` hands them the runs once (each opens `path` once and takes every n-th chunk of
    runs), `summaries(names, cancelled)` reads what they found; `close()` ends them (done, or never
    used). The workers are plain child
    interpreters (running this module, at a lower priority) fed through pipes, not
    `multiprocessing`: that re-imports the main script in each child, which a script without a
    `__main__` guard (one that starts the app) cannot take. OSError when a worker cannot start."""

    def __init__(self, path: str, n_workers: int | None = None) -> None:
        self.path = path
        path_entries = [_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path_entries)}
        self._procs: list[subprocess.Popen] = []
        try:
            for _ in range(n_workers or workers()):
                proc = subprocess.Popen([sys.executable, "-c", _START, path],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                self._procs.append(proc)
                _widen(proc.stdout)
        except BaseException:
            self.close()
            raise
        self._used = False
        self._submitted: list[str] | None = None
        self._chunks = 0
        self._busy: list[subprocess.Popen] = []

    def submit(self, names: Sequence[str]) -> None:
        """Hand the workers the runs `names` now (each opens `path` once and takes every n-th chunk),
        before anyone reads their summaries: they work while the window shows the first run. Once
        per set of workers; `summaries` submits what it is asked when nothing was."""
        if self._submitted is not None:
            raise RuntimeError("these workers were handed their runs already")
        self._submitted = list(names)
        chunks = [self._submitted[i:i + CHUNK] for i in range(0, len(self._submitted), CHUNK)]
        self._chunks = len(chunks)
        self._busy = self._procs[:max(1, min(len(self._procs), len(chunks)))]
        found = scanned(self.path)  # this process looked through the file already: the workers need not
        for k, proc in enumerate(self._procs):
            pickle.dump((found, chunks[k::len(self._busy)] if k < len(self._busy) else []), proc.stdin)
            proc.stdin.close()

    def covers(self, names: Sequence[str]) -> bool:
        """Whether `summaries(names)` can be answered: nothing submitted yet, or `names` among the
        runs submitted (in the same order)."""
        return self._submitted is None or set(names) <= set(self._submitted)

    def summaries(self, names: Sequence[str], cancelled: Callable[[], bool]) -> Iterator[Summary]:
        """The summaries of `names`, in order (those submitted, or submitted now: `covers`); stops
        early when `cancelled()`. OSError (or EOFError) when a worker fails. Once per set of workers."""
        if self._used:
            raise RuntimeError("these workers were read from already")
        if not self.covers(names):
            raise ValueError("asked for runs these workers were not handed")
        self._used = True
        if self._submitted is None:
            self.submit(names)
        wanted = set(names)
        left = len(wanted)
        for i in range(self._chunks):
            if left == 0:
                return
            for summary in pickle.load(self._busy[i % len(self._busy)].stdout):  # our own child's answer
                if summary[0] in wanted:
                    left -= 1
                    yield summary
            if cancelled():
                return

    def close(self) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None and not pipe.closed:
                    with contextlib.suppress(OSError):
                        pipe.close()
        self._procs = []

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def summaries_in_workers(path: str, names: Sequence[str], cancelled: Callable[[], bool],
                         n_workers: int | None = None) -> Iterator[Summary]:
    """The summaries of `names`, in order, computed by worker processes started now (`Workers`)."""
    with Workers(path, n_workers) as procs:
        yield from procs.summaries(names, cancelled)


#: Scheduling priority the workers give up (`os.nice`): the window's thread, which handles the
#: user's events, runs first when the two compete for a core.
NICENESS = 5
#: A worker's program: lower its priority before its imports (they take a few hundred ms), then serve.
_START = (f"import os, runpy\nos.nice({NICENESS})\n"
          f"runpy.run_module({__name__!r}, run_name='__main__', alter_sys=True)")

#: Bytes a worker may write ahead of the reader (Linux; 64 KiB by default): a whole trace's summaries
#: at a thousand runs per worker, so a paused reader does not stop the workers.
PIPE_BYTES = 1 << 20


def _widen(pipe) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not Linux, or above the system's maximum
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


#: The folder holding the `inspector` package, for the workers' import path.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _serve(path: str) -> None:
    """A worker: read the parent's heap scan and the chunks of run names, write each chunk's
    summaries."""
    try:
        found, chunks = pickle.load(sys.stdin.buffer)
    except EOFError:  # closed unused
        return
    if not chunks:
        return
    remember_scan(found)
    with open_trace(path, runs=[n for names in chunks for n in names]) as trace:
        for names in chunks:
            pickle.dump(summarise(trace, names), sys.stdout.buffer)
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve(sys.argv[1])
