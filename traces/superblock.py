"""The end-of-file address an HDF5 file's superblock records, read without HDF5.

The writer reserves space past the end of the file before each run (`posix_fallocate`); HDF5 does
not always give the unused part back (a file reopened for appending keeps it), so the writer trims
the file to the end its superblock records once the run is flushed (HDF5 File Format
Specification, "Superblock", versions 0 to 3).
"""

from __future__ import annotations

import os
import struct

SIGNATURE = b"\x89HDF\r\n\x1a\n"


def stored_eof(path: str | os.PathLike) -> int | None:
    """The end-of-file address in the superblock at the start of `path`, None when it cannot be read
    (no HDF5 signature at offset 0, offsets other than 8 bytes, an unknown superblock version)."""
    with open(path, "rb") as fh:
        head = fh.read(64)
    if len(head) < 48 or not head.startswith(SIGNATURE):
        return None
    version = head[8]
    if version in (0, 1):
        offsets, eof_at = head[13], 40 + (4 if version == 1 else 0)  # after base and free-space addresses
    elif version in (2, 3):
        offsets, eof_at = head[9], 28  # after base and superblock-extension addresses
    else:
        return None
    if offsets != 8:
        return None
    (base,) = struct.unpack_from("<Q", head, eof_at - 16)
    (eof,) = struct.unpack_from("<Q", head, eof_at)
    return base + eof


def trim_to_stored_eof(path: str | os.PathLike) -> bool:
    """Cut `path` to the end its superblock records when it is longer; True if it was."""
    eof = stored_eof(path)
    if eof is None or eof >= os.path.getsize(path):
        return False
    os.truncate(path, eof)
    return True
