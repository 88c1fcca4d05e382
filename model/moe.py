"""Mixture-of-Experts feed-forward block: a router, capacity-limited routing, SwiGLU experts.

The block returns its routing as a value (`LayerRouting`) next to its output; nothing is stashed in
globals or hooks (unlike megablocks' module-level router-logit list). It sits in a residual branch:
a dropped candidate contributes zero, so a token whose candidates are all dropped passes unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from model import experts as backends
from model import kernels
from model.layers import swiglu
from model.routing import RoutingDecision, RoutingPolicy, route
from traces.records import KernelMode

#: Dtypes torch's grouped GEMM takes.
_GROUPED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_HAS_GROUPED_MM = hasattr(F, "grouped_mm")
#: Steps of at most this many candidates (N*K) sort their candidates on the host.
SMALL_CANDIDATES = 128


@dataclass(frozen=True)
class ForcedRouting:
    """Routing imposed on some tokens of one step of one layer (routing replay).

    Tokens with `mask[B,T]` take `expert`, `kept` and `gate` [B,T,K] from here instead of the router.
    """

    expert: torch.Tensor  # [B,T,K] int64
    kept: torch.Tensor  # [B,T,K] bool
    gate: torch.Tensor  # [B,T,K] float32 weight applied (0 when dropped)
    mask: torch.Tensor  # [B,T] bool tokens to force


@dataclass(frozen=True)
class LayerRouting:
    """What one MoE layer did in one forward step: the router's logits and the routing decision."""

    router_logits: torch.Tensor  # [B,T,E] float32
    decision: RoutingDecision  # after any forced routing
    forced: torch.Tensor | None = None  # [B,T] bool tokens whose routing was replayed


class Filled:
    """Builds instances of one frozen dataclass from its fields by name, the way its `__init__` would
    (the defaults of the fields not given, no `__post_init__` to run), without that `__init__`'s
    per-field `object.__setattr__`: a compiled decode step's two records in about a microsecond less."""

    def __init__(self, cls: type):
        if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
            raise TypeError(f"{cls.__name__} is not a plain frozen dataclass")
        fields = dataclasses.fields(cls)
        self.cls = cls
        self.names = [f.name for f in fields]
        self.defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        self.least = len(fields) - len(self.defaults)  # the fields without a default come first

    def __call__(self, *values):
        """An instance from the values of the first fields in order (the others take their defaults)."""
        if not self.least <= len(values) <= len(self.names):
            raise TypeError(f"{self.cls.__name__} takes {self.least} to {len(self.names)} fields, "
                            f"got {len(values)}")
        obj = object.__new__(self.cls)
        obj.__dict__.update(self.defaults)
        obj.__dict__.update(zip(self.names, values, strict=False))
        return obj


def apply_forced(decision: RoutingDecision, forced: ForcedRouting) -> RoutingDecision:
    """The decision with the forced tokens' expert, kept and gate replaced (slot and group kept:
    they describe the router's own queue, which the forced tokens still took part in)."""
    m = forced.mask[..., None]  # [B,T,1]
    return dataclasses.replace(
        decision,
        expert=torch.where(m, forced.expert.to(decision.expert.dtype), decision.expert),
        kept=torch.where(m, forced.kept, decision.kept),
        gate=torch.where(m, forced.gate.to(decision.gate.dtype), decision.gate),
    )


_DECISION = Filled(RoutingDecision)
_LAYER_ROUTING = Filled(LayerRouting)


class MoE(nn.Module):
    """E SwiGLU experts behind a linear router; routing semantics come from `model.routing.route`."""

    def __init__(self, d_model: int, n_experts: int, d_ff: int):
        super().__init__()
        self.n_experts = n_experts
        self.router = nn.Parameter(torch.empty(n_experts, d_model))  # [E, C]
        self.w_in = nn.Parameter(torch.empty(n_experts, 2 * d_ff, d_model))  # [E, 2F, C]
        self.w_out = nn.Parameter(torch.empty(n_experts, d_model, d_ff))  # [E, C, F]
        #: The kernels this block runs (`model.experts.choose`): the compiled path where built.
        self.kernels = backends.choose()
        self._pack: tuple[torch.Tensor, torch.Tensor, int] | None = None  # expert weights packed for it
        self._pack_key: tuple | None = None
        self._plan = None  # the compiled step's `routing.StepPlan` of the last policy
        self._all_valid: dict[tuple, torch.Tensor] = {}  # (B, T, device) -> valid[B,T] all True

    @property
    def kernel_version(self) -> int:
        """The version of the kernels this block runs (`model.kernels.KERNEL_VERSION` history)."""
        return self.kernels.version

    def use_kernels(self, version: int, isa: str | None = None) -> int:
        """Run the kernels of `version` (a trace's, to reproduce its bits), on path `isa` where given and
        available here. Returns the version now run."""
        self.kernels = backends.choose(version, isa)
        return self.kernel_version

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None, policy: RoutingPolicy, *,
                mode: str = "native", tile: int = 4, pad: torch.Tensor | None = None,
                forced: ForcedRouting | None = None, seed_offset: int = 0, edit=None,
                copies: int = 1) -> tuple[torch.Tensor, LayerRouting]:
        """x[B,T,C] -> (y[B,T,C], routing). `valid[B,T]` marks the tokens to route (None: every token, as
        a block used alone, outside a model's padded batch, is called).

        `edit` (a `model.intervention.LayerEdit`) changes one event of this step: its
        `before_route` may replace router logits, its `after_route` the decision. `copies`: the rows are
        that many stacked copies of one batch, each routed alone (`model.routing.route`).
        """
        if valid is None:
            valid = self._everyone(x)
        if forced is None and edit is None and copies == 1:
            tiles = 0 if mode == KernelMode.NATIVE else tile
            step = backends.compiled_step(self, x, valid, policy, pad, tiles)
            if step is not None:  # (y, logits, probs, then the decision's fields but probs, in order)
                y, logits, probs, *fields = step
                return y, _LAYER_ROUTING(logits, _DECISION(*fields, probs))
        router_logits = kernels.linear(x, self.router, mode, tile).float()  # [B,T,E]
        if edit is not None:
            router_logits = edit.before_route(router_logits)
        decision = route(router_logits, valid, policy, pad=pad, seed_offset=seed_offset,
                         compiled=self.kernels.module, copies=copies)
        if forced is not None:
            decision = apply_forced(decision, forced)
        if edit is not None:
            decision = edit.after_route(decision, policy.norm)
        y = self.combine(x, decision.expert, decision.kept, decision.gate, mode, tile)
        return y, LayerRouting(router_logits, decision, None if forced is None else forced.mask)

    def _everyone(self, x: torch.Tensor) -> torch.Tensor:
        """valid[B,T] with every token of x[B,T,C] routed: one read-only mask per shape and device, kept."""
        key = (x.shape[0], x.shape[1], x.device)
        mask = self._all_valid.get(key)
        if mask is None:
            if len(self._all_valid) > 64:
                self._all_valid.clear()
            mask = self._all_valid[key] = torch.ones(key[:2], dtype=torch.bool, device=x.device)
        return mask

    def combine(self, x: torch.Tensor, expert: torch.Tensor, kept: torch.Tensor, gate: torch.Tensor,
                mode: str, tile: int) -> torch.Tensor:
        """Sum over a token's kept candidates of gate * expert(x) (y[B,T,C]); dropped candidates add
        nothing. The experts backend of this block's kernels and `mode` computes it."""
        return self.kernels.experts(mode)(self, x, expert, kept, gate, tile)

    def torch_experts(self, x: torch.Tensor, expert: torch.Tensor, kept: torch.Tensor, gate: torch.Tensor,
                      mode: str, tile: int) -> torch.Tensor:
        """`combine` by the pure-PyTorch kernels (version 2).

        Kept candidates are sorted by expert (stable, so each expert sees its tokens in arrival order)
        and every expert runs once on its contiguous slice: one grouped GEMM over the E slices in
        native mode (megablocks' dropless grouped GEMM), fixed-size tiles in batch-invariant mode.
        The gated outputs are then added into their tokens' rows by one `index_add_` in that sorted
        order, so a token's contributions are added in expert order, an order that depends on
        nothing but the token's own routing.
        """
        B, T, C = x.shape
        K = expert.shape[-1]
        N = B * T
        xf = x.reshape(N, C)  # [N,C]
        cand, counts = self._candidates(expert, kept, x.device.type == "cpu" and N * K <= SMALL_CANDIDATES)
        token = cand // K  # [n]
        weight = gate.reshape(N * K, 1).to(x.dtype).index_select(0, cand)  # [n,1]
        xs = xf.index_select(0, token)  # [n,C]
        if mode == KernelMode.BATCH_INVARIANT:
            out = self._experts_tiled(xs, counts, tile, self._groupable(xs, weight)) * weight
        elif self._groupable(xs, weight):
            out = self._experts_grouped(xs, counts).mul_(weight)  # no autograd on this path
        else:
            out = self._experts_looped(xs, counts) * weight
        return xf.new_zeros(N, C).index_add_(0, token, out).view(B, T, C)

    def _candidates(self, expert: torch.Tensor, kept: torch.Tensor,
                    host: bool) -> tuple[torch.Tensor, list[int]]:
        """The kept candidates (index n*K + j) grouped by expert, arrival order inside ([n]), and each
        expert's count ([E]). `host`: a few candidates (a decode step) sorted and counted in numpy, a
        handful of microseconds where torch's sort, bincount and index arithmetic cost ~15 operator
        calls; the same stable order, so the same bits."""
        E = self.n_experts
        if host:
            flat = np.where(kept.reshape(-1).numpy(), expert.reshape(-1).numpy(), E)  # [N*K], E = dropped
            per_expert = np.bincount(flat, minlength=E + 1)  # [E+1]
            cand = np.argsort(flat, kind="stable")[:flat.size - int(per_expert[E])]
            return torch.from_numpy(cand), per_expert[:E].tolist()
        flat_expert = torch.where(kept, expert, E).reshape(-1)  # [N*K], E = dropped
        order = torch.sort(flat_expert, stable=True).indices
        counts: list[int] = torch.bincount(flat_expert, minlength=E + 1).tolist()
        return order[:flat_expert.numel() - counts[-1]], counts[:-1]

    def _groupable(self, xs: torch.Tensor, weight: torch.Tensor) -> bool:
        """Whether torch's grouped GEMM runs here as per-expert `mm`s: on the CPU (where its bits were
        checked), in a torch that has it, without autograd (it has no CPU backward, and this path
        works in place), on float matrices 16-byte aligned (their data and leading stride)."""
        if xs.device.type != "cpu" or not _HAS_GROUPED_MM:
            return False
        if torch.is_grad_enabled() and (xs.requires_grad or weight.requires_grad or self.w_in.requires_grad
                                        or self.w_out.requires_grad):
            return False
        for m in (xs, self.w_in, self.w_out):
            if m.dtype not in _GROUPED_DTYPES or not m.is_contiguous() or m.data_ptr() % 16 \
                    or m.shape[-1] * m.element_size() % 16:
                return False
        return True

    def _experts_grouped(self, xs: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Native experts as two grouped GEMMs: xs[n,C] sorted by expert (counts[E] rows each) ->
        outputs [n,C]. torch runs each group as the `mm` a per-expert `F.linear` runs, so the bits
        are those of `_experts_looped`, without a Python loop or an operator call per expert."""
        offs = torch.tensor(counts, dtype=torch.int32, device=xs.device).cumsum(0, dtype=torch.int32)  # [E]
        gate, up = F.grouped_mm(xs, self.w_in.transpose(1, 2), offs=offs).chunk(2, dim=-1)  # [n,F] each
        # silu(gate) * up written over gate (no autograd here): the same values, two fewer buffers
        return F.grouped_mm(F.silu(gate, inplace=True).mul_(up), self.w_out.transpose(1, 2), offs=offs)

    def _experts_looped(self, xs: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Native experts one at a time on their slices of xs[n,C] (sorted by expert) -> outputs
        [n,C]: where the grouped GEMM cannot run (training, unaligned widths, other devices)."""
        out = torch.empty_like(xs)
        start = 0
        for e, n_e in enumerate(counts):
            if n_e:
                rows = slice(start, start + n_e)
                out[rows] = swiglu(xs[rows], self.w_in[e], self.w_out[e], "native", 1)  # [n_e,C]
            start += n_e
        return out

    def _experts_tiled(self, xs: torch.Tensor, counts: list[int], tile: int, grouped: bool) -> torch.Tensor:
        """Batch-invariant experts: xs[n,C] sorted by expert (counts[E] rows each) -> outputs [n,C].

        Each expert's rows are cut into tiles of `tile` rows (the last one padded with zeros), so every
        row meets one fixed GEMM shape ([M,C] @ [C,2F], then [M,F] @ [F,C]) whatever the batch. Tile
        slot s of every expert that has one runs in one grouped GEMM (`grouped`: torch runs each group,
        here always one tile, as one `mm`), so an idle expert costs nothing; elsewhere (autograd, other
        devices) one bmm over all E experts per slot. The tiles' layout depends only on the counts.
        """
        E, M = self.n_experts, tile
        C = xs.shape[1]
        sizes = np.asarray(counts, dtype=np.int64)  # [E]
        n_slots = max(1, -(-int(sizes.max()) // M))
        tiles = -(-sizes // M)  # [E] tiles of each expert
        # present[s, e]: expert e has a tile in slot s; a grouped slot holds only those tiles, in expert order
        present = np.arange(n_slots)[:, None] < tiles[None, :] if grouped else np.ones((n_slots, E), bool)
        tile_row = (np.cumsum(present.reshape(-1)) - 1).reshape(n_slots, E) * M  # first row of tile (s, e)
        expert = np.repeat(np.arange(E), sizes)  # [n]
        rank = np.arange(len(expert)) - (np.cumsum(sizes) - sizes)[expert]  # row within its expert
        dest = torch.from_numpy(tile_row[rank // M, expert] + rank % M).to(xs.device)  # [n] row of its tile
        buf = xs.new_zeros(int(present.sum()) * M, C).index_copy_(0, dest, xs)  # [tiles*M, C]
        w_in, w_out = self.w_in.transpose(1, 2), self.w_out.transpose(1, 2)  # [E,C,2F], [E,F,C]
        outs, start = [], 0
        for slot in range(n_slots):
            rows = int(present[slot].sum()) * M
            x_s = buf[start:start + rows]  # [tiles of slot * M, C]
            start += rows
            if grouped:
                offs = torch.from_numpy(np.cumsum(present[slot] * M).astype(np.int32))  # [E]
                gate, up = F.grouped_mm(x_s, w_in, offs=offs).chunk(2, dim=-1)  # [rows,F] each
                outs.append(F.grouped_mm(F.silu(gate) * up, w_out, offs=offs))  # [rows,C]
            else:
                gate, up = torch.bmm(x_s.view(E, M, C), w_in).chunk(2, dim=-1)  # [E,M,F] each
                outs.append(torch.bmm(F.silu(gate) * up, w_out).view(E * M, C))
        out = outs[0] if n_slots == 1 else torch.cat(outs)  # [tiles*M, C]
        return out.index_select(0, dest)  # [n,C]
