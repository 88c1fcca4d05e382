"""One writer per trace: an exclusive lock on a sidecar file, taken before the trace is touched.

HDF5's own file lock is taken only once the file is open, and opening a file for writing ("w")
truncates it first, so a second writer used to destroy the first one's file before failing. The
lock here lives in `<trace>.lock` beside the trace (flock, released by the kernel when the process
dies, so a killed writer leaves no stale lock); the writer takes it before it reads, creates or
replaces anything, and removes the sidecar when it closes.

The sidecar also holds the writer's commit counter (8 bytes, little-endian): odd while the writer
changes bytes a reader may read (an HDF5 flush, cutting the file back, reopening it), even between
those moments. Those moments hold an exclusive lock on the counter's bytes, and a reader reading
metadata holds a shared one (open file description locks, `F_OFD_SETLKW`: a process closing another
descriptor of the sidecar does not drop them): HDF5 reading metadata half-way through a flush may
not just fail but corrupt its own memory. A reader also compares the counter before and after it
opened the file (`traces/live.py`), which covers a writer that starts meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
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
        self._commits = 0
        self._depth = 0
        log.debug("locked %s", self._sidecar)

    @contextlib.contextmanager
    def changing(self):
        """Mark the file as changing (commit counter odd) for the duration; nested uses count once."""
        self._depth += 1
        if self._depth == 1:
            _range_lock(self._fd, fcntl.F_WRLCK)
            self._bump()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._bump()
                _range_lock(self._fd, fcntl.F_UNLCK)

    def _bump(self) -> None:
        self._commits += 1
        if self._fd is not None:
            with contextlib.suppress(OSError):  # a full disk: readers then only see the lock
                os.pwrite(self._fd, struct.pack("<Q", self._commits), 0)

    def release(self) -> None:
        """Remove the sidecar and drop the lock (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # while still locked: a waiting writer re-checks the inode
            os.unlink(self._sidecar)
        os.close(self._fd)
        self._fd = None


#: Open file description locks (Linux >= 3.15); elsewhere readers rely on the counter alone.
_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)


def _range_lock(fd: int | None, kind: int) -> None:
    """Lock (F_RDLCK shared, F_WRLCK exclusive) or unlock the counter's bytes of the sidecar."""
    if fd is None or _OFD_SETLKW is None:
        return
    flock = struct.pack("hhqqi4x", kind, os.SEEK_SET, 0, 8, 0)  # struct flock, l_pid 0 for OFD locks
    with contextlib.suppress(OSError):  # a file system without them: the counter alone protects
        fcntl.fcntl(fd, _OFD_SETLKW, flock)


@contextlib.contextmanager
def reading(path: str | os.PathLike):
    """Hold off the trace's writer from changing the file while this block reads its metadata (a
    no-op when no writer is running)."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = None  # no writer
    try:
        _range_lock(fd, fcntl.F_RDLCK)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # drops the lock


def commit_counter(path: str | os.PathLike) -> tuple[int, int] | None:
    """(inode of the sidecar, commit counter) of the trace's writer, None when there is no sidecar."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.pread(fd, 8, 0)
        ino = os.fstat(fd).st_ino
    except OSError:
        return None
    finally:
        os.close(fd)
    return ino, struct.unpack("<Q", raw)[0] if len(raw) == 8 else 0


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
