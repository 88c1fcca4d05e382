"""Realistic synthetic traces (numpy only, seeded) for benchmarks and GUI tests.

The arrays are internally consistent the way a recorded run is: experts are the real top-k of the
router logits with softmax gates, slots and kept follow the k-major position priority per
(step, group) with a capacity from the group's size (docs/routing.md), load arrays count the same
candidates, generated tokens are the argmax of the previous position's logits, and steps run 0
(prefill) then 1..n. Rows of the same request share most of their logits and router logits, so the
same prompt mostly gives the same completion and routing, and diverges where batches differ.
"""

from __future__ import annotations

import os

import numpy as np

from traces import schema
from traces.records import RootMeta, RunAttrs
from traces.toplogits import TopLogits
from traces.writer import TraceWriter


def byte_vocab(V: int) -> list[str]:
    """Display strings of a bytes tokenizer: printable ASCII as itself, other bytes as \\xNN,
    ids past 255 as special tokens."""
    out = []
    for i in range(V):
        if i >= 256:
            out.append(f"<special {i - 256}>")
        elif 32 <= i < 127:
            out.append(chr(i))
        else:
            out.append(f"\\x{i:02x}")
    return out


def _row_base(seed: int, r: int, L: int, T: int, E: int, V: int):
    """Router logits [L, T, E] and next-token logits [T, V] shared by every row of request r."""
    rng = np.random.default_rng([seed, r])
    return rng.standard_normal((L, T, E), dtype=np.float32), rng.standard_normal((T, V), dtype=np.float32)


def synthetic_run_arrays(L: int, B: int, T: int, K: int, E: int, V: int, rng: np.random.Generator,
                         prompt_len: int | tuple[int, int] | np.ndarray | None = None, *,
                         prompts: list[np.ndarray] | None = None, request_ids: np.ndarray | None = None,
                         seed: int = 0, noise: float = 1e-2, capacity_factor: float = 1.0,
                         min_capacity: int = 1, group_by: str = "batch") -> dict[str, np.ndarray]:
    """One run's arrays, keyed by schema path, shaped by the letters L, B, T, K, E, V.

    `prompt_len` is one length, a (low, high) range drawn per row, or an array [B]; `prompts`
    (token arrays, one per row) override it. Every row generates `T - max(prompt_len)` tokens, so the
    longest row fills T. With `request_ids`, rows of the same request share their base logits
    (seeded by `seed` and the request id) up to `noise`; otherwise logits are drawn from `rng`.
    `group_by` is "batch" (one group per step) or "sequence" (one group per row).
    """
    if K > E:
        raise ValueError(f"K = {K} exceeds E = {E}")
    if group_by not in ("batch", "sequence"):
        raise ValueError(f"group_by must be 'batch' or 'sequence', got {group_by!r}")
    lo_tok, hi_tok = (32, 127) if V >= 127 else (0, V)
    if prompts is not None:
        plen = np.array([len(p) for p in prompts], dtype=np.int32)
    elif prompt_len is None or isinstance(prompt_len, tuple):
        lo, hi = prompt_len or (max(1, T // 8), max(1, T // 4))
        plen = rng.integers(lo, hi + 1, size=B).astype(np.int32)
    else:
        plen = np.broadcast_to(np.asarray(prompt_len, dtype=np.int32), (B,)).copy()
    if plen.shape != (B,) or plen.min(initial=1) < 1 or plen.max(initial=0) > T:
        raise ValueError(f"prompt lengths must be B = {B} values in [1, {T}], got {plen}")
    n_new = T - int(plen.max(initial=0))
    S = n_new + 1

    pos = np.arange(T)
    valid = pos[None, :] < (plen + n_new)[:, None]                                 # [B, T]
    step = np.where(pos[None, :] < plen[:, None], 0, pos[None, :] - plen[:, None] + 1)
    step = np.where(valid, step, schema.MISSING).astype(np.int16)                  # [B, T]

    # Logits: a per-request base plus a little per-run noise (or pure noise without request ids).
    router_logits = np.empty((L, B, T, E), dtype=np.float32)
    logits = np.empty((B, T, V), dtype=np.float32)
    expert_bias = rng.normal(0.0, 0.3, size=(L, 1, E)).astype(np.float32)       # favourite experts
    vocab_bias = np.zeros(V, dtype=np.float32)
    vocab_bias[lo_tok:hi_tok] = 3.0                                                # text is mostly ASCII
    for b in range(B):
        if request_ids is not None:
            base_router, base_logits = _row_base(seed, int(request_ids[b]), L, T, E, V)
            router_logits[:, b] = base_router + noise * rng.standard_normal((L, T, E), dtype=np.float32)
            logits[b] = base_logits * 2.0 + noise * rng.standard_normal((T, V), dtype=np.float32)
        else:
            router_logits[:, b] = rng.standard_normal((L, T, E), dtype=np.float32)
            logits[b] = rng.standard_normal((T, V), dtype=np.float32) * 2.0
    router_logits += expert_bias[:, :, None, :] if L else 0
    logits += vocab_bias
    router_logits[:, ~valid] = 0.0
    logits[~valid] = 0.0

    tokens = np.full((B, T), schema.MISSING, dtype=np.int32)
    for b in range(B):
        prompt = prompts[b] if prompts is not None else rng.integers(lo_tok, hi_tok, size=plen[b])
        tokens[b, :plen[b]] = prompt
    greedy = logits.argmax(axis=-1).astype(np.int32)                                # [B, T]
    generated = valid & (step > 0)
    tokens[generated] = np.roll(greedy, 1, axis=1)[generated]                      # token p = argmax at p-1

    # Top-k with softmax gates renormalized over the k choices (stable order among ties).
    expert = np.argsort(-router_logits, axis=-1, kind="stable")[..., :K]          # [L, B, T, K]
    scores = np.exp(router_logits - router_logits.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    gate = np.take_along_axis(scores, expert, axis=-1)
    gate /= np.maximum(gate.sum(axis=-1, keepdims=True), 1e-30)

    G = 1 if group_by == "batch" else B
    group_bt = np.where(valid, 0 if group_by == "batch" else np.arange(B)[:, None], schema.MISSING)
    group = np.broadcast_to(group_bt, (L, B, T)).astype(np.int32)                  # [L, B, T]
    slot, kept, requested, load_kept, capacity = _capacity_route(expert, step, group_bt, valid, S, G, E,
                                                                 capacity_factor, min_capacity)
    gate = np.where(kept, gate, 0.0).astype(np.float32)
    expert = np.where(valid[None, :, :, None], expert, schema.MISSING).astype(np.int16)
    return {
        schema.TOKENS: tokens, schema.PROMPT_LEN: plen, schema.STEP: step,
        schema.EXPERT: expert, schema.GATE: gate, schema.KEPT: kept, schema.SLOT: slot,
        schema.GROUP: group, schema.ROUTER_LOGITS: router_logits,
        schema.LOAD_REQUESTED: requested, schema.LOAD_KEPT: load_kept, schema.LOAD_CAPACITY: capacity,
        schema.LOGITS: logits,
    }


def _capacity_route(expert, step, group_bt, valid, S, G, E, capacity_factor, min_capacity):
    """Slots, kept and loads under k-major position priority per (layer, step, group).

    Within a group every 1st choice comes before any 2nd choice, each in arrival order b*T + t
    (batch-major flattening), so a 2nd choice's slot counts every 1st choice for that expert.
    """
    L, B, T, K = expert.shape
    ll, bb, tt, kk = np.meshgrid(np.arange(L), np.arange(B), np.arange(T), np.arange(K), indexing="ij")
    live = np.broadcast_to(valid[None, :, :, None], expert.shape)
    st, gr = step[bb, tt].astype(np.int64), group_bt[bb, tt].astype(np.int64)
    seg = ((ll * S + st) * G + gr) * E + expert                                    # (l, step, group, expert)
    priority = kk * (B * T) + bb * T + tt                                          # k-major, then arrival
    idx = np.flatnonzero(live)
    order = idx[np.lexsort((priority.ravel()[idx], seg.ravel()[idx]))]
    sorted_seg = seg.ravel()[order]
    first = np.r_[True, sorted_seg[1:] != sorted_seg[:-1]]
    starts = np.maximum.accumulate(np.where(first, np.arange(order.size), 0))
    slot = np.full(expert.size, schema.MISSING, dtype=np.int32)
    slot[order] = np.arange(order.size) - starts
    slot = slot.reshape(expert.shape)

    # Capacity from the group's size: ceil(cf * tokens * K / E) (GShard/DeepSpeed style).
    sizes = np.zeros((S, G), dtype=np.int64)
    np.add.at(sizes, (step[valid].astype(np.int64), group_bt[valid].astype(np.int64)), 1)
    cap_sg = np.maximum(np.ceil(capacity_factor * sizes * K / E), min_capacity).astype(np.int32)
    cap_sg[sizes == 0] = schema.ABSENT_GROUP
    capacity = np.broadcast_to(cap_sg[:, None, :], (S, L, G)).copy()               # [S, L, G]
    cap_of = capacity[st, ll, gr]
    kept = live & (slot < cap_of)

    load_index = ((st * L + ll) * G + gr) * E + expert
    requested = np.bincount(load_index[live], minlength=S * L * G * E).reshape(S, L, G, E)
    load_kept = np.bincount(load_index[kept], minlength=S * L * G * E).reshape(S, L, G, E)
    return slot, kept, requested.astype(np.int32), load_kept.astype(np.int32), capacity


def synthetic_meta(L: int, E: int, K: int, V: int, *, seed: int = 0, capacity_factor: float = 1.0,
                   group_by: str = "batch") -> RootMeta:
    """Root metadata of a synthetic trace."""
    return RootMeta(
        model_config={"n_layers": L, "n_experts": E, "top_k": K, "vocab_size": V, "synthetic": True},
        moe_layers=list(range(L)),
        tokenizer="bytes",
        routing=synthetic_routing(capacity_factor, group_by),
        kernel_mode="native",
        device="cpu",
        dtype="float32",
        torch_version="none (synthetic)",
        seed=seed,
    )


def synthetic_routing(capacity_factor: float = 1.0, group_by: str = "batch") -> dict:
    """The resolved routing knobs the synthetic arrays follow."""
    return {"group_by": group_by, "flatten": "batch_major", "priority": "kmajor_position",
            "capacity": {"kind": "factor", "cf": capacity_factor, "min_capacity": 1, "rounding": "ceil"},
            "norm": "before_drop", "pads": "not routed"}


def topk_arrays(arrays: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """A run's arrays with the full logits replaced by their top-k form (as the recorder makes it)."""
    out = {p: a for p, a in arrays.items() if p != schema.LOGITS}
    top = TopLogits.from_full(arrays[schema.LOGITS], arrays[schema.TOKENS], k, valid=arrays[schema.STEP] >= 0)
    return {**out, **top.schema_arrays()}


def write_synthetic_trace(path: str | os.PathLike, n_runs: int, L: int = 8, E: int = 8, K: int = 2,
                          V: int = 256, B: int = 32, T: int = 512, *, R: int = 16, seed: int = 0,
                          capacity_factor: float = 1.0, group_by: str = "batch",
                          compression: str | None = "gzip", logits_k: int | None = None) -> str:
    """Write a trace of `n_runs` runs of B rows and T positions drawn from a pool of R requests.

    Request 0 is the probe: every run holds it at a random row, its partners are random requests.
    With `logits_k` the runs hold the top-k form of their logits. Returns the path.
    """
    rng = np.random.default_rng(seed)
    lo, hi = max(1, T // 8), max(1, T // 4)
    prompts = [rng.integers(32 if V >= 127 else 0, 127 if V >= 127 else V, size=rng.integers(lo, hi + 1))
               .astype(np.int32) for _ in range(R)]
    texts = ["".join(chr(int(t)) if 32 <= t < 127 else "?" for t in p) for p in prompts]
    meta = synthetic_meta(L, E, K, V, seed=seed, capacity_factor=capacity_factor, group_by=group_by)
    with TraceWriter(path, meta=meta, vocab=byte_vocab(V), requests=texts,
                     prompt_tokens=[p.tolist() for p in prompts],
                     compression=compression) as writer:
        for i in range(n_runs):
            request_ids = rng.integers(1, R, size=B) if R > 1 else np.zeros(B, dtype=np.int64)
            probe_row = int(rng.integers(B))
            request_ids[probe_row] = 0
            arrays = synthetic_run_arrays(L, B, T, K, E, V, rng, prompts=[prompts[r] for r in request_ids],
                                          request_ids=request_ids, seed=seed, capacity_factor=capacity_factor,
                                          group_by=group_by)
            if logits_k is not None:
                arrays = topk_arrays(arrays, logits_k)
            attrs = RunAttrs(
                request_ids=tuple(int(r) for r in request_ids), probe_row=probe_row, batch_size=B,
                max_new_tokens=int(arrays[schema.LOAD_CAPACITY].shape[0] - 1),
                label=f"probe at row {probe_row} of {B}", condition=f"synthetic {group_by} "
                f"cf={capacity_factor} native", experiment="synthetic",
                routing=synthetic_routing(capacity_factor, group_by), kernel_mode="native",
                seed=seed * 100003 + i, wall_time_s=0.0,
            )
            writer.add_run(f"r{i:03d}", attrs=attrs, arrays=arrays)
    return os.fspath(path)
