"""A run as the analysis and the app's views read it (`RunLike`), whether the reader's lazy
`traces.reader.Run` (arrays read from the file on indexing) or a run held in memory
(`traces.analysis.rows.RunArrays`, numpy arrays).

Both carry the datasets under the schema's attribute names (`traces.schema.RUN_ARRAY_NAMES`) with the
dimension letters of docs/trace-format.md, so `row_trace`, `layer_routing`, the load tables and the
figure data take either.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class ArrayLike(Protocol):
    """A numpy array, or a lazy dataset that reads what it is indexed with (`traces.reader.LazyArray`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __getitem__(self, key: Any) -> Any: ...


class RunLike(Protocol):
    """One run (one batch composition): its rows' requests and its datasets."""

    @property
    def name(self) -> str: ...

    @property
    def request_ids(self) -> np.ndarray: ...  # [B] request id of each row

    @property
    def probe_row(self) -> int: ...  # row of the probe request, -1 when there is none

    @property
    def dims(self) -> dict[str, int]: ...  # size of each dimension letter (L, B, T, K, E, S, G, ...)

    @property
    def attrs(self) -> dict[str, Any]: ...  # the run's attributes (label, condition, routing, ...)

    @property
    def cached_tokens(self) -> np.ndarray | None: ...  # [B] prompt tokens from a prefix cache, or None

    @property
    def not_recorded(self) -> frozenset[str]: ...  # datasets its engine does not give (traces/absent.py)

    tokens: ArrayLike           # [B, T] prompt + generated ids, -1 past the row's end
    prompt_len: ArrayLike       # [B]
    step: ArrayLike             # [B, T] forward step that routed the token, -1 when not routed
    expert: ArrayLike           # [L, B, T, K]
    gate: ArrayLike             # [L, B, T, K]
    kept: ArrayLike             # [L, B, T, K]
    slot: ArrayLike             # [L, B, T, K]
    group: ArrayLike            # [L, B, T]
    router_logits: ArrayLike    # [L, B, T, E]
    requested: ArrayLike        # [S, L, G, E]
    load_kept: ArrayLike        # [S, L, G, E]
    capacity: ArrayLike         # [S, L, G]
    logits: ArrayLike | None    # [B, T, V] or the top-k form [B, T, J]; None when not held
