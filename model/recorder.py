"""The recorder: turns each forward step's routing and logits into the arrays of one trace run.

`generate(..., recorder=Recorder())` hands every step's `LayerRouting` values and logits to
`record_step`; this is the one place where tensors become numpy arrays. `arrays(result)` lays them out
in each sequence's own positions as `traces/schema.py` defines, and `write_run` passes them to
`traces.TraceWriter.add_run` with the run's attributes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from model.fingerprint import machine_fingerprint
from traces.schema import MISSING

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepRecord:
    """One forward step as numpy: which (row, column) tokens were routed and what every layer did."""

    step: int
    positions: np.ndarray  # [B,Ts] int64 position of each column in its row's own coordinates
    valid: np.ndarray  # [B,Ts] bool tokens routed in this step
    expert: np.ndarray  # [L,B,Ts,K]
    gate: np.ndarray  # [L,B,Ts,K] float32
    kept: np.ndarray  # [L,B,Ts,K] bool
    slot: np.ndarray  # [L,B,Ts,K]
    group: np.ndarray  # [L,B,Ts]
    router_logits: np.ndarray  # [L,B,Ts,E] float32
    capacity: np.ndarray  # [L,G]
    requested: np.ndarray  # [L,G,E]
    kept_count: np.ndarray  # [L,G,E]
    logits: np.ndarray | None  # [B,Ts,V] float32


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.is_floating_point() and t.dtype != torch.float32:
        t = t.float()
    return t.cpu().numpy()


class Recorder:
    """Collects every forward step of one `generate` call (step 0 starts a new recording)."""

    def __init__(self, store_logits: bool = True):
        self.store_logits = store_logits
        self.steps: list[StepRecord] = []

    def record_step(self, step: int, positions: torch.Tensor, valid: torch.Tensor, routing: list,
                    logits: torch.Tensor) -> None:
        """Keep one step: positions/valid[B,Ts], one `LayerRouting` per MoE layer, logits[B,Ts,V]."""
        if step == 0:
            self.steps = []
        B, Ts = valid.shape
        if routing:
            d = [r.decision for r in routing]
            stack = torch.stack
            G = max(int(x.capacity.shape[0]) for x in d)

            def per_group(name: str, fill: int) -> torch.Tensor:
                rows = []
                for x in d:
                    t = getattr(x, name)
                    pad = G - t.shape[0]
                    rows.append(torch.cat([t, t.new_full((pad, *t.shape[1:]), fill)]) if pad else t)
                return stack(rows)

            rec = StepRecord(
                step, _np(positions), _np(valid),
                _np(stack([x.expert for x in d])), _np(stack([x.gate for x in d])),
                _np(stack([x.kept for x in d])), _np(stack([x.slot for x in d])),
                _np(stack([x.group for x in d])), _np(stack([r.router_logits for r in routing])),
                _np(per_group("capacity", MISSING)), _np(per_group("requested", 0)),
                _np(per_group("kept_count", 0)), _np(logits) if self.store_logits else None)
        else:  # a dense model: no routing to record, only tokens and logits
            ints, floats = np.zeros((0, B, Ts, 0), np.int64), np.zeros((0, B, Ts, 0), np.float32)
            loads = np.zeros((0, 0, 0), np.int64)
            rec = StepRecord(step, _np(positions), _np(valid), ints, floats, ints.astype(bool), ints,
                             np.zeros((0, B, Ts), np.int64), floats, np.zeros((0, 0), np.int64), loads, loads,
                             _np(logits) if self.store_logits else None)
        self.steps.append(rec)

    def arrays(self, result) -> dict[str, np.ndarray]:
        """The run's datasets (schema paths -> arrays) for a `GenerationResult` of the recorded call."""
        if not self.steps:
            raise ValueError("the recorder holds no steps: pass it to generate() first")
        first = self.steps[0]
        B = first.valid.shape[0]
        if len(result.tokens) != B:
            raise ValueError(f"the result has {len(result.tokens)} rows, the recording {B}")
        T = max(len(row) for row in result.tokens)
        L, K = first.expert.shape[0], first.expert.shape[3]
        E = first.router_logits.shape[3]
        S = len(self.steps)
        G = max(max((r.capacity.shape[1] for r in self.steps), default=0), 1)
        tokens = np.full((B, T), MISSING, np.int32)
        for b, row in enumerate(result.tokens):
            tokens[b, :len(row)] = row
        out = {
            "tokens": tokens,
            "prompt_len": np.asarray(result.prompt_len, np.int32),
            "step": np.full((B, T), MISSING, np.int16),
            "routing/expert": np.full((L, B, T, K), MISSING, np.int16),
            "routing/gate": np.zeros((L, B, T, K), np.float32),
            "routing/kept": np.zeros((L, B, T, K), bool),
            "routing/slot": np.full((L, B, T, K), MISSING, np.int32),
            "routing/group": np.full((L, B, T), MISSING, np.int32),
            "routing/router_logits": np.zeros((L, B, T, E), np.float32),
            "load/requested": np.zeros((S, L, G, E), np.int32),
            "load/kept": np.zeros((S, L, G, E), np.int32),
            "load/capacity": np.full((S, L, G), MISSING, np.int32),
        }
        if self.store_logits:
            out["logits"] = np.zeros((B, T, first.logits.shape[-1]), np.float32)
        for s, rec in enumerate(self.steps):
            b, t = np.nonzero(rec.valid)  # routed tokens of this step
            p = rec.positions[b, t]
            out["step"][b, p] = rec.step
            out["routing/expert"][:, b, p] = rec.expert[:, b, t]
            out["routing/gate"][:, b, p] = rec.gate[:, b, t]
            out["routing/kept"][:, b, p] = rec.kept[:, b, t]
            out["routing/slot"][:, b, p] = rec.slot[:, b, t]
            out["routing/group"][:, b, p] = rec.group[:, b, t]
            out["routing/router_logits"][:, b, p] = rec.router_logits[:, b, t]
            g = rec.capacity.shape[1]
            out["load/requested"][s, :, :g] = rec.requested
            out["load/kept"][s, :, :g] = rec.kept_count
            # The router reports dropless capacity as DROPLESS_CAPACITY (-2); absent groups stay MISSING.
            out["load/capacity"][s, :, :g] = rec.capacity
            if self.store_logits:
                out["logits"][b, p] = rec.logits[b, t]
        return out

    def run_attrs(self, result, *, policy, request_ids, probe_row: int = -1, label: str = "",
                  condition: str = "", experiment: str = "", seed: int = 0) -> dict:
        """The run's attributes (schema `RUN_ATTRS` less `index` and `complete`)."""
        return {
            "request_ids": np.asarray(request_ids, np.int32),
            "probe_row": int(probe_row),
            "batch_size": len(result.tokens),
            "max_new_tokens": int(max((len(r) - p for r, p in zip(result.tokens, result.prompt_len,
                                                                    strict=True)), default=0)),
            "label": label,
            "condition": condition,
            "experiment": experiment,
            "routing": policy.to_dict() if policy is not None else {},
            "kernel_mode": result.kernel_mode,
            "seed": int(seed),
            "wall_time_s": float(result.wall_time_s),
        }

    def write_run(self, writer, name: str, result, *, policy, request_ids, probe_row: int = -1,
                  label: str = "", condition: str = "", experiment: str = "", seed: int = 0,
                  max_new_tokens: int | None = None) -> dict[str, np.ndarray]:
        """Write the recorded run to a `traces.TraceWriter`; returns the arrays written."""
        arrays = self.arrays(result)
        attrs = self.run_attrs(result, policy=policy, request_ids=request_ids, probe_row=probe_row,
                               label=label, condition=condition, experiment=experiment, seed=seed)
        if max_new_tokens is not None:
            attrs["max_new_tokens"] = int(max_new_tokens)
        writer.add_run(name, attrs=attrs, arrays=arrays)
        log.info("recorded run %s: B=%d, S=%d", name, len(result.tokens), len(self.steps))
        return arrays


def trace_meta(model, policy, *, kernel_mode: str = "native", seed: int = 0) -> dict:
    """Root attributes of a trace (`ROOT_ATTRS` less those the writer fills) for a model and policy."""
    config = model.config
    extra = model.trace_meta(kernel_mode) if hasattr(model, "trace_meta") else {}
    return {
        "model_config": config.to_dict(),
        "moe_layers": list(config.moe_layers),
        "tokenizer": "bytes",
        "routing": policy.to_dict() if policy is not None else {},
        "kernel_mode": kernel_mode,
        "device": str(model.device),
        "dtype": str(model.dtype).removeprefix("torch."),
        "torch_version": str(torch.__version__),  # TorchVersion is a str subclass h5py cannot store
        "seed": int(seed),
        "machine": machine_fingerprint(model.device),
        **extra,  # a Hugging Face model: its tokenizer, where to load it from, what the kernel mode covers
    }
