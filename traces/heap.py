"""A bounded check of the file's HDF5 global heap collections, made before HDF5 reads any of them.

Variable-length strings (every string attribute, the dimension labels, `vocab`, `requests/text`)
live in global heap collections ("GCOL" blocks of 4 KiB or more). When HDF5 loads a collection it
walks the objects inside it, each advancing the walk by its own declared size; an object with heap
index 0 (free space) and size 0 does not advance it, and HDF5 (up to at least 2.0) loops for ever
at 100% CPU. Zeroed bytes inside a collection whose header survived are exactly that. So before a
file is handed to HDF5, every collection in it is walked here the way HDF5 walks it, and a walk
that would not end is reported instead (HDF5 File Format Specification, "Global Heap"). The walk
also records the largest object (one string), so a reader knows the most one string can cost
before it reads any.

The file is read with `pread`, never mapped: a trace being recorded grows and shrinks (the writer
reserves space and gives it back), and a map past the new end would kill the reader with SIGBUS.
The scan covers the file only up to the end its superblock records (HDF5 reads nothing past it)
and skips holes (`SEEK_DATA`), so a sparse tail of any length costs nothing. A collection it cannot
parse is left to HDF5, which then fails with an error.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass

from traces.superblock import stored_eof

SIGNATURE = b"GCOL"
#: Collection header: signature (4), version (1), reserved (3), collection size (8, lengths of 8).
HEADER = 16
#: Object header: index (2), reference count (2), reserved (4), object size (8).
OBJECT_HEADER = 16
#: HDF5 never writes a collection smaller than this.
MIN_COLLECTION = 4096
#: Bytes read per `pread` while looking for signatures.
BLOCK = 8 << 20
#: Collections up to this size are read whole to walk them; larger ones one object header at a time.
WHOLE = 4 << 20

_WORD = 1 << 64


def _align8(n: int) -> int:
    return 8 * (((n + 7) % _WORD) // 8)  # H5HG_ALIGN in size_t arithmetic: wraps like C


@dataclass(frozen=True)
class HeapScan:
    """What the walk of every collection found: the first walk that would not end (collection
    offset, object offset) or None, and the largest object (bytes) in any collection."""

    stuck: tuple[int, int] | None
    largest_object: int


#: (device, inode) -> (size, mtime_ns, scanned end, offsets of the collections found) of files found intact.
_SCANNED: dict[tuple[int, int], tuple[int, int, int, list[int]]] = {}
_SCANNED_MAX = 256


def scan_heap(path: str | os.PathLike) -> HeapScan:
    """Walk every global heap collection of `path` as HDF5 would (see the module docstring).

    The collections of a file found intact are remembered by inode: reopening it unchanged walks
    them again without scanning, and a file that grew (a trace being recorded) is scanned from its
    old end on. Every collection is walked on every call, so damage inside one is always found."""
    with open(path, "rb") as fh:
        fd = fh.fileno()
        st = os.fstat(fd)
        end = _scan_end(path, st.st_size)
        if end < HEADER:
            return HeapScan(None, 0)
        key = (st.st_dev, st.st_ino)
        known = _SCANNED.get(key)
        if known is not None and known[:3] == (st.st_size, st.st_mtime_ns, end):
            found = list(known[3])  # unchanged: walk the known collections again, no scan
        elif known is not None and known[2] <= end:
            seen = set(known[3])
            found = list(known[3])
            found += [at for at in _signatures(fd, max(0, known[2] - len(SIGNATURE) + 1), end)
                      if at not in seen]
        else:
            found = _signatures(fd, 0, end)
        largest = 0
        for start in found:
            stuck, biggest = _walk(fd, start, end)
            if stuck is not None:
                _SCANNED.pop(key, None)
                return HeapScan((start, stuck), largest)
            largest = max(largest, biggest)
    if len(_SCANNED) >= _SCANNED_MAX:
        _SCANNED.clear()
    _SCANNED[key] = (st.st_size, st.st_mtime_ns, end, found)
    return HeapScan(None, largest)


def damaged_collection(path: str | os.PathLike) -> tuple[int, int] | None:
    """(collection offset, object offset) of the first global heap collection whose object walk
    would never end, or None when every collection walks to its end (or the file has none)."""
    return scan_heap(path).stuck


def _scan_end(path: str | os.PathLike, size: int) -> int:
    """Where HDF5 stops reading: the superblock's end of file when it records one below the size."""
    eof = stored_eof(path)
    return size if eof is None else min(size, eof)


def _signatures(fd: int, begin: int, end: int) -> list[int]:
    """Offsets of SIGNATURE in [begin, end), read in blocks, holes skipped."""
    out: list[int] = []
    at = begin
    while at < end:
        try:
            data_at = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # only a hole is left
            data_at = at  # a file system without SEEK_DATA: read on
        if data_at >= end:
            break
        at = max(at, data_at)  # a hole holds zeros: no signature starts in it or runs into it
        want = min(BLOCK, end - at)
        block = os.pread(fd, want, at)
        i = block.find(SIGNATURE)
        while i >= 0:
            out.append(at + i)
            i = block.find(SIGNATURE, i + 1)
        if len(block) < want or at + len(block) >= end:
            break  # the end, or the file shrank meanwhile: what is gone holds nothing to walk
        at += len(block) - len(SIGNATURE) + 1
    return out


def _walk(fd: int, start: int, file_end: int) -> tuple[int | None, int]:
    """(offset of the object at which HDF5's walk of the collection at `start` would not advance, or
    None; the largest object in the collection)."""
    head = os.pread(fd, HEADER, start)
    if len(head) < HEADER or head[:4] != SIGNATURE or head[4] != 1:
        return None, 0
    (length,) = struct.unpack_from("<Q", head, 8)
    if length < MIN_COLLECTION or start + length > file_end:
        return None, 0  # not a collection HDF5 would accept: it fails on it with an error
    data = os.pread(fd, length, start) if length <= WHOLE else None  # else: one object at a time
    if data is not None and len(data) < length:
        return None, 0  # the file shrank meanwhile
    p, largest = HEADER, 0
    while p < length:
        if p + OBJECT_HEADER > length:
            return None, largest  # the tail is too small for an object: free space, the walk ends
        raw = data[p:p + OBJECT_HEADER] if data is not None else os.pread(fd, OBJECT_HEADER, start + p)
        if len(raw) < OBJECT_HEADER:
            return None, largest  # the file shrank meanwhile
        index, _refs, _reserved, obj_size = struct.unpack("<HHIQ", raw)
        need = (OBJECT_HEADER + _align8(obj_size)) % _WORD if index > 0 else obj_size
        if need == 0 or need >= _WORD >> 1:  # no progress, or a pointer that wraps backwards
            return start + p, largest
        if index > 0:
            largest = max(largest, obj_size)
        p += need
    return None, largest
