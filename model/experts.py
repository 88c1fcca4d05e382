"""The kernels a model runs, chosen once per model: a kernel version and, for the compiled kernels, the
instruction-set path (`model.native`), and through them the MoE block's experts backend.

`choose(version, isa)` returns a `Kernels`; the MoE block calls `kernels.experts(mode)` for its experts
and `kernels.step` for a whole small step in one call. The backends sit in one registry keyed by
(kernel version, kernel mode, path), as transformers' `ExpertsInterface` maps a name to an experts
function: the compiled experts of every path in both modes (their bits are the path's, in any batch and
on any number of threads), the pure-PyTorch grouped GEMM (native mode) and fixed-shape tiles
(batch-invariant mode) of version 2. Versions 1 and 2 share the pure-PyTorch path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch import nn

from model import native
from model.kernels import KERNEL_VERSION as COMPILED_VERSION
from model.kernels import TORCH_KERNEL_VERSION as TORCH_VERSION
from model.routing import StepPlan

#: The path name of the pure-PyTorch kernels.
TORCH_PATH = "torch"

#: experts(moe, x[B,T,C], expert, kept, gate [B,T,K], tile) -> y[B,T,C] for a `model.moe.MoE` block
Experts = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


@dataclass(frozen=True)
class Kernels:
    """The kernels one model runs: `version` and `isa` (an instruction-set path, or "torch")."""

    version: int
    isa: str
    module: ModuleType | None = field(default=None, compare=False, repr=False)

    @property
    def path(self) -> str:
        """The path as a trace's fingerprint records it: `3-avx512`, `2-torch`."""
        return f"{self.version}-{self.isa}"

    @property
    def compiled(self) -> bool:
        return self.module is not None

    def __reduce__(self):
        """Pickled (a copied or sent model) as its version and path, chosen again where it lands."""
        return choose, (self.version, None if self.isa == TORCH_PATH else self.isa)

    def experts(self, mode: str) -> Experts:
        """The experts backend of this version, path and kernel `mode`."""
        return EXPERTS[(self.version if self.compiled else TORCH_VERSION, mode, self.isa)]


def choose(version: int = COMPILED_VERSION, isa: str | None = None) -> Kernels:
    """The kernels that reproduce `version` here: from version 3 on, the compiled path `isa` where this CPU
    runs it and it is built, else the best compiled path built here; else the pure-PyTorch path."""
    if version >= COMPILED_VERSION:
        module = (native.load_path(isa) if isa is not None else None) or native.load()
        if module is not None:
            return Kernels(COMPILED_VERSION, module.isa, module)
    return Kernels(TORCH_VERSION, TORCH_PATH)


def unavailable(path: str) -> str | None:
    """A sentence when a trace's kernel path (`3-avx512`) does not run here, else None."""
    version, _, isa = str(path).partition("-")
    if not version.isdigit() or int(version) < COMPILED_VERSION or not isa or isa == TORCH_PATH:
        return None
    if native.load_path(isa) is not None:
        return None
    here = choose(int(version))
    why = "this CPU lacks its instructions" if isa not in native.runnable() else "it is not built here"
    return (f"the trace's kernels {path} do not run here ({why}); reruns use {here.path}, which may "
            "reproduce it only at the decisions level")


# -- the backends ---------------------------------------------------------------------------------

def packed_weights(moe: Any, module: ModuleType, x: torch.Tensor,
                   gate: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, int] | None:
    """The block's expert weights in `module`'s layout, packed again whenever they change (a load, an
    optimiser step), or None where the compiled kernels do not run: not the CPU, not float32,
    autograd, widths not a multiple of the path's vector. Written for a decode step's microseconds."""
    if x.dtype != torch.float32 or not x.is_cpu:
        return None
    params = moe._parameters
    w_in, w_out = params["w_in"], params["w_out"]
    if torch.is_grad_enabled() and (x.requires_grad or w_in.requires_grad or w_out.requires_grad
                                    or params["router"].requires_grad
                                    or (gate is not None and gate.requires_grad)):
        return None
    key = (id(module), w_in.data_ptr(), w_in._version, w_out.data_ptr(), w_out._version)
    if moe._pack_key != key:
        C, F = w_out.shape[1], w_out.shape[2]
        ok = w_in.dtype == w_out.dtype == torch.float32 and w_in.device.type == "cpu" \
            and not C % module.lanes and not F % module.lanes
        moe._pack = (module.pack(w_in.detach(), True), module.pack(w_out.detach(), False), F) if ok else None
        moe._pack_key = key
    return moe._pack


def _compiled(mode: str) -> Experts:
    def experts(moe, x, expert, kept, gate, tile):
        module = moe.kernels.module
        pack = packed_weights(moe, module, x, gate)
        if pack is None:  # autograd, another dtype or device: the pure-PyTorch experts of this mode
            return moe.torch_experts(x, expert, kept, gate, mode, tile)
        return module.experts(x, *pack, expert, kept, gate)
    return experts


def _torch(mode: str) -> Experts:
    def experts(moe, x, expert, kept, gate, tile):
        return moe.torch_experts(x, expert, kept, gate, mode, tile)
    return experts


EXPERTS: dict[tuple[int, str, str], Experts] = {
    **{(COMPILED_VERSION, mode, isa): _compiled(mode) for isa in native.ISA_FLAGS
       for mode in ("native", "batch_invariant")},
    **{(TORCH_VERSION, mode, TORCH_PATH): _torch(mode) for mode in ("native", "batch_invariant")},
}


def compiled_step(moe: Any, x: torch.Tensor, valid: torch.Tensor, policy, pad: torch.Tensor | None,
                  tile: int):
    """A step in one compiled call: (y, logits, probs, decision fields), or None where the compiled
    kernels or the block's plan (`routing.StepPlan` without a limit on the tokens) do not apply (tile 0:
    native mode's router linear). The plan is kept on the block while the policy stays the same object."""
    module = moe.kernels.module
    if module is None:
        return None
    pack = packed_weights(moe, module, x, None)
    if pack is None:
        return None
    if moe._plan is None or moe._plan.policy is not policy:
        moe._plan = StepPlan(policy, moe.n_experts, limit=None)
    plan = moe._plan.step(valid, pad)
    if plan is None:
        return None
    return module.moe_step(x, moe._parameters["router"], tile, *plan, *pack)
