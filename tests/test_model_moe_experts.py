"""Native experts as one grouped GEMM: the routing bitwise that of the per-expert loop it replaced
(each expert's `F.linear` on its kept rows, added into y expert by expert), and the block's output
within `ULPS` of it, whatever the policy, the batch shape or the path the block takes.

A grouped GEMM and a loop of `F.linear`s are two computations: on one CPU they give the same bits, on
another their blockings may round an ulp apart. The looped fallback runs the loop's own operations on
the same shapes, so it is compared bit for bit."""

import dataclasses

import pytest
import torch
from ulps import assert_within_ulps

from model import kernels
from model.layers import swiglu
from model.moe import MoE
from model.routing import RoutingPolicy, route

POLICIES = {
    "gshard cf 1.0 per batch": RoutingPolicy.preset("gshard", capacity_formula="deepspeed",
                                                    capacity_factor=1.0),
    "gshard cf 0.5 per sequence": RoutingPolicy.preset("gshard", capacity_formula="deepspeed",
                                                       capacity_factor=0.5, group_by="sequence"),
    "dropless": RoutingPolicy.preset("dropless"),
    "switch top-1": RoutingPolicy.preset("deepspeed_top1"),
    "expert choice (a token kept by up to E experts)": RoutingPolicy.preset("expert_choice"),
    "random priority": RoutingPolicy.preset("gshard", priority="random", capacity_factor=1.0),
}
SHAPES = [(8, 64), (8, 1), (1, 1), (3, 17)]  # prefill, decode, one token, ragged
#: How far the grouped GEMM's output may be from the loop's, in ulps of the output's magnitude.
ULPS = 16


def per_expert_loop(moe: MoE, x: torch.Tensor, expert, kept, gate) -> torch.Tensor:
    """The block's former native combine: expert e's `F.linear`s on its kept rows (arrival order), its
    gated outputs added into y before expert e + 1's."""
    B, T, C = x.shape
    K = expert.shape[-1]
    xf, w = x.reshape(B * T, C), gate.reshape(-1, 1)
    flat = torch.where(kept, expert, moe.n_experts).reshape(-1)
    y = torch.zeros(B * T, C)
    for e in range(moe.n_experts):
        cand = (flat == e).nonzero().squeeze(1)
        if len(cand):
            out = swiglu(xf[cand // K], moe.w_in[e], moe.w_out[e], "native", 4)
            y.index_add_(0, cand // K, out * w[cand])
    return y.view(B, T, C)


def block(d_model: int, n_experts: int, d_ff: int, seed: int = 0) -> MoE:
    torch.manual_seed(seed)
    moe = MoE(d_model, n_experts, d_ff)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return moe


@pytest.mark.parametrize("name", POLICIES)
def test_grouped_experts_keep_the_decisions_and_the_bits_of_the_per_expert_loop(name):
    policy = POLICIES[name]
    for d_model, n_experts, d_ff in ((128, 8, 256), (32, 4, 32)):  # the shipped shape, the tests' tiny one
        moe = block(d_model, n_experts, d_ff)
        with torch.no_grad():  # else this test would not run the grouped GEMM
            assert moe._groupable(torch.zeros(4, d_model), torch.ones(4, 1))
        for B, T in SHAPES:
            x = torch.randn(B, T, d_model)
            valid = torch.rand(B, T) < 0.8
            valid[0, 0] = True
            with torch.no_grad():
                y, routing = moe(x, valid, policy)
                d = route(kernels.linear(x, moe.router).float(), valid, policy)
                expect = per_expert_loop(moe, x, d.expert, d.kept, d.gate)
            for field in dataclasses.fields(d):
                assert torch.equal(getattr(routing.decision, field.name), getattr(d, field.name)), field.name
            assert_within_ulps(y, expect, ULPS, f"{name}, d_model {d_model}, B={B} T={T}")


def test_the_looped_fallback_gives_the_same_bits_with_autograd_or_unaligned_widths():
    policy = POLICIES["gshard cf 1.0 per batch"]
    # (d_ff, what needs a gradient): 6 float32 = 24 bytes is not 16-byte aligned
    for d_ff, grad in ((256, "experts"), (256, "gates"), (6, None)):
        moe = block(128, 8, d_ff, seed=3)
        moe.requires_grad_(grad == "experts")
        x = torch.randn(4, 33, 128)
        valid = torch.ones(4, 33, dtype=torch.bool)
        with torch.no_grad():
            d = route(kernels.linear(x, moe.router).float(), valid, policy)
            expect = per_expert_loop(moe, x, d.expert, d.kept, d.gate)
        gate = d.gate.clone().requires_grad_(grad == "gates")
        with torch.set_grad_enabled(grad is not None):
            assert moe._groupable(x.reshape(-1, 128), gate.reshape(-1, 1)) is False
            y = moe.combine(x, d.expert, d.kept, gate, "native", 4)
        assert torch.equal(y.detach(), expect)
        if grad is not None:
            y.sum().backward()  # the fallback trains: gradients reach every expert that got rows
            if grad == "experts":
                used = torch.bincount(d.expert[d.kept], minlength=8) > 0
                assert (moe.w_in.grad.flatten(1).abs().sum(1) > 0).eq(used).all()
            else:
                assert (gate.grad[d.kept] != 0).all() and (gate.grad[~d.kept] == 0).all()


def test_no_kept_candidate_gives_zeros():
    moe = block(32, 4, 32)
    x = torch.randn(2, 3, 32)
    expert = torch.zeros(2, 3, 2, dtype=torch.int64)
    kept = torch.zeros(2, 3, 2, dtype=torch.bool)
    with torch.no_grad():
        y = moe.combine(x, expert, kept, torch.zeros(2, 3, 2), "native", 4)
    assert torch.equal(y, torch.zeros(2, 3, 32))
