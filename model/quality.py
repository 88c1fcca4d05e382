"""What a routing condition costs in quality: held-out bits per byte under decode-time routing.

Capacity bites hardest at decode, where a group holds one token per running row. Teacher-forced
decoding measures that cost directly: each batch of held-out windows is fed through the model as
generation would feed it (one prefill step over the first `prefill` bytes, then one forward step per
byte with the KV cache), but the next input is the true byte, not the model's choice, so every
condition scores the same text. Bits per byte count byte targets only, as the training card does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.kernels import check_mode
from model.step import StepInputs


@dataclass(frozen=True)
class QualityResult:
    """Summed negative log-likelihoods (nats) and byte counts, and the candidates chosen and dropped,
    split into the prefill step and the decode steps."""

    prefill_nll: float = 0.0
    prefill_bytes: int = 0
    decode_nll: float = 0.0
    decode_bytes: int = 0
    decode_chosen: int = 0
    decode_dropped: int = 0
    prefill_chosen: int = 0
    prefill_dropped: int = 0

    @property
    def bits_per_byte(self) -> float:
        n = self.prefill_bytes + self.decode_bytes
        return (self.prefill_nll + self.decode_nll) / n / math.log(2) if n else float("nan")

    @property
    def decode_bits_per_byte(self) -> float:
        return self.decode_nll / self.decode_bytes / math.log(2) if self.decode_bytes else float("nan")

    @property
    def decode_drop_share(self) -> float:
        return self.decode_dropped / self.decode_chosen if self.decode_chosen else 0.0

    @property
    def prefill_drop_share(self) -> float:
        return self.prefill_dropped / self.prefill_chosen if self.prefill_chosen else 0.0

    def __add__(self, other: QualityResult) -> QualityResult:
        return QualityResult(*(a + b for a, b in zip(_values(self), _values(other), strict=True)))


def _values(r: QualityResult) -> tuple:
    return (r.prefill_nll, r.prefill_bytes, r.decode_nll, r.decode_bytes, r.decode_chosen, r.decode_dropped,
            r.prefill_chosen, r.prefill_dropped)


def _drops(routing) -> tuple[int, int]:
    """(chosen, dropped) candidates of one forward step over every MoE layer."""
    chosen = sum(int((r.decision.expert >= 0).sum()) for r in routing)
    dropped = sum(int(((r.decision.expert >= 0) & ~r.decision.kept).sum()) for r in routing)
    return chosen, dropped


def held_out_windows(stream: np.ndarray, n_windows: int, length: int) -> np.ndarray:
    """[n_windows, length] windows of the held-out stream at evenly spaced offsets."""
    if len(stream) < length + 1:
        raise ValueError(f"the held-out stream has {len(stream)} tokens, fewer than one window of {length}")
    starts = np.linspace(0, len(stream) - length - 1, n_windows).astype(np.int64)
    return np.stack([stream[s:s + length] for s in starts])


def _nll(logits: torch.Tensor, targets: torch.Tensor) -> tuple[float, int]:
    """Summed NLL (nats) of the byte targets (< 256) and their count; logits[N,V], targets[N]."""
    loss = F.cross_entropy(logits.float(), targets, reduction="none")
    is_byte = targets < 256
    return float(loss[is_byte].sum()), int(is_byte.sum())


@torch.no_grad()
def teacher_forced(model, windows: np.ndarray, policy, kernel_mode: str = "native",
                   prefill: int = 64) -> QualityResult:
    """Score windows[B, T] (token ids) under `policy`: prefill the first `prefill` tokens in one step,
    then decode the rest one token per step, feeding the true token."""
    check_mode(kernel_mode)
    B, T = windows.shape
    if not 0 < prefill < T:
        raise ValueError(f"prefill must be in 1..{T - 1}, got {prefill}")
    device = model.device
    x = torch.from_numpy(np.asarray(windows, np.int64)).to(device)   # [B,T]
    cache = model.new_cache(B)
    positions = torch.arange(prefill, device=device).expand(B, prefill)
    valid = torch.ones(B, prefill, dtype=torch.bool, device=device)
    out = model(x[:, :prefill], policy, kernel_mode=kernel_mode,
                step=StepInputs(valid=valid, positions=positions, cache=cache, index=0))
    nll, count = _nll(out.logits.reshape(-1, out.logits.shape[-1]), x[:, 1:prefill + 1].reshape(-1))
    chosen, dropped = _drops(out.routing)
    result = QualityResult(prefill_nll=nll, prefill_bytes=count, prefill_chosen=chosen,
                           prefill_dropped=dropped)
    ok = torch.ones(B, 1, dtype=torch.bool, device=device)
    for s, p in enumerate(range(prefill, T - 1), start=1):
        pos = torch.full((B, 1), p, device=device)
        out = model(x[:, p:p + 1], policy, kernel_mode=kernel_mode,
                    step=StepInputs(valid=ok, positions=pos, cache=cache, index=s))
        nll, count = _nll(out.logits[:, 0], x[:, p + 1])
        chosen, dropped = _drops(out.routing)
        result = result + QualityResult(decode_nll=nll, decode_bytes=count, decode_chosen=chosen,
                                        decode_dropped=dropped)
    return result
