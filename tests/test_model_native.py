"""The compiled MoE kernels (kernel version 3, model/native/) against the pure-PyTorch path they replace.

The router's decision is the same bit for bit (the same integer steps and float operations); the experts
agree with the torch path within a stated tolerance and in every decision, and are batch-invariant by
construction (a row's bits do not depend on the rows beside it or on the step's size). A whole native
step in one call equals the step taken in parts (the path a replay or an intervention takes), bit for
bit, so a rerun with nothing changed reproduces a recording.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from model import experts as backends
from model import native
from model.kernels import KERNEL_VERSION, TORCH_KERNEL_VERSION
from model.moe import ForcedRouting, MoE
from model.routing import RoutingDecision, RoutingPolicy, _route_small, compiled_plan, route

pytestmark = pytest.mark.skipif(native.load() is None, reason="the compiled MoE kernels are not built here "
                                "(no C++ compiler at set-up: `python -m model.native` says why)")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def _same_decision(a: RoutingDecision, b: RoutingDecision) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert x.dtype == y.dtype and x.shape == y.shape, f.name
        assert torch.equal(_bits(x), _bits(y)), f.name


def _policies(rng: np.random.Generator, K: int):
    for _ in range(6):
        yield RoutingPolicy(top_k=K, group_by=str(rng.choice(["batch", "sequence"])),
                            flatten=str(rng.choice(["batch_major", "seq_major"])),
                            capacity_mode=str(rng.choice(["dropless", "factor"])),
                            capacity_factor=float(rng.choice([0.5, 1.0, 1.25])),
                            priority=str(rng.choice(["kmajor_position", "token_major_position"])),
                            norm=str(rng.choice(["none", "before_drop", "after_drop"])))


def test_the_compiled_router_decides_as_the_host_path_bit_for_bit():
    rng = np.random.default_rng(0)
    cases = 0
    for _ in range(40):
        B, T = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        E, K = int(rng.integers(2, 9)), int(rng.integers(1, 3))
        logits = torch.from_numpy(rng.standard_normal((B, T, E)).astype(np.float32))
        tie = torch.from_numpy(rng.random((B, T)) < 0.3)
        logits[..., 1] = torch.where(tie, logits[..., 0], logits[..., 1])
        probs = torch.softmax(logits, -1)  # exact ties between experts 0 and 1 in about a third of the tokens
        routed = torch.from_numpy(rng.random((B, T)) < 0.8)
        counted = routed | torch.from_numpy(rng.random((B, T)) < 0.2)
        for policy in _policies(rng, K):
            want = _route_small(probs, routed, counted, policy, K)
            plan = compiled_plan(policy, routed, counted, E)
            have = RoutingDecision(*native.load().route_position(probs, *plan), probs=probs)
            _same_decision(have, want)
            cases += 1
    assert cases == 240


def test_a_score_that_is_not_finite_is_left_to_the_tensor_paths():
    probs = torch.full((1, 2, 4), 0.25)
    probs[0, 1, 2] = float("nan")
    valid = torch.ones(1, 2, dtype=torch.bool)
    plan = compiled_plan(RoutingPolicy.preset("dropless"), valid, valid, 4)
    assert native.load().route_position(probs, *plan) is None


def _block(C: int = 64, E: int = 8, F: int = 96, seed: int = 0) -> MoE:
    torch.manual_seed(seed)
    moe = MoE(C, E, F).eval()
    for p in (moe.router, moe.w_in, moe.w_out):
        torch.nn.init.normal_(p, std=0.1)
    return moe


@pytest.mark.parametrize("tokens", [1, 8, 64, 300])
@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
def test_the_compiled_experts_agree_with_the_torch_path_in_decisions_and_within_tolerance(tokens, mode):
    moe = _block()
    policy = RoutingPolicy.preset("gshard", capacity_factor=1.0)
    x = torch.randn(1, tokens, 64, generator=torch.Generator().manual_seed(tokens))
    valid = torch.ones(1, tokens, dtype=torch.bool)
    with torch.no_grad():
        assert moe.use_kernels(KERNEL_VERSION) == KERNEL_VERSION
        y3, r3 = moe(x, valid, policy, mode=mode)
        assert moe.use_kernels(TORCH_KERNEL_VERSION) == TORCH_KERNEL_VERSION
        y2, r2 = moe(x, valid, policy, mode=mode)
    _same_decision(r3.decision, r2.decision)  # the router's logits and decision keep their bits
    assert torch.equal(r3.router_logits, r2.router_logits)
    # Two computations: one fused multiply-add chain per output against torch's GEMMs; float32 sums of
    # 64 and 96 products of unit-scale terms differ by a few ulps of the largest partial sum.
    scale = y2.abs().max().item()
    assert (y3 - y2).abs().max().item() <= 1e-5 * max(scale, 1.0)
    assert (r3.decision.kept.sum() < r3.decision.expert.ge(0).sum()) or tokens < 8  # capacity dropped some


@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
def test_a_rows_compiled_experts_do_not_depend_on_the_rows_beside_it(mode):
    moe = _block(seed=1)
    policy = RoutingPolicy.preset("dropless")
    x = torch.randn(1, 300, 64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y_all, r_all = moe(x, torch.ones(1, 300, dtype=torch.bool), policy, mode=mode)
        for t in (0, 7, 299):
            d = r_all.decision
            one = slice(t, t + 1)
            alone = moe.combine(x[:, one], d.expert[:, one], d.kept[:, one], d.gate[:, one], mode, 4)
            assert torch.equal(alone, y_all[:, one])
            eight = moe.combine(x[:, one].expand(1, 8, 64), d.expert[:, one].expand(1, 8, 2),
                                d.kept[:, one].expand(1, 8, 2), d.gate[:, one].expand(1, 8, 2), mode, 4)
            assert torch.equal(eight, y_all[:, one].expand(1, 8, 64))


@pytest.mark.parametrize("shape", [(1, 300), (3, 50), (2, 1100)])
def test_a_prefill_in_one_call_decides_as_the_tensor_path_bit_for_bit(shape):
    """Steps of more than 64 tokens also route in the compiled step: every position policy (groups,
    flatten, capacity, priority, norm), with pads and unrouted tokens, gives the tensor path's decision."""
    B, T = shape
    rng = np.random.default_rng(B * T)
    moe = _block(seed=4)
    x = torch.randn(B, T, 64, generator=torch.Generator().manual_seed(T))
    valid = torch.from_numpy(rng.random((B, T)) < 0.9)
    pad = ~valid & torch.from_numpy(rng.random((B, T)) < 0.5)
    with torch.no_grad():
        for policy in _policies(rng, 2):
            routed = bool(rng.integers(2))  # a routed pad occupies a slot: it counts in S
            policy = dataclasses.replace(policy, pads_routed=routed,
                                         pads_count_toward_capacity=routed or bool(rng.integers(2)))
            moe.use_kernels(KERNEL_VERSION)
            assert backends.compiled_step(moe, x, valid, policy, pad, 0) is not None  # one call decides it
            y3, r3 = moe(x, valid, policy, pad=pad)
            moe.use_kernels(TORCH_KERNEL_VERSION)
            y2, r2 = moe(x, valid, policy, pad=pad)
            assert torch.equal(r3.router_logits, r2.router_logits)
            _same_decision(r3.decision, r2.decision)
            assert (y3 - y2).abs().max().item() <= 1e-5 * max(y2.abs().max().item(), 1.0)


@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
def test_a_rows_bits_in_a_prefill_equal_its_bits_alone(mode):
    """A prefill of small experts runs the activations and the outputs as one item per block of rows
    (from 768 candidate rows on, here 2000); a row's experts give the bits it has alone (the three
    phases) and in a decode step of 8."""
    moe = _block(seed=5)
    policy = RoutingPolicy.preset("dropless")
    x = torch.randn(1, 1000, 64, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        y_all, r_all = moe(x, torch.ones(1, 1000, dtype=torch.bool), policy, mode=mode)
        d = r_all.decision
        for t in (0, 499, 999):
            one, eight = slice(t, t + 1), slice(min(t, 992), min(t, 992) + 8)
            alone = moe.combine(x[:, one], d.expert[:, one], d.kept[:, one], d.gate[:, one], mode, 4)
            assert torch.equal(alone, y_all[:, one])
            step = moe.combine(x[:, eight], d.expert[:, eight], d.kept[:, eight], d.gate[:, eight], mode, 4)
            assert torch.equal(step, y_all[:, eight])


@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
def test_a_step_in_one_call_equals_the_step_in_parts_bit_for_bit(mode):
    """The recording's step (one compiled call) against the step a replay takes (router, route, then
    the experts: `forced` with nothing forced)."""
    moe = _block(seed=2)
    policy = RoutingPolicy.preset("gshard", capacity_factor=1.0)
    x = torch.randn(4, 1, 64, generator=torch.Generator().manual_seed(2))
    valid = torch.ones(4, 1, dtype=torch.bool)
    nothing = ForcedRouting(expert=torch.zeros(4, 1, 2, dtype=torch.int64),
                            kept=torch.zeros(4, 1, 2, dtype=torch.bool), gate=torch.zeros(4, 1, 2),
                            mask=torch.zeros(4, 1, dtype=torch.bool))
    with torch.no_grad():
        tile = 0 if mode == "native" else 4
        assert backends.compiled_step(moe, x, valid, policy, None, tile) is not None  # the one-call path runs
        y1, r1 = moe(x, valid, policy, mode=mode)
        y2, r2 = moe(x, valid, policy, mode=mode, forced=nothing)
    assert torch.equal(y1, y2)
    assert torch.equal(r1.router_logits, r2.router_logits) and r1.forced is None
    assert type(r1.decision) is RoutingDecision and vars(r1.decision).keys() == vars(r2.decision).keys()
    _same_decision(r1.decision, r2.decision)
    assert torch.equal(r1.decision.probs, route(r1.router_logits, valid, policy).probs)


def test_the_packed_weights_follow_every_change_of_the_weights():
    moe = _block(seed=3)
    policy = RoutingPolicy.preset("dropless")
    x = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(3))
    valid = torch.ones(2, 3, dtype=torch.bool)
    with torch.no_grad():
        before, _ = moe(x, valid, policy)
        moe.w_out.mul_(2.0)  # an in-place write (an optimiser step, a load)
        doubled, _ = moe(x, valid, policy)
        moe.w_out.data = moe.w_out.data / 2.0  # new storage
        again, _ = moe(x, valid, policy)
    torch.testing.assert_close(doubled, 2 * before, rtol=1e-6, atol=1e-6)
    assert torch.equal(again, before)


def test_autograd_takes_the_torch_path_and_its_gradients_flow():
    moe = _block(seed=4).train()
    x = torch.randn(1, 4, 64, requires_grad=True)
    y, _ = moe(x, torch.ones(1, 4, dtype=torch.bool), RoutingPolicy.preset("dropless"))
    y.sum().backward()
    assert x.grad is not None and moe.w_in.grad is not None and moe.w_in.grad.abs().sum() > 0


def test_without_the_build_the_model_runs_and_records_version_2(monkeypatch, tmp_path):
    monkeypatch.setenv("MOE_INSPECTOR_BUILD_DIR", str(tmp_path))
    native.load.cache_clear()
    native.load_path.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="not built"):
            assert native.load() is None
        moe = _block()
        assert not moe.kernels.compiled and moe.kernel_version == TORCH_KERNEL_VERSION
        assert moe.kernels.path == "2-torch"
        assert moe.use_kernels(KERNEL_VERSION) == TORCH_KERNEL_VERSION  # a version-3 trace: the torch path
        valid = torch.ones(1, 4, dtype=torch.bool)
        y, _ = moe(torch.randn(1, 4, 64), valid, RoutingPolicy.preset("dropless"))
        assert y.shape == (1, 4, 64)
    finally:
        monkeypatch.undo()
        native.load.cache_clear()
        native.load_path.cache_clear()
    assert native.load() is not None


def test_compiled_attention_agrees_with_the_blocked_path_and_a_cache_equals_recomputation(tiny_model):
    """Batch-invariant generation with the compiled attention: a row's logits alone and in a batch are
    the same bits, and within tolerance of the pure-PyTorch blocked attention."""
    from model.generate import generate
    from model.recorder import Recorder
    from model.tokenizer import encode

    model = tiny_model(seed=5)
    policy = RoutingPolicy.preset("dropless")
    probe = encode("def probe(x): return")
    crowd = [encode("import os"), encode("a = [1, 2, 3] * 4"), probe]

    def logits(prompts, row):
        recorder = Recorder()
        with torch.no_grad():
            result = generate(model, prompts, 6, policy, "batch_invariant", recorder=recorder,
                              stop_at_eos=False)
        return recorder.arrays(result)["logits"][row]

    alone = logits([probe], 0)
    batched = logits(crowd, 2)
    n = alone.shape[0]
    assert np.array_equal(alone, batched[:n])
    model.use_kernels(TORCH_KERNEL_VERSION)
    blocked = logits([probe], 0)
    model.use_kernels(KERNEL_VERSION)
    np.testing.assert_allclose(alone, blocked, rtol=1e-4, atol=1e-4)
