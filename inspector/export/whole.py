"""Outputs written whole or not at all, and exports that stop cleanly on Ctrl-C or SIGTERM.

Every file an export writes (PNG, SVG, PDF, CSV, the caption) is written to a temporary file in the
target's folder and renamed over the target once complete: a full disk, an error half-way or an
interruption leaves the previous file byte for byte and no partial one. Ctrl-C or SIGTERM during an
export is only noted (`Interruptions`): raising inside Qt's rendering, which calls back into Python,
ended the process with a segmentation fault. The export checks the note before each rename and
stops there (`Interrupted`), removing what it wrote.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator


class Interrupted(Exception):
    """The export was interrupted (its signal's number in `signum`); nothing was written."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}: nothing written")


class Interruptions:
    """Ctrl-C and SIGTERM noted, not raised, while the block runs (main thread only)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict = {}

    def __enter__(self) -> Interruptions:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._previous[s] = signal.signal(s, self._note)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _note(self, signum, frame) -> None:
        self.received = self.received or signum

    def check(self) -> None:
        """Interrupted when a signal came."""
        if self.received is not None:
            raise Interrupted(self.received)


@contextlib.contextmanager
def whole_file(path: str | os.PathLike, before_rename: Callable[[], None] = lambda: None) -> Iterator[str]:
    """A temporary path in `path`'s folder (with `path`'s extension, for writers that read it) to write
    to; renamed over `path` when the block ends without an error and `before_rename` does not raise,
    removed otherwise."""
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    temporary = os.path.join(folder, f".{stem}.{os.getpid()}.part{ext}")
    try:
        yield temporary
        before_rename()
        if not os.path.exists(temporary):
            raise OSError(f"{temporary} was not written")
        with open(temporary, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
