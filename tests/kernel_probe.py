"""Probes of this machine's native kernels, for tests that need a property the kernels may not have.

Whether fp32 `F.linear` gives a row other bits at batch size 1 than at 2 or more depends on the CPU,
its BLAS code path and the thread count. A test that needs it (a positive control of the native
kernels, a near-tie that only batch-shaped rounding can flip) asks here first and skips with the
reason when this machine does not show it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def linear_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    """The distinct 2-D weights of a model's linear layers and its tied head, one per shape."""
    seen: dict[tuple[int, ...], torch.Tensor] = {}
    for p in model.parameters():
        if p.dim() == 2:
            seen.setdefault(tuple(p.shape), p.detach())
    return list(seen.values())


def rows_vary_with_batch_size(weights: list[torch.Tensor], sizes=(2, 3, 5), seed: int = 0) -> bool:
    """Whether `F.linear` gives row 0 other bits in a batch of 1 than in a batch of any of `sizes`,
    for any of `weights`."""
    g = torch.Generator().manual_seed(seed)
    for w in weights:
        x = torch.randn(max(sizes), w.shape[1], generator=g, dtype=w.dtype)
        alone = F.linear(x[:1], w)
        if any(not torch.equal(F.linear(x[:b], w)[:1], alone) for b in sizes):
            return True
    return False


def skip_unless_native_varies(model: torch.nn.Module, sizes=(2, 3, 5)) -> None:
    """Skip the calling test when this machine's native kernels give a row the same bits at every
    batch size: what it checks cannot happen here."""
    if not rows_vary_with_batch_size(linear_weights(model), sizes):
        pytest.skip(f"this machine's fp32 F.linear gives a row the same bits at batch size 1 and "
                    f"{', '.join(map(str, sizes))} ({torch.get_num_threads()} threads): no batch-shaped "
                    f"rounding to observe")
