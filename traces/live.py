"""What a viewer following a trace being recorded needs to know about the file, without opening it.

HDF5 serves every handle one process holds on a file from the first handle's cached metadata, so a
second `open_trace` while another handle is open sees the file as it was then. A follower therefore
watches the file's size and modification time, and closes every handle before it reopens.
"""

from __future__ import annotations

import os

from traces.lock import is_locked


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
