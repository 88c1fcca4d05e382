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
import stat
import tempfile
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

    def __init__(self, keep: bool = False) -> None:
        self.received: int | None = None
        self._previous: dict = {}
        #: Whether the signals stay noted after the block (until the process exits): a signal after
        #: the export put its file in place must not turn its success into an interruption.
        self._keep = keep

    def __enter__(self) -> Interruptions:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._previous[s] = signal.signal(s, self._note)
        return self

    def __exit__(self, *exc) -> None:
        if self._keep:
            return
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
    removed otherwise. The temporary file is made by `tempfile.mkstemp` (a name no one can guess and
    plant a link under, created exclusively); the file put in place has the permissions of the file it
    replaces, or a new file's usual ones."""
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    fd, temporary = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".part{ext}", dir=folder)
    os.close(fd)
    try:
        yield temporary
        before_rename()
        if not os.path.exists(temporary):
            raise OSError(f"{temporary} was not written")
        with open(temporary, "rb+") as f:
            os.fchmod(f.fileno(), _mode_for(path))
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def _mode_for(path: str) -> int:
    """The permissions the file written to `path` gets: those of the regular file there now, else what
    creating a file gives (0o666 less the process's umask)."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it (Linux), else by setting and restoring it."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def other_names(path: str | os.PathLike) -> int:
    """How many other names (hard links) the regular file at `path` has: writing a new file in its place
    leaves them holding the previous content."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_nlink - 1 if stat.S_ISREG(st.st_mode) else 0
