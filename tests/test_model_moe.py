"""The MoE block: one expert is a dense FFN, capacity coupling drops what the probe keeps alone."""

import torch
from ulps import assert_within_ulps

from model.layers import SwiGLU
from model.moe import MoE
from model.routing import RoutingPolicy
from model.tokenizer import encode

FIELDS = ("expert", "kept", "gate", "slot", "group", "requested", "kept_count", "group_tokens")
MODE = "batch_invariant"  # numerics equal in every batch: differences come from capacity alone


def test_one_expert_top1_dropless_equals_the_dense_ffn():
    torch.manual_seed(1)
    moe = MoE(d_model=16, n_experts=1, d_ff=24)
    dense = SwiGLU(d_model=16, d_ff=24)
    for p in (*moe.parameters(), *dense.parameters()):
        torch.nn.init.normal_(p, std=0.3)
    dense.w_in.data.copy_(moe.w_in.data[0])
    dense.w_out.data.copy_(moe.w_out.data[0])
    x = torch.randn(3, 7, 16)  # [B,T,C]
    valid = torch.ones(3, 7, dtype=torch.bool)
    policy = RoutingPolicy.preset("dropless", top_k=1)
    with torch.no_grad():
        for mode in ("native", "batch_invariant"):
            y, routing = moe(x, valid, policy, mode=mode)
            assert routing.decision.kept.all() and (routing.decision.gate == 1.0).all()
            # the block's expert GEMM (grouped, or tiled) against the dense F.linear: two computations
            assert_within_ulps(y, dense(x, mode), 16, mode)


def test_dropped_candidates_contribute_zero_and_pads_are_not_routed(tiny_model):
    model = tiny_model()
    moe = model.blocks[0].ffn
    x = torch.randn(2, 5, 32)
    valid = torch.tensor([[True] * 5, [True, True, True, False, False]])
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    with torch.no_grad():
        y, routing = moe(x, valid, policy)
        d = routing.decision
        assert (d.expert[~valid] == -1).all() and (d.group[~valid] == -1).all()
        assert (y[~valid] == 0).all()  # a token with no kept candidate passes the residual unchanged
        assert (d.gate[~d.kept] == 0).all()
        # Recompute every token from its kept candidates alone.
        for b, t in valid.nonzero().tolist():
            expect = torch.zeros(32)
            for j in range(2):
                if d.kept[b, t, j]:
                    e = int(d.expert[b, t, j])
                    h = torch.nn.functional.linear(x[b, t], moe.w_in[e]).chunk(2)
                    expect += d.gate[b, t, j] * torch.nn.functional.linear(
                        torch.nn.functional.silu(h[0]) * h[1], moe.w_out[e])
            torch.testing.assert_close(y[b, t], expect, rtol=1e-5, atol=1e-6)


def test_batch_grouping_partners_crowding_the_probes_experts_drop_what_it_keeps_alone(tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    probe = encode("def probe(x): return x")
    with torch.no_grad():
        alone = model(torch.tensor([probe]), policy, kernel_mode=MODE).routing[0].decision
        favourite = int(torch.bincount(alone.expert[0, :, 0], minlength=4).argmax())
        # Partners: sequences of one byte whose first choice at layer 0 is the probe's favourite expert.
        crowd = []
        for byte in range(32, 127):
            d = model(torch.tensor([[byte] * len(probe)]), policy, kernel_mode=MODE).routing[0].decision
            if (d.expert[0, :, 0] == favourite).float().mean() > 0.8:
                crowd.append([byte] * len(probe))
            if len(crowd) == 3:
                break
        assert crowd, "no byte prefers the probe's favourite expert"
        batch = model(torch.tensor(crowd + [probe]), policy, kernel_mode=MODE).routing[0].decision
    kept_alone, kept_crowded = alone.kept[0], batch.kept[len(crowd)]
    assert torch.equal(alone.expert[0], batch.expert[len(crowd)])  # same choices: capacity, not numerics
    lost = kept_alone & ~kept_crowded
    assert lost.any(), "the crowded batch should drop candidates the probe keeps alone"
    assert (batch.expert[len(crowd)][lost] == favourite).any()


def test_a_block_called_without_a_mask_routes_every_token_as_an_all_true_mask_does(tiny_model):
    model = tiny_model()
    moe = model.blocks[0].ffn
    x = torch.randn(2, 5, 32)
    everyone = torch.ones(2, 5, dtype=torch.bool)
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    # no autograd: the compiled step where built; autograd: the tensor path (same operations either side)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            for mode in ("native", "batch_invariant"):
                y, routing = moe(x, None, policy, mode=mode)
                y_mask, with_mask = moe(x, everyone, policy, mode=mode)
                assert torch.equal(y, y_mask) and torch.equal(routing.router_logits, with_mask.router_logits)
                for name in FIELDS:
                    a, b = getattr(routing.decision, name), getattr(with_mask.decision, name)
                    assert torch.equal(a, b), name
                assert (routing.decision.group >= 0).all()  # every token routed
    # a mask is kept per shape: another step's shape routes all of its own tokens
    with torch.no_grad():
        y, routing = moe(x[:, :3], None, policy)
    assert y.shape == (2, 3, 32) and routing.decision.group.shape == (2, 3)
    assert (routing.decision.group >= 0).all()
