"""One routing decision, however it is computed: the general path (`_route_general`), the sort-free
position path (`_route_by_position`), its numpy twin for small steps (`_route_small`), the compiled
kernel where it is built, and `route` itself agree field by field, bit for bit, on random policies and
random batches; and every decision keeps the rules of a queue (docs/routing.md).

The policies draw every knob: priority, group_by (and group size), flatten, norm, score function,
capacity mode, formula, factor and minimum, pads routed or counted, the seed of random priority;
sometimes a model router's own candidates (`chosen`). The batches draw B, T, E and K, the valid and pad
masks (rows with nothing valid included) and scores with exact ties between experts and between
tokens. Where a policy has one path only (a score or random priority, fixed groups), the queue rules
are what is checked.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import native, routing
from model.routing import (
    RoutingPolicy,
    _route_by_position,
    _route_general,
    _route_small,
    route,
    router_scores,
)
from model.routing_policy import (
    CAPACITY_FORMULAS,
    CAPACITY_MODES,
    FLATTEN,
    GROUP_BY,
    NORMS,
    PRIORITIES,
    SCORE_FNS,
)

FIELDS = ("expert", "gate", "kept", "slot", "group", "capacity", "requested", "kept_count", "group_tokens",
          "probs")
POSITION = ("kmajor_position", "token_major_position")
CASES = 400


def _policy(rng: np.random.Generator) -> RoutingPolicy:
    """A random valid policy; two in three have a position priority with batch or sequence groups,
    the policies that several paths decide."""
    several = rng.random() < 2 / 3
    while True:
        group_by = str(rng.choice(("batch", "sequence") if several else GROUP_BY))
        mode = str(rng.choice(CAPACITY_MODES))
        counted = bool(rng.random() < 0.5)
        knobs = dict(
            top_k=int(rng.integers(1, 4)), group_by=group_by, flatten=str(rng.choice(FLATTEN)),
            group_size=int(rng.integers(1, 9)) if group_by == "fixed" else None,
            capacity_mode=mode, capacity_factor=float(rng.choice((0.25, 0.5, 1.0, 1.25, 2.0))),
            min_capacity=int(rng.choice((0, 0, 1, 4))), capacity_formula=str(rng.choice(CAPACITY_FORMULAS)),
            fixed_capacity=int(rng.integers(0, 6)) if mode == "fixed" else None,
            priority=str(rng.choice(POSITION if several else PRIORITIES)), seed=int(rng.integers(0, 2**40)),
            score_fn=str(rng.choice(SCORE_FNS)), norm=str(rng.choice(NORMS)),
            pads_routed=counted and bool(rng.random() < 0.5), pads_count_toward_capacity=counted)
        try:
            return RoutingPolicy(**knobs)
        except ValueError:  # a combination the policy refuses (e.g. a dropless expert choice)
            continue


def _batch(rng: np.random.Generator, policy: RoutingPolicy):
    """(router logits [B,T,E], valid [B,T], pad [B,T], chosen or None) of a random step."""
    B, T = int(rng.integers(1, 7)), int(rng.integers(1, 13))
    E = int(rng.integers(policy.top_k if policy.priority != "expert_choice" else 1, 10))
    kind = rng.integers(0, 3)
    if kind == 0:  # a coarse grid: exact ties between experts and between tokens
        logits = rng.integers(-3, 3, (B, T, E)) / 2
    elif kind == 1:  # a few repeated rows: tokens with equal scores everywhere
        rows = rng.normal(size=(3, E))
        logits = rows[rng.integers(0, 3, (B, T))]
    else:  # large logits: scores saturate to exact 0 and 1
        logits = rng.normal(size=(B, T, E)) * float(rng.choice((1.0, 40.0)))
    valid = rng.random((B, T)) < float(rng.choice((0.0, 0.5, 0.9, 1.0)))
    pad = ~valid & (rng.random((B, T)) < 0.5)
    chosen = None
    if policy.priority != "expert_choice" and rng.random() < 0.3:
        K = policy.top_k
        expert = np.argsort(rng.random((B, T, E)), axis=-1)[..., :K]  # distinct experts per token
        weight = rng.integers(0, 4, (B, T, K)) / 4  # ties and zeros among the weights
        chosen = (torch.from_numpy(expert).to(torch.int64), torch.from_numpy(weight).float())
    return (torch.from_numpy(np.asarray(logits)).float(), torch.from_numpy(valid), torch.from_numpy(pad),
            chosen)


def _paths(logits, valid, pad, policy, chosen, seed_offset):
    """Name -> decision of every path that serves `policy` on this step."""
    B, T, E = logits.shape
    K = policy.candidates_per_token(E)
    routed = valid | pad if policy.pads_routed else valid
    counted = valid | pad if policy.pads_count_toward_capacity else valid
    if chosen is None:
        probs, expert = router_scores(logits, policy.score_fn), None
    else:
        expert = chosen[0]
        probs = torch.zeros(B, T, E).scatter_(-1, expert, chosen[1])
    found = {"route": route(logits, valid, policy, pad=pad, seed_offset=seed_offset, chosen=chosen),
             "general": _route_general(probs, routed, counted, policy, K, seed_offset, expert=expert)}
    if policy.priority in POSITION and policy.group_by != "fixed":
        found["by_position"] = _route_by_position(probs, routed, counted, policy, K, expert=expert)
        if K <= 2:  # the numpy twin sums at most two candidates (one IEEE addition in any library)
            found["small"] = _route_small(probs, routed, counted, policy, K, expert=expert)
        plan = routing.compiled_plan(policy, routed, counted, probs.shape[-1])  # where the kernel is built
        if plan is not None and expert is None and native.load() is not None:
            out = native.load().route_position(probs, *plan)
            if out is not None:
                found["compiled"] = routing.RoutingDecision(*out, probs=probs)
    return found, routed.numpy(), counted.numpy()


def _first_difference(x: torch.Tensor, y: torch.Tensor) -> str:
    if x.dtype != y.dtype or x.shape != y.shape:
        return f"{x.dtype}{tuple(x.shape)} against {y.dtype}{tuple(y.shape)}"
    if x.is_floating_point():
        x, y = x.view(torch.int32), y.view(torch.int32)
    at = tuple(int(i) for i in (x != y).nonzero()[0])
    return f"at {at}: {x[at].item()} against {y[at].item()}" + (" (float32 bits)" if x.dtype == torch.int32
                                                               else "")


def _same(a, b) -> str | None:
    """The first field where two decisions differ, bit for bit (the sign of zero included), or None."""
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{f}: {_first_difference(x, y)}"
        bits = (x.view(torch.int32), y.view(torch.int32)) if x.is_floating_point() else (x, y)
        if not torch.equal(*bits):
            return f"{f}: {_first_difference(x, y)}"
    return None


def _queue_rules(d, routed: np.ndarray, counted: np.ndarray, policy: RoutingPolicy) -> str | None:
    """What any decision must say, read from its fields alone, or the first rule it breaks."""
    expert, kept, slot = d.expert.numpy(), d.kept.numpy(), d.slot.numpy()
    group, cap = d.group.numpy(), d.capacity.numpy()
    requested, kept_count = d.requested.numpy(), d.kept_count.numpy()
    G, E = requested.shape
    if not np.array_equal(group >= 0, routed):
        return "a token is routed where the policy does not route it, or not where it does"
    if (expert[~routed] != -1).any() or (slot[~routed] != -1).any() or kept[~routed].any():
        return "a token not routed has an expert, a slot or a kept candidate"
    if (d.gate.numpy()[~kept] != 0).any():
        return "a dropped candidate has a weight"
    if policy.group_by != "fixed":
        of = np.arange(routed.shape[0])[:, None] if policy.group_by == "sequence" else 0
        S = np.bincount(np.broadcast_to(of, counted.shape)[counted], minlength=G)[:G]
        if not np.array_equal(d.group_tokens.numpy(), S):
            return f"group_tokens {d.group_tokens.numpy()} are not the counted tokens {S}"
    b, t, j = np.nonzero(expert >= 0)
    bucket = group[b, t] * E + expert[b, t, j]
    for k in np.unique(bucket):
        slots = np.sort(slot[b, t, j][bucket == k])
        if not np.array_equal(slots, np.arange(len(slots))):
            return f"the slots of (group, expert) {divmod(int(k), E)} are {slots}, not 0..n-1"
    if not np.array_equal(np.bincount(bucket, minlength=G * E), requested.reshape(-1)):
        return "requested is not the number of candidates of each (group, expert)"
    kept_bucket = bucket[kept[b, t, j]]
    if not np.array_equal(np.bincount(kept_bucket, minlength=G * E), kept_count.reshape(-1)):
        return "kept_count is not the number of kept candidates of each (group, expert)"
    if policy.dropless:
        return None if kept[b, t, j].all() else "a dropless policy dropped a candidate"
    if not np.array_equal(kept[b, t, j], slot[b, t, j] < cap[group[b, t]]):
        return "a candidate is kept without a slot below its group's capacity, or dropped with one"
    return None


@pytest.fixture
def one_thread():
    """Steps of a few tokens on one intra-op thread: on a loaded machine a second thread's handshake
    costs more than these operators."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_every_path_gives_the_same_decision_bit_for_bit(one_thread):
    rng = np.random.default_rng(20260)
    torch.manual_seed(0)
    compared = {}
    for case in range(CASES):
        policy = _policy(rng)
        logits, valid, pad, chosen = _batch(rng, policy)
        seed_offset = int(rng.integers(0, 1000))
        found, routed, counted = _paths(logits, valid, pad, policy, chosen, seed_offset)
        kind = "chosen" if chosen else "scored"
        where = (f"case {case}: B,T,E = {tuple(logits.shape)}, {kind} candidates, "
                 f"{policy}")
        broken = _queue_rules(found["general"], routed, counted, policy)
        assert broken is None, f"{where}: general path: {broken}"
        for name, decision in found.items():
            if name != "general":
                differ = _same(found["general"], decision)
                assert differ is None, f"{where}: {name} differs from the general path in {differ}"
                compared[name] = compared.get(name, 0) + 1
    # the draw reaches every path that is there to compare
    assert compared["by_position"] > CASES / 3 and compared["small"] > CASES / 4
    assert native.load() is None or compared.get("compiled", 0) > CASES / 10


@pytest.mark.parametrize("priority", PRIORITIES)
def test_the_draw_reaches_every_priority_and_grouping(priority):
    rng = np.random.default_rng(1)
    policies = [_policy(rng) for _ in range(CASES)]
    assert any(p.priority == priority for p in policies)
    assert {p.group_by for p in policies} == set(GROUP_BY) and {p.norm for p in policies} == set(NORMS)
    assert any(p.pads_routed for p in policies) and any(p.dropless for p in policies)
