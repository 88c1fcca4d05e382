"""Following a trace while it is recorded: poll the file, say when it is live, ask for a reload.

`LiveFollower` emits `live(True)` while a writer holds the trace's lock and `changed()` once the file
has changed since it was opened and then held still for one poll: a writer flushes a run in one go
between runs, so a file that held still is not half-way through a flush, and the reader lists only
runs marked complete.
"""

from __future__ import annotations

from inspector.qt import QtCore, Signal
from traces.live import being_written, file_state

#: Milliseconds between two looks at the followed file.
LIVE_POLL_MS = 2000


class LiveFollower(QtCore.QObject):
    live = Signal(bool)
    changed = Signal()

    def __init__(self, parent: QtCore.QObject | None = None, interval_ms: int = LIVE_POLL_MS) -> None:
        super().__init__(parent)
        self._path: str | None = None
        self._opened = self._last = None
        self._live: bool | None = None
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)

    def follow(self, path: str) -> None:
        """Watch `path`, as it is now (just opened)."""
        self._path = path
        self._opened = self._last = file_state(path)
        self._live = None
        self.poll()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        self._path = None
        if self._live:
            self.live.emit(False)
        self._live = None

    def poll(self) -> None:
        if self._path is None:
            return
        live = being_written(self._path)
        if live != self._live:
            self._live = live
            self.live.emit(live)
        now = file_state(self._path)
        if now is not None and now != self._opened and now == self._last:
            self._opened = now
            self.changed.emit()
        self._last = now
