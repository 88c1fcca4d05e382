"""Kernel modes: batch_invariant computes the same maths as native, and each row in one shape class."""

import pytest
import torch

from model import kernels
from model.config import ModelConfig
from model.routing import RoutingPolicy
from model.tokenizer import encode
from model.transformer import MoETransformer


def test_batch_invariant_linear_gives_a_row_the_same_bits_at_every_batch_size_and_row():
    torch.manual_seed(0)
    weight = torch.randn(96, 64)
    x = torch.randn(70, 64)
    ref = kernels.linear(x[:1], weight, "batch_invariant")[0]
    for B in (1, 2, 3, 5, 16, 17, 33, 70):
        for r in {0, B // 2, B - 1}:
            rows = x[:B].clone()
            rows[r] = x[0]
            assert torch.equal(kernels.linear(rows, weight, "batch_invariant")[r], ref), (B, r)
    torch.testing.assert_close(kernels.linear(x, weight, "batch_invariant"), x @ weight.T)


@pytest.mark.parametrize("Tq, Tk", [(1, 1), (1, 70), (5, 130), (40, 40)])
def test_blocked_attention_matches_native_attention(Tq, Tk):
    torch.manual_seed(Tq + Tk)
    B, H, D = 3, 2, 16
    q, k, v = torch.randn(B, H, Tq, D), torch.randn(B, H, Tk, D), torch.randn(B, H, Tk, D)
    q_pos = torch.stack([torch.arange(Tk - Tq, Tk) - b for b in range(B)]).clamp_min(0)  # per-row positions
    native = kernels.attention(q, k, v, q_pos, "native")
    invariant = kernels.attention(q, k, v, q_pos, "batch_invariant", tile=8)
    torch.testing.assert_close(invariant, native, rtol=1e-5, atol=1e-5)


def test_batch_invariant_model_computes_the_native_model_up_to_rounding():
    torch.manual_seed(0)
    model = MoETransformer(ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, expert_d_ff=32,
                                       context=128, init_std=0.2)).eval()
    tokens = torch.tensor([encode("x" * 90, bos=True)])
    policy = RoutingPolicy.preset("dropless")
    with torch.no_grad():
        native = model(tokens, policy).logits
        invariant = model(tokens, policy, kernel_mode="batch_invariant").logits
    torch.testing.assert_close(invariant, native, rtol=1e-4, atol=1e-4)
