"""The host (numpy) routing of small steps gives the decision of the tensor paths, bit for bit."""

from __future__ import annotations

import pytest
import torch

from model.routing import (
    PRESETS,
    SMALL_TOKENS,
    RoutingPolicy,
    _dispatch,
    _route_by_position,
    _route_general,
    route,
    router_scores,
)

FIELDS = ("expert", "gate", "kept", "slot", "group", "capacity", "requested", "kept_count", "group_tokens")

def _policy(name: str, knobs: dict) -> RoutingPolicy | None:
    """The preset with `knobs` when it is a policy the small path serves: position priorities with
    batch or sequence groups and at most two candidates a token; else None."""
    try:
        policy = RoutingPolicy.preset(name, **knobs)
    except ValueError:
        return None
    ok = policy.priority in ("kmajor_position", "token_major_position") and policy.group_by != "fixed" \
        and policy.top_k <= 2
    return policy if ok else None


KNOBS = ({}, {"group_by": "sequence"}, {"flatten": "seq_major"}, {"priority": "token_major_position"},
         {"norm": "before_drop"}, {"norm": "after_drop"}, {"capacity_factor": 0.5, "capacity_mode": "factor"},
         {"pads_routed": True, "pads_count_toward_capacity": True})
#: Every preset with every knob that gives a policy of the small path.
CASES = [(name, knobs) for name in sorted(PRESETS) for knobs in KNOBS if _policy(name, knobs) is not None]


def _inputs(seed: int, B: int, T: int, E: int):
    g = torch.Generator().manual_seed(seed)
    # logits on a coarse grid: many exact ties between experts and between tokens
    logits = torch.randint(-3, 3, (B, T, E), generator=g).float() / 2
    valid = torch.rand(B, T, generator=g) < 0.8
    pad = ~valid & (torch.rand(B, T, generator=g) < 0.5)
    return logits, valid, pad


def _same(a, b) -> None:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape, f
        assert torch.equal(x, y), f
        if x.is_floating_point():  # bit for bit, the sign of zero included
            assert torch.equal(x.view(torch.int32), y.view(torch.int32)), f


@pytest.mark.parametrize(("name", "knobs"), CASES)
def test_small_steps_route_as_the_tensor_paths(name, knobs):
    policy = _policy(name, knobs)
    for seed, (B, T, E) in enumerate([(1, 1, 8), (8, 1, 8), (3, 5, 4), (4, 16, 8), (2, 3, 2)]):
        logits, valid, pad = _inputs(seed, B, T, E)
        assert B * T <= SMALL_TOKENS
        small = route(logits, valid, policy, pad=pad)
        routed = valid | pad if policy.pads_routed else valid
        counted = valid | pad if policy.pads_count_toward_capacity else valid
        probs = router_scores(logits, policy.score_fn)
        K = policy.candidates_per_token(E)
        _same(small, _route_by_position(probs, routed, counted, policy, K))
        _same(small, _route_general(probs, routed, counted, policy, K, 0))


def test_small_steps_keep_a_model_routers_own_choices():
    policy = RoutingPolicy.preset("gshard", capacity_factor=1.0)
    logits, valid, _ = _inputs(7, 6, 1, 8)
    g = torch.Generator().manual_seed(3)
    expert = torch.stack([torch.randperm(8, generator=g)[:2] for _ in range(6)]).view(6, 1, 2)
    weight = torch.rand(6, 1, 2, generator=g)
    small = route(logits, valid, policy, chosen=(expert, weight))
    probs = torch.zeros(6, 1, 8).scatter_(-1, expert, weight)
    _same(small, _route_by_position(probs, valid, valid, policy, 2, expert=expert))


def test_large_steps_and_gradients_take_the_tensor_path():
    policy = RoutingPolicy.preset("gshard")
    logits, valid, _ = _inputs(1, 1, SMALL_TOKENS + 1, 8)
    probs = router_scores(logits, "softmax")
    _same(_dispatch(probs, valid, None, policy, 2, 0), _route_by_position(probs, valid, valid, policy, 2))
    step = torch.randn(8, 1, 8, requires_grad=True)  # training: gates carry gradients
    assert route(step, torch.ones(8, 1, dtype=torch.bool), policy).gate.requires_grad
