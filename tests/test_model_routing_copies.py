"""Stacked copies of a batch routed in one call (`route(..., copies=D)`): copy i holds rows
i*B0..(i+1)*B0-1 and is routed as if it were alone, so every decision of every copy equals the
one-copy batch's, bit for bit: its own batch group, fixed groups counted inside it, its own capacity,
the one-copy stream of random priorities. The copies may differ (their own scores and masks): that
is how a batch of counterfactual reruns uses them. Checked on random policies and batches (every
knob, the paths' test's generators), every shipped preset at K = 1 and 2 with pads, and a model
forward step with copies against each copy's forward alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from model import native
from model.routing import PRESETS, RoutingPolicy, _dispatch, _route_general, route, router_scores
from tests.test_model_routing_paths import _batch, _policy


@pytest.fixture
def one_thread():
    """Steps of a few tokens on one intra-op thread (a second thread's handshake costs more)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TOKEN_FIELDS = ("expert", "gate", "kept", "slot", "probs")
GROUP_FIELDS = ("capacity", "requested", "kept_count", "group_tokens")


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.int32) if x.is_floating_point() else x


def _check_copy(stacked, alone, i: int, B0: int, G0: int, where: str) -> None:
    """Copy i of the stacked decision against the copy's decision alone, field by field, bit for bit;
    its groups are i*G0.. (a copy alone may have fewer fixed groups: the rest are empty)."""
    rows = slice(i * B0, (i + 1) * B0)
    for f in TOKEN_FIELDS:
        a, b = getattr(stacked, f)[rows], getattr(alone, f)
        assert torch.equal(_bits(a), _bits(b)), f"{where}: copy {i}: {f} differs"
    group = stacked.group[rows]
    assert torch.equal(torch.where(group >= 0, group - i * G0, -1), alone.group), f"{where}: copy {i}: group"
    G = alone.capacity.shape[0]
    for f in GROUP_FIELDS:
        a, b = getattr(stacked, f)[i * G0: i * G0 + G], getattr(alone, f)
        assert torch.equal(a, b), f"{where}: copy {i}: {f} differs"
    for f in ("requested", "kept_count", "group_tokens"):
        assert not getattr(stacked, f)[i * G0 + G: (i + 1) * G0].any(), f"{where}: copy {i}: an extra group"


def _scores(logits: torch.Tensor, policy: RoutingPolicy, chosen) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The scores [B,T,E] and candidates `route` hands its paths (elementwise functions may round a
    longer tensor's tail otherwise, so the copies alone take their slice of the stacked scores)."""
    if chosen is None:
        return router_scores(logits, policy.score_fn), None
    B, T, E = logits.shape
    return torch.zeros(B, T, E).scatter_(-1, chosen[0], chosen[1]), chosen[0]


def _stack_and_compare(copies, policy, seed_offset: int, where: str) -> None:
    """copies: [(logits, valid, pad, chosen)] of one shape; route them stacked and each alone."""
    B0, _, E = copies[0][0].shape
    D = len(copies)
    chosen = None
    if copies[0][3] is not None:
        chosen = tuple(torch.cat([c[3][k] for c in copies]) for k in range(2))
    logits = torch.cat([c[0] for c in copies])
    probs, expert = _scores(logits, policy, chosen)
    K = policy.top_k if chosen is not None else policy.candidates_per_token(E)
    valid, pad = torch.cat([c[1] for c in copies]), torch.cat([c[2] for c in copies])
    stacked = _dispatch(probs, valid, pad, policy, K, seed_offset, expert=expert, copies=D)
    # `route` itself takes the copies the same way (its scores may round otherwise: not compared)
    assert route(logits, valid, policy, pad=pad, seed_offset=seed_offset, chosen=chosen,
                 copies=D).capacity.shape == stacked.capacity.shape
    G = stacked.capacity.shape[0]
    assert G % D == 0, f"{where}: {G} groups for {D} copies"
    for i, (_, valid, pad, _) in enumerate(copies):
        rows = slice(i * B0, (i + 1) * B0)
        own = None if expert is None else expert[rows]
        for name, alone in _alone(probs[rows], valid, pad, policy, K, seed_offset, own).items():
            _check_copy(stacked, alone, i, B0, G // D, f"{where} ({name})")


def _alone(probs, valid, pad, policy, K, seed_offset, expert) -> dict:
    """The one-copy decision by `_dispatch` (every path it takes) and by the general path."""
    routed = valid | pad if policy.pads_routed else valid
    counted = valid | pad if policy.pads_count_toward_capacity else valid
    return {"dispatch": _dispatch(probs, valid, pad, policy, K, seed_offset, expert=expert,
                                  compiled=native.load()),
            "general": _route_general(probs, routed, counted, policy, K, seed_offset, expert=expert)}


def _like(rng, first):
    """Another copy of `first`'s shape: its own scores (with ties), masks and candidates."""
    B, T, E = first[0].shape
    logits = torch.from_numpy(rng.integers(-3, 3, (B, T, E)) / 2).float()
    valid = torch.from_numpy(rng.random((B, T)) < float(rng.choice((0.0, 0.5, 0.9, 1.0))))
    pad = ~valid & torch.from_numpy(rng.random((B, T)) < 0.5)
    chosen = None
    if first[3] is not None:
        K = first[3][0].shape[-1]
        expert = torch.from_numpy(np.argsort(rng.random((B, T, E)), axis=-1)[..., :K]).to(torch.int64)
        chosen = (expert, torch.from_numpy(rng.integers(0, 4, (B, T, K)) / 4).float())
    return logits, valid, pad, chosen


def test_copies_route_as_each_copy_alone(one_thread):
    rng = np.random.default_rng(4401)
    for case in range(200):
        policy = _policy(rng)
        first = _batch(rng, policy)
        copies = [first] + [_like(rng, first) for _ in range(int(rng.integers(1, 4)))]
        _stack_and_compare(copies, policy, int(rng.integers(0, 1000)), f"case {case}: {policy}")


def _same_shape_batch(rng, B: int, T: int, E: int):
    logits = torch.from_numpy(rng.integers(-3, 3, (B, T, E)) / 2).float()  # exact ties
    valid = torch.from_numpy(rng.random((B, T)) < 0.8)
    pad = ~valid & torch.from_numpy(rng.random((B, T)) < 0.6)
    return logits, valid, pad, None


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("top_k", [1, 2])
def test_every_preset_with_pads(name, top_k, one_thread):
    rng = np.random.default_rng([4402, top_k, len(name)])
    base = RoutingPolicy.preset(name)
    policy = base if base.priority == "expert_choice" else dataclasses.replace(base, top_k=top_k)
    for B, T in ((1, 1), (3, 1), (4, 7), (2, 40)):   # a decode step, a prefill with pads
        copies = [_same_shape_batch(rng, B, T, 8) for _ in range(3)]
        _stack_and_compare(copies, policy, 7, f"{name} K={top_k} B={B} T={T}")
        same = [copies[0]] * 4       # identical copies: identical decisions
        _stack_and_compare(same, policy, 7, f"{name} K={top_k} B={B} T={T}, identical copies")


def test_random_priority_draws_each_copy_the_one_copy_stream():
    policy = RoutingPolicy(top_k=2, group_by="batch", capacity_mode="factor", capacity_factor=0.5,
                           priority="random", seed=11)
    rng = np.random.default_rng(3)
    one = _same_shape_batch(rng, 3, 5, 6)
    stacked = route(torch.cat([one[0]] * 3), torch.cat([one[1]] * 3), policy, pad=torch.cat([one[2]] * 3),
                    seed_offset=2, copies=3)
    alone = route(one[0], one[1], policy, pad=one[2], seed_offset=2)
    stacked = dataclasses.replace(stacked, probs=torch.cat([alone.probs] * 3))   # softmax of a longer tensor
    for i in range(3):
        _check_copy(stacked, alone, i, 3, 1, "random")
    # without copies the stacked rows would share one group and draw one longer stream: not the same
    shared = route(torch.cat([one[0]] * 3), torch.cat([one[1]] * 3), policy, pad=torch.cat([one[2]] * 3),
                   seed_offset=2)
    assert shared.capacity.shape[0] == 1 and not torch.equal(shared.kept[:3], alone.kept)


def test_copies_must_divide_the_batch():
    logits, valid, pad, _ = _same_shape_batch(np.random.default_rng(0), 3, 2, 4)
    policy = RoutingPolicy()
    for bad in (0, 2, True, 1.5):
        with pytest.raises(ValueError, match="copies"):
            route(logits, valid, policy, pad=pad, copies=bad)
