"""Safe access to an HDF5 file that came from someone else: the one open every reader, the writer's
append, the validator, `explain` and the app use, and the hardened reads they share.

HDF5 lets a file reach outside itself: an *external link* names an object in another file, a dataset
may keep its data in *external raw storage* (any file, `/etc/passwd` included) or be *virtual*
(assembled from datasets of other files). Read through h5py, such a trace would hand out another
file's bytes, write into another file (a table added under an external link), or wait for ever on
a FIFO. So a trace must be a regular file, and:

- every link outside the runs (the vocabulary, the requests, the tables, anything else at the root)
  is walked when the file opens (`refuse_outside`), and a run's links when the run is checked
  (`run_outside`): an external link, or a link type HDF5 users may define, is refused with a sentence
  naming the link and where it points. Soft links inside the file keep working (HDF5 stops a cycle of
  them after 16 hops; a walk never follows them);
- every dataset read is checked for where its data live (`storage_outside`): external raw storage and
  virtual datasets are refused.

The refusals use HDF5's own link and storage properties (link types, the dataset creation property
list's layout and external file count), never the names. `check_heap` and `read_strings` bound what
strings a damaged or hostile file can make HDF5 allocate (traces/heap.py).
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from traces import schema
from traces.errors import TraceError
from traces.heap import HeapScan, scan_heap

#: Longest string (one global heap object) a trace may hold: the schema's strings (JSON attributes,
#: prompts, token texts) are KBs. A file holding a longer one is refused before anything is read.
MAX_STRING_BYTES = 16 << 20
#: Bytes of strings read at once (a slice of a string dataset holds at most this many bytes).
STRING_SLICE_BYTES = 32 << 20


def regular_file(path: str) -> None:
    """TraceError unless `path` is an existing, readable regular file. Checked before a byte is read: a
    FIFO, a device or a socket would make a reader wait for ever (or read for ever)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise TraceError(path, "/", "expected an existing file, found nothing at that path") from None
    except OSError as exc:
        raise TraceError(path, "/", f"expected a readable file ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(path, "/", "expected a file, found a directory")
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(path, "/", f"expected a regular file, found {_file_kind(st.st_mode)} "
                                    f"(refused unread)")
    if not os.access(path, os.R_OK):
        raise TraceError(path, "/", "expected a readable file, permission denied")
    if st.st_size == 0:
        raise TraceError(path, "/", "expected an HDF5 trace, found an empty file")


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def open_hdf5(path: str, mode: str = "r", **kwargs) -> h5py.File:
    """Open `path` as HDF5 (read-only by default; "r+" for the writer's append), or raise TraceError
    saying why it cannot be: not a regular file, not HDF5, damaged string storage, or an object that
    reaches outside the file (`refuse_outside`)."""
    regular_file(path)
    try:
        check_heap(path)
        # No HDF5 file lock: a trace being recorded can be inspected up to its last flushed run, and
        # one writer at a time is the sidecar lock's work (traces/lock.py).
        kwargs.setdefault("locking", False)
        f = h5py.File(path, mode, **kwargs)
    except TraceError:
        raise
    except Exception as exc:
        reason = "a file that is not HDF5" if not is_hdf5(path) else f"{type(exc).__name__}: {exc}"
        raise TraceError(path, "/", f"expected an HDF5 trace, found {reason}") from exc
    try:
        refuse_outside(path, f)
    except TraceError:
        f.close()
        raise
    except Exception as exc:  # a damaged link table or object header
        f.close()
        raise TraceError(path, "/", f"expected readable links ({type(exc).__name__}: {exc})") from exc
    return f


def refuse_outside(path: str, f: h5py.File) -> None:
    """TraceError when a link outside the runs, or a link naming a run, leaves the file, or a dataset
    outside the runs keeps its data elsewhere (a run's own objects are checked with the run)."""
    found: list[tuple[str, str]] = []
    for name, info in _links(f.id):
        where = f"/{name.decode('utf-8', 'replace')}"
        problem = _link_problem(f.id, name, info)
        if problem:
            found.append((where, problem))
            continue
        if info.type != h5py.h5l.TYPE_HARD:
            continue
        oid = h5py.h5o.open(f.id, name)
        if isinstance(oid, h5py.h5d.DatasetID):
            problem = storage_outside(oid)
            found += [(where, problem)] if problem else []
        elif isinstance(oid, h5py.h5g.GroupID):
            if name == schema.RUNS.encode():
                found += [(f"{where}/{n.decode('utf-8', 'replace')}", p)
                          for n, i in _links(oid) if (p := _link_problem(oid, n, i))]
            else:
                found += _links_outside(oid, where) or _datasets_outside(oid, where)
    if found:
        where, message = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise TraceError(path, where, message + more)


def runs_outside(path: str, f: h5py.File) -> None:
    """TraceError when a link under any run leaves the file or a run's dataset keeps its data
    elsewhere: the whole walk `refuse_outside` leaves to each run's check (about a millisecond a run),
    for a command that vouches for the whole file without reading every run (`info`)."""
    runs = f.get(schema.RUNS)
    if not isinstance(runs, h5py.Group):
        return
    for name, link in _links(runs.id):
        if link.type != h5py.h5l.TYPE_HARD:
            continue
        gid = h5py.h5o.open(runs.id, name)
        if isinstance(gid, h5py.h5g.GroupID):
            where = f"/{schema.RUNS}/{name.decode('utf-8', 'replace')}"
            found = _links_outside(gid, where) or _datasets_outside(gid, where)
            if found:
                raise TraceError(path, *found[0])


def run_outside(group: h5py.Group, where: str) -> list[tuple[str, str]]:
    """(where, what) of every link under a run's group that leaves the file (its datasets' storage is
    checked as each is opened: `storage_outside`)."""
    return _links_outside(group.id, where)


def _links(gid) -> list[tuple[bytes, Any]]:
    out: list = []
    # h5py hands every call the same LinkInfo, changed in place: keep what it says now.
    gid.links.iterate(lambda name, info: out.append((name, _Link(info.type))), info=True)
    return out


@dataclass(frozen=True)
class _Link:
    type: int


def _link_problem(gid, name: bytes, info) -> str | None:
    if info.type == h5py.h5l.TYPE_EXTERNAL:
        return (f"expected an object stored in this file, found an external link to "
                f"{_external_target(gid, name)} (links to other files are refused)")
    if info.type not in (h5py.h5l.TYPE_HARD, h5py.h5l.TYPE_SOFT):
        return f"expected an object stored in this file, found a link of user-defined type {info.type}"
    return None


def _links_outside(gid: h5py.h5g.GroupID, prefix: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def visit(name: bytes, info) -> None:
        problem = _link_problem(gid, name, info)
        if problem:
            found.append((f"{prefix}/{name.decode('utf-8', 'replace')}", problem))
        return None

    gid.links.visit(visit, info=True)  # follows hard links only: never soft or external ones
    return found


def _external_target(gid, name: bytes) -> str:
    try:
        file_name, object_name = gid.links.get_val(name)
        return f"{_text(file_name)!r} (object {_text(object_name)!r})"
    except Exception:
        return "another file"


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _datasets_outside(gid: h5py.h5g.GroupID, prefix: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def visit(name: bytes, info) -> None:
        if info.type != h5py.h5o.TYPE_DATASET:
            return None
        try:
            message = storage_outside(h5py.h5d.open(gid, name))
        except Exception as exc:
            message = f"expected a readable dataset ({type(exc).__name__}: {exc})"
        if message:
            found.append((f"{prefix}/{name.decode('utf-8', 'replace')}", message))
        return None

    h5py.h5o.visit(gid, visit, info=True)  # hard links only
    return found


def storage_outside(dsid: h5py.h5d.DatasetID) -> str | None:
    """Why the dataset's data are not this file's (external raw storage, a virtual dataset), or None."""
    plist = dsid.get_create_plist()
    if plist.get_layout() == h5py.h5d.VIRTUAL:
        sources = sorted({_text(plist.get_virtual_filename(i)) for i in range(plist.get_virtual_count())})
        return (f"expected data stored in this file, found a virtual dataset assembled from "
                f"{', '.join(map(repr, sources[:3])) or 'other datasets'} (refused)")
    count = plist.get_external_count()
    if count:
        names = [_text(plist.get_external(i)[0]) for i in range(min(count, 3))]
        return (f"expected data stored in this file, found external raw storage in "
                f"{', '.join(map(repr, names))} (refused unread)")
    return None


class Dataset(h5py.Dataset):
    """An h5py Dataset that converts its HDF5 type to a numpy dtype once (h5py converts it on every
    `.dtype`, and checking and reading a run asked some forty times per run; a dataset's type never
    changes), keeps its shape without h5py's lock (some thirty times per run), and makes its transfer
    property list only when it is read (a run's check opens 17 datasets, a summary reads 5)."""

    def __init__(self, bind: h5py.h5d.DatasetID, *, readonly: bool = False) -> None:
        super().__init__(bind, readonly=readonly)
        self._keeps_shape = readonly

    @functools.cached_property
    def dtype(self) -> np.dtype:
        return self.id.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """As h5py's (kept once read when the file is read-only), at a plain attribute's cost."""
        shape = self.__dict__.get("_shape")
        if shape is None:
            shape = self.id.shape
            if self._keeps_shape:
                self.__dict__["_shape"] = shape
        return shape


def open_object(parent, path: str, read_only: bool | None = None):
    """The object at `path` under `parent` (a dataset as `Dataset`, else its low-level id), or None
    when nothing is there: what `parent.get(path)` gives, without the cost h5py's high-level lookup
    adds per call (a File object made to ask the mode), which was much of checking a run.
    `read_only`: whether the file is open read-only (`read_only_file`), when the caller knows."""
    head = path.rpartition("/")[0]
    if head and "/" not in head and not parent.id.links.exists(head.encode()):
        return None  # asked this way, a missing group costs HDF5 no error stack
    try:
        oid = h5py.h5o.open(parent.id, path.encode())
    except KeyError:
        return None
    if isinstance(oid, h5py.h5d.DatasetID):
        return Dataset(oid, readonly=read_only_file(parent) if read_only is None else read_only)
    return oid


def read_only_file(obj) -> bool:
    """Whether `obj`'s file is open read-only (an h5py Dataset then keeps its shape)."""
    return h5py.h5i.get_file_id(obj.id).get_intent() == h5py.h5f.ACC_RDONLY


def check_heap(path: str, walk_again: bool = True) -> HeapScan:
    """TraceError when a global heap collection of `path` would make HDF5 loop for ever, or holds a
    string longer than MAX_STRING_BYTES (traces/heap.py); else what the walk found (`walk_again`:
    see `scan_heap`)."""
    try:
        scan = scan_heap(path, walk_again)
    except (OSError, ValueError) as exc:
        raise TraceError(path, "/", f"expected a readable file ({type(exc).__name__}: {exc})") from exc
    stuck = scan.stuck
    if scan.largest_object > MAX_STRING_BYTES:
        raise TraceError(path, "/", f"expected strings of at most {MAX_STRING_BYTES} bytes, found one of "
                                    f"{scan.largest_object} bytes (refused unread)")
    if stuck is not None:
        raise TraceError(path, "/", f"expected intact string storage, found a damaged HDF5 global heap "
                                    f"collection at byte {stuck[0]} (object at byte {stuck[1]} has size 0; "
                                    f"HDF5 would never finish reading it)")
    return scan


def read_strings(path: str, ds: h5py.Dataset, where: str) -> list[str]:
    """Every string of a 1-D string dataset, read in slices that the heap walk bounds: a slice holds
    at most STRING_SLICE_BYTES whatever its strings point at, and the strings together may not take
    more bytes than the file holds (entries pointing at one long string many times are refused
    before they fill memory)."""
    outside = storage_outside(ds.id)
    if outside:
        raise TraceError(path, where, outside)
    scan = check_heap(path, walk_again=False)  # walked when the file was opened
    budget = os.path.getsize(path)
    step = max(1, STRING_SLICE_BYTES // max(scan.largest_object, 1))
    out: list[str] = []
    total = 0
    try:
        _check_string_entries(path, ds, where, scan.largest_object)
        text = ds.asstr()
        for start in range(0, len(ds), step):
            part = [str(s) for s in text[start:start + step]]
            total += sum(len(s) for s in part)
            if total > budget:
                raise TraceError(path, where, f"expected strings that fit in the file ({budget} bytes), "
                                              f"found {total} bytes in the first {start + len(part)} of "
                                              f"{len(ds)} entries (they point at the same data again and "
                                              f"again)")
            out += part
    except TraceError:
        raise
    except Exception as exc:  # damaged heap, invalid UTF-8, ...
        raise TraceError(path, where, f"readable UTF-8 strings ({type(exc).__name__}: {exc})") from exc
    return out


def _check_string_entries(path: str, ds: h5py.Dataset, where: str, longest: int) -> None:
    """TraceError when an entry of the string dataset `ds` declares a string longer than the longest
    string the file holds (`longest`, from the heap walk): HDF5 allocates what an entry declares before
    it looks the string up, so one damaged entry would take gigabytes. An entry starts with its
    length (4 bytes, little-endian); the entries are read as the file's bytes, unconverted."""
    n = int(ds.shape[0]) if ds.shape else 0
    plist = ds.id.get_create_plist()
    if n == 0 or ds.id.get_storage_size() == 0:
        return
    if plist.get_nfilters():  # never written so: the writer keeps its strings unfiltered
        raise TraceError(path, where, "expected strings stored without filters")
    if plist.get_layout() == h5py.h5d.CONTIGUOUS:
        spans = [(ds.id.get_offset(), ds.id.get_storage_size(), n, n)]
    elif plist.get_layout() == h5py.h5d.CHUNKED:
        rows = plist.get_chunk()[0]
        spans = [(info.byte_offset, info.size, rows, min(rows, n - info.chunk_offset[0]))
                 for info in map(ds.id.get_chunk_info, range(ds.id.get_num_chunks()))]
    else:
        raise TraceError(path, where, "expected strings stored contiguous or in chunks")
    with open(path, "rb") as f:
        for offset, size, stored, used in spans:
            if used <= 0 or offset is None:
                continue
            width = size // stored
            if width < 4 or width % 4 or width * stored != size:
                raise TraceError(path, where, f"expected string entries of a whole number of 4-byte words, "
                                              f"found {size} bytes for {stored}")
            lengths = np.frombuffer(os.pread(f.fileno(), width * used, offset), "<u4")[::width // 4]
            if lengths.size and int(lengths.max()) > longest:
                raise TraceError(path, where, f"expected strings of at most {longest} bytes (the longest the "
                                              f"file holds), found an entry of {int(lengths.max())} bytes")


def is_hdf5(path: str | os.PathLike) -> bool:
    """Whether `path` is an existing HDF5 file (by its signature; nothing else is read)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and bool(h5py.is_hdf5(path))
    except Exception:
        return False
