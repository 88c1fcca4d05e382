"""First-order estimates of routing changes (attribution patching for routing).

One forward of one row over positions 0..t*-1 with its recorded routing forced everywhere, and one
backward, give the gradient of a target (the logit difference at t*, or a router margin) with
respect to every MoE layer's output at every position. A routing change at a cell (layer l,
position p) changes that output by delta = combine(h, new decision) - combine(h, own decision),
with h the MoE block's input there; the estimate of the change's effect is grad[l, p] . delta.
The combine is a gated sum over experts, so grad . combine(h, decision) = sum over the decision's
candidates of gate * (grad . expert_e(h)): one table score[l][p, e] = grad[l, p] . expert_e(h[l, p])
of every expert at every position (one pass of the E experts over the row per layer) turns any
decision's estimate into a weighted sum of K table entries. Every cell and thousands of random
changes cost one forward, one backward and one pass of the experts per layer. It holds the routing
of every other cell fixed (the batch's reaction is the exact rerun's business,
`lab.counterfactual.forced`), and it is a first-order estimate: exact patching confirms the cells
that matter (`lab.counterfactual.causal_map`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch

from model.experts import TORCH_VERSION, choose
from model.layers import swiglu
from model.replay import ReplayRouting, forced_for_step
from model.step import StepInputs


@dataclass
class Linearized:
    """One row's forward with its routing forced: per MoE layer, the block input h[T,C], output
    y[T,C], router scores probs[T,E] and the gradient of the target at y, grad[T,C]; the routing
    forced (expert, kept, gate [L,T,K])."""

    h: list[torch.Tensor]
    y: list[torch.Tensor]
    probs: list[torch.Tensor]
    grad: list[torch.Tensor]
    value: float            # the target itself
    routing: ReplayRouting
    _score: dict = field(default_factory=dict)   # layer -> (score[T,E], own[T]) float64, made once

    def score(self, model, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """score[T,E] = grad[p] . expert_e(h[p]) of every expert at every position of MoE layer `layer`,
        and own[T]: the forced decision's gated sum of it (grad . its output)."""
        if layer not in self._score:
            ffn = [b.ffn for b in model.blocks if b.is_moe][layer]
            h, grad = self.h[layer], self.grad[layer]
            with torch.no_grad():
                score = torch.stack([(swiglu(h, ffn.w_in[e], ffn.w_out[e], "native", 1) * grad).sum(-1)
                                     for e in range(ffn.n_experts)], -1).double()           # [T,E]
            T = h.shape[0]
            e = torch.as_tensor(np.asarray(self.routing.expert)[layer, :T]).long()       # [T,K]
            g = torch.as_tensor(np.asarray(self.routing.gate)[layer, :T]).double()
            k = torch.as_tensor(np.asarray(self.routing.kept)[layer, :T]).bool()
            self._score[layer] = (score, _weighted(score, torch.arange(T), e, k, g))
        return self._score[layer]


def supports_estimates(model) -> bool:
    """Whether the model exposes its MoE blocks for estimates (the project's own model)."""
    return hasattr(model, "blocks") and hasattr(model, "_kernel_parts")


@contextlib.contextmanager
def _autograd_kernels(model):
    """The pure-PyTorch path (differentiable) for the duration; the compiled kernels after."""
    parts = model._kernel_parts()
    before = [m.kernels for m in parts]
    torch_path = choose(TORCH_VERSION)
    for m in parts:
        m.kernels = torch_path
    try:
        yield
    finally:
        for m, k in zip(parts, before, strict=True):
            m.kernels = k


def linearize(model, policy, tokens: list[int], routing: ReplayRouting, target) -> Linearized:
    """Forward tokens[T] (positions 0..T-1, one row) with `routing` forced at every position and
    backward `target(logits[T,V], router_logits per layer [T,E]) -> scalar tensor`."""
    T = len(tokens)
    L = len(model.config.moe_layers)
    K = int(np.asarray(routing.expert).shape[-1])
    blocks = [b.ffn for b in model.blocks if b.is_moe]
    h, y, probs, router = [], [], [], []

    def hook(module, args, output):
        out, r = output
        leaf = out.detach().requires_grad_(True)
        h.append(args[0].detach()[0])
        y.append(leaf)
        probs.append(r.decision.probs.detach()[0])
        router.append(r.router_logits[0])
        return leaf, r

    tok = torch.tensor([tokens], device=model.device)
    pos = torch.arange(T, device=model.device)[None]
    valid = torch.ones((1, T), dtype=torch.bool, device=model.device)
    cut = ReplayRouting(np.asarray(routing.expert)[:, :T], np.asarray(routing.kept)[:, :T],
                        np.asarray(routing.gate)[:, :T])
    forced = forced_for_step({0: cut}, pos, valid, L, K)
    handles = [b.register_forward_hook(hook) for b in blocks]
    try:
        with torch.enable_grad(), _autograd_kernels(model):
            logits = model(tok, policy, kernel_mode="batch_invariant",
                           step=StepInputs(valid=valid, positions=pos, forced=forced)).logits[0]
            value = target(logits, router)
            grads = (torch.autograd.grad(value, y, allow_unused=True) if value.requires_grad
                     else [None] * len(y))
    finally:
        for handle in handles:
            handle.remove()
    grads = [torch.zeros_like(yy) if g is None else g for g, yy in zip(grads, y, strict=True)]
    return Linearized(h, [yy.detach()[0] for yy in y], probs, [g[0] for g in grads], float(value.detach()),
                      cut)


def gates(probs: torch.Tensor, expert: torch.Tensor, kept: torch.Tensor, norm: str) -> torch.Tensor:
    """The gates[N,K] the policy's normalization gives experts[N,K] with kept[N,K] (scores probs[N,E])."""
    raw = probs.gather(-1, expert.clamp_min(0)) * (expert >= 0)
    g = raw / raw.sum(-1, keepdim=True).clamp_min(1e-30) if norm == "before_drop" else raw
    g = torch.where(kept, g, torch.zeros_like(g))
    if norm == "after_drop":
        g = g / g.sum(-1, keepdim=True).clamp_min(1e-30)
    return g


def effects(model, lin: Linearized, layer: int, positions: np.ndarray, expert: np.ndarray,
            kept: np.ndarray, gate: np.ndarray | None, norm: str) -> np.ndarray:
    """Estimated effect [N] of giving position positions[N] of MoE layer `layer` the decision
    (expert, kept[N,K], gate[N,K]; None: the policy's gates from the row's own scores)."""
    if len(positions) == 0:
        return np.zeros(0)
    p = torch.as_tensor(np.asarray(positions), dtype=torch.long)
    e = torch.as_tensor(np.asarray(expert), dtype=torch.long)
    k = torch.as_tensor(np.asarray(kept), dtype=torch.bool)
    g = gates(lin.probs[layer][p], e, k, norm) if gate is None else torch.as_tensor(np.asarray(gate))
    score, own = lin.score(model, layer)
    return (_weighted(score, p, e, k, g.double()) - own[p]).numpy()


def _weighted(score: torch.Tensor, p: torch.Tensor, e: torch.Tensor, k: torch.Tensor,
              g: torch.Tensor) -> torch.Tensor:
    """[N] sum over the kept candidates of gate * score[p, expert] (decisions expert/kept/gate[N,K])."""
    s = score[p[:, None], e.clamp_min(0)]                        # [N,K]
    return torch.where(k & (e >= 0), g * s, torch.zeros_like(s)).sum(-1)
