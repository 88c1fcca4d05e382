"""Checks of a trace against schema v2 (and v1) that collect every problem, not only the first.

`check_root` and `check_run` look only at metadata (attributes, dtypes, shapes), so the reader runs
them on open and on `trace.run(name)` at no real cost; `validate(path, read_data=True)` also reads
every dataset of every run to find damaged chunks.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass

import h5py
import numpy as np

from traces import records, run_table, schema
from traces.errors import TraceError
from traces.h5safe import (
    open_hdf5,
    open_object,
    read_only_file,
    read_strings,
    run_outside,
    storage_outside,
)
from traces.live import being_written, read_consistently
from traces.lock import reading
from traces.prompts import Prompts
from traces.route_check import RouteCheck, check_problems
from traces.route_rules import data_problems, shape_problems, trace_problems
from traces.steering import meta_problems


@dataclass(frozen=True)
class Problem:
    """One problem found in a file: where inside it, what was expected, and how bad it is."""

    where: str
    message: str
    severity: str = "error"  # "error" (unusable part) or "warning" (usable, but not as specified)

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message}"


#: A dataset may declare at most this many times its stored bytes (deflate's best ratio is about
#: 1032:1), plus MAX_UNSTORED: a file that declares more was edited, and reading it would allocate
#: what it declares, not what it holds.
MAX_EXPANSION = 1100
MAX_UNSTORED = 1 << 20
#: Largest attribute read (stored bytes); the schema's attributes are a few KB.
MAX_ATTR_BYTES = 16 << 20
#: Most problems `validate` collects before it stops walking a file.
MAX_PROBLEMS = 1000


def _safe(fn, where: str, problems: list[Problem], what: str):
    """Call fn(); on any h5py failure record a problem and return None."""
    try:
        return fn()
    except Exception as exc:  # damaged files raise OSError, RuntimeError, KeyError, ValueError, ...
        problems.append(Problem(where, f"expected {what} ({type(exc).__name__}: {exc})"))
        return None


def plain_attr(value):
    """An attribute as a plain Python value (str, int, float, bool or numeric array), else TypeError.

    Only strings, numbers and numeric arrays are data; anything else (object arrays, references,
    compound types) is refused, never interpreted.
    """
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8")
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.item() if value.shape == () else value
    raise TypeError(f"unsupported attribute type {type(value).__name__}")


def _attr(obj, key: str, where: str, problems: list[Problem], kind: type | tuple, required: bool = True):
    """Read attribute `key` as a plain value of type `kind`, recording a problem when it is not."""
    try:
        name = key.encode()
        if not h5py.h5a.exists(obj.id, name):
            if required:
                problems.append(Problem(where, f"expected attribute {key!r}"))
            else:
                problems.append(Problem(where, f"expected attribute {key!r} (optional)", "warning"))
            return None
        attr = h5py.h5a.open(obj.id, name)
        size = attr.get_storage_size()
        if size > MAX_ATTR_BYTES:
            problems.append(Problem(where, f"expected attribute {key!r} of at most {MAX_ATTR_BYTES} bytes, "
                                           f"found {size}"))
            return None
        value = plain_attr(_attr_value(attr))
        if isinstance(value, str) and len(value) > MAX_ATTR_BYTES:
            problems.append(Problem(where, f"expected attribute {key!r} of at most {MAX_ATTR_BYTES} "
                                           f"characters, found {len(value)}"))
            return None
    except Exception as exc:
        problems.append(Problem(where, f"expected readable attribute {key!r} ({type(exc).__name__}: {exc})"))
        return None
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        problems.append(Problem(where, f"expected attribute {key!r} of type {names}, found {value!r:.60}"))
        return None
    return value


def _attr_value(attr: h5py.h5a.AttrID):
    """The value of an open attribute, as h5py's `obj.attrs[key]` gives it (that opens the attribute
    again, and `_attr` read some forty attributes per run)."""
    shape = attr.shape
    if shape is None:  # an empty dataspace
        return h5py.Empty(attr.dtype)
    dtype = attr.dtype
    mtype = h5py.h5t.py_create(dtype)
    if dtype.subdtype is not None:  # numpy has no top-level array types: read as a larger array
        dtype, subshape = dtype.subdtype
        shape = shape + subshape
    arr = np.zeros(shape, dtype=dtype, order="C")
    attr.read(arr, mtype=mtype)
    string = h5py.check_string_dtype(dtype)
    if string and string.length is None:  # variable-length strings are read as bytes
        text = [b.decode("utf-8", "surrogateescape") for b in arr.flat]
        arr = np.array(text, dtype=dtype).reshape(arr.shape)
    return arr[()] if arr.ndim == 0 else arr


def attr_or_none(obj, key: str, kind: type | tuple):
    """Attribute `key` of `obj` as a plain value of type `kind`, read with `_attr`'s size checks, or
    None when it is missing, too large or not such a value."""
    return _attr(obj, key, "", [], kind, required=False)


def _json_attr(obj, key: str, where: str, problems: list[Problem], kind: type, required: bool = True):
    text = _attr(obj, key, where, problems, str, required)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        problems.append(Problem(where, f"expected JSON text in attribute {key!r}, found {text!r:.60}"))
        return None
    except RecursionError:
        problems.append(Problem(where, f"expected JSON in attribute {key!r} nested less deeply than "
                                       f"Python's recursion limit"))
        return None
    if not isinstance(value, kind):
        problems.append(Problem(where, f"expected attribute {key!r} to hold a JSON {kind.__name__}"))
        return None
    return value


#: What `_dataset` returns for an optional dataset that is not there.
ABSENT = object()


#: What a non-dataset object is called in problems (h5py's class names, lower case).
_KINDS = {h5py.h5g.GroupID: "group", h5py.h5t.TypeID: "datatype"}


def _dataset(parent, path: str, where: str, problems: list[Problem], required: bool = True,
             read_only: bool | None = None):
    """The dataset at `path`, None (a problem recorded) when it is not a usable one, or ABSENT when it
    is optional and missing (`read_only`: see `open_object`)."""
    n_before = len(problems)
    obj = _safe(lambda: open_object(parent, path, read_only), where, problems, "a readable object")
    if obj is None:
        if not required and len(problems) == n_before:
            return ABSENT
        if len(problems) == n_before:
            problems.append(Problem(where, "expected dataset, found nothing"))
        return None
    if not isinstance(obj, h5py.Dataset):
        kind = next((k for t, k in _KINDS.items() if isinstance(obj, t)), type(obj).__name__.lower())
        problems.append(Problem(where, f"expected dataset, found {kind}"))
        return None
    outside = _safe(lambda: storage_outside(obj.id), where, problems, "a readable dataset")
    if outside:
        problems.append(Problem(where, outside))
    if outside or outside is None and len(problems) > n_before:
        return None
    declared = _safe(lambda: _declared_bytes(obj), where, problems, "a readable dataset")
    if declared is None:
        return None
    if declared <= MAX_UNSTORED:
        return obj  # small whatever it stores: no need to walk its chunk index
    stored = _safe(lambda: int(obj.id.get_storage_size()), where, problems, "readable storage")
    if stored is None:
        return None
    if declared > stored * MAX_EXPANSION + MAX_UNSTORED:
        problems.append(Problem(where, f"expected a shape its stored data can hold, found {obj.shape} "
                                       f"({declared} bytes declared, {stored} stored)"))
        return None
    return obj


def _declared_bytes(ds: h5py.Dataset) -> int:
    n = 1
    for d in ds.shape:
        n *= int(d)
    return n * ds.dtype.itemsize


def _string_dataset(parent, path: str, problems: list[Problem]) -> h5py.Dataset | None:
    where = f"/{path}"
    ds = _dataset(parent, path, where, problems)
    if ds is None:
        return None
    if ds.ndim != 1 or h5py.check_string_dtype(ds.dtype) is None:
        problems.append(Problem(where, f"expected 1-D dataset of strings, found {ds.ndim}-D {ds.dtype}"))
        return None
    return ds


def check_root(f: h5py.File) -> tuple[dict, list[Problem]]:
    """Problems of the root (attributes, vocab, request pool, runs group) and the decoded metadata.

    Metadata holds every readable root attribute, JSON ones decoded, plus `"R"` and `"V"` sizes.
    """
    problems: list[Problem] = []
    fmt = _attr(f, "format", "/", problems, str)
    if fmt is not None and fmt != schema.FORMAT:
        problems.append(Problem("/", f'expected attribute format = "{schema.FORMAT}", found {fmt!r:.60}'))
    if fmt != schema.FORMAT:  # another kind of file: its other contents say nothing to us
        return {}, problems
    version = _attr(f, "format_version", "/", problems, int)
    if version is not None and not 1 <= version <= schema.FORMAT_VERSION:
        problems.append(Problem("/", f"expected format_version <= {schema.FORMAT_VERSION} (newest this "
                                     f"reader knows), found {version}: upgrade moe-inspector to read it"))
        return {}, problems
    meta = _record_attrs(f, schema.RECORDS["root"], "/", problems)
    problems.extend(Problem("/", message, severity) for severity, message in schema.root_problems(meta))
    _keep_well_typed(schema.RECORDS["root"], meta)
    vocab = _string_dataset(f, schema.VOCAB, problems)
    text = _string_dataset(f, schema.REQUEST_TEXT, problems)
    meta["V"] = vocab.shape[0] if vocab is not None else None
    meta["R"] = text.shape[0] if text is not None else None
    _check_request_tokens(f, meta["R"], problems)
    runs = _safe(lambda: f.get(schema.RUNS), f"/{schema.RUNS}", problems, "a readable group")
    if not isinstance(runs, h5py.Group):
        problems.append(Problem(f"/{schema.RUNS}", "expected group"))
    tables = _safe(lambda: f.get(schema.TABLES), f"/{schema.TABLES}", problems, "a readable group")
    if tables is not None and not isinstance(tables, h5py.Group):
        problems.append(Problem(f"/{schema.TABLES}", "expected group"))
    return meta, problems


def _check_request_tokens(f: h5py.File, R: int | None, problems: list[Problem]) -> None:
    tokens = _dataset(f, schema.REQUEST_TOKENS, f"/{schema.REQUEST_TOKENS}", problems)
    offsets = _dataset(f, schema.REQUEST_OFFSETS, f"/{schema.REQUEST_OFFSETS}", problems)
    for ds, where in ((tokens, schema.REQUEST_TOKENS), (offsets, schema.REQUEST_OFFSETS)):
        if ds is not None and (ds.ndim != 1 or ds.dtype.kind not in "iu"):
            problems.append(Problem(f"/{where}", f"expected 1-D integer dataset, "
                                                 f"found {ds.ndim}-D {ds.dtype}"))
            return
    if tokens is None or offsets is None or R is None:
        return
    if offsets.shape[0] != R + 1:
        problems.append(Problem(f"/{schema.REQUEST_OFFSETS}", f"expected {R + 1} offsets (R + 1), "
                                                              f"found {offsets.shape[0]}"))
        return
    values = _safe(lambda: offsets[()], f"/{schema.REQUEST_OFFSETS}", problems, "readable offsets")
    if values is None:
        return
    if values[0] != 0 or np.any(np.diff(values) < 0) or values[-1] != tokens.shape[0]:
        problems.append(Problem(f"/{schema.REQUEST_OFFSETS}", f"expected non-decreasing offsets from 0 to "
                                                              f"{tokens.shape[0]} (length of tokens)"))


def _check_labels(ds: h5py.Dataset, spec: schema.DatasetSpec, where: str, problems: list[Problem]) -> None:
    """Warn when the HDF5 dimension labels are not the schema's letters.

    The labels are read as a plain string attribute: the HDF5 dimension-scale API (`ds.dims[i].label`)
    crashes the process on some damaged files instead of reporting an error.
    """
    labels = _safe(lambda: ds.attrs.get("DIMENSION_LABELS"), where, problems, "readable dimension labels")
    try:
        found = tuple(bytes(x).decode() if isinstance(x, bytes) else str(x) for x in labels)
    except TypeError:
        found = None
    if found != spec.dims:
        problems.append(Problem(where, f"expected dimension labels {spec.dims}, found {found}", "warning"))


def check_run(f: h5py.File, name: str, meta: dict, labels: bool = False,
              group: h5py.Group | None = None,
              found: dict | None = None) -> tuple[dict[str, int], list[Problem]]:
    """Problems of one run (attributes, each dataset's dtype and ndim, consistent dims) and its dims.

    With `labels`, also check the dimension labels (only `validate` does: the reader never needs them).
    `group` is the run's group when the caller holds it already; `found` (a dict) receives the
    schema attributes read (`"attrs"`, JSON ones decoded) and the datasets opened (`"datasets"`),
    so the reader does not read them twice.
    """
    found = {} if found is None else found
    values, datasets = found.setdefault("attrs", {}), found.setdefault("datasets", {})
    where = f"/{schema.RUNS}/{name}"
    problems: list[Problem] = []
    if group is None:
        group = _safe(lambda: f[schema.RUNS].get(name), where, problems, "a readable group")
    if not isinstance(group, h5py.Group):
        if group is not None or not problems:
            problems.append(Problem(where, "expected group"))
        return {}, problems
    outside = _safe(lambda: run_outside(group, where), where, problems, "readable links")
    if outside is None or outside:
        problems.extend(Problem(w, m) for w, m in outside or [])
        return {}, problems
    values.update(_record_attrs(group, schema.RECORDS["run"], where, problems))
    if values.get("complete") is False:
        problems.append(Problem(where, "run is incomplete (complete = false): its writer did not finish",
                                "warning"))
    listed = values.get("not_recorded")
    not_recorded: tuple[str, ...] = tuple(listed) if isinstance(listed, list) and all(
        p in schema.ENGINE_OMITTABLE for p in listed) else ()
    shapes = {}
    present = set()
    read_only = _safe(lambda: read_only_file(group), where, problems, "a readable group")
    for spec in schema.RUN_DATASETS:
        ds_where = f"{where}/{spec.path}"
        required = spec.required and spec.path not in not_recorded
        ds = _dataset(group, spec.path, ds_where, problems, required, read_only)
        if ds is ABSENT:
            continue  # one of the logits forms (which one is checked below), or not recorded
        present.add(spec.path)
        if ds is None:
            continue
        if not schema.dtype_ok(spec, ds.dtype):
            problems.append(Problem(ds_where, f"expected dataset of dtype {' or '.join(spec.dtypes)}, "
                                              f"found {ds.dtype}"))
            continue
        shapes[spec.path] = ds.shape
        datasets[spec.path] = ds
        if labels:
            _check_labels(ds, spec, ds_where, problems)
    dims, conflicts = schema.collect_dims(shapes)
    problems.extend(Problem(f"{where}/{path}", message) for path, message in conflicts)
    form, wrong = schema.logits_form(present)
    if form is None:
        problems.append(Problem(f"{where}/logits", wrong))
    problems.extend(Problem(where, message, severity) for severity, message in schema.run_problems(
        values, B=dims.get("B"), R=meta.get("R"), omittable=schema.ENGINE_OMITTABLE))
    check = values.get("route_check")
    problems.extend(Problem(where, message, severity) for severity, message in
                    check_problems(check if isinstance(check, dict) else None, bool(not_recorded)))
    problems.extend(Problem(f"{where}/{path}", message) for path, message in
                    shape_problems(meta, dims, bool(not_recorded)))
    _keep_well_typed(schema.RECORDS["run"], values)
    if "not_recorded" in values:
        values["not_recorded"] = list(not_recorded)
    layers = meta.get("moe_layers")
    if layers is not None and dims.get("L") not in (None, len(layers)):
        problems.append(Problem(f"{where}/routing/expert", f"expected L = {len(layers)} (length of "
                                                          f"moe_layers), found {dims['L']}"))
    if meta.get("V") is not None and dims.get("V") not in (None, meta["V"]):
        problems.append(Problem(f"{where}/logits", f"expected V = {meta['V']} (length of vocab), "
                                                   f"found {dims['V']}"))
    return dims, problems


def _record_attrs(obj, record: type[schema.Record], where: str, problems: list[Problem]) -> dict:
    """Every attribute of `record` that `obj` holds and that can be read (JSON ones decoded); what
    is wrong with them is the record's rule's to say (`schema.root_problems`, `schema.run_problems`)."""
    values = {}
    for key, spec in record.specs().items():
        held = _safe(lambda k=key: h5py.h5a.exists(obj.id, k.encode()), where, problems,
                     "readable attributes")
        if not held:
            continue
        value = (_json_attr if spec.json else _attr)(obj, key, where, problems, object)
        if value is not None:
            values[key] = value
    return values


def _keep_well_typed(record: type[schema.Record], values: dict) -> None:
    """Drop the attributes that are not of their declared kind (their problem is reported)."""
    specs = record.specs()
    for key in [k for k, v in values.items() if k in specs and not records.well_typed(specs[k], v)]:
        del values[key]


def _prompt_problems(found: dict, where: str, prompts: Prompts) -> list[Problem]:
    """A problem when a row of the run does not hold the prompt its request's first row held."""
    problems: list[Problem] = []
    datasets = found["datasets"]
    tokens = _safe(lambda: datasets[schema.TOKENS][()], f"{where}/{schema.TOKENS}", problems,
                   "readable tokens")
    lengths = _safe(lambda: datasets[schema.PROMPT_LEN][()], f"{where}/{schema.PROMPT_LEN}", problems,
                    "readable lengths")
    if tokens is None or lengths is None:
        return problems
    ids = np.asarray(found["attrs"]["request_ids"], dtype=np.int64)
    run = where.rsplit("/", 1)[-1]
    for b, (r, p) in enumerate(zip(ids.tolist(), lengths.tolist(), strict=False)):
        wrong = prompts.mismatch(r, tokens[b, :max(0, p)], f"run {run} row {b}")
        if wrong:
            return problems + [Problem(f"{where}/tokens", wrong)]
    return problems


def _read_all(group: h5py.Group, where_run: str, problems: list[Problem]) -> None:
    """Read every dataset of a run chunk by chunk, recording those that cannot be read."""
    for spec in schema.RUN_DATASETS:
        where = f"{where_run}/{spec.path}"
        optional = not spec.required or spec.path in schema.ENGINE_OMITTABLE
        if optional and not _safe(lambda spec=spec: spec.path in group, where, problems,
                                  "a readable group"):
            continue
        ds = _safe(lambda spec=spec: group[spec.path], where, problems, "a dataset")
        if ds is None:
            continue
        step = ds.chunks[0] if ds.chunks else max(1, ds.shape[0] if ds.shape else 1)
        for start in range(0, ds.shape[0] if ds.shape else 1, step):
            if _safe(lambda ds=ds, start=start, step=step: ds[start:start + step], where, problems,
                     "readable data") is None:
                break


def validate(path: str | os.PathLike, *, read_data: bool = False) -> list[Problem]:
    """Every problem found in the trace at `path` (empty list: a valid file), at most MAX_PROBLEMS.

    With `read_data`, also read every dataset of every run (slow on big files) to find damaged chunks.
    A trace being recorded is checked as one committed version of it (traces/live.py); the run its
    writer is adding is a warning, not checked."""
    path = os.fspath(path)
    try:
        return read_consistently(path, lambda: _validate(path, read_data), hold=False,
                                 good_enough=lambda found: not any(p.severity == "error" for p in found))
    except TraceError as exc:
        return [Problem(exc.where, exc.expected)]


def _validate(path: str, read_data: bool) -> list[Problem]:
    held = contextlib.ExitStack()  # from the open to the run list: one committed version of the file
    held.enter_context(reading(path))
    try:
        f = open_hdf5(path)
    except BaseException:
        held.close()
        raise
    with f:
        with held:  # metadata that a writer adding runs may rewrite; the runs it lists are committed
            recording = being_written(path)
            meta, problems = check_root(f)
            if any(p.severity == "error" for p in problems) and "format_version" not in meta:
                return problems
            problems += [Problem(where, message) for where, message in meta_problems(meta)]
            for where in (schema.VOCAB, schema.REQUEST_TEXT):  # what the strings point at, bounded
                ds = f.get(where) if not any(p.where == f"/{where}" for p in problems) else None
                if isinstance(ds, h5py.Dataset):
                    try:
                        read_strings(path, ds, f"/{where}")
                    except TraceError as exc:
                        problems.append(Problem(exc.where, exc.expected))
            runs = f.get(schema.RUNS) if not any(p.where == f"/{schema.RUNS}" for p in problems) else None
            names = _safe(lambda: list(runs), f"/{schema.RUNS}", problems, "a readable group") if runs else []
            if names and len(names) > schema.MAX_RUNS:
                problems.append(Problem(f"/{schema.RUNS}", f"expected at most {schema.MAX_RUNS} runs, found "
                                                           f"{len(names)} groups (not checked)"))
                names = []
            to_read = []
            checks: list[RouteCheck] = []
            prompts = Prompts()
            for name in names or []:
                where = f"/{schema.RUNS}/{name}"
                group = _safe(lambda name=name: runs[name], where, problems,  # type: ignore[index]
                              "a readable group")  # (names are listed only when `runs` is a group)
                if recording and isinstance(group, h5py.Group) and _complete(group) is False:
                    problems.append(Problem(where, "run is being recorded (not checked)", "warning"))
                    continue
                found: dict = {}
                _, run_problems = check_run(f, name, meta, labels=True, found=found,
                                            group=group if isinstance(group, h5py.Group) else None)
                if not any(p.severity == "error" for p in run_problems) and found["attrs"].get("complete"):
                    run_problems += _prompt_problems(found, where, prompts)
                problems.extend(run_problems)
                if read_data and not any(p.severity == "error" for p in run_problems):
                    to_read.append((group, where, bool(found["attrs"].get("not_recorded"))))
                checks += _route_check(found)
                if _too_many(problems):
                    return _capped(problems)
            tables = _safe(lambda: f.get(schema.TABLES), f"/{schema.TABLES}", problems, "a readable group")
            if isinstance(tables, h5py.Group):
                table_names = _safe(lambda: list(tables), f"/{schema.TABLES}", problems, "a readable group")
                for name in table_names or []:
                    problems.extend(check_table(f, name)[1])
                problems.extend(check_run_summaries(path, f, meta))
        problems.extend(Problem(f"/{schema.RUNS}", message) for message in trace_problems(checks))
        for group, where, engine_run in to_read:  # committed runs: a writer never changes them again
            _read_all(group, where, problems)
            unread = any(p.severity == "error" and (p.where + "/").startswith(where + "/") for p in problems)
            if not unread:
                routes = _safe(lambda g=group, e=engine_run: data_problems(g, meta, e), where, problems,
                               "readable routes")
                problems.extend(Problem(f"{where}/{path}", message) for path, message in routes or [])
            if _too_many(problems):
                break
    return _capped(problems)


def _route_check(found: dict) -> list[RouteCheck]:
    """The run's route check as read (none when absent or malformed: reported with the run)."""
    try:
        return [RouteCheck.from_attr(found.get("attrs", {}).get("route_check"))]
    except ValueError:
        return []


def _complete(group: h5py.Group):
    try:
        return plain_attr(group.attrs["complete"]) if "complete" in group.attrs else None
    except Exception:
        return None


def _too_many(problems: list[Problem]) -> bool:
    return len(problems) > MAX_PROBLEMS


def _capped(problems: list[Problem]) -> list[Problem]:
    if not _too_many(problems):
        return problems
    return problems[:MAX_PROBLEMS] + [Problem("/", f"expected at most {MAX_PROBLEMS} problems; stopped "
                                                   f"checking after {MAX_PROBLEMS} (a badly damaged file)")]


def check_table(f: h5py.File, name: str) -> tuple[list[str], list[Problem]]:
    """Problems of `/tables/<name>` and its column names in order."""
    where = f"/{schema.TABLES}/{name}"
    problems: list[Problem] = []
    group = _safe(lambda: f[schema.TABLES].get(name), where, problems, "a readable group")
    if not isinstance(group, h5py.Group):
        problems.append(Problem(where, "expected group"))
        return [], problems
    columns = _json_attr(group, "columns", where, problems, list)
    _json_attr(group, "attrs", where, problems, dict)
    if columns is None:
        return [], problems
    lengths = set()
    for col in columns:
        ds = _dataset(group, str(col), f"{where}/{col}", problems)
        if ds is None:
            continue
        if ds.ndim != 1 or not (ds.dtype.kind in "biuf" or h5py.check_string_dtype(ds.dtype) is not None):
            problems.append(Problem(f"{where}/{col}", f"expected 1-D column of numbers, bools or strings, "
                                                      f"found {ds.ndim}-D {ds.dtype}"))
            continue
        lengths.add(ds.shape[0])
    if len(lengths) > 1:
        problems.append(Problem(where, f"expected columns of equal length, found lengths {sorted(lengths)}"))
    return [str(c) for c in columns], problems


def check_run_summaries(path: str, f: h5py.File, meta: dict) -> list[Problem]:
    """Problems of the run summary table against the runs it summarises (`run_table.check`); its
    layout is `check_table`'s."""
    where = f"/{schema.TABLES}/{schema.RUN_SUMMARY_TABLE}"
    problems: list[Problem] = []
    group = _safe(lambda: f.get(where), where, problems, "a readable group")
    if not isinstance(group, h5py.Group) or any(p.severity == "error" for p in check_table(
            f, schema.RUN_SUMMARY_TABLE)[1]):
        return problems  # none, or its layout is reported with the other tables
    attrs = _json_attr(group, "attrs", where, problems, dict)
    if attrs is None or not run_table.known(attrs):
        return problems + [Problem(where, f"expected a run summary table of kind {schema.RUN_SUMMARY_KIND!r} "
                                          f"version {schema.RUN_SUMMARY_VERSION} (not checked)", "warning")]
    try:
        columns = {name: (np.array(read_strings(path, group[name], f"{where}/{name}"), dtype=str)
                          if name in run_table.TEXT_COLUMNS else group[name][()])
                   for name in run_table.COLUMN_NAMES}
    except Exception as exc:  # damaged files raise OSError, RuntimeError, KeyError, ValueError, ...
        return problems + [Problem(where, f"expected readable columns {', '.join(run_table.COLUMN_NAMES)} "
                                          f"({type(exc).__name__}: {exc})")]
    runs = _safe(lambda: f[schema.RUNS], f"/{schema.RUNS}", [], "a readable group")
    if not isinstance(runs, h5py.Group) or len(runs) > schema.MAX_RUNS:
        return problems  # reported with the runs
    groups = _safe(lambda: {name: runs[name] for name in runs}, f"/{schema.RUNS}", [], "readable runs")
    complete = {name: g for name, g in (groups or {}).items() if _complete(g) is True}

    def actual(name: str) -> run_table.RunSummary | None:
        found: dict = {}
        if any(p.severity == "error" for p in check_run(f, name, meta, group=complete[name], found=found)[1]):
            return None  # the run's own problems are reported with it
        return run_table.summarise(name, found["attrs"], found["datasets"].get)

    return problems + [Problem(where, message, severity)
                       for severity, message in run_table.check(columns, list(complete), actual)]


