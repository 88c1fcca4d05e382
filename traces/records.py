"""The trace's records: the root metadata (`RootMeta`) and the attributes of a run (`RunAttrs`).

Each record is a frozen dataclass declared once here; every field carries how it is stored (`Attr`:
its HDF5 or JSON type, meaning, whether a file is readable without it, whether the writer fills it)
and its default. Producers build records, the writer turns them into HDF5 attributes (`to_attrs`),
and a reader turns stored attributes back into a record (`from_attrs`: fields a file lacks, being
older than them, take their defaults). One rule function per record (`root_problems`,
`run_problems`) says what is wrong with a set of attributes: the writer raises on the first, the
validator collects them all.

To add a run attribute, add one field to `RunAttrs` (docs/api.md, "Adding a run attribute"): the
writer stores it, the validator checks its type, the reader decodes it and `info` shows it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING as NO_DEFAULT
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar, cast

import numpy as np

from traces.vocabulary import Vocabulary


class KernelMode(Vocabulary):
    """How the model computes (`model.kernels`), stored in a trace's meta and in each run."""

    NATIVE = "native"                    # torch's own kernels: a row's bits may depend on its batch
    BATCH_INVARIANT = "batch_invariant"  # fixed reduction orders: a row's bits do not


#: Kernel modes of the model, as stored.
KERNEL_MODES = KernelMode.names()
#: What `logits_topk/value` may hold (run attribute `topk_values`).
TOPK_VALUES = ("logits", "log_probs")

#: How an attribute is stored: HDF5 text, integer, float (an integer reads as one), bool, a 1-D
#: integer array, or JSON text of an object ("json") or a list ("json_list").
KINDS = ("str", "int", "float", "bool", "ints", "json", "json_list")
JSON_KINDS = ("json", "json_list")
#: Presence: "required" (a file is unreadable without it), "expected" (a writer must give it, a
#: reader warns when it is absent) or "optional" (older traces lack it; no warning).
PRESENCES = ("required", "expected", "optional")


@dataclass(frozen=True)
class Attr:
    """How one field of a record is stored and checked."""

    kind: str
    meaning: str
    presence: str = "expected"
    by_writer: bool = False                # filled by the writer, never given by a producer
    choices: tuple[str, ...] = ()          # the values a "str" attribute may hold (empty: any)
    wrong_choice: str = "error"            # severity of a value outside `choices` in a file read
    info: bool = False                     # `moe-inspector info` shows it as "key: value"

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.presence not in PRESENCES:
            raise ValueError(f"Attr: kind must be one of {KINDS} and presence one of {PRESENCES}")

    @property
    def json(self) -> bool:
        return self.kind in JSON_KINDS


def attr(kind: str, meaning: str, *, default=NO_DEFAULT, presence: str = "expected", **more):
    """A record field stored as `kind` (see `Attr`); optional and writer-filled fields default to None."""
    spec = Attr(kind, meaning, presence, **more)
    if default is NO_DEFAULT and (presence == "optional" or spec.by_writer):
        default = None
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata={"attr": spec})
    return field(default=default, metadata={"attr": spec})


R = TypeVar("R", bound="Record")


@dataclass(frozen=True)
class Record:
    """Shared behaviour of the records: their specs, and conversion to and from stored attributes."""

    @classmethod
    def specs(cls) -> dict[str, Attr]:
        """Field name -> `Attr`, in declaration order."""
        return {f.name: f.metadata["attr"] for f in fields(cls)}

    @classmethod
    def meanings(cls) -> dict[str, str]:
        return {name: spec.meaning for name, spec in cls.specs().items()}

    @classmethod
    def names(cls, *, presence: str | None = None, by_writer: bool | None = None,
              kinds: tuple[str, ...] | None = None) -> tuple[str, ...]:
        """Names of the fields with that presence, filled (or not) by the writer, of those kinds."""
        return tuple(name for name, s in cls.specs().items()
                     if (presence is None or s.presence == presence)
                     and (by_writer is None or s.by_writer == by_writer)
                     and (kinds is None or s.kind in kinds))

    def to_attrs(self) -> dict[str, object]:
        """The attributes to store: every field that is not None, JSON ones as Python values."""
        out: dict[str, object] = {}
        for name, spec in self.specs().items():
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = np.asarray(value, np.int32) if spec.kind == "ints" else value
        return out

    def without_writer_fields(self):
        """The record less the fields the writer fills: a record read back, to write again."""
        return replace(self, **{name: None for name, spec in self.specs().items() if spec.by_writer})

    @classmethod
    def default(cls, name: str) -> object:
        """The value field `name` takes when a file lacks it (None when it has no default)."""
        f = next(f for f in fields(cls) if f.name == name)
        if f.default_factory is not NO_DEFAULT:
            return f.default_factory()
        return None if f.default is NO_DEFAULT else f.default

    @classmethod
    def from_attrs(cls: type[R], attrs: Mapping[str, object]) -> R:
        """The record of stored attributes (JSON text decoded); fields they lack take their defaults,
        attributes the record does not declare are left out."""
        values = {}
        for name, spec in cls.specs().items():
            if name in attrs and attrs[name] is not None:
                value = attrs[name]
                if spec.json and isinstance(value, str):
                    value = json.loads(value)
                values[name] = value
        return cls(**values)


def _tuple_of_ints(record, name: str) -> None:
    value = getattr(record, name)
    if value is not None and not isinstance(value, tuple):
        object.__setattr__(record, name, tuple(int(v) for v in np.asarray(value).reshape(-1)))


@dataclass(frozen=True, kw_only=True)
class RootMeta(Record):
    """The root attributes of a trace (schema v2)."""

    format: str | None = attr("str", "always \"moe-routing-trace\"", presence="required", by_writer=True)
    format_version: int | None = attr("int", "integer schema version", presence="required", by_writer=True)
    created: str | None = attr("str", "ISO 8601 time the file was created", by_writer=True)
    producer: str | None = attr("str", "package and version that wrote the file", by_writer=True)
    model_config: dict = attr("json", "JSON of the model configuration", presence="required")
    moe_layers: list = attr("json_list", "JSON list: model layer index of each MoE layer (length L)",
                            presence="required")
    tokenizer: str = attr("str", '"bytes" (UTF-8 bytes plus special tokens) or another tokenizer name',
                          default="bytes")
    routing: dict = attr("json", "JSON of the default resolved routing knobs (each run stores its own too)",
                         presence="required")
    kernel_mode: str = attr("str", '"native" or "batch_invariant" (default; each run stores its own too)',
                            presence="required", default=KernelMode.NATIVE.value, choices=KERNEL_MODES,
                            wrong_choice="warning")
    device: str = attr("str", "torch device the runs were computed on", default="cpu")
    dtype: str = attr("str", "compute dtype of the model", default="float32")
    torch_version: str = attr("str", "torch version", default="none")
    seed: int = attr("int", "seed of the recording session", default=0)
    machine: dict | None = attr("json", "JSON object: fingerprint of the machine that computed the runs "
                                "(CPU, kernels, threads, libraries, GPU, kernel environment variables); "
                                "optional", presence="optional")
    model_source: str | None = attr("str", '"huggingface" for a transformers model (docs/hf-models.md); '
                                    "absent for the shipped model; optional", presence="optional")
    checkpoint: str | None = attr("str", "the model explain reruns: a Hugging Face folder or hub id; "
                                  "optional", presence="optional")
    kernel_coverage: dict | None = attr("json", "JSON object: per kernel mode, what it covers for a Hugging "
                                        "Face model (linear layers, expert GEMMs, attention, routing); "
                                        "optional", presence="optional")
    engine: dict | None = attr("json", "JSON object: the serving engine that generated the runs (name, "
                               "package, version, settings, engine arguments); absent for the project's "
                               "own loop; optional", presence="optional")


@dataclass(frozen=True, kw_only=True)
class RunAttrs(Record):
    """The attributes of one run (schema v2)."""

    request_ids: tuple[int, ...] = attr("ints", "int array [B]: the request id in each row",
                                        presence="required")
    probe_row: int = attr("int", "row of the probe request in this batch, -1 when there is none",
                          presence="required", default=-1)
    batch_size: int = attr("int", "B", presence="required")
    # None only in a file that lacks it (a reader warns); a writer refuses a run without it.
    max_new_tokens: int | None = attr("int", "new tokens generated per row", default=None)
    label: str = attr("str", "human label of the composition", default="", info=True)
    condition: str = attr("str", "experiment condition this run belongs to (e.g. 'batch cf=1.0 native')",
                          default="", info=True)
    experiment: str = attr("str", "experiment id (E0, E1, E3, E4, E7, example, ...)", default="", info=True)
    routing: dict = attr("json", "JSON of the resolved routing knobs used for this run", default={})
    kernel_mode: str = attr("str", '"native" or "batch_invariant"', default=KernelMode.NATIVE.value,
                            choices=KERNEL_MODES)
    seed: int = attr("int", "RNG seed of this run", default=0)
    wall_time_s: float = attr("float", "seconds the generation took", default=0.0)
    index: int | None = attr("int", "order in which the run was written", presence="required",
                             by_writer=True)
    not_recorded: list | None = attr(
        "json_list", "JSON list: datasets of ENGINE_OMITTABLE this run does not hold, because the engine "
        "that generated it does not give them (absent: the run holds them all)", presence="optional")
    topk_values: str | None = attr(
        "str", '"logits" (absent: logits unless the run lists not_recorded) or "log_probs": what '
        'logits_topk/value holds; an engine returns log-probabilities only (stored with lse = 0), so a '
        'pair with such a run compares log-probabilities (traces/analysis/next_token.py)',
        presence="optional", choices=TOPK_VALUES)
    cached_tokens: list | None = attr(
        "json_list", "JSON list [B]: prompt tokens of each row the engine served from its prefix cache "
        "(their routing is that of the request that first computed them); -1 where the engine did not "
        "say; absent for the project's loop", presence="optional")
    route_check: dict | None = attr(
        "json", "JSON object: the spot check of an engine's recorded routes against the router "
        "(traces/route_check.py); absent for the project's loop", presence="optional")
    complete: bool | None = attr("bool", "false until every dataset of the run is written and flushed",
                                 presence="required", by_writer=True)

    def __post_init__(self) -> None:
        _tuple_of_ints(self, "request_ids")


#: The record of each kind that the writer, the validator, the reader and `info` read. A field
#: added to the classes above is seen by all of them; a test may put a record that extends one here.
RECORDS: dict[str, type[Record]] = {"root": RootMeta, "run": RunAttrs}


def root_record() -> type[RootMeta]:
    """The root record in force (a test may extend it, see `RECORDS`)."""
    return cast("type[RootMeta]", RECORDS["root"])


def run_record() -> type[RunAttrs]:
    """The run record in force (a test may extend it, see `RECORDS`)."""
    return cast("type[RunAttrs]", RECORDS["run"])


# -- rules ----------------------------------------------------------------------------------------

def well_typed(spec: Attr, value) -> bool:
    """Whether `value` (JSON decoded) is of the attribute's kind."""
    if spec.kind == "str":
        return isinstance(value, str)
    if spec.kind == "bool":
        return isinstance(value, bool | np.bool_)
    if spec.kind == "int":
        return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if spec.kind == "float":
        number = isinstance(value, int | float | np.integer | np.floating)
        return number and not isinstance(value, bool | np.bool_)
    if spec.kind == "ints":
        return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu"
    return isinstance(value, dict if spec.kind == "json" else list)


_TYPE_NAMES = {"str": "str", "int": "int", "float": "float", "bool": "bool", "ints": "1-D int array",
               "json": "JSON object", "json_list": "JSON list"}


def _field_problems(record: type[Record], attrs: Mapping[str, object], writing: bool,
                    what: str) -> list[tuple[str, str]]:
    """(severity, message) of each field's presence, type and choices."""
    out: list[tuple[str, str]] = []
    specs = record.specs()
    if writing:
        given = [k for k in attrs if k in specs and specs[k].by_writer]
        if given:
            out.append(("error", f"{given[0]!r} is filled by the writer"))
        missing = [k for k, s in specs.items()
                   if not s.by_writer and s.presence != "optional" and k not in attrs]
        if missing:
            out.append(("error", f"missing {what} attributes {missing}"))
    for key, spec in specs.items():
        if key not in attrs:
            if not writing and spec.presence != "optional":
                out.append(("error", f"expected attribute {key!r}") if spec.presence == "required" else
                           ("warning", f"expected attribute {key!r} (optional)"))
            continue
        value = attrs[key]
        if not well_typed(spec, value):
            out.append(("error", f"expected attribute {key!r} of type {_TYPE_NAMES[spec.kind]}, "
                                 f"found {value!r:.60}"))
        elif spec.choices and value not in spec.choices:
            out.append(("error" if writing else spec.wrong_choice,
                        f"expected attribute {key!r} in {spec.choices}, found {value!r:.40}"))
    return out


def root_problems(attrs: Mapping[str, object], *, writing: bool = False) -> list[tuple[str, str]]:
    """(severity, message) of every problem of a trace's root attributes (JSON ones decoded):
    `writing` checks what a producer gives (every field the writer does not fill)."""
    record = root_record()
    out = _field_problems(record, attrs, writing, "root")
    layers = attrs.get("moe_layers")
    if isinstance(layers, list) and not all(isinstance(i, int) and not isinstance(i, bool) for i in layers):
        out.append(("error", "expected attribute 'moe_layers' to be a JSON list of ints"))
    return out


def run_problems(attrs: Mapping[str, object], *, B: int | None = None, R: int | None = None,
                 omittable: tuple[str, ...] = (), writing: bool = False) -> list[tuple[str, str]]:
    """(severity, message) of every problem of a run's attributes (JSON ones decoded), against the
    batch size `B` of its arrays and the `R` requests of the pool (None: not known). `omittable`:
    the datasets an engine may leave out (schema.ENGINE_OMITTABLE). The verdict of the route check
    is the validator's (traces/route_check.py): a writer records it as given."""
    specs = run_record().specs()
    out = _field_problems(run_record(), attrs, writing, "run")
    typed: dict[str, Any] = {k: v for k, v in attrs.items() if k in specs and well_typed(specs[k], v)}
    request_ids = typed.get("request_ids")
    if "request_ids" in attrs and request_ids is None:
        pass  # its type is reported above
    elif request_ids is not None and B is not None and request_ids.shape[0] != B:
        out.append(("error", f"expected attribute 'request_ids' of {B} ints (one per row), "
                             f"found {request_ids!r:.60}"))
    elif request_ids is not None and R is not None and request_ids.size and (
            request_ids.min() < 0 or request_ids.max() >= R):
        out.append(("error", f"expected request_ids in [0, {R}) (the request pool), found {request_ids}"))
    batch_size, probe_row = typed.get("batch_size"), typed.get("probe_row")
    if batch_size is not None and B is not None and batch_size != B:
        out.append(("error", f"expected batch_size = B = {B}, found {batch_size}"))
    if probe_row is not None and B is not None and not -1 <= probe_row < B:
        out.append(("error", f"expected probe_row in [-1, {B}), found {probe_row}"))
    not_recorded = typed.get("not_recorded") or []
    wrong = [p for p in not_recorded if p not in omittable]
    if wrong:
        out.append(("error", f"expected attribute 'not_recorded' to list datasets an engine may leave out "
                             f"({', '.join(omittable)}), found {wrong[0]!r:.40}"))
    cached = typed.get("cached_tokens")
    if cached is not None and not (all(isinstance(c, int) and not isinstance(c, bool) and c >= -1
                                       for c in cached) and (B is None or len(cached) == B)):
        out.append(("error", f"expected attribute 'cached_tokens' to list {B} counts (-1 unknown), "
                             f"found {cached!r:.60}"))
    return out
