"""A `TraceWriter` on its own thread: runs are checked in the caller, then written while it goes on.

`BackgroundWriter(writer)` takes `add_run` and `write_table` calls in the same form as the writer.
Each run is validated at once (a bad array raises `ValueError` in the caller, as before) and queued;
the writer thread compresses and writes the runs in order. At most `depth` runs wait in the queue,
so a caller that outpaces the disk waits for room instead of holding every run in memory.

An error in the writer thread (disk full, an I/O error, anything else) stops it: runs already
written stay as the writer's crash safety leaves them (complete runs intact, the failed run
incomplete), queued runs are dropped, and the same exception, with the writer's message, is raised
in the caller by the next `add_run`, `write_table`, `flush` or `close`. `close()` waits for the
queue to drain, joins the thread and closes the writer.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping

from traces.writer import TraceWriter

log = logging.getLogger(__name__)

#: Runs that may wait for the writer thread.
DEPTH = 2
_STOP = object()


class BackgroundWriter:
    """Writes a `TraceWriter`'s runs and tables on a thread of its own (see the module docstring)."""

    def __init__(self, writer: TraceWriter, depth: int = DEPTH) -> None:
        self.writer = writer
        self.path = writer.path
        self._jobs: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._raised = False
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=f"trace-writer {self.path}", daemon=True)
        self._thread.start()

    def add_run(self, name: str, *, attrs: Mapping[str, object], arrays: Mapping[str, object]) -> None:
        """Check the run here and queue it (its arrays must not change afterwards)."""
        self._check()
        prepared = self.writer.prepare_run(name, attrs=attrs, arrays=arrays)
        self._put(self.writer.write_prepared, prepared)

    def write_table(self, name: str, columns: Mapping[str, object],
                    attrs: Mapping[str, object] | None = None) -> None:
        self._check()
        self._put(self.writer.write_table, name, columns, attrs)

    def flush(self) -> None:
        """Wait until everything queued is written; raise the writer thread's error, if any."""
        self._jobs.join()
        self._check()

    def close(self) -> None:
        """Write what is queued, stop the thread, close the writer (idempotent); raise the writer
        thread's error if the caller has not seen it yet."""
        if not self._closed:
            self._closed = True
            self._jobs.put((_STOP, ()))
            self._thread.join()
            self.writer.close()
        if not self._raised:
            self._check()

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _put(self, fn, *args) -> None:
        if self._closed:
            raise ValueError(f"{self.path}: the writer is closed")
        self._jobs.put((fn, args))

    def _check(self) -> None:
        if self._error is not None:  # every call after a failure fails the same way
            self._raised = True
            raise self._error

    def _work(self) -> None:
        while True:
            fn, args = self._jobs.get()
            try:
                if fn is _STOP:
                    return
                if self._error is None:
                    fn(*args)
            except BaseException as exc:  # handed to the caller, who decides what it means
                log.warning("%s: writer thread stopped: %s", self.path, exc)
                self._error = exc
            finally:
                self._jobs.task_done()
