"""One writer per trace: an exclusive lock on a sidecar file, taken before the trace is touched.

HDF5's own file lock is taken only once the file is open, and opening a file for writing ("w")
truncates it first, so a second writer used to destroy the first one's file before failing. The
lock here lives in `<trace>.lock` beside the trace (flock, released by the kernel when the process
dies, so a killed writer leaves no stale lock); the writer takes it before it reads, creates or
replaces anything, and removes the sidecar when it closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time

from traces.errors import TraceError

log = logging.getLogger(__name__)

#: Seconds a writer keeps trying a held lock before it fails (a reader's probe holds it briefly).
PROBE_GRACE_S = 0.2


def lock_path(path: str | os.PathLike) -> str:
    """The sidecar lock file of the trace at `path`."""
    return os.fspath(path) + ".lock"


class WriteLock:
    """An exclusive, non-blocking lock on `<path>.lock`; TraceError when another writer holds it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._sidecar = lock_path(path)
        self._fd: int | None = None
        while self._fd is None:
            try:
                fd = os.open(self._sidecar, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise TraceError(self.path, "/", f"expected a lock file {self._sidecar} this process "
                                                 f"can create ({exc.strerror})") from exc
            if not _lock_soon(fd):
                os.close(fd)
                raise TraceError(self.path, "/", "expected no other writer, but another process is "
                                                 f"writing this trace (it holds {self._sidecar})")
            if _same_file(fd, self._sidecar):
                self._fd = fd
            else:  # the previous holder removed the sidecar between our open and our lock: retry
                os.close(fd)
        log.debug("locked %s", self._sidecar)

    def release(self) -> None:
        """Remove the sidecar and drop the lock (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # while still locked: a waiting writer re-checks the inode
            os.unlink(self._sidecar)
        os.close(self._fd)
        self._fd = None


def is_locked(path: str | os.PathLike) -> bool:
    """Whether a writer (in this or another process) holds the lock of the trace at `path`."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _lock_soon(fd: int) -> bool:
    """Take the lock, trying for PROBE_GRACE_S: `is_locked` holds it for an instant when it looks."""
    deadline = time.monotonic() + PROBE_GRACE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
