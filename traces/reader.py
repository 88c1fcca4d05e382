"""Lazy reader of schema-v2 and v1 traces: opening costs milliseconds, arrays read only what is asked.

`open_trace` checks the root (format, version, required attributes, vocab, request pool, runs
group) and lists runs; `trace.run(name)` checks that run's attributes and datasets. Every failure
becomes `TraceError`; nothing in a file is ever evaluated or unpickled (JSON text and plain numbers
only; object dtypes other than UTF-8 strings are refused).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections import OrderedDict

import h5py
import numpy as np

from traces import schema
from traces.absent import stand_ins
from traces.errors import TraceError
from traces.h5safe import open_hdf5, runs_outside
from traces.h5safe import read_strings as _strings
from traces.lazy import LazyArray
from traces.live import being_written, read_consistently, version
from traces.lock import reading
from traces.memory import return_freed_memory
from traces.records import RootMeta, RunAttrs, root_record, run_record
from traces.steering import engine_experts, meta_problems
from traces.toplogits import LazyTopLogits
from traces.validate import attr_or_none, check_root, check_run, check_table, plain_attr

log = logging.getLogger(__name__)

#: Byte budget of the runs a reader keeps open (least recently used dropped first).
RUN_CACHE_BYTES = 64 << 20
#: HDF5's chunk cache per open dataset (h5py's default rdcc_nbytes) and the rest of its cost
#: (about 90 KB per open chunked dataset, measured with bench/trace_memory.py).
CHUNK_CACHE_BYTES = 1 << 20
DATASET_BYTES = 96 << 10


def _first_error(path: str, problems) -> None:
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise TraceError(path, errors[0].where, errors[0].message + more)


class Requests:
    """The request pool: `text` (list of str), `prompt_tokens(r)`, `len()`."""

    def __init__(self, path: str, group: h5py.Group, n: int) -> None:
        self._path, self._group, self._n = path, group, n
        self._text: list[str] | None = None
        self._offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n

    @property
    def text(self) -> list[str]:
        if self._text is None:
            with reading(self._path):
                self._text = _strings(self._path, self._group["text"], f"/{schema.REQUEST_TEXT}")
        return self._text

    def prompt_tokens(self, r: int) -> np.ndarray:
        """Prompt token ids of request `r` (int32 [n])."""
        if not 0 <= r < self._n:
            raise IndexError(f"request {r} out of range [0, {self._n})")
        try:
            if self._offsets is None:
                self._offsets = np.asarray(self._group["offsets"][()], dtype=np.int64)
            start, stop = int(self._offsets[r]), int(self._offsets[r + 1])
            return np.asarray(self._group[schema.TOKENS][start:stop], dtype=np.int32)
        except Exception as exc:
            raise TraceError(self._path, f"/{schema.REQUEST_TOKENS}",
                             f"readable prompt tokens ({type(exc).__name__}: {exc})") from exc


class Run:
    """One run (one batch composition): attributes, dims and one lazy array per dataset."""

    tokens: LazyArray
    prompt_len: LazyArray
    step: LazyArray
    expert: LazyArray
    gate: LazyArray
    kept: LazyArray
    slot: LazyArray
    group: LazyArray
    router_logits: LazyArray
    requested: LazyArray
    load_kept: LazyArray
    capacity: LazyArray
    logits: LazyArray | LazyTopLogits  # full [B, T, V], or the top-k form (`logits_form`)

    def __init__(self, path: str, f: h5py.File, name: str, meta: dict,
                 group: h5py.Group | None = None) -> None:
        group = f[schema.RUNS][name] if group is None else group
        found: dict = {}
        dims, problems = check_run(f, name, meta, group=group, found=found)
        _first_error(path, problems)
        self.name = name
        self.where = f"/{schema.RUNS}/{name}"
        self.dims: dict[str, int] = dims
        attrs = found["attrs"]  # the schema's, checked (JSON ones decoded); then any others
        try:
            attrs.update({k: plain_attr(group.attrs[k]) for k in group.attrs if k not in attrs})
        except Exception as exc:
            raise TraceError(path, self.where, f"plain attributes ({type(exc).__name__}: {exc})") from exc
        #: Every attribute as stored (JSON ones decoded), declared or not.
        self.attrs: dict = attrs
        #: The declared attributes, read as they were written: those the file lacks take the record's
        #: defaults. What a consumer reads.
        self.record: RunAttrs = run_record().from_attrs(attrs)
        record = self.record
        self.complete: bool = bool(record.complete)
        self.request_ids: np.ndarray = np.asarray(record.request_ids, dtype=np.int64)
        self.probe_row: int = int(record.probe_row)
        self.batch_size: int = int(record.batch_size)
        #: Datasets this run does not hold because its engine does not give them (traces/absent.py).
        self.not_recorded: frozenset[str] = frozenset(record.not_recorded or ())
        #: Per row, prompt tokens an engine served from its prefix cache (-1 unknown); None: not an engine's.
        cached = record.cached_tokens
        self.cached_tokens: np.ndarray | None = None if cached is None else np.asarray(cached, np.int64)
        self.arrays: dict[str, LazyArray] = {}
        for spec in schema.RUN_DATASETS:
            if spec.path in found["datasets"]:
                where = f"{self.where}/{spec.path}"
                self.arrays[spec.path] = LazyArray(found["datasets"][spec.path], path, where, spec.dims)
        for data_path, attr in schema.RUN_ARRAY_NAMES.items():
            if data_path in self.arrays:
                setattr(self, attr, self.arrays[data_path])
        if self.not_recorded:
            E = engine_experts(meta, int(np.asarray(self.expert[...]).max(initial=-1)), path, self.where)
            absent = stand_ins(self.where, sorted(self.not_recorded), self.expert, self.step, int(E))
            for data_path, stand_in in absent.items():
                setattr(self, schema.RUN_ARRAY_NAMES[data_path], stand_in)
            self.dims.update(E=int(E), G=1, S=self.capacity.shape[0])
        self.logits_form: str = str(schema.logits_form(self.arrays)[0])  # check_run proved there is one
        if self.logits_form == "topk":
            self.logits = LazyTopLogits({p: self.arrays[p] for p in schema.LOGITS_FORMS["topk"]}, meta["V"],
                                        schema.topk_values(attrs) == "log_probs")

    def __repr__(self) -> str:
        dims = " ".join(f"{k}={v}" for k, v in self.dims.items())
        return f"<Run {self.name} [{dims}]{'' if self.complete else ' incomplete'}>"

    @functools.cached_property
    def resident_bytes(self) -> int:
        """What this run may hold in memory once read: each dataset's chunk cache (at most
        CHUNK_CACHE_BYTES, h5py's default) plus a small fixed cost per open dataset."""
        return sum(min(a.nbytes, CHUNK_CACHE_BYTES) + DATASET_BYTES for a in self.arrays.values())

    def row_length(self, b: int) -> int:
        """Valid positions of row `b` (prompt + generated tokens; later positions hold -1)."""
        return int(np.count_nonzero(self.tokens[b] != schema.MISSING))

    def storage(self) -> dict[str, tuple[int, int]]:
        """Per dataset: (bytes as arrays, bytes stored on disk)."""
        out = {}
        for path, arr in self.arrays.items():
            try:
                stored = int(arr._ds.id.get_storage_size())
            except Exception as exc:
                raise TraceError(arr._file_path, arr.where, f"readable storage ({exc})") from exc
            out[path] = (arr.nbytes, stored)
        return out


class Trace:
    """An open trace file. Use as a context manager or call `close()`."""

    def __init__(self, path: str | os.PathLike, *, cache_bytes: int = RUN_CACHE_BYTES,
                 runs: list[str] | None = None) -> None:
        self.path = os.fspath(path)
        self._cache_bytes = cache_bytes
        self._listed = None if runs is None else list(runs)
        self._file: h5py.File = None
        # A trace being recorded is read as one committed version of it (traces/live.py).
        read_consistently(self.path, self._open_file, discard=lambda _: self._file.close())
        #: Whether a recording was adding runs when the trace was opened (its incomplete run, if
        #: any, is the one being written).
        self.recording: bool = being_written(self.path)

    def _open_file(self) -> None:
        #: The trace's `traces.live.version` when it was opened (a follower compares it).
        self.version = version(self.path)
        self._file = open_hdf5(self.path)
        try:
            self._open()
        except TraceError:
            self._file.close()
            raise
        except Exception as exc:  # any other h5py failure on a damaged file
            self._file.close()
            raise TraceError(self.path, "/", f"a readable trace ({type(exc).__name__}: {exc})") from exc

    def _open(self) -> None:
        meta, problems = check_root(self._file)
        _first_error(self.path, problems)
        for where, problem in meta_problems(meta):  # metadata that steers, checked before it is used
            raise TraceError(self.path, where, problem)
        self._R, self._V = meta.pop("R"), meta.pop("V")
        #: The root attributes as stored (JSON ones decoded).
        self.meta: dict = meta
        #: The root attributes read as they were written: those the file lacks take the record's
        #: defaults. What a consumer reads.
        self.record: RootMeta = root_record().from_attrs(meta)
        self.moe_layers: list[int] = list(self.record.moe_layers)
        self._vocab: list[str] | None = None
        self.requests = Requests(self.path, self._file[schema.REQUESTS], self._R)
        self._runs: OrderedDict[str, Run] = OrderedDict()  # least recently used first
        self._held = 0  # their resident_bytes
        # Each run's group by address: a writer adding runs rewrites /runs, never a committed run.
        self._refs: dict[str, h5py.Reference] = {}
        self._conditions: dict[str, str] | None = None
        complete: list[tuple[tuple[float, str], str]] = []
        incomplete: list[tuple[tuple[float, str], str]] = []
        if self._listed is not None:  # listed by the caller: each run is checked when read
            self.run_names: list[str] = list(self._listed)
            self.incomplete_runs: list[str] = []
            self._names = set(self.run_names)
            return
        runs = self._file[schema.RUNS]
        names = list(runs)
        if len(names) > schema.MAX_RUNS:
            raise TraceError(self.path, f"/{schema.RUNS}", f"expected at most {schema.MAX_RUNS} runs, "
                                                           f"found {len(names)} groups")
        for name in names:
            where = f"/{schema.RUNS}/{name}"
            try:
                group = runs[name]
                self._refs[name] = group.ref
                done = bool(plain_attr(group.attrs["complete"])) if "complete" in group.attrs else False
                index = plain_attr(group.attrs["index"]) if "index" in group.attrs else None
            except Exception as exc:  # a damaged run header does not make the whole file unusable
                log.info("%s: %s: unreadable run header (%s)", self.path, where, exc)
                done, index = False, None
            key = (index if isinstance(index, int) else float("inf"), name)
            (complete if done is True else incomplete).append((key, name))
        self.run_names = [n for _, n in sorted(complete)]
        self.incomplete_runs = [n for _, n in sorted(incomplete)]
        self._names = {*self.run_names, *self.incomplete_runs}   # for run(): a list is searched
        if self.incomplete_runs:
            log.info("%s: incomplete runs %s", self.path, self.incomplete_runs)

    @property
    def run_conditions(self) -> dict[str, str]:
        """Each listed run's `condition` attribute as stored, read unchecked on first use ("" when it
        has none or it cannot be read): what a browser groups runs by before checking them."""
        if self._conditions is None:
            conditions = {}
            names = [*self.run_names, *([] if self.recording else self.incomplete_runs)]
            for start in range(0, len(names), 256):  # a writer waits for one block at most
                with reading(self.path):
                    for name in names[start:start + 256]:
                        try:
                            value = attr_or_none(self._file[self._refs[name]], "condition", (str, int, float))
                        except Exception:  # a damaged run header: checked, and refused, when read
                            value = None
                        conditions[name] = "" if value is None else str(value)
            self._conditions = conditions
        return self._conditions

    # -- root ---------------------------------------------------------------------------------

    @property
    def vocab(self) -> list[str]:
        """Display string of each token id (read on first use)."""
        if self._vocab is None:
            with reading(self.path):
                self._vocab = _strings(self.path, self._file[schema.VOCAB], f"/{schema.VOCAB}")
        return self._vocab

    # -- runs ---------------------------------------------------------------------------------

    def run(self, name: str) -> Run:
        """The run `name` (complete or not), checked against the schema; TraceError if broken."""
        if name in self._runs:
            self._runs.move_to_end(name)
        else:
            if name not in self._names:
                raise TraceError(self.path, f"/{schema.RUNS}/{name}",
                                 f"expected an existing run (runs: {', '.join(self.run_names) or 'none'})")
            try:
                with reading(self.path):  # the run's string attributes share heap blocks with new runs
                    group = self._file[self._refs[name]] if name in self._refs else None
                    self._runs[name] = Run(self.path, self._file, name,
                                           {**self.meta, "R": self._R, "V": self._V}, group)
                self._held += self._runs[name].resident_bytes
            except TraceError:
                raise
            except Exception as exc:
                raise TraceError(self.path, f"/{schema.RUNS}/{name}",
                                 f"a readable run ({type(exc).__name__}: {exc})") from exc
            self._evict()
        return self._runs[name]

    def _evict(self) -> None:
        """Drop the least recently used runs past the byte budget (the newest always stays): an open
        dataset holds HDF5's chunk cache, so a reader that kept every run grew with the file."""
        while len(self._runs) > 1 and self._held > self._cache_bytes:
            self._held -= self._runs.popitem(last=False)[1].resident_bytes

    def runs(self) -> list[Run]:
        """Every complete run, in write order."""
        return [self.run(name) for name in self.run_names]

    # -- tables -------------------------------------------------------------------------------

    @property
    def table_names(self) -> list[str]:
        """Names of the complete tables under /tables."""
        with reading(self.path):
            return self._table_names()

    def _table_names(self) -> list[str]:
        try:
            tables = self._file.get(schema.TABLES)
            if tables is None:
                return []
            return [n for n in tables if plain_attr(tables[n].attrs.get("complete", False)) is True]
        except Exception as exc:
            raise TraceError(self.path, f"/{schema.TABLES}", f"a readable group ({exc})") from exc

    def read_table(self, name: str) -> tuple[dict[str, np.ndarray], dict]:
        """Columns (name -> 1-D array, strings as str arrays) in stored order, and the table's attrs."""
        with reading(self.path):
            return self._read_table(name)

    def _read_table(self, name: str) -> tuple[dict[str, np.ndarray], dict]:
        where = f"/{schema.TABLES}/{name}"
        if name not in self.table_names:
            raise TraceError(self.path, where, f"expected an existing table "
                                               f"(tables: {', '.join(self.table_names) or 'none'})")
        columns, problems = check_table(self._file, name)
        _first_error(self.path, problems)
        group = self._file[schema.TABLES][name]
        out = {}
        for col in columns:
            ds = group[col]
            if h5py.check_string_dtype(ds.dtype) is not None:
                out[col] = np.array(_strings(self.path, ds, f"{where}/{col}"), dtype=str)
            else:
                out[col] = LazyArray(ds, self.path, f"{where}/{col}", ("N",)).read()
        return out, json.loads(plain_attr(group.attrs["attrs"]))

    # -- lifetime -----------------------------------------------------------------------------

    def check_contained(self) -> None:
        """TraceError when any run reaches outside the file (traces/h5safe.py): what opening the trace
        leaves to each run's own check, walked now for every run."""
        with reading(self.path):  # the runs listed at the open: a recording's newer runs are not read
            names = [*self.run_names, *([] if self.recording else self.incomplete_runs)]
            runs_outside(self.path, ((name, self._file[self._refs[name]] if name in self._refs
                                      else self._file[schema.RUNS][name]) for name in names))

    def close(self) -> None:
        """Close the file and every run read from it; the memory they held goes back to the system."""
        self._runs.clear()
        self._held = 0
        self._refs = {}
        if self._file is not None and self._file.id.valid:
            self._file.close()
            return_freed_memory()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Trace {self.path}: {len(self.run_names)} runs, {len(self.incomplete_runs)} incomplete>"


def open_trace(path: str | os.PathLike, *, cache_bytes: int = RUN_CACHE_BYTES,
               runs: list[str] | None = None) -> Trace:
    """Open a trace lazily; raises TraceError when the file is not a usable trace.

    The trace keeps the runs it opened within `cache_bytes` (see `Run.resident_bytes`); a `Run`
    held by the caller stays usable until the trace is closed. `runs`: the complete runs' names when
    the caller listed them already (a worker process summarising a trace its parent opened): they
    are not listed again, a thousand runs cost a few hundred milliseconds to list."""
    return Trace(path, cache_bytes=cache_bytes, runs=runs)
