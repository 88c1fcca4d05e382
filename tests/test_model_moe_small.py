"""A small step's MoE block (host-sorted candidates) runs the operations of the tensor path on the same
shapes, so its output is compared bit for bit with that path's, in both kernel modes; batch-invariant
expert tiles keep a row's bits whatever shares its step."""

import pytest
import torch
from ulps import assert_within_ulps

from model import moe as moe_module
from model.moe import MoE
from model.routing import RoutingPolicy, route

#: How far two computations of the same expert tiles may be apart, in ulps of the output's magnitude.
ULPS = 16
GSHARD = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
POLICIES = [GSHARD, GSHARD.replace(capacity_factor=0.5, group_by="sequence"),
            RoutingPolicy.preset("dropless"), RoutingPolicy.preset("expert_choice")]


def _block(seed: int) -> MoE:
    torch.manual_seed(seed)
    moe = MoE(32, 8, 48)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return moe


@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: f"{p.priority}-{p.capacity_mode}-{p.group_by}")
def test_small_steps_combine_bit_for_bit_as_the_tensor_path(policy, mode, monkeypatch):
    moe = _block(0)
    for B, T in [(8, 1), (1, 1), (3, 5), (2, 7)]:
        x = torch.randn(B, T, 32)
        valid = torch.rand(B, T) < 0.9
        with torch.no_grad():
            d = route(x @ moe.router.T, valid, policy)
            small = moe.combine(x, d.expert, d.kept, d.gate, mode, 4)
            with monkeypatch.context() as m:
                m.setattr(moe_module, "SMALL_CANDIDATES", 0)
                tensor_path = moe.combine(x, d.expert, d.kept, d.gate, mode, 4)
        assert torch.equal(small.view(torch.int32), tensor_path.view(torch.int32)), (B, T)


def test_a_decode_step_is_batch_invariant_in_batch_invariant_mode():
    """A row's output at decode is bitwise the same alone and among 7 others (per-sequence groups)."""
    moe = _block(1)
    policy = GSHARD.replace(group_by="sequence")
    x = torch.randn(8, 1, 32)
    with torch.no_grad():
        together, _ = moe(x, torch.ones(8, 1, dtype=torch.bool), policy, mode="batch_invariant")
        for b in range(8):
            alone, _ = moe(x[b:b + 1], torch.ones(1, 1, dtype=torch.bool), policy, mode="batch_invariant")
            assert torch.equal(alone[0].view(torch.int32), together[b].view(torch.int32))


@pytest.mark.parametrize("tile", [1, 4])
def test_batch_invariant_tiles_agree_through_the_grouped_gemm_and_the_bmm_fallback(tile):
    """Two computations of the same tiles (one `mm` per tile through torch's grouped GEMM, or one bmm
    over all experts per slot, where autograd or another device rules the grouped GEMM out): within
    ULPS, never compared bit for bit."""
    moe = _block(2)
    counts = [0, 3, 9, 1, 0, 4, 2, 5]
    xs = torch.randn(sum(counts), 32)
    with torch.no_grad():
        grouped = moe._experts_tiled(xs, counts, tile, grouped=True)
        fallback = moe._experts_tiled(xs, counts, tile, grouped=False)
    assert_within_ulps(grouped, fallback, ULPS, "tiled experts")
