"""Held-out quality under a routing condition: teacher-forced decoding with the generation loop's steps."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lab.experiments.conditions import capacity, dropless
from model.config import ModelConfig
from model.quality import QualityResult, held_out_windows, teacher_forced
from model.routing import RoutingPolicy
from model.transformer import MoETransformer


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return MoETransformer(ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, expert_d_ff=32,
                                      context=128, init_std=0.2)).eval()


@pytest.fixture(scope="module")
def windows():
    rng = np.random.default_rng(0)
    return held_out_windows(rng.integers(0, 256, 5000), 6, 40)


def test_dropless_teacher_forcing_scores_what_one_full_forward_scores(model, windows):
    # Dropless routing decides per token, so decoding step by step with the cache must give the
    # loss of one causal forward over the whole window (up to the reductions' rounding).
    policy = RoutingPolicy.preset("dropless")
    result = teacher_forced(model, windows, policy, prefill=8)
    x = torch.from_numpy(windows)
    with torch.no_grad():
        logits = model(x[:, :-1], policy).logits
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
    assert result.prefill_bytes + result.decode_bytes == x[:, 1:].numel()
    assert result.bits_per_byte == pytest.approx(float(nll) / x[:, 1:].numel() / math.log(2), rel=1e-5)
    assert result.decode_dropped == 0 and result.decode_chosen == 2 * 2 * 6 * (40 - 1 - 8)


def test_capacity_drops_at_decode_and_costs_bits_and_a_floor_gives_some_back(model, windows):
    ref = teacher_forced(model, windows, RoutingPolicy.preset("dropless"), prefill=8)
    tight = teacher_forced(model, windows, capacity("gshard", 0.5, "native").policy, prefill=8)
    floored = capacity("gshard", 0.5, "native", min_capacity=4).policy
    floor = teacher_forced(model, windows, floored, prefill=8)
    assert tight.decode_drop_share > floor.decode_drop_share
    assert tight.bits_per_byte != ref.bits_per_byte
    # a floor of 4 slots with 6 rows x 2 candidates over 4 experts still drops sometimes, never more
    assert floor.decode_dropped < tight.decode_dropped


def test_per_sequence_decode_cannot_drop(model, windows):
    # A per-sequence decode group is one token whose K candidates go to K different experts, each
    # with capacity >= 1: nothing can overflow, whatever the capacity factor.
    policy = capacity("gshard", 0.25, "native", group_by="sequence", pads_counted=False).policy
    result = teacher_forced(model, windows, policy, prefill=8)
    assert result.decode_chosen > 0 and result.decode_dropped == 0


def test_results_add_and_bad_input_is_refused(model, windows):
    a = QualityResult(1.0, 2, 3.0, 4, 5, 1)
    assert (a + a).decode_bytes == 8 and (a + a).decode_drop_share == pytest.approx(0.2)
    with pytest.raises(ValueError, match="prefill"):
        teacher_forced(model, windows, dropless().policy, prefill=40)
    with pytest.raises(ValueError, match="fewer than one window"):
        held_out_windows(np.zeros(10, np.int64), 2, 40)
