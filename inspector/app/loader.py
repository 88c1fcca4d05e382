"""Background work: opening a trace and summarising its runs off the GUI thread.

Each job is a `QRunnable` on the global thread pool that reports through a `QObject`'s signals
(queued to the GUI thread). The summariser opens its own handle on the file, so closing or
reloading the window's trace never pulls a file out from under a running job; for a trace of many
runs it hands the work to worker processes (`inspector/figure_data/run_summaries.py`), so the
window's thread never waits for the interpreter lock.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from inspector.figure_data.browser import RunInfo, first_divergent_run, run_info, table_summaries
from inspector.figure_data.run_summaries import IN_THREAD_MAX, Workers, summarise
from inspector.qt import QtCore, Signal
from traces import Trace, TraceError, open_trace

log = logging.getLogger(__name__)


def _emit(signal, *args) -> bool:
    """Emit from a worker thread; False when the receiving side is gone (the app is quitting)."""
    try:
        signal.emit(*args)
    except RuntimeError:  # "Signal source has been deleted"
        return False
    return True


#: Why an incomplete run cannot be shown.
INCOMPLETE = "incomplete: the recording stopped before this run was finished"


@dataclass
class Opened:
    """An open trace and what the window needs to show it at once."""

    trace: Trace
    first: RunInfo | None              # the run to show first (see `open_first`)
    unusable: dict[str, str]           # run -> why it cannot be shown
    conditions: dict[str, str]         # run -> its listed condition (`Trace.run_conditions`)
    #: What the run summary table says of the runs it holds (run -> `TableRun`), read at once; the
    #: other runs are summarised in the background.
    summaries: dict = field(default_factory=dict)
    #: Worker processes started for summarising the runs (a trace of more than IN_THREAD_MAX runs):
    #: the receiver hands them to `SummaryJob` or closes them.
    workers: Workers | None = None


class OpenSignals(QtCore.QObject):
    opened = Signal(object)      # Opened
    failed = Signal(str, str)    # (path, message)


def open_first(path: str, listed: Callable[[list[str]], None] | None = None):
    """Open `path`, read its run summary table and check its first usable run only (and, to pick
    the run shown first, read the probe tokens of at most `first_divergent_run`'s limit of runs the
    table does not hold), so a trace of thousands of runs opens as fast as one of a single run;
    raises TraceError for the file.

    Returns (trace, info of the run to show first: the first divergent probe run, else the first
    usable one, or None; unusable runs: name -> why; the table's summaries: `table_summaries`). A run
    that fails its checks does not make the file unusable; the others are checked later (`SummaryJob`,
    or, for runs the table holds, when shown). `listed(names)` is called with the complete runs the
    table does not hold as soon as they are known.
    """
    trace = open_trace(path)
    # While a recording adds runs, its incomplete run is the one being written: it shows once done.
    unusable = {} if trace.recording else {name: INCOMPLETE for name in trace.incomplete_runs}
    first = None
    summaries: dict = {}
    try:
        summaries = _table_summaries(trace)
        if listed is not None:
            listed([name for name in trace.run_names if name not in summaries])
        for name in trace.run_names:
            try:
                first = run_info(trace.run(name))
                break
            except TraceError as exc:
                log.warning("run %s of %s is unusable: %s", name, path, exc)
                unusable[name] = str(exc)
        # Open on what matters: the first run whose probe completion leaves its reference's.
        name = first_divergent_run(trace, known=summaries) if first is not None else None
        if name is not None:
            first = run_info(trace.run(name))
    except TraceError as exc:  # a damaged run met while looking: open on the first usable one
        log.warning("looking for the first divergent run of %s: %s", path, exc)
    except BaseException:
        trace.close()
        raise
    return trace, first, unusable, summaries


def _table_summaries(trace: Trace) -> dict:
    """`table_summaries`, or none when the trace has no table (or an unreadable one: its runs are
    then summarised one by one)."""
    try:
        return table_summaries(trace) or {}
    except TraceError as exc:
        log.warning("the run summary table of %s is left out: %s", trace.path, exc)
        return {}


#: A file this large starts the summary's worker processes as its open begins, before its runs are
#: listed (their imports take a few hundred ms): more than IN_THREAD_MAX runs of the smallest
#: recordings (about 200 KB a run). The workers are closed if it holds fewer runs.
EARLY_START_BYTES = 32 << 20


def start_workers(path: str) -> Workers | None:
    """Worker processes for summarising the runs of `path`, or None when they cannot start (the
    summary then runs in a thread)."""
    try:
        return Workers(path)
    except OSError as exc:
        log.warning("could not start worker processes for %s (%s); summarising in a thread", path, exc)
        return None


class OpenJob(QtCore.QRunnable):
    """Opens a trace; emits `opened(Opened)` or `failed(path, message)`. For a trace of more than
    IN_THREAD_MAX runs, the summary's worker processes start as the open begins (a large file) or as
    soon as the runs are listed, and are handed the runs at once (but `known`, the runs the window
    summarised already): they work while the window shows the first run."""

    def __init__(self, path: str, known: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.path = path
        self.known = known
        self.signals = OpenSignals()
        self._workers: Workers | None = None
        self.setAutoDelete(True)

    def run(self) -> None:
        try:
            if _size(self.path) >= EARLY_START_BYTES:
                self._workers = start_workers(self.path)
            trace, first, unusable, summaries = open_first(self.path, listed=self._listed)
        except TraceError as exc:
            log.info("could not open %s: %s", self.path, exc)
            _emit(self.signals.failed, self.path, str(exc))
        except Exception as exc:  # anything else still becomes one clear message
            log.exception("unexpected error opening %s", self.path)
            _emit(self.signals.failed, self.path,
                  f"{self.path}: could not be opened ({type(exc).__name__}: {exc})")
        else:
            conditions = {}
            try:  # read here, off the window's thread (a few thousand attributes), when some are needed
                if any(name not in summaries for name in trace.run_names):
                    conditions = trace.run_conditions
            except TraceError as exc:
                log.warning("listing the conditions of %s: %s", self.path, exc)
            opened = Opened(trace, first, unusable, conditions, summaries, self._workers)
            self._workers = None
            if not _emit(self.signals.opened, opened):
                trace.close()
                if opened.workers is not None:
                    opened.workers.close()
        finally:
            if self._workers is not None:  # failed after they started
                self._workers.close()
                self._workers = None

    def _listed(self, names: list[str]) -> None:
        todo = [n for n in names if n not in self.known]
        if len(todo) <= IN_THREAD_MAX:
            if self._workers is not None:
                self._workers.close()
                self._workers = None
            return
        if self._workers is None:
            self._workers = start_workers(self.path)
        if self._workers is not None:
            try:
                self._workers.submit(todo)
            except OSError as exc:  # a worker died: the summary starts new ones
                log.warning("handing %s to worker processes failed (%s)", self.path, exc)
                self._workers.close()
                self._workers = None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # open_first says why
        return 0


class SummarySignals(QtCore.QObject):
    summarised = Signal(object)           # [(RunInfo, RunStats), ...] in write order
    progress = Signal(int, int)           # (done, total)
    finished = Signal()
    failed = Signal(str, str)             # (run name, message)


#: Summaries sent to the window at once (one queued call for many runs), and the longest a
#: summary waits to be sent (seconds).
EMIT_RUNS = 64
EMIT_WAIT_S = 0.05


class SummaryJob(QtCore.QRunnable):
    """Checks each run and reads its attributes, drops and focus-row completion, in write order;
    cancel with `cancel()`. More than IN_THREAD_MAX runs are summarised by worker processes (those
    `workers` started when the trace opened, else new ones), so the window's thread never waits for
    the interpreter lock.

    In a thread, the job shares the interpreter lock with the GUI thread, so `pause(seconds)` holds
    it between two runs while the user navigates: a layer switch then repaints at full speed.
    """

    def __init__(self, path: str, names: list[str], workers: Workers | None = None) -> None:
        super().__init__()
        self.path = path
        self.names = list(names)
        self.signals = SummarySignals()
        self._workers = workers
        self._cancel = threading.Event()
        self._resume_at = 0.0   # time.monotonic() before which the job waits between runs
        self.setAutoDelete(True)

    def cancel(self) -> None:
        self._cancel.set()

    def pause(self, seconds: float) -> None:
        """Wait between runs until `seconds` from now (extends an earlier pause)."""
        self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    def _wait_while_paused(self) -> None:
        while not self._cancel.is_set() and time.monotonic() < self._resume_at:
            time.sleep(0.01)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> None:
        workers, self._workers = self._workers, None
        try:
            done = 0
            # Worker processes: the window's thread stays free.
            if len(self.names) > IN_THREAD_MAX and not self._cancel.is_set():
                try:
                    if workers is not None and not workers.covers(self.names):
                        workers.close()  # handed other runs (the file changed since the open)
                        workers = None
                    workers = workers or Workers(self.path)
                    done = self._report(workers.summaries(self.names, self._cancel.is_set))
                except (OSError, EOFError, pickle.UnpicklingError) as exc:
                    log.warning("summarising %s in worker processes failed (%s); going on here",
                                self.path, exc)
            if workers is not None:
                workers.close()
                workers = None
            if done < len(self.names) and not self._cancel.is_set():
                try:
                    trace = open_trace(self.path)
                except TraceError as exc:
                    _emit(self.signals.failed, "", str(exc))
                    return
                try:
                    self._report((s for name in self.names[done:] for s in summarise(trace, [name])), done)
                finally:
                    trace.close()
        finally:
            if workers is not None:
                workers.close()
            _emit(self.signals.finished)

    def _report(self, summaries, done: int = 0) -> int:
        """Emit the summaries in batches (pausing between runs as asked); the number of runs reported."""
        total = len(self.names)
        batch: list = []
        sent = time.monotonic()

        def send() -> bool:
            nonlocal batch, sent
            alive = not batch or _emit(self.signals.summarised, batch)
            batch, sent = [], time.monotonic()
            return alive and _emit(self.signals.progress, done, total)

        for name, info, stats, why in summaries:
            done += 1
            if why is not None:
                log.warning("run %s of %s is unusable: %s", name, self.path, why)
                if not (send() and _emit(self.signals.failed, name, why)):
                    self._cancel.set()
            else:
                batch.append((info, stats))
                if (len(batch) >= EMIT_RUNS or time.monotonic() - sent >= EMIT_WAIT_S) and not send():
                    self._cancel.set()
            if time.monotonic() < self._resume_at:
                if not send():
                    self._cancel.set()
                self._wait_while_paused()
            if self._cancel.is_set():
                return done
        send()
        return done
