"""Background work: opening a trace and summarising its runs off the GUI thread.

Each job is a `QRunnable` on the global thread pool that reports through a `QObject`'s signals
(queued to the GUI thread). The summariser opens its own handle on the file, so closing or
reloading the window's trace never pulls a file out from under a running job; for a trace of many
runs it hands the work to worker processes (`inspector/figure_data/run_summaries.py`), so the
window's thread never waits for the interpreter lock.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import threading
import time

from inspector.figure_data.browser import first_divergent_run, run_info
from inspector.figure_data.run_summaries import IN_THREAD_MAX, summaries_in_workers, summarise
from inspector.qt import QtCore, Signal
from traces import TraceError, open_trace

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


class OpenSignals(QtCore.QObject):
    opened = Signal(object, object, object)   # (Trace, first usable RunInfo or None, {run: why unusable})
    failed = Signal(str, str)                 # (path, message)


def open_first(path: str):
    """Open `path` and read the attributes of its first usable run only (and, to pick the run shown
    first, the probe tokens of at most `first_divergent_run`'s limit of runs), so a trace of
    thousands of runs opens as fast as one of a single run; raises TraceError for the file.

    Returns (trace, info of the run to show first: the first divergent probe run, else the first
    usable one, or None; unusable runs: name -> why). A run that
    fails its checks does not make the file unusable; the others are checked later (`SummaryJob`).
    """
    trace = open_trace(path)
    # While a recording adds runs, its incomplete run is the one being written: it shows once done.
    unusable = {} if trace.recording else {name: INCOMPLETE for name in trace.incomplete_runs}
    first = None
    try:
        for name in trace.run_names:
            try:
                first = run_info(trace.run(name))
                break
            except TraceError as exc:
                log.warning("run %s of %s is unusable: %s", name, path, exc)
                unusable[name] = str(exc)
        # Open on what matters: the first run whose probe completion leaves its reference's.
        name = first_divergent_run(trace) if first is not None else None
        if name is not None:
            first = run_info(trace.run(name))
    except TraceError as exc:  # a damaged run met while looking: open on the first usable one
        log.warning("looking for the first divergent run of %s: %s", path, exc)
    except BaseException:
        trace.close()
        raise
    return trace, first, unusable


class OpenJob(QtCore.QRunnable):
    """Opens a trace; emits `opened(trace, first_info, unusable)` or `failed(path, message)`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.signals = OpenSignals()
        self.setAutoDelete(True)

    def run(self) -> None:
        try:
            trace, first, unusable = open_first(self.path)
        except TraceError as exc:
            log.info("could not open %s: %s", self.path, exc)
            _emit(self.signals.failed, self.path, str(exc))
        except Exception as exc:  # anything else still becomes one clear message
            log.exception("unexpected error opening %s", self.path)
            _emit(self.signals.failed, self.path,
                  f"{self.path}: could not be opened ({type(exc).__name__}: {exc})")
        else:
            if not _emit(self.signals.opened, trace, first, unusable):
                trace.close()


class SummarySignals(QtCore.QObject):
    summarised = Signal(object, object)   # (RunInfo, RunStats)
    progress = Signal(int, int)           # (done, total)
    finished = Signal()
    failed = Signal(str, str)             # (run name, message)


class SummaryJob(QtCore.QRunnable):
    """Checks each run and reads its attributes, drops and focus-row completion, in write order;
    cancel with `cancel()`.

    The job shares the interpreter lock with the GUI thread, so `pause(seconds)` holds it between
    two runs while the user navigates: a layer switch then repaints at full speed.
    """

    def __init__(self, path: str, names: list[str]) -> None:
        super().__init__()
        self.path = path
        self.names = list(names)
        self.signals = SummarySignals()
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
        try:
            done = 0
            if len(self.names) > IN_THREAD_MAX:  # worker processes: the window's thread stays free
                try:
                    with contextlib.closing(summaries_in_workers(self.path, self.names,
                                                                 self._cancel.is_set)) as summaries:
                        done = self._report(summaries)
                except (OSError, EOFError, pickle.UnpicklingError) as exc:
                    log.warning("summarising %s in worker processes failed (%s); going on here",
                                self.path, exc)
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
            _emit(self.signals.finished)

    def _report(self, summaries, done: int = 0) -> int:
        """Emit each summary (pausing between them as asked); the number of runs reported."""
        total = len(self.names)
        for name, info, stats, why in summaries:
            if why is not None:
                log.warning("run %s of %s is unusable: %s", name, self.path, why)
                alive = _emit(self.signals.failed, name, why)
            else:
                alive = _emit(self.signals.summarised, info, stats)
            done += 1
            if not (alive and _emit(self.signals.progress, done, total)):
                self._cancel.set()
            self._wait_while_paused()
            if self._cancel.is_set():
                break
        return done
