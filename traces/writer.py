"""Streaming writer of schema-v2 traces: root metadata, vocab and request pool, then one run at a time.

Crash safety: a run is created with `complete=False` and flushed, its datasets are written, the
file is flushed, then the run is marked complete and flushed again. Between flushes HDF5's
metadata cache is told never to evict, so no half-updated group or chunk index reaches the disk;
only raw chunk data does, into space past the last flushed end of file. A writer killed mid-run
therefore leaves the file as it was at the last flush: completed runs read back intact and the
interrupted run (if its group was flushed) is reported incomplete.

One writer at a time (`traces/lock.py`), taken before the file is touched; a new trace is built
beside the old one and renamed over it. Each run's space is checked and reserved before HDF5 writes
it, and every h5py failure becomes `TraceError` (docs/trace-format.md, "Writers").

Speed: every gzip dataset of a run is cut into its chunks, which worker threads shuffle and deflate
(`traces/chunks.py`) while this thread stores finished ones with HDF5's direct chunk write; all of a
run's datasets are queued at once, so the pool never waits for the writing thread. A writer thread
of its own (`traces/background.py`) keeps the caller from waiting at all.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import resource
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib import metadata
from typing import cast

import h5py
import numpy as np

from traces import run_table, schema
from traces.chunks import encoded_chunks, new_pool
from traces.errors import RecordError, TraceError
from traces.h5safe import open_hdf5, read_strings
from traces.lock import WriteLock
from traces.superblock import trim_to_stored_eof

log = logging.getLogger(__name__)

#: HDF5 1.8 file format: checksummed metadata, readable by every HDF5 >= 1.8 tool, and no
#: "file open for write" flag (the 1.10 format's flag makes a killed writer's file unopenable).
LIBVER = ("v108", "v108")
COMPRESSIONS = ("gzip", "lzf", None)
GZIP_LEVEL = 1
#: Room a run needs beyond its raw array bytes: compression can grow random floats a little, and each
#: dataset adds its header, attributes and chunk index (about 4 KB each, measured), the run's group
#: a little more; so a small run on a nearly full disk still fits.
SPACE_MARGIN = 1.05
DATASET_SLACK = 6 << 10
SPACE_SLACK = 16 << 10
#: Runs and tables written between two reopenings of the file (bounds the metadata cache).
REOPEN_EVERY = 16

_STR = h5py.string_dtype("utf-8")
#: The run summary table's references of a reopened trace before they are read.
_UNREAD = object()


def _producer() -> str:
    try:
        return f"moe-inspector {metadata.version('moe-inspector')}"
    except metadata.PackageNotFoundError:
        return "moe-inspector"


def _json_text(key: str, value) -> str:
    """JSON text of a dict/list value, or a string checked to be JSON."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"attribute {key!r}: expected JSON text, got {value[:60]!r}") from exc
        return value
    try:
        return json.dumps(value, default=_json_default, sort_keys=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"attribute {key!r}: cannot store as JSON: {exc}") from exc


def _json_default(value):
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _attr_value(key: str, value):
    """A value HDF5 stores natively: str, bool, int, float or a 1-D numeric array."""
    if isinstance(value, str):
        return str(value)   # a vocabulary member (a str enum) as its plain text: h5py takes no subclass
    if isinstance(value, bool | int | float | np.bool_ | np.integer | np.floating):
        return value
    if isinstance(value, Sequence | np.ndarray):
        arr = np.asarray(value)
        if arr.ndim == 1 and arr.dtype.kind in "biuf":
            return arr
    raise ValueError(f"attribute {key!r}: expected str, number, bool or 1-D numeric array, "
                     f"got {type(value).__name__}")


def _convert(path: str, spec: schema.DatasetSpec, value) -> np.ndarray:
    """`value` as an array of a dtype the spec accepts; ValueError naming `path` otherwise."""
    arr = np.asarray(value)
    if arr.dtype.name in spec.dtypes:
        return arr
    target = np.dtype(spec.dtypes[0])
    kind = arr.dtype.kind
    ok = (target.kind == "b" and kind == "b") or (target.kind == "f" and kind in "fiu")
    if target.kind == "i" and kind in "iu":
        info = np.iinfo(target)
        ok = arr.size == 0 or (int(arr.min()) >= info.min and int(arr.max()) <= info.max)
    if not ok:
        raise ValueError(f"{path}: expected dtype {' or '.join(spec.dtypes)}, got {arr.dtype}")
    return arr.astype(target)


def check_run_arrays(arrays: Mapping[str, object],
                     not_recorded=()) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Arrays of one run converted to schema dtypes, and their dims (letter -> size).

    Raises ValueError naming the dataset when one is missing (and not among `not_recorded`, datasets
    of `schema.ENGINE_OMITTABLE` an engine does not give), unknown, of a wrong dtype, or whose
    shape disagrees with the others (same L, B, T, K, E, V, S, G everywhere).
    """
    unknown = sorted(set(arrays) - set(schema.DATASETS_BY_PATH))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a dataset of schema v{schema.FORMAT_VERSION}")
    wrong = [p for p in not_recorded if p not in schema.ENGINE_OMITTABLE or p in arrays]
    if wrong:
        raise ValueError(f"{wrong[0]}: listed as not recorded, but it is "
                         f"{'given' if wrong[0] in arrays else 'not a dataset an engine may leave out'}")
    missing = [s.path for s in schema.RUN_DATASETS
               if s.required and s.path not in arrays and s.path not in not_recorded]
    if missing:
        raise ValueError(f"{missing[0]}: required dataset missing (also missing: {missing[1:]})")
    form, problem = schema.logits_form(arrays)
    if form is None:
        raise ValueError(f"logits: {problem}")
    converted = {p: _convert(p, schema.DATASETS_BY_PATH[p], a) for p, a in arrays.items()}
    dims, problems = schema.collect_dims({p: a.shape for p, a in converted.items()})
    if problems:
        raise ValueError(f"{problems[0][0]}: {problems[0][1]}")
    if "E" in dims and dims.get("K", 0) > dims["E"]:
        raise ValueError(f"routing/expert: K = {dims['K']} exceeds E = {dims['E']}")
    return converted, dims


@dataclass(frozen=True, eq=False)
class PreparedRun:
    """A run checked against the trace, ready to write (its arrays must not change until written)."""

    name: str
    attrs: dict
    arrays: dict[str, np.ndarray]
    dims: dict[str, int]
    summary: run_table.RunSummary | None = None   # its row of the run summary table, before placing


def stored_bound(arrays: Mapping[str, np.ndarray]) -> int:
    """Most bytes the arrays take before compression: edge chunks are stored whole (padded)."""
    total = 0
    for path, arr in arrays.items():
        chunks = schema.chunk_shape(schema.DATASETS_BY_PATH[path], arr.shape, arr.dtype.itemsize)
        if chunks is None:
            total += arr.nbytes
        else:
            total += math.prod(-(-n // c) * c for n, c in zip(arr.shape, chunks, strict=True)) * arr.itemsize
    return total


class TraceWriter:
    """Creates (or, through `append`, reopens) a trace and adds runs and tables one at a time."""

    def __init__(self, path: str | os.PathLike, *, meta: schema.RootMeta | Mapping[str, object],
                 vocab: Sequence[str],
                 requests: Sequence[str], prompt_tokens: Sequence[Sequence[int]],
                 compression: str | None = "gzip", threads: int | None = None) -> None:
        self._compression = _check_compression(compression)
        self._threads = threads
        root_attrs = self._root_attrs(os.fspath(path), meta)
        vocab = [str(v) if isinstance(v, np.str_) else v for v in vocab]
        if not all(isinstance(v, str) for v in vocab):
            raise ValueError("vocab: expected a sequence of str")
        texts, flat, offsets = _request_pool(requests, prompt_tokens)
        self.path = os.fspath(path)
        self._lock = WriteLock(self.path)
        # Never truncate in place: the new file is built beside the old one and renamed over it once it
        # holds a complete run (or table), so the old file stays whole until then, a writer that stops
        # before keeps it, and readers see one or the other.
        self._disk = os.path.join(os.path.dirname(os.path.abspath(self.path)),
                                  f".{os.path.basename(self.path)}.{os.getpid()}.tmp")
        _remove_stale_temporaries(self.path)
        try:
            # The root is built in memory and written with plain writes: a full disk or file-size
            # limit then fails an os.write, cleanly, never an HDF5 flush half-way.
            image = _root_image(root_attrs, vocab, texts, flat, offsets, self._filters)
            self._check_space(len(image), 0, reserve=False)
            _write_new(self._disk, image)
            self._file = h5py.File(self._disk, "r+", libver=LIBVER)
        except BaseException as exc:
            _remove(self._disk)
            self._lock.release()
            if isinstance(exc, TraceError):
                raise
            if isinstance(exc, OSError | RuntimeError | ValueError):  # disk full, unwritable folder, ...
                reason = "disk full; " if is_disk_full(exc) else ""
                raise TraceError(self.path, "/", f"expected a writable file ({reason}{type(exc).__name__}: "
                                                 f"{exc})") from exc
            raise
        self._n_layers = len(json.loads(str(root_attrs["moe_layers"])))
        self._n_vocab, self._n_requests, self._next_index = len(vocab), len(texts), 0
        self._version = schema.FORMAT_VERSION
        self._references: object = run_table.References()  # or _UNREAD: see `_summary_references`
        self._hold_metadata()

    @classmethod
    def append(cls, path: str | os.PathLike, *, compression: str | None = "gzip",
               threads: int | None = None) -> TraceWriter:
        """Reopen an existing trace (format version 1 or 2) to add runs or tables; a version-1 file
        takes runs with full logits only and stays version 1."""
        self = cls.__new__(cls)
        self._compression = _check_compression(compression)
        self._threads = threads
        self.path = self._disk = os.fspath(path)
        self._lock = WriteLock(self.path)
        try:
            self._file = open_hdf5(self.path, "r+", libver=LIBVER)  # refuses what reaches outside
        except (OSError, ValueError) as exc:
            self._lock.release()
            raise TraceError(self.path, "/", f"expected a writable HDF5 trace ({exc})") from exc
        except BaseException:
            self._lock.release()
            raise
        try:
            self._load_existing()
        except BaseException:
            self._file.close()
            self._lock.release()
            raise
        self._hold_metadata()
        return self

    def _load_existing(self) -> None:
        attrs = self._file.attrs
        if attrs.get("format") != schema.FORMAT:
            raise TraceError(self.path, "/", f'expected attribute format = "{schema.FORMAT}"')
        if attrs.get("format_version") not in schema.READABLE_VERSIONS:
            raise TraceError(self.path, "/", f"expected format_version in {schema.READABLE_VERSIONS} to "
                                             f"append, found {attrs.get('format_version')}")
        self._version = int(attrs["format_version"])
        try:
            self._n_layers = len(json.loads(attrs["moe_layers"]))
            self._n_vocab = len(self._file[schema.VOCAB])
            self._n_requests = len(self._file[schema.REQUEST_TEXT])
            runs = self._file[schema.RUNS]
            self._next_index = 1 + max((int(g.attrs.get("index", -1)) for g in runs.values()), default=-1)
        except (KeyError, OSError, ValueError, TypeError, RecursionError) as exc:
            raise TraceError(self.path, "/", f"expected a complete trace root ({exc})") from exc
        self._references = _UNREAD   # read when the first run is added (`_summary_references`)

    def _summary_references(self) -> run_table.References | None:
        """The run summary table's references so far, to add rows to it (read once); None when the
        runs are not summarised (a trace written before the table, or a table this writer does not
        know or cannot read): the runs added are not either, so a reader summarises them itself."""
        if self._references is _UNREAD:
            self._references = self._existing_references()
        return cast("run_table.References | None", self._references)

    def _placed(self, summary: run_table.RunSummary) -> run_table.RunSummary:
        """`summary` placed among the runs before it (the table is read: a summary was made for it)."""
        references = self._summary_references()
        assert references is not None
        return references.place(summary)

    def _existing_references(self) -> run_table.References | None:
        where = f"/{schema.TABLES}/{schema.RUN_SUMMARY_TABLE}"
        group = self._file.get(where)
        if group is None:
            if len(self._file[schema.RUNS]):
                log.info("%s: its runs have no summary table; the runs added get none either", self.path)
                return None
            return run_table.References()
        try:
            if not run_table.known(json.loads(group.attrs["attrs"])):
                log.info("%s: a run summary table of another version; the runs added get no row", self.path)
                return None
            columns = {name: (np.array(read_strings(self.path, group[name], f"{where}/{name}"), dtype=str)
                              if name in run_table.TEXT_COLUMNS else group[name][()])
                       for name in run_table.COLUMN_NAMES}
        except (TraceError, KeyError, OSError, ValueError, TypeError, RecursionError) as exc:
            log.warning("%s: an unreadable run summary table (%s); the runs added get no row", self.path, exc)
            return None
        summaries, problems = run_table.from_columns(columns)
        if problems:
            log.warning("%s: row %d of the run summary table cannot be read (%s); the runs added get no row",
                        self.path, *problems[0])
            return None
        references = run_table.References()
        for summary in sorted(summaries, key=lambda s: s.index):
            references.place(summary)
        return references

    # -- public API ---------------------------------------------------------------------------

    def add_run(self, name: str, *, attrs: schema.RunAttrs | Mapping[str, object],
                arrays: Mapping[str, object]) -> None:
        """Validate and write one run; it is flushed, then marked complete and flushed again."""
        self.write_prepared(self.prepare_run(name, attrs=attrs, arrays=arrays))

    def prepare_run(self, name: str, *, attrs: schema.RunAttrs | Mapping[str, object],
                    arrays: Mapping[str, object]) -> PreparedRun:
        """Validate one run without writing it: ValueError naming what is wrong."""
        _check_name("run", name)
        stored, decoded = _stored(schema.RECORDS["run"], attrs)
        not_recorded = decoded.get("not_recorded", ())
        arrays, dims = check_run_arrays(arrays, tuple(not_recorded) if isinstance(not_recorded, list) else ())
        if dims["L"] != self._n_layers:
            raise ValueError(f"routing/expert: expected L = {self._n_layers} (length of moe_layers), "
                             f"found {dims['L']}")
        if dims.get("V", self._n_vocab) != self._n_vocab:
            raise ValueError(f"logits: expected V = {self._n_vocab} (length of vocab), found {dims['V']}")
        index = arrays.get(schema.TOPK_INDEX)
        if index is not None:
            if self._version < 2:
                raise ValueError(f"logits_topk: {self.path} is format version {self._version}, which holds "
                                 f"full logits only (write the top-k form to a new trace)")
            if index.size and (int(index.min()) < schema.MISSING or int(index.max()) >= self._n_vocab):
                raise ValueError(f"logits_topk/index: expected ids in [0, {self._n_vocab}) or "
                                 f"{schema.MISSING}, found {int(index.min())}..{int(index.max())}")
        run_attrs = self._run_attrs(name, decoded, stored, dims)
        summarised = self._summary_references() is not None
        summary = run_table.summarise(name, run_attrs, arrays.get) if summarised else None
        return PreparedRun(name, run_attrs, arrays, dims, summary)

    def write_prepared(self, run: PreparedRun) -> None:
        """Write a run `prepare_run` checked (TraceError when the disk or HDF5 fails)."""
        self._check_usable()
        with self._io(f"/{schema.RUNS}/{run.name}"):
            summary = None
            if run.summary is not None and self._summary_references() is not None:
                # (its reference, placed below, is at most as long as its own name: room for the row)
                summary = replace(run.summary, index=self._next_index, reference=run.name)
            extra = run_table.row_bytes(run_table.row(summary)) if summary is not None else 0
            self._check_space(stored_bound(run.arrays) + extra, len(run.arrays) + (summary is not None))
            group = self._add_run(run.name, run.attrs, run.arrays)
            # Placed among the runs before it once the run is sure to be written.
            row = run_table.row(self._placed(summary)) if summary is not None else None
            with self._lock.changing():  # readers wait for this moment only (traces/live.py)
                self._file.flush()
                if row is not None:  # the row and the run's completeness reach the disk in one flush
                    self._append_summary(row)
                group.attrs["complete"] = True
                self._file.flush()
                trim_to_stored_eof(self._disk)  # give back the reserved space the run did not use
                self._publish()
                self._reopen_now_and_then()
        log.info("wrote run %s (%s) to %s", run.name, run.dims, self.path)

    def _add_run(self, name: str, run_attrs: dict, arrays: dict[str, np.ndarray]) -> h5py.Group:
        """Create the run's group (flushed, incomplete) and write its datasets (not flushed yet)."""
        runs = self._file[schema.RUNS]
        if name in runs:
            if bool(runs[name].attrs.get("complete", False)):
                raise ValueError(f"run {name!r} already exists in {self.path}")
            log.info("replacing incomplete run %s in %s", name, self.path)
            del runs[name]
        group = runs.create_group(name)
        group.attrs.update(run_attrs)
        group.attrs["index"] = self._next_index
        group.attrs["complete"] = False
        with self._lock.changing():
            self._file.flush()
        self._next_index += 1
        specs = [spec for spec in schema.RUN_DATASETS if spec.path in arrays]
        encoded = [self._encode(spec, arrays[spec.path]) for spec in specs]  # all queued at once
        for spec, chunks in zip(specs, encoded, strict=True):
            self._write_dataset(group, spec, arrays[spec.path], chunks)
        return group

    def _append_summary(self, row: dict[str, object]) -> None:
        """Add a run's row to the run summary table (made with the first run)."""
        if self._summary_columns is None:  # open until the file is closed or reopened
            tables = self._file.require_group(schema.TABLES)
            if schema.RUN_SUMMARY_TABLE not in tables:
                run_table.create(tables, _STR)
            self._summary_columns = run_table.columns_of(tables[schema.RUN_SUMMARY_TABLE])
        run_table.append(self._summary_columns, row)

    def write_table(self, name: str, columns: Mapping[str, object],
                    attrs: Mapping[str, object] | None = None) -> None:
        """Write `/tables/<name>`: equal-length 1-D columns, replacing a table of that name."""
        _check_name("table", name)
        if name == schema.RUN_SUMMARY_TABLE:
            raise ValueError(f"table name {name!r} is the writer's own run summary table")
        cols = {}
        for key, value in columns.items():
            _check_name("column", key)
            cols[key] = _table_column(name, key, value)
        lengths = {len(c) for c in cols.values()}
        if len(lengths) > 1:
            raise ValueError(f"tables/{name}: columns differ in length: "
                             f"{ {k: len(c) for k, c in cols.items()} }")
        self._check_usable()
        with self._io(f"/{schema.TABLES}/{name}"):
            self._check_space(sum(c.nbytes for c in cols.values()), len(cols))
            with self._lock.changing():
                self._write_table(name, cols, attrs)
                trim_to_stored_eof(self._disk)
                self._publish()
                self._reopen_now_and_then()

    def _write_table(self, name: str, cols: dict[str, np.ndarray], attrs) -> None:
        tables = self._file.require_group(schema.TABLES)
        if name in tables:
            del tables[name]
        group = tables.create_group(name)
        group.attrs["columns"] = json.dumps(list(cols))
        group.attrs["attrs"] = _json_text("attrs", dict(attrs or {}))
        group.attrs["complete"] = False
        for key, col in cols.items():
            dtype = _STR if col.dtype.kind == "U" else col.dtype
            data = col.tolist() if col.dtype.kind == "U" else col
            chunks = (min(len(col), 1 << 16),) if len(col) and dtype != _STR else None
            group.create_dataset(key, data=data, dtype=dtype, **self._filters(col.shape, dtype, chunks))
        self._file.flush()
        group.attrs["complete"] = True
        self._file.flush()

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        try:
            if getattr(self, "_file", None) is not None and self._file.id.valid:
                with self._lock.changing():
                    if self._failed is None:
                        with self._io("/"):
                            self._file.flush()
                    self._close_quietly()
                    with contextlib.suppress(OSError):
                        trim_to_stored_eof(self._disk)
                    self._publish_or_drop()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
            if getattr(self, "_lock", None) is not None:
                self._lock.release()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    _failed: TraceError | None = None
    _writes_since_open = 0
    _summary_columns: list | None = None
    _pool: ThreadPoolExecutor | None = None
    _threads: int | None = None

    def _chunk_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = new_pool(self._threads)
        return self._pool

    @contextlib.contextmanager
    def _io(self, where: str):
        """Turn every h5py failure (disk full, I/O error) into TraceError and stop the writer: after a
        failed flush the in-memory metadata no longer matches the disk, so nothing more is written."""
        try:
            yield
        except (OSError, RuntimeError, KeyError) as exc:
            reason = "disk full" if is_disk_full(exc) else "an I/O error"
            self._failed = TraceError(self.path, where, f"a write that succeeds; {reason} "
                                                        f"({type(exc).__name__}: {exc})")
            log.warning("%s", self._failed)
            raise self._failed from exc

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise TraceError(self.path, "/", f"a writer that has not failed (it stopped on: "
                                             f"{self._failed.expected})")

    def _check_space(self, raw_bytes: int, n_datasets: int, reserve: bool = True) -> None:
        """TraceError before anything is written when the file system or the process's file-size
        limit cannot take `raw_bytes` more in `n_datasets` datasets (with a margin that scales with
        them): the file stays as at the last flush."""
        need = int(raw_bytes * SPACE_MARGIN) + n_datasets * DATASET_SLACK + SPACE_SLACK
        room = room_bytes(self._disk)
        if need > room:
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            under = "" if limit == resource.RLIM_INFINITY else f" under the file-size limit of {limit} bytes"
            self._fail_full(f"room for {need} more bytes; disk full ({room} bytes left{under})")
        if reserve:
            self._reserve(need)

    def _publish(self) -> None:
        """Once the new file holds a complete run or table, rename it over the old trace."""
        if self._disk != self.path:
            os.replace(self._disk, self.path)
            self._disk = self.path

    def _publish_or_drop(self) -> None:
        """At close: a new file that holds no complete run or table replaces nothing that exists
        (the old trace is kept), else it becomes the (empty) trace."""
        if self._disk == self.path:
            return
        if os.path.exists(self.path) or self._failed is not None:
            log.warning("%s: no run was written; the file is left as it was", self.path)
            _remove(self._disk)
            self._disk = self.path
        else:
            self._publish()

    def _reserve(self, need: int) -> None:
        """Allocate `need` bytes past the recorded end of file before HDF5 writes: its flush then
        writes into blocks it already has, so another process filling the disk meanwhile cannot make
        the flush fail half-way (after which HDF5 itself may crash)."""
        start = os.path.getsize(self._disk)  # trimmed to the recorded end after each write
        fd = os.open(self._disk, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.posix_fallocate(fd, start, need)
        except OSError as exc:
            if is_disk_full(exc):
                self._fail_full(f"room for {need} more bytes; disk full ({exc.strerror})")
            log.debug("%s: cannot reserve space (%s); relying on the free-space check", self.path, exc)
        finally:
            os.close(fd)

    def _fail_full(self, expected: str) -> None:
        self._failed = TraceError(self.path, "/", expected)
        raise self._failed

    def _close_quietly(self) -> None:
        """Close the file; after a failure its metadata is dropped, not written (a failed flush left
        the disk as it was at the last good one)."""
        self._summary_columns = None   # closed with the file
        try:
            self._file.close()
        except Exception as exc:  # the flush inside close fails the same way
            log.warning("%s: closing after a failed write: %s", self.path, exc)

    def _hold_metadata(self) -> None:
        """Keep dirty metadata in memory until the next flush (see the module docstring)."""
        config = self._file.id.get_mdc_config()
        config.evictions_enabled = False
        config.incr_mode = 0  # H5C_incr__off: required when evictions are disabled
        config.flash_incr_mode = 0
        config.decr_mode = 0
        self._file.id.set_mdc_config(config)

    def _reopen_now_and_then(self) -> None:
        """With evictions disabled HDF5's metadata cache only grows (about 0.5 MB a run); closing
        and reopening the file every REOPEN_EVERY writes empties it, so memory stays flat. The
        sidecar lock stays held throughout, so no other writer gets in between."""
        self._writes_since_open += 1
        if self._writes_since_open < REOPEN_EVERY:
            return
        self._summary_columns = None   # closed with the file
        self._file.close()
        self._file = h5py.File(self._disk, "r+", libver=LIBVER)
        self._hold_metadata()
        self._writes_since_open = 0

    def _filters(self, shape: tuple[int, ...], dtype, chunks: tuple[int, ...] | None) -> dict:
        if chunks is None or 0 in shape or self._compression is None or dtype == _STR:
            return {"chunks": chunks} if chunks and 0 not in shape else {}
        opts = {"compression_opts": GZIP_LEVEL} if self._compression == "gzip" else {}
        return {"chunks": chunks, "compression": self._compression, "shuffle": True, **opts}

    def _encode(self, spec: schema.DatasetSpec, arr: np.ndarray):
        """The dataset's chunks, shuffled and deflated on the pool (None: h5py's filters write it)."""
        chunks = schema.chunk_shape(spec, arr.shape, arr.dtype.itemsize)
        if self._filters(arr.shape, arr.dtype, chunks).get("compression") != "gzip":
            return None
        assert chunks is not None  # gzip is chunked
        return encoded_chunks(self._chunk_pool(), arr, chunks, np.array(spec.fill, dtype=arr.dtype))

    def _write_dataset(self, group: h5py.Group, spec: schema.DatasetSpec, arr: np.ndarray,
                       encoded=None) -> None:
        chunks = schema.chunk_shape(spec, arr.shape, arr.dtype.itemsize)
        fill = np.array(spec.fill, dtype=arr.dtype)
        filters = self._filters(arr.shape, arr.dtype, chunks)
        if encoded is not None:  # gzip + shuffle chunks made on the pool, stored as they are
            ds = group.create_dataset(spec.path, shape=arr.shape, dtype=arr.dtype, fillvalue=fill, **filters)
            for offset, data in encoded:
                ds.id.write_direct_chunk(offset, data)
        else:
            ds = group.create_dataset(spec.path, data=arr, fillvalue=fill, **filters)
        for axis, letter in enumerate(spec.dims):
            ds.dims[axis].label = letter

    def _root_attrs(self, path: str, meta: schema.RootMeta | Mapping[str, object]) -> dict[str, object]:
        stored, decoded = _stored(schema.RECORDS["root"], meta)
        _raise_first(path, "/", schema.root_problems(decoded, writing=True))
        return {
            "format": schema.FORMAT,
            "format_version": schema.FORMAT_VERSION,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "producer": _producer(),
            **stored,
        }

    def _run_attrs(self, name: str, decoded: dict[str, object], stored: dict[str, object],
                   dims: dict[str, int]) -> dict[str, object]:
        _raise_first(self.path, f"/{schema.RUNS}/{name}", schema.run_problems(
            decoded, B=dims["B"], R=self._n_requests, omittable=schema.ENGINE_OMITTABLE, writing=True))
        if "request_ids" in stored:
            stored["request_ids"] = np.asarray(stored["request_ids"]).astype(np.int32)
        return stored


def _stored(record: type[schema.Record], given) -> tuple[dict[str, object], dict[str, object]]:
    """The attributes of a record (or of a mapping of them) as HDF5 stores them, and as a reader
    decodes them (what the record's rules check)."""
    given = given.to_attrs() if isinstance(given, schema.Record) else dict(given)
    specs = record.specs()
    stored: dict[str, object] = {}
    decoded: dict[str, object] = {}
    for key, value in given.items():
        spec = specs.get(key)
        if spec is not None and spec.json:
            stored[key] = _json_text(key, value)
            decoded[key] = json.loads(str(stored[key]))
        else:
            stored[key] = plain = _attr_value(key, value)
            decoded[key] = plain.item() if isinstance(plain, np.generic) else plain
    return stored, decoded


def _raise_first(path: str, where: str, problems: list[tuple[str, str]]) -> None:
    """RecordError with the first problem a record's rule found in what a producer gives (the
    validator reports the same problems of a file, every one)."""
    if problems:
        raise RecordError(path, where, problems[0][1])


def is_disk_full(exc: BaseException) -> bool:
    """Whether an h5py/OS error says the disk (or the file-size limit) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return True
    text = str(exc)
    return any(f"errno = {n}," in text for n in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)) or \
        "No space left" in text or "File too large" in text


def room_bytes(path: str) -> int:
    """Bytes the file at `path` may still grow by: the file system's space for an unprivileged
    process, and the process's file-size limit (RLIMIT_FSIZE)."""
    st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    free = st.f_bavail * st.f_frsize
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    size = os.path.getsize(path) if os.path.exists(path) else 0
    return free if limit == resource.RLIM_INFINITY else max(0, min(free, limit - size))


def _root_image(root_attrs: dict, vocab: list[str], texts: list[str], flat: np.ndarray,
                offsets: np.ndarray, filters) -> bytes:
    """The bytes of a new trace holding the root attributes, vocab, request pool and an empty /runs,
    built in memory (HDF5's core driver)."""
    with h5py.File(f"root-{id(root_attrs)}", "w", driver="core", backing_store=False, libver=LIBVER) as f:
        f.attrs.update(root_attrs)
        vocab_ds = f.create_dataset(schema.VOCAB, data=vocab, dtype=_STR)
        vocab_ds.dims[0].label = "V"
        for where, data, dtype, label in ((schema.REQUEST_TEXT, texts, _STR, "R"),
                                          (schema.REQUEST_TOKENS, flat, np.int32, "N"),
                                          (schema.REQUEST_OFFSETS, offsets, np.int64, "R+1")):
            ds = f.create_dataset(where, data=data, dtype=dtype, **filters(
                np.shape(data), dtype, (min(len(data), 1 << 16),) if dtype != _STR else None))
            ds.dims[0].label = label
        f.create_group(schema.RUNS, track_order=True)
        f.flush()
        return f.id.get_file_image()


def _write_new(path: str, data: bytes) -> None:
    """Create `path` holding `data` (OSError, the file removed, when the disk or a limit refuses); never
    through a link or into a file that is already there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        _remove(path)
        raise
    os.close(fd)


def _remove_stale_temporaries(path: str) -> None:
    """Remove the temporary files a killed writer of this trace left (`.<name>.<pid>.tmp`): the
    caller holds the trace's lock, so no other writer is building one now."""
    folder, name = os.path.split(os.path.abspath(path))
    with contextlib.suppress(OSError):
        for entry in os.listdir(folder):
            stem, _, pid = entry[:-len(".tmp")].rpartition(".") if entry.endswith(".tmp") else ("", "", "")
            if stem == f".{name}" and pid.isdigit():
                log.info("removing %s, left by a writer that was stopped", entry)
                _remove(os.path.join(folder, entry))


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _check_compression(compression: str | None) -> str | None:
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    return compression


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{kind} name must be a non-empty string without '/', got {name!r}")


def _request_pool(requests: Sequence[str], prompt_tokens: Sequence[Sequence[int]]):
    """Request texts, flat int32 prompt tokens and int64 offsets [R+1] (row r is tokens[o[r]:o[r+1]])."""
    texts = [str(t) if isinstance(t, np.str_) else t for t in requests]
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("requests: expected a sequence of str")
    if len(prompt_tokens) != len(texts):
        raise ValueError(f"prompt_tokens: expected {len(texts)} token lists (one per request), "
                         f"got {len(prompt_tokens)}")
    parts = []
    for r, toks in enumerate(prompt_tokens):
        arr = np.asarray(toks)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(f"prompt_tokens[{r}]: expected a 1-D sequence of ints")
        parts.append(arr.astype(np.int32))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return texts, flat, offsets


def _table_column(table: str, key: str, value) -> np.ndarray:
    col = np.asarray(value)
    if col.dtype.kind == "O" and all(isinstance(v, str) for v in col.ravel()):
        col = col.astype(str)
    if col.ndim != 1 or col.dtype.kind not in "biufU":
        raise ValueError(f"tables/{table}/{key}: expected a 1-D column of numbers, bools or strings, "
                         f"got {col.dtype} with shape {col.shape}")
    return col
