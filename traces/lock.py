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

The sidecar is this tool's, never the trace's: anyone who sends a trace can send a `<trace>.lock`
beside it. It is opened without following a symbolic link and without waiting (a FIFO would block
the open for ever), and anything but a regular file there is refused in one sentence; the writer
creates it exclusively, and takes one over only when it is a regular file of this user with one
name and at most a counter in it (what a writer stopped by `kill -9` leaves, said in a warning).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import struct
import time

from traces.errors import TraceError

log = logging.getLogger(__name__)

#: Seconds a writer keeps trying a held lock before it fails (a reader's probe holds it briefly).
PROBE_GRACE_S = 0.2
#: Bytes of the commit counter at the start of the sidecar.
COUNTER_BYTES = 8


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
            fd, created = self._open_or_create()
            if not _lock_soon(fd):
                os.close(fd)
                raise TraceError(self.path, "/", "expected no other writer, but another process is "
                                                 f"writing this trace (it holds {self._sidecar})")
            if _same_file(fd, self._sidecar):
                self._fd = fd
                if not created:
                    log.warning("%s: a lock file left by a writer that was stopped without closing the trace "
                                "(killed?) is taken over", self._sidecar)
            else:  # the previous holder removed the sidecar between our open and our lock: retry
                os.close(fd)
        self._commits = 0
        self._depth = 0
        log.debug("locked %s", self._sidecar)

    def _open_or_create(self) -> tuple[int, bool]:
        """(descriptor, whether this call created it) of the sidecar: created anew, or the lock file
        a writer left (a regular file of this user's, of one name, holding at most a counter); never a
        link, a FIFO or any other file, which would make the writer write into a file it did not make."""
        flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            return os.open(self._sidecar, flags | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            pass
        except OSError as exc:
            raise TraceError(self.path, "/", f"expected a lock file {self._sidecar} this process "
                                             f"can create ({exc.strerror})") from exc
        fd = _open_sidecar(self.path, flags)
        if fd is None and os.path.lexists(self._sidecar):
            raise TraceError(self.path, "/", f"expected {self._sidecar} to be a lock file this process can "
                                             f"open, found one it cannot (refused; remove it)")
        if fd is None:  # removed meanwhile by the writer that held it
            return self._open_or_create()
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_nlink != 1 or st.st_size > COUNTER_BYTES:
            os.close(fd)
            raise TraceError(self.path, "/", f"expected {self._sidecar} to be a lock file this tool made, "
                                             f"found a file of {st.st_size} bytes with {st.st_nlink} name(s) "
                                             f"owned by user {st.st_uid} (refused; remove it if no writer "
                                             f"is running)")
        return fd, False

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
            if _same_file(self._fd, self._sidecar):  # never a file someone put in its place
                os.unlink(self._sidecar)
        os.close(self._fd)
        self._fd = None


#: Open file description locks (Linux >= 3.15); elsewhere readers rely on the counter alone.
_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
#: Longest a reader waits at the turnstile for a writer that wants the counter's bytes.
TURNSTILE_WAIT_S = 0.5


def _range_lock(fd: int | None, kind: int) -> None:
    """Lock (F_RDLCK shared, F_WRLCK exclusive) or unlock the counter's bytes of the sidecar.

    The writer goes first: it takes the byte after the counter (a turnstile) before it waits for the
    counter's bytes, and a reader passes the turnstile (`_pass_turnstile`) before it takes them, so
    readers in a tight loop, whose shared locks overlap, cannot keep the writer out."""
    if kind == fcntl.F_WRLCK:
        _lock_bytes(fd, fcntl.F_WRLCK, COUNTER_BYTES)
        _lock_bytes(fd, fcntl.F_WRLCK, 0)
        _lock_bytes(fd, fcntl.F_UNLCK, COUNTER_BYTES)
    elif kind == fcntl.F_RDLCK:
        _pass_turnstile(fd)
        _lock_bytes(fd, fcntl.F_RDLCK, 0)
    else:
        _lock_bytes(fd, kind, 0)


def _pass_turnstile(fd: int | None) -> None:
    """Wait while a writer holds the turnstile, for TURNSTILE_WAIT_S at most: a reader that already
    holds the counter's bytes (a read nested in another) would otherwise wait for a writer that waits
    for it."""
    if fd is None or _OFD_SETLK is None:
        return
    deadline = time.monotonic() + TURNSTILE_WAIT_S
    shared = struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, COUNTER_BYTES, 1, 0)
    while True:
        try:
            fcntl.fcntl(fd, _OFD_SETLK, shared)
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.002)
                continue
            return
        except OSError:
            return  # a file system without them: the counter alone protects
        _lock_bytes(fd, fcntl.F_UNLCK, COUNTER_BYTES)
        return


def _lock_bytes(fd: int | None, kind: int, start: int) -> None:
    """Lock or unlock the counter's bytes (`start` 0) or the turnstile (`start` COUNTER_BYTES)."""
    if fd is None or _OFD_SETLKW is None:
        return
    length = COUNTER_BYTES if start == 0 else 1
    flock = struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0)  # l_pid 0 for OFD locks
    with contextlib.suppress(OSError):  # a file system without them: the counter alone protects
        fcntl.fcntl(fd, _OFD_SETLKW, flock)


@contextlib.contextmanager
def reading(path: str | os.PathLike):
    """Hold off the trace's writer from changing the file while this block reads its metadata (a
    no-op when no writer is running)."""
    fd = _open_sidecar(path, os.O_RDONLY)  # None: no writer
    try:
        _range_lock(fd, fcntl.F_RDLCK)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # drops the lock


def commit_counter(path: str | os.PathLike) -> tuple[int, int] | None:
    """(inode of the sidecar, commit counter) of the trace's writer, None when there is no sidecar."""
    fd = _open_sidecar(path, os.O_RDONLY)
    if fd is None:
        return None
    try:
        raw = os.pread(fd, COUNTER_BYTES, 0)
        ino = os.fstat(fd).st_ino
    except OSError:
        return None
    finally:
        os.close(fd)
    return ino, struct.unpack("<Q", raw)[0] if len(raw) == 8 else 0


def is_locked(path: str | os.PathLike) -> bool:
    """Whether a writer (in this or another process) holds the lock of the trace at `path`."""
    fd = _open_sidecar(path, os.O_RDONLY)
    if fd is None:
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


def _open_sidecar(path: str | os.PathLike, flags: int) -> int | None:
    """A descriptor of the trace's sidecar lock file opened with `flags`, None when there is none (or
    it cannot be opened); TraceError when something other than a regular file is there. It is opened
    without following a symbolic link and without waiting (a FIFO would block the open for ever)."""
    sidecar = lock_path(path)
    try:
        fd = os.open(sidecar, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return None
        raise TraceError(os.fspath(path), "/", f"expected {sidecar} to be the lock file of a writer, found a "
                                               f"symbolic link (refused unfollowed; remove it)") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) \
            else "a special file"
        raise TraceError(os.fspath(path), "/", f"expected {sidecar} to be the lock file of a writer, found "
                                               f"{kind} (refused unread; remove it)")
    return fd


def _same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
