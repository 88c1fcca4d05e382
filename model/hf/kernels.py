"""The batch-invariant kernel mode for Hugging Face models, as far as it reaches without model code.

Inside `batch_invariant(model, tile)` every `F.linear` the model calls (projections, routers, shared
experts, the LM head, and each expert's GEMMs once the experts run in their eager implementation) and
every 2-D `x @ W` (GPT-OSS's experts) go through `model.kernels.linear` in batch-invariant mode: fixed
tiles of `tile` rows, so a row's result does not depend on how many rows share its GEMM. Attention
stays transformers' own (sdpa or eager), whose reduction may still depend on the batch's shape; the
trace says so (`COVERAGE`).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from model import kernels
from traces.records import KernelMode

#: What each kernel mode covers for a Hugging Face model (stored in the trace's `kernel_coverage`).
COVERAGE = {
    "native": {"linear layers": "native", "expert GEMMs": "native (the model's experts implementation)",
               "attention": "native", "routing": "model router; route() with stable sorts"},
    "batch_invariant": {"linear layers": "batch-invariant (fixed row tiles)",
                        "expert GEMMs": "batch-invariant (eager experts, fixed row tiles)",
                        "attention": "native (transformers' attention; not batch-invariant)",
                        "routing": "model router; route() with stable sorts"},
}


class _TiledGemms(TorchFunctionMode):
    """Replaces F.linear and 2-D matrix products by fixed-tile GEMMs (see the module docstring)."""

    def __init__(self, tile: int):
        super().__init__()
        self.tile = tile

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            y = kernels.linear(x, weight, "batch_invariant", self.tile)
            return y if bias is None else y + bias
        if func in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__) and not kwargs:
            x, w = args
            if isinstance(w, torch.Tensor) and x.dim() == 2 and w.dim() == 2:
                return kernels.linear(x, w.t(), "batch_invariant", self.tile)
        return func(*args, **kwargs)


@contextlib.contextmanager
def kernel_mode(model, mode: str, tile: int = 4):
    """Run `model` (a transformers model) in kernel `mode` for the duration of the block."""
    kernels.check_mode(mode)
    if mode == KernelMode.NATIVE:
        yield
        return
    config = model.config
    before = getattr(config, "_experts_implementation", None)
    if before is not None:
        config._experts_implementation = "eager"  # per-expert F.linear calls, which the tiles cover
    try:
        with _TiledGemms(tile):
            yield
    finally:
        if before is not None:
            config._experts_implementation = before
