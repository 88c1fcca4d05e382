"""A bounded check of the file's HDF5 global heap collections, made before HDF5 reads any of them.

Variable-length strings (every string attribute, the dimension labels, `vocab`, `requests/text`)
live in global heap collections ("GCOL" blocks of 4 KiB or more). When HDF5 loads a collection it
walks the objects inside it, each advancing the walk by its own declared size; an object with heap
index 0 (free space) and size 0 does not advance it, and HDF5 (up to at least 2.0) loops for ever
at 100% CPU. Zeroed bytes inside a collection whose header survived are exactly that. So before a
file is handed to HDF5, every collection in it is walked here the way HDF5 walks it, and a walk
that would not end is reported instead (HDF5 File Format Specification, "Global Heap").

The scan looks for the signature through the whole file with `mmap.find` (about 0.7 GB/s from the
page cache) once per file state; a collection it cannot parse is left to HDF5, which then fails
with an error.
"""

from __future__ import annotations

import mmap
import os
import struct

SIGNATURE = b"GCOL"
#: Collection header: signature (4), version (1), reserved (3), collection size (8, lengths of 8).
HEADER = 16
#: Object header: index (2), reference count (2), reserved (4), object size (8).
OBJECT_HEADER = 16
#: HDF5 never writes a collection smaller than this.
MIN_COLLECTION = 4096


_WORD = 1 << 64


def _align8(n: int) -> int:
    return 8 * (((n + 7) % _WORD) // 8)  # H5HG_ALIGN in size_t arithmetic: wraps like C


#: (device, inode) -> (size, mtime_ns, offsets of the collections found) of files found intact.
_SCANNED: dict[tuple[int, int], tuple[int, int, list[int]]] = {}
_SCANNED_MAX = 256


def damaged_collection(path: str | os.PathLike) -> tuple[int, int] | None:
    """(collection offset, object offset) of the first global heap collection whose object walk
    would never end, or None when every collection walks to its end (or the file has none).

    The collections of a file found intact are remembered by inode: reopening it unchanged walks
    them again without scanning, and a file that grew (a trace being recorded) is scanned from its
    old end on. Every collection is walked on every call, so damage inside one is always found."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_size < HEADER:
            return None
        key = (st.st_dev, st.st_ino)
        known = _SCANNED.get(key)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            found: list[int] = []
            if known is not None and known[:2] == (st.st_size, st.st_mtime_ns):
                found = list(known[2])  # unchanged: walk the known collections again, no scan
            elif known is not None and known[0] <= st.st_size:
                seen = set(known[2])
                found = list(known[2])
                found += [at for at in _signatures(mm, max(0, known[0] - len(SIGNATURE) + 1))
                          if at not in seen]
            else:
                found = _signatures(mm, 0)
            for start in found:
                stuck = _stuck_object(mm, start, st.st_size)
                if stuck is not None:
                    _SCANNED.pop(key, None)
                    return start, stuck
    if len(_SCANNED) >= _SCANNED_MAX:
        _SCANNED.clear()
    _SCANNED[key] = (st.st_size, st.st_mtime_ns, found)
    return None


def _signatures(mm: mmap.mmap, begin: int) -> list[int]:
    out = []
    at = mm.find(SIGNATURE, begin)
    while at >= 0:
        out.append(at)
        at = mm.find(SIGNATURE, at + 1)
    return out


def _stuck_object(mm: mmap.mmap, start: int, file_size: int) -> int | None:
    """Offset of the object at which HDF5's walk of the collection at `start` would not advance."""
    if start + HEADER > file_size or mm[start + 4] != 1:
        return None
    (length,) = struct.unpack_from("<Q", mm, start + 8)
    if length < MIN_COLLECTION or start + length > file_size:
        return None  # not a collection HDF5 would accept: it fails on it with an error
    end = start + length
    p = start + HEADER
    while p < end:
        if p + OBJECT_HEADER > end:
            return None  # the tail is too small for an object: free space, the walk ends
        index, _refs, _reserved, obj_size = struct.unpack_from("<HHIQ", mm, p)
        need = (OBJECT_HEADER + _align8(obj_size)) % _WORD if index > 0 else obj_size
        if need == 0 or need >= _WORD >> 1:  # no progress, or a pointer that wraps backwards
            return p
        p += need
    return None
