"""Schema v2 of the MoE routing trace: every name, dtype and dimension letter in one place.

Dimension letters (used in code, HDF5 dimension labels and the UI):
L MoE layers, B batch rows, T token positions, K experts per token (top-k), E experts,
V vocabulary, J next-token logits kept per position (top-J), S forward steps, G groups within a
step, R requests.

Version 2 adds the top-k form of the next-token logits (`logits_topk/*`) beside the full `logits`;
a run holds exactly one form. A version-1 file is a version-2 file with full logits only, so the
same reader reads both.

`docs/trace-format.md` is the human-readable spec of this module; keep them in step and bump
`FORMAT_VERSION` on every change to names, shapes or meanings.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from traces.records import (  # noqa: F401  (re-exported: the schema names every record and rule)
    JSON_KINDS,
    KERNEL_MODES,
    RECORDS,
    TOPK_VALUES,
    Attr,
    KernelMode,
    Record,
    RootMeta,
    RunAttrs,
    attr,
    root_problems,
    run_problems,
)

FORMAT = "moe-routing-trace"
FORMAT_VERSION = 2
#: Versions this reader reads.
READABLE_VERSIONS = (1, 2)

#: Fill value for positions past a row's end (tokens, step, expert, slot, group).
MISSING = -1

#: Capacity value stored for dropless routing (no candidate can overflow).
DROPLESS_CAPACITY = -2

#: Capacity value stored for a group that does not exist in that step (fewer groups than G).
ABSENT_GROUP = -1

DIM_LETTERS = ("L", "B", "T", "K", "E", "V", "J", "S", "G", "R")

# Where things live inside the file.
VOCAB = "vocab"
REQUESTS = "requests"
REQUEST_TEXT = "requests/text"
REQUEST_TOKENS = "requests/tokens"
REQUEST_OFFSETS = "requests/offsets"
RUNS = "runs"
TABLES = "tables"

# Datasets of a run (paths inside its group); `RUN_DATASETS` below says their shapes and dtypes.
TOKENS = "tokens"
PROMPT_LEN = "prompt_len"
STEP = "step"
EXPERT = "routing/expert"
GATE = "routing/gate"
KEPT = "routing/kept"
SLOT = "routing/slot"
GROUP = "routing/group"
ROUTER_LOGITS = "routing/router_logits"
LOAD_REQUESTED = "load/requested"
LOAD_KEPT = "load/kept"
LOAD_CAPACITY = "load/capacity"
LOGITS = "logits"
TOPK_INDEX = "logits_topk/index"
TOPK_VALUE = "logits_topk/value"
TOPK_LSE = "logits_topk/lse"
TOPK_CHOSEN = "logits_topk/chosen"

#: Positions per chunk along T: a 512-token window of one (layer, row) is one chunk.
CHUNK_T = 512
#: Target bytes of one chunk of the small per-step load arrays (they are chunked along S only).
LOAD_CHUNK_BYTES = 1 << 16
#: Most bytes of any chunk, whatever the vocabulary or expert count: h5py's default chunk cache
#: holds 1 MiB, and a chunk larger than the cache is read (and decompressed) again on every access.
MAX_CHUNK_BYTES = 1 << 20
#: Most groups under /runs a reader walks (a trace of 10,000 runs opens; a file of more is refused,
#: not listed for minutes).
MAX_RUNS = 16384


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of a run: its path inside the run group, dimension letters and dtype kind."""

    path: str
    dims: tuple[str, ...]
    dtypes: tuple[str, ...]  # accepted numpy dtype names; the writer uses the first
    meaning: str
    required: bool = True
    fill: float | int | bool = MISSING  # value past a row's end (and HDF5 fill value)

    @property
    def ndim(self) -> int:
        return len(self.dims)


# The root and run attributes are the fields of the records `RootMeta` and `RunAttrs`
# (traces/records.py); these name them as the writer, the validator and the docs group them.
ROOT_ATTRS: dict[str, str] = RootMeta.meanings()
#: Root attributes the writer fills itself; `meta` gives every other one.
WRITER_ROOT_ATTRS = RootMeta.names(by_writer=True)
#: Root attributes without which a file cannot be read (the others only give warnings).
REQUIRED_ROOT_ATTRS = RootMeta.names(presence="required")
#: Root attributes a writer may leave out without a warning (older traces lack them).
OPTIONAL_ROOT_ATTRS = RootMeta.names(presence="optional")
#: Root attributes stored as JSON text.
JSON_ROOT_ATTRS = RootMeta.names(kinds=JSON_KINDS)

RUN_ATTRS: dict[str, str] = RunAttrs.meanings()
#: Run attributes the writer fills itself.
WRITER_RUN_ATTRS = RunAttrs.names(by_writer=True)
#: Run attributes without which a run cannot be read (the others only give warnings).
REQUIRED_RUN_ATTRS = RunAttrs.names(presence="required")
#: Run attributes a run may leave out without a warning.
OPTIONAL_RUN_ATTRS = RunAttrs.names(presence="optional")
#: Run attributes stored as JSON text.
JSON_RUN_ATTRS = RunAttrs.names(kinds=JSON_KINDS)

RUN_DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec(TOKENS, ("B", "T"), ("int32",), "prompt + generated token ids, -1 past the row's end"),
    DatasetSpec(PROMPT_LEN, ("B",), ("int32",), "prompt length of each row", fill=0),
    DatasetSpec(STEP, ("B", "T"), ("int16",),
                "forward step that routed the token (0 = prefill), -1 past end"),
    DatasetSpec(EXPERT, ("L", "B", "T", "K"), ("int16",), "chosen experts in choice order"),
    DatasetSpec(GATE, ("L", "B", "T", "K"), ("float32", "float16"),
                "weight applied (0 when dropped)", fill=0.0),
    DatasetSpec(KEPT, ("L", "B", "T", "K"), ("bool",),
                "candidate kept (true) or dropped (false)", fill=False),
    DatasetSpec(SLOT, ("L", "B", "T", "K"), ("int32",),
                "rank in that expert's queue within its group"),
    DatasetSpec(GROUP, ("L", "B", "T"), ("int32",), "group id within its step"),
    DatasetSpec(ROUTER_LOGITS, ("L", "B", "T", "E"), ("float32", "float16"), "router logits",
                fill=0.0),
    DatasetSpec(LOAD_REQUESTED, ("S", "L", "G", "E"), ("int32",), "candidates sent to each expert", fill=0),
    DatasetSpec(LOAD_KEPT, ("S", "L", "G", "E"), ("int32",), "candidates each expert accepted", fill=0),
    DatasetSpec(LOAD_CAPACITY, ("S", "L", "G"), ("int32",), "capacity C per group, -1 for absent groups, "
                "-2 for dropless"),
    DatasetSpec(LOGITS, ("B", "T", "V"), ("float32", "float16"), "next-token logits at every position",
                required=False, fill=0.0),
    DatasetSpec(TOPK_INDEX, ("B", "T", "J"), ("int32",),
                "vocabulary ids of the J largest next-token logits, largest first", required=False),
    DatasetSpec(TOPK_VALUE, ("B", "T", "J"), ("float32", "float16"), "those logits",
                required=False, fill=0.0),
    DatasetSpec(TOPK_LSE, ("B", "T"), ("float32",), "log-sum-exp of all V logits",
                required=False, fill=0.0),
    DatasetSpec(TOPK_CHOSEN, ("B", "T"), ("float32", "float16"),
                "logit of the token that follows (the prompt's next token, then the greedy choice)",
                required=False, fill=0.0),
)

DATASETS_BY_PATH: dict[str, DatasetSpec] = {d.path: d for d in RUN_DATASETS}

#: Required datasets a serving engine may leave out (it returns the chosen experts, not the router's
#: logits or weights, and no capacity, queue or per-forward-step load): a run whose attribute
#: `not_recorded` lists some of them holds none of those. Readers say what is missing by reading
#: `not_recorded`, never by the engine's name.
ENGINE_OMITTABLE = (GATE, KEPT, SLOT, GROUP, ROUTER_LOGITS, LOAD_REQUESTED, LOAD_KEPT, LOAD_CAPACITY)

#: The two forms of the next-token logits: a run holds every dataset of exactly one (schema v1: full).
LOGITS_FORMS: dict[str, tuple[str, ...]] = {
    "full": (LOGITS,),
    "topk": (TOPK_INDEX, TOPK_VALUE, TOPK_LSE, TOPK_CHOSEN),
}
#: Default J of the top-k form.
DEFAULT_LOGITS_K = 64

#: Lazy-array attribute name of each dataset on a reader's `Run` (`routing/kept` -> `kept`); both
#: forms of the next-token logits are the one attribute `logits`.
RUN_ARRAY_NAMES: dict[str, str] = {
    d.path: ("load_kept" if d.path == LOAD_KEPT else d.path.rsplit("/", 1)[-1])
    for d in RUN_DATASETS if d.path not in LOGITS_FORMS["topk"]
}


def topk_values(attrs) -> str:
    """What a run's `logits_topk/value` holds, from its attributes: `topk_values` when given, else
    "log_probs" for an engine's run (one that lists `not_recorded`; older engine traces lack the
    attribute) and "logits" for the project's loop."""
    return str(attrs.get("topk_values") or ("log_probs" if attrs.get("not_recorded") else "logits"))


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a table the writer keeps itself: name, numpy dtype name ("str": UTF-8 text,
    "json": UTF-8 JSON text) and meaning."""

    name: str
    dtype: str
    meaning: str


#: The run summary table, `/tables/run_summary` (docs/trace-format.md): one row per complete run, what
#: a run browser shows of it, added by the writer in the same commit as its run so that a reader lists
#: thousands of runs from one table instead of opening every run. Its attributes name its kind and
#: version (tables are versioned on their own: a reader ignores a kind or version it does not know).
RUN_SUMMARY_TABLE = "run_summary"
RUN_SUMMARY_KIND = "run_summary"
RUN_SUMMARY_VERSION = 1
#: The "focus row" of a run is its probe row, or row 0 when it has no probe.
RUN_SUMMARY_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("run", "str", "run name (a group under /runs)"),
    ColumnSpec("index", "int64", "the run's index attribute (write order)"),
    ColumnSpec("condition", "str", "the run's condition attribute ('' when it has none)"),
    ColumnSpec("label", "str", "the run's label attribute"),
    ColumnSpec("experiment", "str", "the run's experiment attribute"),
    ColumnSpec("kernel_mode", "str", "the run's kernel_mode attribute"),
    ColumnSpec("routing", "json", "the run's routing attribute as stored ('' when it has none)"),
    ColumnSpec("batch_size", "int32", "B"),
    ColumnSpec("request_ids", "json", "the run's request_ids attribute, a JSON list of B ints"),
    ColumnSpec("probe_row", "int32", "the run's probe_row attribute (-1: none)"),
    ColumnSpec("prompt_len", "int32", "prompt length of the focus row"),
    ColumnSpec("completion", "json", "generated token ids of the focus row (tokens[focus, "
                                     "prompt_len:n]), a JSON list"),
    ColumnSpec("requested", "int64", "candidates of the whole batch: the sum of load/requested"),
    ColumnSpec("dropped", "int64", "dropped candidates of the whole batch: requested less the sum of "
                                   "load/kept"),
    ColumnSpec("focus_dropped", "int64", "dropped candidates of the focus row: false entries of "
                                         "routing/kept[:, focus, :n]"),
    ColumnSpec("reference", "str", "the run its focus row is compared with: the first run (write order) "
                                   "of its focus request and condition, the run itself for that first "
                                   "run (traces/analysis/reference.py)"),
    ColumnSpec("first_difference", "int32", "position (prompt_len + new-token index) of the first "
                                            "generated token where the focus completion differs from "
                                            "the reference's (a length difference counts); -1 none"),
)
#: Rows per chunk of the run summary table's columns (stored uncompressed, so a row appended rewrites
#: its chunk in place).
RUN_SUMMARY_CHUNK = 64


def run_datasets(form: str = "full", not_recorded=()) -> tuple[DatasetSpec, ...]:
    """The datasets of a run whose logits are in `form`, less those `not_recorded` (ENGINE_OMITTABLE)."""
    return tuple(d for d in RUN_DATASETS if (d.required or d.path in LOGITS_FORMS[form])
                 and d.path not in not_recorded)


def logits_form(paths) -> tuple[str | None, str]:
    """The logits form ("full", "topk" or None) of a run holding the datasets `paths`, and what is
    wrong ('' when the run holds exactly one whole form)."""
    present = {form: [p for p in names if p in paths] for form, names in LOGITS_FORMS.items()}
    whole = [form for form, names in LOGITS_FORMS.items() if len(present[form]) == len(names)]
    partial = [form for form in LOGITS_FORMS if present[form] and form not in whole]
    if len(whole) == 1 and not partial:
        return whole[0], ""
    if whole or partial:
        held = ", ".join(p for form in LOGITS_FORMS for p in present[form])
        return None, f"expected the datasets of one logits form (logits, or all of logits_topk/*), " \
                     f"found {held}"
    return None, "expected next-token logits: dataset logits or the datasets logits_topk/*"


def dtype_ok(spec: DatasetSpec, dtype: np.dtype) -> bool:
    """Whether `dtype` is one of the dtypes the spec accepts."""
    return _dtype_name(dtype) in spec.dtypes


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    """numpy's name of `dtype` (worked out anew on every `.name`, a few µs each)."""
    return np.dtype(dtype).name


def chunk_shape(spec: DatasetSpec, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...] | None:
    """Chunk shape of a dataset so one run, one layer or one window of positions reads only its chunks.

    Per-token arrays take one (layer, row) and up to `CHUNK_T` positions per chunk with the whole
    K, E or V axis; per-step load arrays take whole (L, G, E) blocks and as many steps as fit in
    `LOAD_CHUNK_BYTES`. No chunk exceeds `MAX_CHUNK_BYTES`: fewer positions (or steps) first, then
    the innermost axes are split. None (contiguous) for empty datasets, which HDF5 cannot chunk.
    """
    if not shape or 0 in shape:
        return None
    if spec.dims[0] == "S":
        inner = math.prod(shape[1:]) * itemsize
        chunk = [max(1, min(shape[0], LOAD_CHUNK_BYTES // max(inner, 1))), *shape[1:]]
        first = 0
    else:
        chunk = []
        for letter, size in zip(spec.dims, shape, strict=True):
            if letter in ("L",) or (letter == "B" and len(spec.dims) > 1):
                chunk.append(1)
            elif letter == "T":
                chunk.append(min(size, CHUNK_T))
            else:
                chunk.append(size)
        first = spec.dims.index("T") if "T" in spec.dims else len(chunk) - 1
    return _capped(chunk, itemsize, first)


def _capped(chunk: list[int], itemsize: int, first: int) -> tuple[int, ...]:
    """`chunk` shrunk to at most `MAX_CHUNK_BYTES`: axis `first` (T, or S) first, then the others
    from the innermost out, each only as far as needed."""
    order = [first, *(a for a in reversed(range(len(chunk))) if a != first)]
    for axis in order:
        others = math.prod(n for a, n in enumerate(chunk) if a != axis) * itemsize
        if others * chunk[axis] <= MAX_CHUNK_BYTES:
            break
        chunk[axis] = max(1, MAX_CHUNK_BYTES // max(others, 1))
    return tuple(int(n) for n in chunk)


def collect_dims(
    shapes: dict[str, tuple[int, ...]],
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Dimension sizes (letter -> size) implied by run dataset shapes, and every conflict found.

    `shapes` maps schema paths to shapes; unknown paths are ignored. A conflict is `(path, message)`
    where the message says what was expected: `"expected dim B = 4 (as in tokens), found 3"`.
    """
    dims: dict[str, int] = {}
    origin: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for spec in RUN_DATASETS:
        if spec.path not in shapes:
            continue
        shape = tuple(int(n) for n in shapes[spec.path])
        if len(shape) != spec.ndim:
            problems.append((spec.path, f"expected {spec.ndim}-D array [{', '.join(spec.dims)}], "
                                        f"found shape {shape}"))
            continue
        for letter, size in zip(spec.dims, shape, strict=True):
            if letter not in dims:
                dims[letter], origin[letter] = size, spec.path
            elif dims[letter] != size:
                problems.append((spec.path, f"expected dim {letter} = {dims[letter]} "
                                            f"(as in {origin[letter]}), found {size} in shape {shape}"))
    return dims, problems


def empty_run_arrays(sizes: dict[str, int], form: str | None = "full") -> dict[str, np.ndarray]:
    """Every dataset of a run whose logits are in `form` (None: no logits), shaped by the dimension
    `sizes` ({'B': 4, 'T': 40, ...}), in its first dtype and filled with its fill value: what a
    recorder fills in before handing the run to the writer."""
    specs = [d for d in RUN_DATASETS if d.required or (form is not None and d.path in LOGITS_FORMS[form])]
    return {d.path: np.full(tuple(sizes[letter] for letter in d.dims), d.fill, np.dtype(d.dtypes[0]))
            for d in specs}
