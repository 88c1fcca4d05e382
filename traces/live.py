"""Reading a trace while it is recorded: never a torn view, never an error on a healthy growing file.

A writer changes bytes already in the file only while its commit counter (in the lock sidecar,
`traces/lock.py`) is odd: when HDF5 flushes, when the file is cut back to its recorded end, when it
is reopened. Between those moments the file holds exactly what the last flush committed, plus
unreferenced bytes past its end. So a reader notes the trace's state (its inode and the counter)
before it opens the file, reads what it needs, and compares: the same even state means it saw one
committed version of the file; otherwise it closes what it opened and reads again. A committed run
is never changed afterwards, so what a reader opened stays readable while the file grows. While it
reads metadata a reader also holds the writer off (`traces.lock.reading`): HDF5 meeting metadata
half-way through a flush may corrupt its own memory instead of failing.

HDF5 serves every handle one process holds on a file from the first handle's cached metadata, so a
second `open_trace` while another handle is open sees the file as it was then. A follower therefore
closes every handle before it reopens.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TypeVar

from traces.errors import TraceError
from traces.lock import commit_counter, is_locked, reading

T = TypeVar("T")

#: Longest a reader waits for one consistent read before it keeps what it read last.
CONSISTENT_WAIT_S = 10.0
#: Seconds between two looks while the writer is changing the file.
BUSY_SLEEP_S = 0.002


def file_state(path: str | os.PathLike) -> tuple[int, int] | None:
    """(size, modification time in ns) of the file at `path`, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def being_written(path: str | os.PathLike) -> bool:
    """Whether a writer holds the trace's lock (a recording is adding runs to it)."""
    return is_locked(path)


def commit_state(path: str | os.PathLike) -> tuple | None:
    """What identifies one committed version of the trace: (device, inode) of the file and the
    writer's (sidecar inode, commit counter), the latter None without a writer; None when there is
    no file. Equal states, both `settled`, mean the file did not change in between."""
    counter = commit_counter(path)
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino), counter


def version(path: str | os.PathLike) -> tuple:
    """What a follower compares to see that the trace changed: its `commit_state`, and without a
    writer also its size and modification time (a file appended to between two looks)."""
    committed = commit_state(path)
    if committed is None or committed[1] is None:
        return committed, file_state(path)
    return committed, None


def settled(state: tuple | None, path: str | os.PathLike) -> bool:
    """Whether no writer is changing the file now (a counter left odd by a killed writer, whose
    lock the kernel dropped, counts as settled)."""
    if state is None or state[1] is None or state[1][1] % 2 == 0:
        return True
    return not is_locked(path)


def read_consistently(path: str | os.PathLike, read: Callable[[], T], *,
                      discard: Callable[[T], None] = lambda result: None,
                      good_enough: Callable[[T], bool] = lambda result: False,
                      hold: bool = True, wait_s: float = CONSISTENT_WAIT_S) -> T:
    """`read()` repeated until it ran while the trace held still (see the module docstring).

    A TraceError raised while the trace changed is retried, one raised while it held still is the
    file's. A result read while it changed is `discard`ed and read again, unless `good_enough`
    accepts it; after `wait_s` the last result is kept (and a TraceError raised). With `hold`, the
    writer is held off while `read()` runs (otherwise `read()` holds it where it needs to)."""
    deadline = time.monotonic() + wait_s
    while True:
        before = commit_state(path)
        if not settled(before, path) and time.monotonic() < deadline:
            time.sleep(BUSY_SLEEP_S)
            continue
        try:
            with reading(path) if hold else contextlib.nullcontext():
                result = read()
        except TraceError:
            if commit_state(path) != before and time.monotonic() < deadline:
                continue
            raise
        if commit_state(path) == before or good_enough(result) or time.monotonic() >= deadline:
            return result
        discard(result)
