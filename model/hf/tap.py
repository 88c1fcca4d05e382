"""The router seam: a forward hook on every MoE block's router submodule of a Hugging Face model.

The hook sees the router's output (router_logits[N,E], weights[N,K], indices[N,K]) for the block's
tokens, N = B*T in row-major order. It hands them, as [B,T,...], to `route` with the model's own
choices (`chosen`), so every step yields the project's `LayerRouting` values (slots, groups, loads)
next to the logits. Native (a dropless policy, nothing replayed or edited): the router's output goes
on to the experts untouched, so the forward is the unmodified model's. Imposed: the experts get the
policy's decision; a dropped candidate goes to the sentinel index E with weight 0 (see
`model.hf.families` for the families where it keeps its index instead).

Routing is collected per step in the tap object the bridge owns, never in a global.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from model.moe import LayerRouting, apply_forced
from model.routing import RoutingPolicy, route
from model.step import StepInputs


@dataclass
class StepContext:
    """What the hooks need to know about the forward step in flight."""

    B: int
    T: int
    valid: torch.Tensor  # [B,T] bool tokens to route
    policy: RoutingPolicy
    impose: bool  # hand the policy's decision to the experts (else the router's own output)
    step: StepInputs  # pads, step index, replay and edits of the step
    to_left: torch.Tensor | None = None  # [B,T] model column u <- caller column (None: same layout)
    to_right: torch.Tensor | None = None  # [B,T] caller column t <- model column
    routing: list[LayerRouting] = field(default_factory=list)

    def caller(self, x: torch.Tensor) -> torch.Tensor:
        """x[B,T,...] of the model's layout in the caller's."""
        return x if self.to_right is None else _gather_cols(x, self.to_right)

    def model(self, x: torch.Tensor) -> torch.Tensor:
        """x[B,T,...] of the caller's layout in the model's."""
        return x if self.to_left is None else _gather_cols(x, self.to_left)


def _gather_cols(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[B,T,...] with column t of row b taken from column index[b,t]."""
    idx = index.to(x.device).view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)


class RouterTap:
    """Hooks on the routers of `blocks` (the MoE blocks, in layer order) of one model."""

    def __init__(self, blocks: list[torch.nn.Module], family, config):
        self.family = family
        self.config = config
        self.E = family.num_experts(config)
        self.context: StepContext | None = None
        self._handles = []
        for li, block in enumerate(blocks):
            router = getattr(block, family.router_attr)
            self._handles.append(router.register_forward_hook(self._hook(li, router)))

    def close(self) -> None:
        """Remove the hooks: the model is the unmodified one again."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def _hook(self, li: int, router: torch.nn.Module):
        def hook(module, args, output):
            ctx = self.context
            if ctx is None:  # a call outside the bridge (e.g. HF's own generate): leave it alone
                return None
            return self._route(li, router, ctx, output)
        return hook

    def _route(self, li: int, router, ctx: StepContext, output):
        logits, weights, index = output  # [N,E], [N,K], [N,K]
        B, T, E = ctx.B, ctx.T, self.E
        K = index.shape[-1]
        z = ctx.caller(logits.float().view(B, T, E))  # [B,T,E] exact for float16/bfloat16 logits
        weights = ctx.caller(weights.view(B, T, K))
        index = ctx.caller(index.view(B, T, K))
        edit = ctx.step.edit_at(li)
        if edit is not None:
            z2 = edit.before_route(z)
            if not torch.equal(z2, z):  # a token's router logits replaced: route it as the model would
                z = z2
                w, i = self.family.choose(router, z.view(B * T, E).to(logits.dtype))
                weights, index = w.view(B, T, K), i.view(B, T, K)
        # with device_map="auto" a layer may sit on another device than the inputs
        valid = ctx.valid.to(z.device)
        pad = None if ctx.step.pad is None else ctx.step.pad.to(z.device)
        decision = route(z, valid, ctx.policy, pad=pad, seed_offset=ctx.step.seed_offset(li),
                         chosen=(index, weights), copies=ctx.step.copies)
        forced = ctx.step.forced_at(li)
        if forced is not None:
            decision = apply_forced(decision, forced)
        if edit is not None:
            # the model's gates are already normalised as it does: before_drop leaves them as they are
            norm = "none" if ctx.policy.norm == "before_drop" else ctx.policy.norm
            decision = edit.after_route(decision, norm)
        home = ctx.valid.device  # the recorder stacks the layers: keep them on the inputs' device
        moved = decision if z.device == home else dataclasses.replace(
            decision, **{f.name: getattr(decision, f.name).to(home) for f in dataclasses.fields(decision)})
        ctx.routing.append(LayerRouting(z.to(home), moved, None if forced is None else forced.mask))
        if not (ctx.impose or forced is not None or edit is not None):
            return None  # native: the experts get the router's own output
        gate, expert = self._experts_input(decision, weights, index)  # [B,T,K] caller's layout
        return logits, ctx.model(gate).reshape(B * T, K), ctx.model(expert).reshape(B * T, K)

    def _experts_input(self, d, weights: torch.Tensor, index: torch.Tensor):
        """(weights, indices)[B,T,K] for the experts from decision `d`; dropped and unrouted candidates
        weigh 0 and go to the sentinel E, or keep an index when the experts cannot skip E."""
        expert = d.expert.to(index.dtype)
        kept = d.kept
        if self.family.uses_sentinel(self.config):
            expert = torch.where(kept, expert, self.E)
        else:  # unrouted tokens (expert -1) take the router's index, at weight 0
            expert = torch.where(expert >= 0, expert, index)
        gate = torch.where(kept, d.gate, 0.0).to(weights.dtype)
        return gate, expert
