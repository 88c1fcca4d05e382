"""The training loop the shipped model (`model.train`) and the small Mixtral (`model.hf.train_mixtral`)
share: seeded windows of a token stream, the learning rate warmed up linearly then decayed on a
cosine to 10% of its peak, gradients clipped at norm 1.0, a log entry every `LOG_EVERY` steps and at
the last. What each model computes of a batch is its own (`StepLoss`)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

log = logging.getLogger(__name__)

#: Steps between two log entries.
LOG_EVERY = 50

#: A batch of windows [B, seq + 1] of the stream (inputs `w[:, :-1]`, next tokens `w[:, 1:]`) ->
#: (the loss to minimise, `describe(step, seconds)`: the step's log entry, asked only of the steps
#: logged).
StepLoss = Callable[[torch.Tensor], tuple[torch.Tensor, Callable[[int, float], dict]]]


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass(frozen=True)
class Trained:
    """What a training run reports: its log entries and its time."""

    history: list[dict]
    seconds: float       # wall time
    cpu_seconds: float   # CPU time over all threads: on a shared machine wall time overstates the cost


def train_steps(model: torch.nn.Module, opt: torch.optim.Optimizer, stream: torch.Tensor,
                rng: np.random.Generator, *, steps: int, batch: int, seq: int, lr: float, warmup: int,
                step_loss: StepLoss) -> Trained:
    """Train `model` for `steps` optimizer steps on `batch` windows of `seq + 1` tokens of `stream`
    each, their starts drawn from `rng`."""
    started, started_cpu = time.perf_counter(), time.process_time()
    history = []
    model.train()
    for step in range(steps):
        starts = rng.integers(0, len(stream) - seq - 1, size=batch)
        windows = torch.stack([stream[s:s + seq + 1] for s in starts])  # [B, seq + 1]
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup)
        loss, describe = step_loss(windows)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % LOG_EVERY == 0 or step == steps - 1:
            entry = describe(step, round(time.perf_counter() - started, 1))
            history.append(entry)
            log.info("%s", entry)
    return Trained(history, time.perf_counter() - started, time.process_time() - started_cpu)
