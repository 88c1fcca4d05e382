"""The recorder: turns each forward step's routing and logits into the arrays of one trace run.

`generate(..., recorder=Recorder())` hands every step's `LayerRouting` values and logits to
`record_step`; this is the one place where tensors become numpy arrays. `arrays(result)` lays them out
in each sequence's own positions as `traces/schema.py` defines, and `write_run` passes them to
`traces.TraceWriter.add_run` (or a `traces.background.BackgroundWriter`, which writes on its own
thread) with the run's attributes.

Next-token logits are kept whole (`logits="full"`, [B, T, V]) or in the top-k form (`logits="topk"`:
the k largest with their ids, the log-sum-exp and the following token's logit, reduced on the
model's device at every step, so a large vocabulary never reaches host memory whole). The reduction
runs on one worker thread of the recorder while the model computes the next step (torch's kernels
release the GIL), so it costs generation little where a core is free; `arrays` waits for it.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from model.fingerprint import machine_fingerprint
from model.protocols import GenerationModel
from model.routing_policy import RoutingPolicy
from traces import schema
from traces.records import RootMeta, RunAttrs
from traces.schema import DEFAULT_LOGITS_K, LOGITS_FORMS, MISSING, empty_run_arrays
from traces.toplogits import TopLogits

#: Logits forms a recorder keeps (None: no next-token logits).
LOGITS_CHOICES = (*LOGITS_FORMS, None)
#: `--logits auto` keeps full logits up to this vocabulary size and the top-k form above it: at
#: V = 4096 a run of B = 8 rows and T = 512 positions holds 64 MiB of float32 logits.
AUTO_TOPK_ABOVE = 4096
#: Positions whose log-sum-exp is computed at once (bounds the temporary memory).
LSE_POSITIONS = 16

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
    logits: np.ndarray | TopLogits | Future | None  # [B,Ts,V] float32, or its top-k form [B,Ts,J]


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.is_floating_point() and t.dtype != torch.float32:
        t = t.float()
    return t.cpu().numpy()


class Recorder:
    """Collects every forward step of one `generate` call (step 0 starts a new recording)."""

    def __init__(self, logits: str | None = "full", k: int = DEFAULT_LOGITS_K):
        if logits not in LOGITS_CHOICES:
            raise ValueError(f"logits must be one of {LOGITS_CHOICES}, got {logits!r}")
        if logits == "topk" and k < 2:
            raise ValueError(f"the top-k logits need k >= 2 (the margin is top-1 minus top-2), got {k}")
        self.logits_form = logits
        self.k = k
        self.steps: list[StepRecord] = []
        self._reducer: ThreadPoolExecutor | None = None  # the top-k reduction's worker thread

    def _logits(self, logits: torch.Tensor, valid: torch.Tensor, tokens: torch.Tensor | None):
        if self.logits_form == "full":
            return _np(logits)
        if self.logits_form == "topk":
            if self._reducer is None:
                self._reducer = ThreadPoolExecutor(1, thread_name_prefix="recorder-topk")
            # The step's logits are a fresh tensor that nothing writes to once handed over; the small
            # id and mask tensors are copied, as the loop may reuse their buffers.
            follow = None if tokens is None else tokens.detach().clone()
            return self._reducer.submit(top_logits, logits.detach(), valid.clone(), follow, self.k)
        return None

    def _step_logits(self) -> list:
        """Every step's logits, waiting for the top-k reductions still running (their errors raise here)."""
        out = [r.logits.result() if isinstance(r.logits, Future) else r.logits for r in self.steps]
        if self._reducer is not None:
            self._reducer.shutdown()
            self._reducer = None
        return out

    def record_step(self, step: int, positions: torch.Tensor, valid: torch.Tensor, routing: list,
                    logits: torch.Tensor, tokens: torch.Tensor | None = None) -> None:
        """Keep one step: positions/valid[B,Ts], one `LayerRouting` per MoE layer, logits[B,Ts,V] and
        the step's input ids tokens[B,Ts] (the top-k form needs them for the following token's logit)."""
        if step == 0:
            self.steps = []
        B, Ts = valid.shape
        kept_logits = self._logits(logits, valid, tokens)
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
                _np(per_group("kept_count", 0)), kept_logits)
        else:  # a dense model: no routing to record, only tokens and logits
            ints, floats = np.zeros((0, B, Ts, 0), np.int64), np.zeros((0, B, Ts, 0), np.float32)
            loads = np.zeros((0, 0, 0), np.int64)
            rec = StepRecord(step, _np(positions), _np(valid), ints, floats, ints.astype(bool), ints,
                             np.zeros((0, B, Ts), np.int64), floats, np.zeros((0, 0), np.int64), loads, loads,
                             kept_logits)
        self.steps.append(rec)

    def arrays(self, result) -> dict[str, np.ndarray]:
        """The run's datasets (schema paths -> arrays) for a `GenerationResult` of the recorded call."""
        if not self.steps:
            raise ValueError("the recorder holds no steps: pass it to generate() first")
        first = self.steps[0]
        step_logits = self._step_logits()
        B = first.valid.shape[0]
        if len(result.tokens) != B:
            raise ValueError(f"the result has {len(result.tokens)} rows, the recording {B}")
        T = max(len(row) for row in result.tokens)
        L, K = first.expert.shape[0], first.expert.shape[3]
        E = first.router_logits.shape[3]
        S = len(self.steps)
        G = max(max((r.capacity.shape[1] for r in self.steps), default=0), 1)
        sizes = {"B": B, "T": T, "L": L, "K": K, "E": E, "S": S, "G": G}
        if self.logits_form == "full":
            sizes["V"] = step_logits[0].shape[-1]
        elif self.logits_form == "topk":
            sizes["J"] = step_logits[0].k
        out = empty_run_arrays(sizes, self.logits_form)  # the schema's dtypes and fill values
        for r, row in enumerate(result.tokens):
            out[schema.TOKENS][r, :len(row)] = row
        out[schema.PROMPT_LEN][:] = result.prompt_len
        for s, rec in enumerate(self.steps):
            b, t = np.nonzero(rec.valid)  # routed tokens of this step
            p = rec.positions[b, t]
            out[schema.STEP][b, p] = rec.step
            out[schema.EXPERT][:, b, p] = rec.expert[:, b, t]
            out[schema.GATE][:, b, p] = rec.gate[:, b, t]
            out[schema.KEPT][:, b, p] = rec.kept[:, b, t]
            out[schema.SLOT][:, b, p] = rec.slot[:, b, t]
            out[schema.GROUP][:, b, p] = rec.group[:, b, t]
            out[schema.ROUTER_LOGITS][:, b, p] = rec.router_logits[:, b, t]
            g = rec.capacity.shape[1]
            out[schema.LOAD_REQUESTED][s, :, :g] = rec.requested
            out[schema.LOAD_KEPT][s, :, :g] = rec.kept_count
            # The router reports dropless capacity as DROPLESS_CAPACITY (-2); absent groups stay MISSING.
            out[schema.LOAD_CAPACITY][s, :, :g] = rec.capacity
            if self.logits_form == "full":
                out[schema.LOGITS][b, p] = step_logits[s][b, t]
            elif self.logits_form == "topk":
                for path, values in step_logits[s].schema_arrays().items():
                    out[path][b, p] = values[b, t]
        return out

    def run_attrs(self, result, *, policy, request_ids, probe_row: int = -1, label: str = "",
                  condition: str = "", experiment: str = "", seed: int = 0,
                  max_new_tokens: int | None = None) -> RunAttrs:
        """The run's attributes (all but `index` and `complete`, which the writer fills)."""
        if max_new_tokens is None:
            max_new_tokens = max((len(r) - p for r, p in zip(result.tokens, result.prompt_len, strict=True)),
                                 default=0)
        return RunAttrs(
            request_ids=request_ids,
            probe_row=int(probe_row),
            batch_size=len(result.tokens),
            max_new_tokens=int(max_new_tokens),
            label=label,
            condition=condition,
            experiment=experiment,
            routing=policy.to_dict() if policy is not None else {},
            kernel_mode=result.kernel_mode,
            seed=int(seed),
            wall_time_s=float(result.wall_time_s),
        )

    def write_run(self, writer, name: str, result, *, policy, request_ids, probe_row: int = -1,
                  label: str = "", condition: str = "", experiment: str = "", seed: int = 0,
                  max_new_tokens: int | None = None) -> dict[str, np.ndarray]:
        """Write the recorded run to a `traces.TraceWriter`; returns the arrays written."""
        arrays = self.arrays(result)
        attrs = self.run_attrs(result, policy=policy, request_ids=request_ids, probe_row=probe_row,
                               label=label, condition=condition, experiment=experiment, seed=seed,
                               max_new_tokens=max_new_tokens)
        writer.add_run(name, attrs=attrs, arrays=arrays)
        log.info("recorded run %s: B=%d, S=%d", name, len(result.tokens), len(self.steps))
        return arrays


def logits_form_for(choice: str, vocab_size: int) -> str:
    """The logits form of `--logits` `choice` ("auto", "full" or "topk") for a vocabulary size."""
    if choice == "auto":
        return "topk" if vocab_size > AUTO_TOPK_ABOVE else "full"
    if choice not in LOGITS_FORMS:
        raise ValueError(f"logits must be auto, full or topk, got {choice!r}")
    return choice


def top_logits(logits: torch.Tensor, valid: torch.Tensor, tokens: torch.Tensor | None, k: int) -> TopLogits:
    """The top-k form of one step's logits [B,Ts,V] (reduced where they are, then moved to numpy).

    The token after column t is the next column's input when that column is valid (a prompt in
    its prefill); otherwise it is the greedy choice, the largest logit."""
    z = logits.detach().float()
    B, Ts, V = z.shape
    k = min(k, V)
    value, index = torch.topk(z, k, dim=-1)
    lse = np.empty((B, Ts), np.float32)
    for start in range(0, Ts, LSE_POSITIONS):
        lse[:, start:start + LSE_POSITIONS] = log_sum_exp(z[:, start:start + LSE_POSITIONS])
    chosen = value[..., 0].clone()
    if tokens is not None and Ts > 1:
        follows = valid[:, :-1] & valid[:, 1:]
        picked = z[:, :-1].gather(-1, tokens[:, 1:].to(z.device).clamp(0, V - 1)[..., None])[..., 0]
        chosen[:, :-1] = torch.where(follows, picked, chosen[:, :-1])
    ids, values = index.cpu().numpy(), value.cpu().numpy()
    order = np.lexsort((ids, -values.astype(np.float64)), axis=-1)  # largest first, then smaller id
    return TopLogits(np.take_along_axis(ids, order, -1).astype(np.int32),
                     np.take_along_axis(values, order, -1), lse, chosen.cpu().numpy(), V)


def log_sum_exp(z: torch.Tensor) -> np.ndarray:
    """float32 log-sum-exp over the last axis of float32 z[..., V], summed in float64 so that the
    order of the sum never shows in the float32 result. On the CPU the exponentials are float32
    (about 1e-7 relative each; the sum's error stays near 1e-8, far below a float32 ulp of the
    result) and numpy adds them in float64, a third of the time of torch's float64 log-sum-exp."""
    m = z.amax(-1, keepdim=True)  # [..., 1]
    if z.device.type != "cpu":
        return torch.logsumexp(z.double(), -1).float().cpu().numpy()
    total = torch.exp(z - m).numpy().sum(-1, dtype=np.float64)
    return (m[..., 0].double().numpy() + np.log(total)).astype(np.float32)


def trace_meta(model: GenerationModel, policy: RoutingPolicy | None, *, kernel_mode: str = "native",
               seed: int = 0) -> RootMeta:
    """Root attributes of a trace (all but those the writer fills) for a model and policy."""
    config = model.config
    extra = model.trace_meta(kernel_mode)
    fields = {
        "model_config": config.to_dict(),
        "moe_layers": list(config.moe_layers),
        "tokenizer": "bytes",
        "routing": policy.to_dict() if policy is not None else {},
        "kernel_mode": kernel_mode,
        "device": str(model.device),
        "dtype": str(model.dtype).removeprefix("torch."),
        "torch_version": str(torch.__version__),  # TorchVersion is a str subclass h5py cannot store
        "seed": int(seed),
        "machine": machine_fingerprint(model.device, model.kernel_version, model.kernel_path),
        **extra,  # a Hugging Face model: its tokenizer, where to load it from, what the kernel mode covers
    }
    return RootMeta(**fields)
