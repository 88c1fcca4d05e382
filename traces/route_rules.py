"""The validator's rules on a trace's routes, whatever flags recorded it (`validate`, `info --check`).

- **shapes**: a run's E (router logits) is the model's number of experts, and an engine's run has
  K = the routing's top_k experts per token (`shape_problems`);
- **structure**, on the stored arrays: every route names K distinct experts in 0..E-1 (an engine's
  run: every held token; the project's loop: -1 marks an empty slot of expert choice)
  (`data_problems`);
- **the trace's replays together**: the unexplained disagreements of every replayed run, summed, must
  pass the same test as each run's (`trace_problems`): a corruption spread thinly over many runs
  fails here even where no single run holds enough to fail alone.

Each is an error; numpy and h5py only.
"""

from __future__ import annotations

import numpy as np

from traces import schema
from traces.route_check import LEVEL, NULL_RATE, RouteCheck, aggregate, malformed, structure

#: Config fields that hold the number of routed experts (the shipped model's, then Hugging Face's).
EXPERT_FIELDS = ("n_experts", "num_local_experts", "num_experts", "n_routed_experts")


def model_experts(meta: dict) -> int | None:
    """E of the trace's model: the engine's count, else its config's (None: not stated)."""
    engine = meta.get("engine")
    candidates = [engine.get("experts")] if isinstance(engine, dict) else []
    config = meta.get("model_config")
    if isinstance(config, dict):
        candidates += [config.get(name) for name in EXPERT_FIELDS]
    return next((int(v) for v in candidates if isinstance(v, int) and not isinstance(v, bool) and v > 0),
                None)


def _top_k(meta: dict) -> int | None:
    routing = meta.get("routing")
    k = routing.get("top_k") if isinstance(routing, dict) else None
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None


def shape_problems(meta: dict, dims: dict, engine_run: bool) -> list[tuple[str, str]]:
    """(dataset, message) of an engine run's dims that do not fit the model (the project's own loop
    writes E and K from the very model it runs, a dense control included: nothing to cross-check)."""
    out: list[tuple[str, str]] = []
    E = model_experts(meta)
    if engine_run and E is not None and dims.get("E") not in (None, E):
        out.append((schema.ROUTER_LOGITS, f"expected E = {E} (the model's experts), found {dims['E']}"))
    K = _top_k(meta)
    if engine_run and K is not None and dims.get("K") not in (None, K):
        out.append((schema.EXPERT, f"expected K = {K} experts per token (the routing's top_k), found "
                                   f"{dims['K']}"))
    return out


def data_problems(group, meta: dict, engine_run: bool) -> list[tuple[str, str]]:
    """(dataset, message) of a run's stored routes that cannot be a router's top-K choice: an expert
    named twice in one token's set, or out of range. Reads `routing/expert` layer block by layer
    block (its chunks) and `tokens`."""
    E = model_experts(meta)
    if E is None or schema.EXPERT not in group:
        return []
    ds = group[schema.EXPERT]
    held = np.asarray(group[schema.TOKENS][()]) >= 0 if engine_run and schema.TOKENS in group else None
    if ds.ndim != 4 or (held is not None and held.shape != ds.shape[1:3]):
        return []  # the shapes are reported with the datasets
    routes = repeated = out_of_range = 0
    example: tuple[int, ...] = ()
    step = ds.chunks[0] if ds.chunks else 1
    for start in range(0, ds.shape[0], step):
        r, rep, out, ex = structure(ds[start:start + step], E, held)
        routes, repeated, out_of_range = routes + r, repeated + rep, out_of_range + out
        example = example or ex
    if repeated or out_of_range:
        what = malformed(repeated, out_of_range, routes, example)
        return [(schema.EXPERT, f"routes that cannot be a router's top-K: {what}")]
    return []


def trace_problems(checks: list[RouteCheck]) -> list[str]:
    """Messages when the trace's replayed runs together fail the route check's test."""
    x, n, p = aggregate(checks)
    if n and p < LEVEL:
        return [f"over the {sum(c.replayed for c in checks)} replayed runs together, {x} of {n} checked "
                f"(layer, token) routes differ from the router's top-K away from a near tie, p = {p:.2g} "
                f"under a rate of at most {NULL_RATE:g}"]
    return []
