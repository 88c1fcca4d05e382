"""Schema v1 of the MoE routing trace: every name, dtype and dimension letter in one place.

Dimension letters (used in code, HDF5 dimension labels and the UI):
L MoE layers, B batch rows, T token positions, K experts per token (top-k), E experts,
V vocabulary, S forward steps, G groups within a step, R requests.

`docs/trace-format.md` is the human-readable spec of this module; keep them in step and bump
`FORMAT_VERSION` on every change to names, shapes or meanings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FORMAT = "moe-routing-trace"
FORMAT_VERSION = 1

#: Fill value for positions past a row's end (tokens, step, expert, slot, group).
MISSING = -1


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of a run: its path inside the run group, dimension letters and dtype kind."""

    path: str
    dims: tuple[str, ...]
    dtypes: tuple[str, ...]  # accepted numpy dtype names; the writer uses the first
    meaning: str
    required: bool = True

    @property
    def ndim(self) -> int:
        return len(self.dims)


ROOT_ATTRS: dict[str, str] = {
    "format": f'always "{FORMAT}"',
    "format_version": "integer schema version",
    "created": "ISO 8601 time the file was created",
    "producer": "package and version that wrote the file",
    "model_config": "JSON of the model configuration",
    "moe_layers": "JSON list: model layer index of each MoE layer (length L)",
    "tokenizer": '"bytes" (UTF-8 bytes plus special tokens) or another tokenizer name',
    "routing": "JSON of the default resolved routing knobs (each run stores its own too)",
    "kernel_mode": '"native" or "batch_invariant" (default; each run stores its own too)',
    "device": "torch device the runs were computed on",
    "dtype": "compute dtype of the model",
    "torch_version": "torch version",
    "seed": "seed of the recording session",
}

RUN_ATTRS: dict[str, str] = {
    "request_ids": "int array [B]: the request id in each row",
    "probe_row": "row of the probe request in this batch, -1 when there is none",
    "batch_size": "B",
    "max_new_tokens": "new tokens generated per row",
    "label": "human label of the composition",
    "condition": "experiment condition this run belongs to (e.g. 'batch cf=1.0 native')",
    "experiment": "experiment id (E0, E1, E3, E4, E7, example, ...)",
    "routing": "JSON of the resolved routing knobs used for this run",
    "kernel_mode": '"native" or "batch_invariant"',
    "seed": "RNG seed of this run",
    "wall_time_s": "seconds the generation took",
    "index": "order in which the run was written",
    "complete": "false until every dataset of the run is written and flushed",
}

RUN_DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec("tokens", ("B", "T"), ("int32",), "prompt + generated token ids, -1 past the row's end"),
    DatasetSpec("prompt_len", ("B",), ("int32",), "prompt length of each row"),
    DatasetSpec("step", ("B", "T"), ("int16",), "forward step that routed the token (0 = prefill), -1 past end"),
    DatasetSpec("routing/expert", ("L", "B", "T", "K"), ("int16",), "chosen experts in choice order"),
    DatasetSpec("routing/gate", ("L", "B", "T", "K"), ("float32", "float16"), "weight applied (0 when dropped)"),
    DatasetSpec("routing/kept", ("L", "B", "T", "K"), ("bool",), "candidate kept (true) or dropped (false)"),
    DatasetSpec("routing/slot", ("L", "B", "T", "K"), ("int32",), "rank in that expert's queue within its group"),
    DatasetSpec("routing/group", ("L", "B", "T"), ("int32",), "group id within its step"),
    DatasetSpec("routing/router_logits", ("L", "B", "T", "E"), ("float32", "float16"), "router logits"),
    DatasetSpec("load/requested", ("S", "L", "G", "E"), ("int32",), "candidates sent to each expert"),
    DatasetSpec("load/kept", ("S", "L", "G", "E"), ("int32",), "candidates each expert accepted"),
    DatasetSpec("load/capacity", ("S", "L", "G"), ("int32",), "capacity C per group, -1 for absent groups, "
                "-2 for dropless"),
    DatasetSpec("logits", ("B", "T", "V"), ("float32", "float16"), "next-token logits at every position"),
)

DATASETS_BY_PATH: dict[str, DatasetSpec] = {d.path: d for d in RUN_DATASETS}

#: Capacity value stored for dropless routing (no candidate can overflow).
DROPLESS_CAPACITY = -2

KERNEL_MODES = ("native", "batch_invariant")


def dtype_ok(spec: DatasetSpec, dtype: np.dtype) -> bool:
    """Whether `dtype` is one of the dtypes the spec accepts."""
    return np.dtype(dtype).name in spec.dtypes
