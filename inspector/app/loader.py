"""Background work: opening a trace and summarising its runs off the GUI thread.

Each job is a `QRunnable` on the global thread pool that reports through a `QObject`'s signals
(queued to the GUI thread). The summariser opens its own handle on the file, so closing or
reloading the window's trace never pulls a file out from under a running job.
"""

from __future__ import annotations

import logging
import threading
import time

from inspector.figure_data.browser import first_divergent_run, run_info, run_stats
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
            trace = open_trace(self.path)
        except TraceError as exc:
            _emit(self.signals.failed, "", str(exc))
            _emit(self.signals.finished)
            return
        try:
            total = len(self.names)
            for i, name in enumerate(self.names):
                self._wait_while_paused()
                if self._cancel.is_set():
                    break
                try:
                    run = trace.run(name)
                    info = run_info(run)
                    stats = run_stats(run, trace.vocab, info.focus_row)
                except TraceError as exc:
                    log.warning("run %s of %s is unusable: %s", name, self.path, exc)
                    alive = _emit(self.signals.failed, name, str(exc))
                except Exception as exc:  # a run the reader accepts but that does not add up
                    log.exception("cannot summarise run %s of %s", name, self.path)
                    alive = _emit(self.signals.failed, name, f"{self.path}: /runs/{name}: could not be "
                                                             f"summarised ({type(exc).__name__}: {exc})")
                else:
                    alive = _emit(self.signals.summarised, info, stats)
                if not (alive and _emit(self.signals.progress, i + 1, total)):
                    break
        finally:
            trace.close()
            _emit(self.signals.finished)
