"""Following a trace while it is recorded: poll the file, say when it is live, ask for a reload.

`LiveFollower` emits `live(True)` while a writer holds the trace's lock and `changed()` as soon as
the writer has committed something since the file was opened (its commit counter moved and is at
rest, `traces/live.py`), so a new run shows within one poll of its commit however fast runs come.
A file changed without a running writer (replaced, or appended to between two polls) is seen by
its size and modification time.
"""

from __future__ import annotations

from inspector.qt import QtCore, Signal
from traces.live import being_written, settled, version

#: Milliseconds between two looks at the followed file.
LIVE_POLL_MS = 250


class LiveFollower(QtCore.QObject):
    live = Signal(bool)
    changed = Signal()

    def __init__(self, parent: QtCore.QObject | None = None, interval_ms: int = LIVE_POLL_MS) -> None:
        super().__init__(parent)
        self._path: str | None = None
        self._opened = None
        self._live: bool | None = None
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)

    def follow(self, path: str, opened=None) -> None:
        """Watch `path`, as it was when opened (`opened`: its `traces.live.version` then, or now
        when not given)."""
        self._path = path
        self._opened = version(path) if opened is None else opened
        self._live = None
        self._show_live()  # a change is left to the timer: the caller is still showing the trace
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        self._path = None
        if self._live:
            self.live.emit(False)
        self._live = None

    def _show_live(self) -> None:
        live = being_written(self._path)
        if live != self._live:
            self._live = live
            self.live.emit(live)

    def poll(self) -> None:
        if self._path is None:
            return
        self._show_live()
        now = version(self._path)
        if now[0] is not None and now != self._opened and settled(now[0], self._path):
            self._opened = now
            self.changed.emit()
