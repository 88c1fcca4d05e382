"""The reader's lazy `Run` and a run held in memory (`RunArrays`) are both a `RunLike`, and the
analysis reads the same row from either."""

from __future__ import annotations

import numpy as np
from paths import EXAMPLE

from traces import open_trace
from traces.analysis.rows import RunArrays, row_trace
from traces.run_like import RunLike


def members(protocol: type) -> set[str]:
    declared = {n for n in vars(protocol) if not n.startswith("_")}
    return declared | set(vars(protocol).get("__annotations__", {}))


def test_a_read_run_and_a_run_in_memory_are_run_likes():
    with open_trace(EXAMPLE) as trace:
        run = trace.run(trace.run_names[0])
        held = RunArrays(name=run.name, request_ids=np.asarray(run.request_ids), probe_row=run.probe_row,
                         attrs=dict(run.attrs), **{n: np.asarray(getattr(run, n)[...]) for n in (
                             "tokens", "prompt_len", "step", "expert", "gate", "kept", "slot", "group",
                             "router_logits", "requested", "load_kept", "capacity", "logits")})
        for r in (run, held):
            assert {n for n in members(RunLike) if not hasattr(r, n)} == set(), type(r).__name__
        assert held.dims == run.dims and held.not_recorded == run.not_recorded
        a, b = row_trace(run, run.probe_row), row_trace(held, held.probe_row)
        for field in ("tokens", "step", "expert", "gate", "kept", "router_logits", "logits"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), field
