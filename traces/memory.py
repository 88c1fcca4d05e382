"""Memory freed by HDF5 and numpy, handed back to the system."""

from __future__ import annotations

import contextlib
import ctypes


def return_freed_memory() -> None:
    """Hand memory freed by HDF5 back to the system (glibc keeps freed blocks in its arenas, so a
    process's resident size otherwise stays at its largest)."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
        ctypes.CDLL(None).malloc_trim(0)
