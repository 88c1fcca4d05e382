"""Runs and rows as numpy arrays: the units every divergence measure works on.

Analysis takes a *run-like* object: anything with the attribute names of the reader's `Run`
(`name`, `request_ids`, `probe_row`, `tokens`, `prompt_len`, `step`, `expert`, `gate`, `kept`, `slot`,
`group`, `router_logits`, `requested`, `load_kept`, `capacity`, `logits`), whose arrays support
numpy-style slicing. The reader's lazy `Run` is one; `RunArrays` (a run held in memory) is another,
so hand-built runs, recorded runs and counterfactual reruns go through the same code. `logits` is
the full [B, T, V] array or the top-k form (`traces.toplogits`), which indexes the same way along B
and T; `traces.analysis.next_token` measures both.

A `RowTrace` is one row of one run cropped to the row's length, in the sequence's own positions:
position p of a request is the same token in every run, which is what aligns runs by
(request, position). A `LayerArrays` is one MoE layer of a whole run: what "who displaced me" and
the expert-load view need.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traces import schema
from traces.analysis.measures import log_softmax, router_margin
from traces.analysis.next_token import margin
from traces.run_like import RunLike
from traces.schema import LOGITS_FORMS, MISSING, RUN_ARRAY_NAMES, RUN_DATASETS, topk_values
from traces.toplogits import TopLogits

#: The dataset of the router's logits (a serving engine's runs do not hold it).
ROUTER_LOGITS = schema.ROUTER_LOGITS

#: Attribute name of each per-run array on a run-like object, in schema order.
ARRAY_NAMES: tuple[str, ...] = tuple(RUN_ARRAY_NAMES.values())

#: Dimension letters of each per-run array, by attribute name (the schema's).
_DIMS: dict[str, tuple[str, ...]] = {RUN_ARRAY_NAMES[d.path]: d.dims for d in RUN_DATASETS
                                     if d.path in RUN_ARRAY_NAMES}


def _dims(name: str, value) -> tuple[str, ...]:
    return ("B", "T", "J") if isinstance(value, TopLogits) else _DIMS[name]


@dataclass(frozen=True, eq=False)
class RunArrays:
    """A run held in memory, with the reader's `Run` attribute names and dimension letters.

    `logits` may be None when next-token logits are not needed. Shapes are checked on creation;
    a mismatch raises ValueError naming the array and the dimension.
    """

    name: str
    request_ids: np.ndarray     # [B] request id of each row
    probe_row: int              # row of the probe request, -1 when there is none
    tokens: np.ndarray          # [B, T] prompt + generated ids, -1 past the row's end
    prompt_len: np.ndarray      # [B]
    step: np.ndarray            # [B, T] forward step that routed the token, -1 when not routed
    expert: np.ndarray          # [L, B, T, K] chosen experts in choice order
    gate: np.ndarray            # [L, B, T, K] weight applied (0 when dropped)
    kept: np.ndarray            # [L, B, T, K]
    slot: np.ndarray            # [L, B, T, K] rank in the expert's queue within its group
    group: np.ndarray           # [L, B, T] group id within its step
    router_logits: np.ndarray   # [L, B, T, E]
    requested: np.ndarray       # [S, L, G, E] candidates sent to each expert
    load_kept: np.ndarray       # [S, L, G, E] candidates each expert accepted
    capacity: np.ndarray        # [S, L, G] capacity C, -1 absent group, -2 dropless
    logits: np.ndarray | TopLogits | None = None  # [B, T, V] next-token logits, or [B, T, J] top-k
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sizes: dict[str, tuple[int, str]] = {}
        for name in ("request_ids", *ARRAY_NAMES):
            value = getattr(self, name)
            if value is None and name == "logits":
                continue
            array = value if isinstance(value, TopLogits) else np.asarray(value)
            object.__setattr__(self, name, array)
            dims = ("B",) if name == "request_ids" else _dims(name, array)
            if array.ndim != len(dims):
                raise ValueError(f"run {self.name!r}: {name} must be {len(dims)}-D [{', '.join(dims)}], "
                                 f"found shape {array.shape}")
            for letter, size in zip(dims, array.shape, strict=True):
                seen = sizes.setdefault(letter, (size, name))
                if seen[0] != size:
                    raise ValueError(f"run {self.name!r}: {name} has {letter} = {size}, "
                                     f"but {seen[1]} has {letter} = {seen[0]}")
        if not -1 <= int(self.probe_row) < len(self.request_ids):
            raise ValueError(f"run {self.name!r}: probe_row {self.probe_row} is not a row of a batch "
                             f"of {len(self.request_ids)}")

    @classmethod
    def from_schema(cls, name: str, arrays: dict[str, np.ndarray], *, request_ids, probe_row: int = -1,
                    attrs: dict[str, Any] | None = None) -> RunArrays:
        """A run from arrays keyed by schema path (as `TraceWriter.add_run` and `traces.synthetic` use)."""
        topk = LOGITS_FORMS["topk"]
        unknown = sorted(set(arrays) - set(RUN_ARRAY_NAMES) - set(topk))
        if unknown:
            raise ValueError(f"run {name!r}: {unknown[0]} is not a dataset of the trace schema")
        missing = [p for p, n in RUN_ARRAY_NAMES.items() if p not in arrays and n != "logits"]
        if missing:
            raise ValueError(f"run {name!r}: dataset {missing[0]} missing")
        named: dict[str, Any] = {RUN_ARRAY_NAMES[p]: a for p, a in arrays.items() if p not in topk}
        if any(p in arrays for p in topk):
            only = topk_values(attrs or {}) == "log_probs"
            named["logits"] = TopLogits.from_schema(arrays, logprobs_only=only)
        return cls(name=name, request_ids=np.asarray(request_ids), probe_row=int(probe_row),
                   attrs=dict(attrs or {}), **named)

    @property
    def batch_size(self) -> int:
        return len(self.request_ids)

    @property
    def cached_tokens(self) -> np.ndarray | None:
        """[B] prompt tokens an engine served from its prefix cache (-1 unknown); None: not an engine's."""
        cached = self.attrs.get("cached_tokens")
        return None if cached is None else np.asarray(cached, dtype=np.int64)

    @property
    def not_recorded(self) -> frozenset[str]:
        """Datasets this run does not hold because its engine does not give them (traces/absent.py)."""
        return frozenset(self.attrs.get("not_recorded") or ())

    @property
    def dims(self) -> dict[str, int]:
        """Size of each dimension letter (L, B, T, K, E, S, G and V when logits are held)."""
        out: dict[str, int] = {}
        for name in ARRAY_NAMES:
            value = getattr(self, name)
            if value is not None:
                out.update(zip(_dims(name, value), value.shape, strict=True))
        return out

    def row_length(self, b: int) -> int:
        return _row_length(self.tokens[b])

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays keyed by schema path (`"routing/expert"`, ...), as `TraceWriter.add_run` takes them."""
        out = {path: getattr(self, name) for path, name in RUN_ARRAY_NAMES.items()
               if getattr(self, name) is not None}
        if isinstance(self.logits, TopLogits):
            del out[schema.LOGITS]
            out.update(self.logits.schema_arrays())
        return out


def _row_length(tokens: np.ndarray) -> int:
    """Positions before the first MISSING token."""
    missing = np.flatnonzero(np.asarray(tokens) == MISSING)
    return int(missing[0]) if missing.size else int(np.asarray(tokens).shape[0])


@dataclass(frozen=True, eq=False)
class LayerArrays:
    """One MoE layer of a whole run: every row's routing, and the step's loads and capacities."""

    run: str
    layer: int
    request_ids: np.ndarray   # [B]
    probe_row: int
    step: np.ndarray          # [B, T]
    group: np.ndarray         # [B, T]
    expert: np.ndarray        # [B, T, K]
    slot: np.ndarray          # [B, T, K]
    kept: np.ndarray          # [B, T, K]
    capacity: np.ndarray      # [S, G]
    requested: np.ndarray     # [S, G, E]
    load_kept: np.ndarray     # [S, G, E]


def layer_routing(run: RunLike, layer: int) -> LayerArrays:
    """Layer `layer` of a run-like object (reader `Run` or `RunArrays`) as a `LayerArrays`."""
    L = int(run.expert.shape[0])
    if not 0 <= layer < L:
        raise ValueError(f"run {run.name!r} has MoE layers 0..{L - 1}, not {layer}")
    return LayerArrays(
        run=run.name, layer=layer, request_ids=np.asarray(run.request_ids), probe_row=int(run.probe_row),
        step=np.asarray(run.step[...]), group=np.asarray(run.group[layer]),
        expert=np.asarray(run.expert[layer]), slot=np.asarray(run.slot[layer]),
        kept=np.asarray(run.kept[layer]), capacity=np.asarray(run.capacity[:, layer]),
        requested=np.asarray(run.requested[:, layer]), load_kept=np.asarray(run.load_kept[:, layer]),
    )


@dataclass(frozen=True, eq=False)
class RowTrace:
    """One row of one run, cropped to the row's length T (its own sequence positions)."""

    run: str
    row: int
    request: int
    is_probe: bool
    prompt_len: int
    tokens: np.ndarray          # [T]
    step: np.ndarray            # [T] forward step that routed the token, -1 when not routed
    expert: np.ndarray          # [L, T, K]
    gate: np.ndarray            # [L, T, K]
    kept: np.ndarray            # [L, T, K]
    slot: np.ndarray            # [L, T, K]
    group: np.ndarray           # [L, T]
    router_logits: np.ndarray   # [L, T, E]
    logits: np.ndarray | TopLogits | None = None  # [T, V], or the top-k form [T, J]
    #: Gives a whole layer of this row's run, for "who displaced me"; None when not available.
    layer_source: Callable[[int], LayerArrays] | None = field(default=None, repr=False)
    #: Datasets the row's run does not hold (an engine's run, `Run.not_recorded`): their arrays
    #: here are the reader's stand-ins, which no comparison reads as recorded values.
    not_recorded: frozenset[str] = frozenset()
    cached_tokens: int = 0  # prompt tokens an engine served from its prefix cache, -1 unknown

    def __post_init__(self) -> None:
        T = self.tokens.shape[0]
        L = self.expert.shape[0]
        for name, want in (("step", (T,)), ("expert", (L, T)), ("gate", (L, T)), ("kept", (L, T)),
                           ("slot", (L, T)), ("group", (L, T)), ("router_logits", (L, T))):
            shape = np.shape(getattr(self, name))
            if shape[: len(want)] != want:
                raise ValueError(f"row {self.row} of run {self.run!r}: {name} has shape {shape}, "
                                 f"expected leading dims {want}")
        if self.logits is not None and self.logits.shape[0] != T:
            raise ValueError(f"row {self.row} of run {self.run!r}: logits cover {self.logits.shape[0]} "
                             f"positions, tokens {T}")
        if not 0 <= self.prompt_len <= T:
            raise ValueError(f"row {self.row} of run {self.run!r}: prompt_len {self.prompt_len} "
                             f"outside 0..{T}")

    @property
    def length(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_layers(self) -> int:
        return int(self.expert.shape[0])

    @property
    def label(self) -> str:
        return f"run {self.run} row {self.row}"

    @property
    def router_recorded(self) -> bool:
        """False for a run whose router logits were not recorded (a serving engine's, `Run.not_recorded`:
        the reader gives NaN for them)."""
        if self.not_recorded:
            return ROUTER_LOGITS not in self.not_recorded
        z = np.asarray(self.router_logits[:, :1])
        return not (z.size and np.isnan(z).all())

    def recorded(self, path: str) -> bool:
        """Whether the row's run holds dataset `path` (`routing/gate`, ...) rather than a stand-in."""
        return path not in self.not_recorded if path != ROUTER_LOGITS else self.router_recorded

    # Per-row quantities every pair with this row needs: computed once, kept with the row.
    @functools.cached_property
    def log_probs(self) -> np.ndarray | None:
        """[T, V] float64 log softmax of the full next-token logits (None without them)."""
        return log_softmax(self.logits) if isinstance(self.logits, np.ndarray) else None

    @functools.cached_property
    def probs(self) -> np.ndarray | None:
        """[T, V] float64 next-token distribution (None without full logits)."""
        return None if self.log_probs is None else np.exp(self.log_probs)

    @functools.cached_property
    def logit_margin(self) -> np.ndarray | None:
        """[T] top-1 minus top-2 next-token logit, exact in both forms (None without logits)."""
        return None if self.logits is None else margin(self.logits)

    @functools.cached_property
    def router_margin(self) -> np.ndarray:
        """[L, T] router margin z_(K) - z_(K+1), NaN where the token was not routed."""
        margin = router_margin(self.router_logits, self.expert.shape[2])
        return np.where(self.step >= 0, margin, np.nan)

    def layer(self, l: int) -> LayerArrays:
        """Layer `l` of this row's whole run (all rows); ValueError when the run is not at hand."""
        if self.layer_source is None:
            raise ValueError(f"{self.label}: the whole run is not available (no layer source)")
        return self.layer_source(l)


def row_trace(run: RunLike, b: int, *, logits: bool = True) -> RowTrace:
    """Row `b` of a run-like object (reader `Run` or `RunArrays`), read and cropped to its length.

    `logits=False` skips the [T, V] next-token logits (the largest array) when they are not needed.
    """
    B = len(run.request_ids)
    if not 0 <= b < B:
        raise ValueError(f"run {run.name!r} has rows 0..{B - 1}, not {b}")
    tokens = np.asarray(run.tokens[b])
    T = _row_length(tokens)
    row_logits = run.logits[b, :T] if logits and run.logits is not None else None  # an array, or top-k
    cached = run.cached_tokens
    return RowTrace(
        run=run.name, row=b, request=int(run.request_ids[b]), is_probe=(b == int(run.probe_row)),
        prompt_len=int(run.prompt_len[b]), tokens=tokens[:T], step=np.asarray(run.step[b, :T]),
        expert=np.asarray(run.expert[:, b, :T]), gate=np.asarray(run.gate[:, b, :T]),
        kept=np.asarray(run.kept[:, b, :T]), slot=np.asarray(run.slot[:, b, :T]),
        group=np.asarray(run.group[:, b, :T]), router_logits=np.asarray(run.router_logits[:, b, :T]),
        logits=row_logits, layer_source=functools.partial(layer_routing, run),
        not_recorded=frozenset(run.not_recorded), cached_tokens=0 if cached is None else int(cached[b]),
    )
