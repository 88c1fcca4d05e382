"""The run summary table (`/tables/run_summary`, `schema.RUN_SUMMARY_COLUMNS`): what a run browser
shows of each run, one row per complete run, so that a reader lists thousands of runs from one table
instead of opening and checking every run.

The writer adds a run's row in the same commit that marks the run complete (traces/writer.py), so a
reader that sees the run sees its row and the other way round. One function summarises a run
(`summarise`) from whatever holds its arrays: the writer's numpy arrays, the validator's datasets or a
reader's `Run`; the validator compares every row with the run it summarises. A trace written before
the table, or whose table is of a kind or version this reader does not know, has no summaries here:
its readers summarise each run themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import h5py
import numpy as np

from traces import schema
from traces.analysis.reference import condition_of, default_references
from traces.errors import TraceError
from traces.live import version
from traces.records import run_record

#: How a summary gets one of the run's arrays by schema path (numpy, h5py or lazy), None when the run
#: does not hold it (a dataset its engine did not record: `schema.ENGINE_OMITTABLE`).
ArrayOf = Callable[[str], Any]


@dataclass(frozen=True, eq=False)
class RunSummary:
    """One row of the table: a run's attributes a browser shows, its drops and its focus row's
    completion (the focus row is the probe row, else row 0), and its default reference."""

    run: str
    index: int
    condition: str
    label: str
    experiment: str
    kernel_mode: str
    routing: object                 # the routing attribute decoded (a dict), None when it has none
    batch_size: int
    request_ids: tuple[int, ...]
    probe_row: int
    prompt_len: int                 # of the focus row
    completion: np.ndarray = field(repr=False)  # [n - prompt_len] int32 generated ids of the focus row
    requested: int = 0              # candidates of the whole batch
    dropped: int = 0                # dropped candidates of the whole batch
    focus_dropped: int = 0          # dropped candidates of the focus row
    reference: str = ""             # '' until placed among the runs before it (`References`)
    first_difference: int = -1      # position where the completion first leaves the reference's

    @property
    def focus_row(self) -> int:
        return max(self.probe_row, 0)

    @property
    def focus_request(self) -> int:
        return self.request_ids[self.focus_row] if self.focus_row < len(self.request_ids) else -1

    @property
    def compared_in(self) -> str:
        """The condition its reference is chosen in (`traces.analysis.reference.condition_of`)."""
        return condition_of(self)


def first_difference(a: np.ndarray, b: np.ndarray) -> int | None:
    """First new-token index where completion `a` differs from `b` (a length difference counts), or
    None when they are equal."""
    n = min(len(a), len(b))
    differs = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    if differs.size:
        return int(differs[0])
    return None if len(a) == len(b) else n


def summarise(name: str, attrs: Mapping, array: ArrayOf) -> RunSummary:
    """The summary of run `name` from its attributes (as stored, or decoded by a reader) and its
    arrays; `reference` is left for `References.place`. A dataset its engine did not record reads
    as the reader's stand-in (traces/absent.py): every chosen expert kept."""
    request_ids = tuple(int(r) for r in np.asarray(attrs["request_ids"]).reshape(-1))
    probe_row = int(_plain(attrs["probe_row"]))
    focus = max(probe_row, 0)
    expert = array(schema.EXPERT)
    requested = _total(array(schema.LOAD_REQUESTED), expert)
    kept_total = _total(array(schema.LOAD_KEPT), expert)
    prompt_len, focus_dropped = 0, 0
    completion = np.zeros(0, np.int32)
    if focus < len(request_ids):
        tokens = np.asarray(array(schema.TOKENS)[focus])             # [T] read once: length and completion
        n = int(np.count_nonzero(tokens != schema.MISSING))          # as Run.row_length
        prompt_len = int(np.asarray(array(schema.PROMPT_LEN)[focus]))
        kept = array(schema.KEPT)
        row_kept = (np.asarray(kept[:, focus, :n]) if kept is not None
                    else np.asarray(expert[:, focus, :n]) >= 0)      # [L, n, K]
        focus_dropped = int(np.count_nonzero(~row_kept))
        completion = tokens[prompt_len:n].astype(np.int32)
    routing = attrs.get("routing")
    routing = json.loads(routing) if isinstance(routing, str) else routing
    return RunSummary(
        run=name, index=int(_plain(attrs.get("index", -1))), condition=_text(attrs, "condition"),
        label=_text(attrs, "label"), experiment=_text(attrs, "experiment"),
        kernel_mode=_text(attrs, "kernel_mode"),
        routing=routing if isinstance(routing, dict) else None,   # as a reader keeps it
        batch_size=int(_plain(attrs["batch_size"])), request_ids=request_ids, probe_row=probe_row,
        prompt_len=prompt_len, completion=completion, requested=requested, dropped=requested - kept_total,
        focus_dropped=focus_dropped)


def summarise_run(run) -> RunSummary:
    """The summary of a reader's `Run` (its checked attributes and lazy arrays)."""
    return summarise(run.name, run.attrs, run.arrays.get)


def _total(counts, expert) -> int:
    """Sum of a load array [S, L, G, E]; without it, the chosen experts (every one kept, as a
    dropless engine's stand-in counts them)."""
    if counts is None:
        return int(np.count_nonzero(np.asarray(expert[...]) >= 0))
    return int(np.asarray(counts[...]).sum(dtype=np.int64))


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _text(attrs: Mapping, key: str) -> str:
    """A text attribute as a reader shows it (the run record's default when missing)."""
    return str(_plain(attrs.get(key, run_record().default(key))))


class References:
    """Places runs, in write order, among those before them: each run's default reference is the first
    run of its focus request and condition (`traces.analysis.reference`), and its first difference is
    where its completion leaves that run's."""

    def __init__(self) -> None:
        self._first: dict = {}                      # (request, condition) -> run
        self._completions: dict[str, np.ndarray] = {}  # of those first runs

    def place(self, summary: RunSummary) -> RunSummary:
        name = summary.run
        reference = default_references([(name, summary.focus_request, summary.compared_in)],
                                       self._first)[name]
        if reference == name:
            self._completions[name] = summary.completion
            return replace(summary, reference=name, first_difference=-1)
        t = first_difference(summary.completion, self._completions[reference])
        return replace(summary, reference=reference,
                       first_difference=-1 if t is None else summary.prompt_len + t)


# -- the table's rows ---------------------------------------------------------------------------------

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in schema.RUN_SUMMARY_COLUMNS)
#: Columns stored as text (UTF-8 strings, JSON or plain).
TEXT_COLUMNS = frozenset(c.name for c in schema.RUN_SUMMARY_COLUMNS if c.dtype in ("str", "json"))


def table_attrs() -> dict:
    """The table's own attributes (its `attrs`)."""
    return {"kind": schema.RUN_SUMMARY_KIND, "version": schema.RUN_SUMMARY_VERSION}


def known(attrs: Mapping) -> bool:
    """Whether a table with these attributes is a run summary table this reader reads."""
    return attrs.get("kind") == schema.RUN_SUMMARY_KIND and attrs.get("version") == schema.RUN_SUMMARY_VERSION


def row(summary: RunSummary) -> dict[str, object]:
    """The table's row of a summary: column -> plain value."""
    values = {f.name: getattr(summary, f.name) for f in fields(summary)}
    values["routing"] = "" if summary.routing is None else json.dumps(summary.routing, sort_keys=True)
    values["request_ids"] = _ints_json(summary.request_ids)
    values["completion"] = _ints_json(summary.completion.tolist())
    return {name: values[name] for name in COLUMN_NAMES}


def _ints_json(values: Sequence[int]) -> str:
    return json.dumps([int(v) for v in values], separators=(",", ":"))


def from_columns(columns: Mapping[str, np.ndarray]) -> tuple[list[RunSummary], list[tuple[int, str]]]:
    """The summaries of the table's columns (equal-length arrays, text as str), and what is wrong
    with each row that cannot be read: (row, why). Missing columns make every row unreadable."""
    missing = [name for name in COLUMN_NAMES if name not in columns]
    if missing:
        return [], [(-1, f"expected the columns {', '.join(missing)}")]
    values = {name: np.asarray(columns[name]).tolist() for name in COLUMN_NAMES}
    lists = {name: _json_lists(values[name]) for name in ("request_ids", "completion")}
    routings: dict[str, object] = {}   # runs of one session share their routing text
    out, problems = [], []
    for i, run in enumerate(values["run"]):
        try:
            text = values["routing"][i]
            if text not in routings:
                routings[text] = _json(text, dict) if text else None
            out.append(RunSummary(
                run=str(run), index=int(values["index"][i]), condition=str(values["condition"][i]),
                label=str(values["label"][i]), experiment=str(values["experiment"][i]),
                kernel_mode=str(values["kernel_mode"][i]), routing=routings[text],
                batch_size=int(values["batch_size"][i]),
                request_ids=tuple(_ints(lists["request_ids"][i], values["request_ids"][i]).tolist()),
                probe_row=int(values["probe_row"][i]), prompt_len=int(values["prompt_len"][i]),
                completion=_ints(lists["completion"][i], values["completion"][i]).astype(np.int32),
                requested=int(values["requested"][i]), dropped=int(values["dropped"][i]),
                focus_dropped=int(values["focus_dropped"][i]), reference=str(values["reference"][i]),
                first_difference=int(values["first_difference"][i])))
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            problems.append((i, f"{type(exc).__name__}: {exc}"))
    return out, problems


def _json_lists(texts: list[str]) -> list:
    """Each text's JSON value, parsed in one call when they all parse (None for one that does not)."""
    try:
        parsed = json.loads("[" + ",".join(texts) + "]")
        if len(parsed) == len(texts):
            return parsed
    except (ValueError, RecursionError):
        pass
    out = []
    for text in texts:
        try:
            out.append(json.loads(text))
        except (ValueError, RecursionError):
            out.append(None)
    return out


def _ints(value, text: str) -> np.ndarray:
    """A parsed JSON list of ints as an int64 array; ValueError naming `text` otherwise."""
    arr = np.array(value if isinstance(value, list) else None, dtype=object if value is None else None)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"expected a JSON list of ints, found {text[:40]!r}")
    return arr.astype(np.int64)


def _json(text: str, kind: type):
    value = json.loads(text)
    if not isinstance(value, kind):
        raise ValueError(f"expected a JSON {kind.__name__}, found {text[:40]!r}")
    return value


def disagreements(stored: RunSummary, actual: RunSummary) -> list[str]:
    """The fields in which a stored summary differs from the run's own (`summarise` and `References`),
    each as `expected FIELD = ACTUAL (from the run), found STORED`."""
    out = []
    for f in fields(RunSummary):
        a, b = getattr(stored, f.name), getattr(actual, f.name)
        same = np.array_equal(a, b) if f.name == "completion" else a == b
        if not same:
            out.append(f"expected {f.name} = {_short(b)} (from the run), found {_short(a)}")
    return out


def _short(value) -> str:
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(columns: Mapping[str, np.ndarray], complete: Sequence[str],
          actual: Callable[[str], RunSummary | None]) -> list[tuple[str, str]]:
    """What is wrong with a run summary table's `columns` against the `complete` runs, as (severity,
    message): a row that cannot be read, names no complete run or names one twice, or disagrees with
    `actual(run)` (the run summarised from its arrays; None: the run itself is broken) placed again
    in write order, is an error; a complete run without a row is a warning."""
    summaries, unreadable = from_columns(columns)
    out = [("error", f"row {i}: expected a readable summary ({why})") for i, why in unreadable]
    references, seen, listed = References(), set(), set(complete)
    for stored in sorted(summaries, key=lambda s: s.index):
        if stored.run in seen or stored.run not in listed:
            what = "a second row" if stored.run in seen else "a row, but no complete run"
            out.append(("error", f"run {stored.run!r}: expected one row per complete run, found {what}"))
            continue
        seen.add(stored.run)
        try:
            summary = actual(stored.run)
        except Exception as exc:  # h5py raises OSError, RuntimeError, ... on damaged chunks
            out.append(("error", f"run {stored.run!r}: expected a run that can be summarised "
                                 f"({type(exc).__name__}: {exc})"))
            continue
        if summary is not None:
            out += [("error", f"run {stored.run!r}: {what}")
                    for what in disagreements(stored, references.place(summary))]
    return out + [("warning", f"run {name!r}: expected a row (a reader summarises it from its arrays)")
                  for name in complete if name not in seen]


def read_summaries(trace) -> dict[str, RunSummary] | None:
    """The summaries of a reader's `Trace` by run name, for its complete runs that have a row; None
    when the trace has no run summary table this reader knows (it was written before the table, or
    by a newer writer), or when a writer committed runs since the trace was opened: the table, which
    grows in place, would then be read ahead of the runs listed (live.py), so its reader summarises
    the runs itself, or opens the trace again. Rows that cannot be read are left out (`validate`
    reports them)."""
    if version(trace.path) != trace.version:
        return None
    try:
        if schema.RUN_SUMMARY_TABLE not in trace.table_names:
            return None
        columns, attrs = trace.read_table(schema.RUN_SUMMARY_TABLE)
    except TraceError:
        if version(trace.path) != trace.version:
            return None
        raise
    if version(trace.path) != trace.version or not known(attrs):
        return None
    summaries, _ = from_columns(columns)
    listed = set(trace.run_names)
    out: dict[str, RunSummary] = {}
    for summary in summaries:
        if summary.run in listed:
            out.setdefault(summary.run, summary)
    return out


# -- writing (traces/writer.py) -------------------------------------------------------------------------

def create(tables, string_dtype) -> None:
    """An empty run summary table in the h5py group `tables` (/tables): one resizable, chunked,
    uncompressed dataset per column, so that appending a row rewrites the chunks it lands in in place."""
    group = tables.create_group(schema.RUN_SUMMARY_TABLE)
    group.attrs["columns"] = json.dumps(list(COLUMN_NAMES))
    group.attrs["attrs"] = json.dumps(table_attrs())
    group.attrs["complete"] = True
    for column in schema.RUN_SUMMARY_COLUMNS:
        dtype = string_dtype if column.name in TEXT_COLUMNS else np.dtype(column.dtype)
        group.create_dataset(column.name, shape=(0,), maxshape=(None,), dtype=dtype,
                             chunks=(schema.RUN_SUMMARY_CHUNK,))


def columns_of(group) -> list:
    """The columns of the table in the h5py group `group`, opened (low-level ids) for `append`: kept
    open, a column keeps the chunk being filled in its cache instead of reading it for every row."""
    return [h5py.h5d.open(group.id, name.encode()) for name in COLUMN_NAMES]


def append(columns: list, values: Mapping[str, object]) -> None:
    """Add one row (`row`) at the end of the table's `columns` (`columns_of`), with h5py's low-level
    calls (its high-level ones cost some 5 ms a row)."""
    one = h5py.h5s.create_simple((1,))
    n = columns[0].shape[0]
    for name, column in zip(COLUMN_NAMES, columns, strict=True):
        column.set_extent((n + 1,))
        space = column.get_space()
        space.select_hyperslab((n,), (1,))
        column.write(one, space, np.asarray([values[name]], dtype=column.dtype))


def row_bytes(values: Mapping[str, object]) -> int:
    """Most bytes a row may add to the file: a new chunk of every column, and its text."""
    chunks = sum(schema.RUN_SUMMARY_CHUNK * (16 if name in TEXT_COLUMNS else 8) for name in COLUMN_NAMES)
    return chunks + sum(len(str(values[name]).encode()) + 16 for name in TEXT_COLUMNS)
