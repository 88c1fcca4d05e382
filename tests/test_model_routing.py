"""Properties of capacity-limited routing (docs/routing.md), each checked against numbers worked on paper."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from model.routing import PRESETS, RoutingPolicy, route


def logits_from_probs(rows: list[list[list[float]]]) -> torch.Tensor:
    """Router logits [B,T,E] whose softmax is the given probabilities (rows sum to 1)."""
    return torch.tensor(rows, dtype=torch.float64).log().float()


def all_valid(z: torch.Tensor) -> torch.Tensor:
    return torch.ones(z.shape[:2], dtype=torch.bool)


def fixed(C: int, **knobs) -> RoutingPolicy:
    return RoutingPolicy(capacity_mode="fixed", fixed_capacity=C, **knobs)


# ---- hand-worked capacity cases, per priority --------------------------------------------------

# E=3, k=2, one row of three tokens; choices t0 (0,1), t1 (2,1), t2 (1,0).
# Expert 1 receives t2's 1st choice (p=.40) and the 2nd choices of t0 (p=.48) and t1 (p=.30).
THREE = logits_from_probs([[[0.52, 0.48, 0.00001], [0.1, 0.3, 0.6], [0.35, 0.4, 0.25]]])


def test_candidates_are_top_k_in_score_order():
    d = route(THREE, all_valid(THREE), fixed(1, top_k=2, norm="none"))
    assert d.expert[0].tolist() == [[0, 1], [2, 1], [1, 0]]


@pytest.mark.parametrize(
    ("priority", "norm", "slots"),
    [
        # every 1st choice first (t2 on e1), then 2nd choices in arrival order (t0, t1)
        ("kmajor_position", "none", [[0, 1], [0, 2], [0, 1]]),
        # 1st choices first, then 2nd choices by the token's top score: t1 (.6) before t0 (.52)
        ("kmajor_score", "none", [[0, 2], [0, 1], [0, 1]]),
        # by the candidate's own probability: on e1 t0's 2nd (.48) > t2's 1st (.40) > t1's 2nd
        # (.30); on e0 t0's 1st (.52) > t2's 2nd (.35). With C=1, t2 loses its 1st choice.
        ("probs", "none", [[0, 0], [0, 2], [1, 1]]),
        # Megatron normalises before the drop: t2 .4/.75=.53 > t0 .48/1.0 > t1 .3/.9
        ("probs", "before_drop", [[0, 1], [0, 2], [0, 1]]),
        # a token's choices together, arrival order: t0 (e0, e1), t1 (e2, e1), t2 (e1, e0)
        ("token_major_position", "none", [[0, 0], [0, 1], [2, 1]]),
    ],
)
def test_hand_worked_slots_per_priority(priority, norm, slots):
    for C in (1, 2):
        d = route(THREE, all_valid(THREE), fixed(C, top_k=2, priority=priority, norm=norm))
        assert d.slot[0].tolist() == slots
        assert d.kept[0].tolist() == [[s < C for s in row] for row in slots]
        assert d.requested.tolist() == [[2, 3, 1]]
        assert d.kept_count.tolist() == [[min(2, C), min(3, C), 1]]
        assert d.capacity.tolist() == [C]


def test_kmajor_slot_offsets_count_overflowed_first_choices():
    # E=3, k=2, C=2: expert 1 gets three 1st choices (t1, t2, t3; t3 overflows), then t0's 2nd
    # choice. Its slot is 3 (after every 1st-choice request, kept or not), not 2 (after the kept).
    z = logits_from_probs([[[0.6, 0.3, 0.1], [0.1, 0.6, 0.3], [0.1, 0.6, 0.3], [0.1, 0.6, 0.3]]])
    d = route(z, all_valid(z), fixed(2, top_k=2, norm="none"))
    assert d.expert[0].tolist() == [[0, 1], [1, 2], [1, 2], [1, 2]]
    assert d.slot[0].tolist() == [[0, 3], [0, 0], [1, 1], [2, 2]]
    assert d.kept[0].tolist() == [[True, False], [True, True], [True, True], [False, False]]


def test_expert_choice_each_expert_takes_its_top_tokens():
    # E=2: e0 prefers t0 (.7) > t1 (.6) > t2 (.2); e1 prefers t2 (.8) > t1 (.4) > t0 (.3).
    z = logits_from_probs([[[0.7, 0.3], [0.6, 0.4], [0.2, 0.8]]])
    d1 = route(z, all_valid(z), fixed(1, top_k=1, priority="expert_choice", norm="none"))
    assert d1.expert.shape == (1, 3, 2)  # K = E: a token may be taken by every expert
    assert d1.expert[0].tolist() == [[0, 1], [0, 1], [1, 0]]
    assert d1.slot[0].tolist() == [[0, 2], [1, 1], [0, 2]]
    assert d1.kept[0].tolist() == [[True, False], [False, False], [True, False]]
    assert torch.allclose(d1.gate[0], torch.tensor([[0.7, 0.0], [0.0, 0.0], [0.8, 0.0]]))
    d2 = route(z, all_valid(z), fixed(2, top_k=1, priority="expert_choice", norm="none"))
    assert d2.kept[0].tolist() == [[True, False], [True, True], [True, False]]
    assert d2.kept_count.tolist() == [[2, 2]] and d2.requested.tolist() == [[3, 3]]


def test_expert_choice_preset_capacity():
    # preset: C = ceil(S*k/E*cf) = ceil(8*2/4) = 4 tokens per expert, 16 kept candidates in all
    z = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(1))
    d = route(z, all_valid(z), RoutingPolicy.preset("expert_choice"))
    assert d.capacity.tolist() == [4] and d.kept_count.tolist() == [[4, 4, 4, 4]]


def test_random_priority_is_seeded_and_reproducible():
    # 16 tokens all want expert 0, C=4: which four are kept is decided by the seed alone.
    z = torch.zeros(2, 8, 3)
    z[..., 0] = 5.0
    v = all_valid(z)

    def kept_set(seed, offset=0):
        d = route(z, v, fixed(4, top_k=1, priority="random", seed=seed), seed_offset=offset)
        assert int(d.kept.sum()) == 4 and sorted(d.slot[..., 0].flatten().tolist()) == list(range(16))
        return tuple(d.kept[..., 0].flatten().tolist())

    assert kept_set(7) == kept_set(7)
    assert len({kept_set(s) for s in range(8)}) > 1
    assert len({kept_set(7, off) for off in range(8)}) > 1
    first_four = tuple([True] * 4 + [False] * 12)
    assert any(kept_set(s) != first_four for s in range(8))


# ---- weight normalisation ------------------------------------------------------------------------

# E=3, k=2, C=1: t0 (0,1) loses its 2nd choice to t1's 1st choice on e1; t1 (1,2) keeps both.
NORM_CASE = logits_from_probs([[[0.5, 0.3, 0.2], [0.2, 0.5, 0.3]]])


@pytest.mark.parametrize(
    ("norm", "gates"),
    [
        ("none", [[0.5, 0.0], [0.5, 0.3]]),
        ("before_drop", [[0.625, 0.0], [0.625, 0.375]]),
        ("after_drop", [[1.0, 0.0], [0.625, 0.375]]),
    ],
)
def test_normalisation(norm, gates):
    d = route(NORM_CASE, all_valid(NORM_CASE), fixed(1, top_k=2, norm=norm))
    assert d.expert[0].tolist() == [[0, 1], [1, 2]]
    assert d.kept[0].tolist() == [[True, False], [True, True]]
    assert torch.allclose(d.gate[0], torch.tensor(gates), atol=1e-6)


def test_all_dropped_token_has_zero_gates_after_drop():
    z = torch.zeros(1, 3, 2)
    d = route(z, all_valid(z), fixed(0, top_k=2, norm="after_drop"))
    assert not d.kept.any() and torch.equal(d.gate, torch.zeros(1, 3, 2))


# ---- flatten order, groups and batch composition -------------------------------------------------

def test_flatten_order_decides_the_winner():
    # B=2, T=2, k=1, C=1, one batch group. Row 0: e0, e1; row 1: e1, e0.
    z = torch.full((2, 2, 2), -4.0)
    z[0, 0, 0] = z[0, 1, 1] = z[1, 0, 1] = z[1, 1, 0] = 4.0
    batch_major = route(z, all_valid(z), fixed(1, top_k=1))
    seq_major = route(z, all_valid(z), fixed(1, top_k=1, flatten="seq_major"))
    # batch-major: row 0 outranks row 1 everywhere
    assert batch_major.kept[..., 0].tolist() == [[True, True], [False, False]]
    # seq-major: position 0 of every row outranks position 1
    assert seq_major.kept[..., 0].tolist() == [[True, False], [True, False]]
    assert seq_major.slot[..., 0].tolist() == [[0, 1], [0, 1]]


def test_batch_group_partners_crowd_out_the_probe():
    # Probe alone: E=4, k=2, DeepSpeed cf=1: C = ceil(4/4*2) = 2, every expert asked twice: all kept.
    probe = torch.full((4, 4), -3.0)
    for t, (a, b) in enumerate([(0, 1), (1, 2), (2, 3), (3, 0)]):
        probe[t, a], probe[t, b] = 3.0, 2.0
    partner = torch.full((4, 4), -3.0)
    partner[:, 0], partner[:, 1] = 3.0, 2.0  # wants the probe's experts 0 and 1
    policy = RoutingPolicy(top_k=2, capacity_mode="factor", capacity_formula="deepspeed", capacity_factor=1.0)
    alone = route(probe[None], torch.ones(1, 4, dtype=torch.bool), policy)
    assert alone.capacity.tolist() == [2] and alone.kept.all()
    together = route(torch.stack([partner, probe]), torch.ones(2, 4, dtype=torch.bool), policy)
    assert together.capacity.tolist() == [4]
    assert int((~together.kept[1]).sum()) > 0
    # per sequence the partner no longer matters
    per_seq = route(torch.stack([partner, probe]), torch.ones(2, 4, dtype=torch.bool),
                    policy.replace(group_by="sequence"))
    assert torch.equal(per_seq.kept[1], alone.kept[0]) and torch.equal(per_seq.slot[1], alone.slot[0])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 6), st.integers(0, 3),
       st.sampled_from(["kmajor_position", "token_major_position", "kmajor_score", "probs", "expert_choice"]),
       st.sampled_from(["batch_major", "seq_major"]))
def test_sequence_groups_are_batch_invariant(seed, B, T, probe_row, priority, flatten):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B + 1, T, 4, generator=g)
    valid = torch.rand(B + 1, T, generator=g) < 0.8
    row = min(probe_row, B)
    policy = RoutingPolicy(top_k=2, group_by="sequence", flatten=flatten, capacity_mode="factor",
                           capacity_factor=1.0, capacity_formula="megatron", priority=priority)
    batch = route(z, valid, policy)
    alone = route(z[row:row + 1], valid[row:row + 1], policy)
    for field in ("expert", "gate", "kept", "slot"):
        assert torch.equal(getattr(batch, field)[row], getattr(alone, field)[0]), field
    assert torch.equal(batch.capacity[row:row + 1], alone.capacity)
    assert torch.equal(batch.requested[row:row + 1], alone.requested)


def test_fixed_groups_chunk_the_stream_of_counted_tokens():
    # 2 rows x 3 tokens, the middle token of row 0 not routed: stream (0,0) (0,2) (1,0) (1,1) (1,2)
    z = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
    valid = torch.ones(2, 3, dtype=torch.bool)
    valid[0, 1] = False
    d = route(z, valid, RoutingPolicy(top_k=1, group_by="fixed", group_size=2))
    assert d.group.tolist() == [[0, -1, 0], [1, 1, 2]]
    assert d.group_tokens.tolist() == [2, 2, 1]
    seq = route(z, valid, RoutingPolicy(top_k=1, group_by="fixed", group_size=2, flatten="seq_major"))
    # seq-major stream: (0,0) (1,0) (1,1) (0,2) (1,2)
    assert seq.group.tolist() == [[0, -1, 1], [0, 1, 2]]
    rows = route(z, valid, RoutingPolicy(top_k=1, group_by="sequence", flatten="seq_major"))
    assert rows.group.tolist() == [[0, -1, 0], [1, 1, 1]] and rows.group_tokens.tolist() == [2, 3]


# ---- invalid tokens and pads ----------------------------------------------------------------------

@pytest.mark.parametrize("group_by", ["sequence", "batch", "fixed"])
def test_invalid_tokens_never_routed_and_never_count(group_by):
    g = torch.Generator().manual_seed(3)
    z = torch.randn(3, 5, 4, generator=g)
    valid = torch.rand(3, 5, generator=g) < 0.6
    policy = RoutingPolicy(top_k=2, group_by=group_by, group_size=3 if group_by == "fixed" else None,
                           capacity_mode="factor", capacity_formula="deepspeed")
    d = route(z, valid, policy)
    assert (d.expert[~valid] == -1).all() and (d.slot[~valid] == -1).all()
    assert not d.kept[~valid].any() and (d.gate[~valid] == 0).all() and (d.group[~valid] == -1).all()
    assert int(d.requested.sum()) == 2 * int(valid.sum()) == int(d.group_tokens.sum()) * 2
    noisy = z.clone()
    noisy[~valid] = torch.randn(int((~valid).sum()), 4, generator=g) * 10
    d2 = route(noisy, valid, policy)
    for field in ("expert", "gate", "kept", "slot", "group", "capacity", "requested", "kept_count"):
        assert torch.equal(getattr(d, field), getattr(d2, field)), field


def test_pads_count_and_pads_routed():
    z = torch.zeros(1, 4, 2)
    z[..., 0] = 3.0  # every token wants expert 0
    valid = torch.tensor([[False, True, True, True]])
    pad = ~valid
    base = dict(top_k=1, group_by="sequence", capacity_mode="factor", capacity_formula="megatron")
    ignored = route(z, valid, RoutingPolicy(**base), pad=pad)
    counted = route(z, valid, RoutingPolicy(**base, pads_count_toward_capacity=True), pad=pad)
    both = RoutingPolicy(**base, pads_routed=True, pads_count_toward_capacity=True)
    routed = route(z, valid, both, pad=pad)
    assert ignored.group_tokens.tolist() == [3] and ignored.capacity.tolist() == [2]   # ceil(3/2)
    assert counted.group_tokens.tolist() == [4] and counted.capacity.tolist() == [2]   # ceil(4/2)
    assert counted.expert[0, 0, 0] == -1 and counted.kept[0, 1:, 0].tolist() == [True, True, False]
    # a routed pad in front takes the first slot and pushes the last real token out
    assert routed.expert[0, 0, 0] == 0 and routed.kept[0, :, 0].tolist() == [True, True, False, False]


# ---- dropless, ties, invariants ------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 6), st.integers(1, 8),
       st.integers(1, 3), st.sampled_from(["sequence", "batch", "fixed"]),
       st.sampled_from(["batch_major", "seq_major"]),
       st.sampled_from(["kmajor_position", "token_major_position", "kmajor_score", "probs", "random"]),
       st.sampled_from(["none", "before_drop", "after_drop"]))
def test_dropless_never_drops(seed, B, T, E, k, group_by, flatten, priority, norm):
    k = min(k, E)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B, T, E, generator=g) * 3
    valid = torch.rand(B, T, generator=g) < 0.7
    policy = RoutingPolicy(top_k=k, group_by=group_by, group_size=2 if group_by == "fixed" else None,
                           flatten=flatten, priority=priority, norm=norm)
    d = route(z, valid, policy)
    assert torch.equal(d.kept, valid[..., None].expand(B, T, k))
    assert (d.capacity == -2).all() and torch.equal(d.kept_count, d.requested)
    if norm != "none" and valid.any():
        assert torch.allclose(d.gate[valid].sum(-1), torch.ones(int(valid.sum())), atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 6), st.integers(2, 6),
       st.integers(0, 3), st.sampled_from(sorted(PRESETS)))
def test_slots_rank_each_queue_and_keep_the_first_capacity(seed, B, T, E, C, preset):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B, T, E, generator=g)
    valid = torch.rand(B, T, generator=g) < 0.8
    extra = {"group_size": 3} if PRESETS[preset].get("group_by") == "fixed" else {}
    policy = RoutingPolicy.preset(preset, top_k=min(2, E), **extra)
    if preset != "dropless":
        policy = policy.replace(capacity_mode="fixed", capacity_factor=1.0, fixed_capacity=C,
                                capacity_formula="deepspeed")
    d = route(z, valid, policy)
    routed = d.expert >= 0
    ge = (d.group[..., None] * E + d.expert)[routed]
    slots = d.slot[routed]
    for bucket in ge.unique().tolist():  # test-side loop: each queue holds slots 0..n-1 once
        assert sorted(slots[ge == bucket].tolist()) == list(range(int((ge == bucket).sum())))
    if preset != "dropless":
        assert torch.equal(d.kept[routed], slots < C)
        assert torch.equal(d.kept_count, d.requested.clamp(max=C))


def test_ties_are_broken_by_expert_index_then_position():
    z = torch.zeros(2, 3, 4)
    d = route(z, all_valid(z), fixed(2, top_k=3, priority="probs"))
    assert (d.expert == torch.tensor([0, 1, 2])).all()
    # equal probabilities: the queue follows arrival order (batch-major)
    assert d.slot[..., 0].flatten().tolist() == [0, 1, 2, 3, 4, 5]
    ec = route(z, all_valid(z), fixed(2, top_k=1, priority="expert_choice"))
    assert (ec.expert == torch.tensor([0, 1, 2, 3])).all()
    assert ec.kept[0, :2].all() and not ec.kept[0, 2:].any() and not ec.kept[1].any()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 8), st.integers(1, 8),
       st.sampled_from(["softmax", "sigmoid"]))
def test_choice_order_is_score_then_expert_index(seed, E, k, score_fn):
    # logits on a coarse grid, so many scores tie exactly; small k and large k take different paths
    k = min(k, E)
    z = torch.randint(-2, 3, (3, 5, E), generator=torch.Generator().manual_seed(seed)).float()
    d = route(z, all_valid(z), RoutingPolicy(top_k=k, score_fn=score_fn))
    p = d.probs.double()
    keys = -p * 1000 + torch.arange(E) / 1000  # score descending, then index ascending (no ties)
    assert torch.equal(d.expert, keys.argsort(-1)[..., :k])
    # the scores the top-k passes return with the experts are the chosen experts' own, bit for bit
    raw = route(z, all_valid(z), RoutingPolicy.preset("dropless", top_k=k, score_fn=score_fn, norm="none"))
    assert torch.equal(raw.expert, d.expert) and torch.equal(raw.gate, raw.probs.gather(-1, raw.expert))


def test_same_inputs_give_bitwise_same_decision():
    g = torch.Generator().manual_seed(5)
    z = torch.randn(4, 6, 8, generator=g)
    valid = torch.rand(4, 6, generator=g) < 0.9
    for name in PRESETS:
        a, b = (route(z, valid, RoutingPolicy.preset(name), seed_offset=2) for _ in range(2))
        for field in a.__dataclass_fields__:
            assert torch.equal(getattr(a, field), getattr(b, field)), (name, field)


def test_sigmoid_scores_and_fp16_logits():
    z = torch.tensor([[[2.0, 0.0, -1.0]]], dtype=torch.float16)
    d = route(z, all_valid(z), RoutingPolicy(top_k=2, score_fn="sigmoid", norm="before_drop"))
    s = torch.sigmoid(torch.tensor([2.0, 0.0]))
    assert d.probs.dtype == torch.float32 and d.gate.dtype == torch.float32
    assert torch.allclose(d.gate[0, 0], s / s.sum())


# ---- capacity formulas ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("formula", "S", "E", "k", "cf", "min_cap", "expected"),
    [
        ("deepspeed", 10, 4, 1, 1.0, 4, 4),        # max(ceil(2.5), 4)
        ("deepspeed", 10, 4, 1, 1.0, 0, 3),        # ceil(2.5)
        ("deepspeed", 10, 4, 2, 1.25, 0, 7),       # ceil(2.5*2*1.25 = 6.25)
        ("t5x", 10, 4, 1, 1.0, 0, 2),              # round(2.5) = 2, half to even
        ("t5x", 14, 4, 1, 1.0, 0, 4),              # round(3.5) = 4
        ("t5x", 10, 4, 1, 1.0, 4, 4),              # max(2, 4)
        ("t5x", 64, 8, 1, 1.25, 4, 10),            # round(10.0)
        ("vmoe", 10, 4, 2, 1.05, 0, 8),            # ceil(5.25) = 6 -> multiple of 4: 8
        ("vmoe", 16, 4, 1, 1.0, 0, 4),             # 4 already a multiple of 4
        ("megatron", 10, 4, 2, 1.0, 0, 5),         # ceil(10*2/4)
        ("megatron", 10, 4, 2, 1.1, 0, 6),         # ceil(5.5)
        ("tutel", 10, 4, 2, 1.5, 0, 8),            # 2*int(1.5*ceil(2.5)) = 2*int(4.5)
        ("megablocks", 10, 4, 2, 1.5, 0, 7),       # int(1.5*5) = int(7.5)
        ("megablocks", 10, 4, 2, 1.0, 0, 5),
        ("gshard_train", 10, 4, 2, 1.0, 0, 6),     # 2*ceil(2.5)
        ("gshard_eval", 10, 4, 2, 0.25, 0, 3),     # ceil(0.25*10)
    ],
)
def test_capacity_formulas(formula, S, E, k, cf, min_cap, expected):
    policy = RoutingPolicy(top_k=k, capacity_mode="factor", capacity_formula=formula, capacity_factor=cf,
                           min_capacity=min_cap)
    assert policy.capacity(torch.tensor([S]), E).tolist() == [expected]


def test_capacity_follows_group_size():
    policy = RoutingPolicy.preset("deepspeed_top2", min_capacity=0)
    assert policy.capacity(torch.tensor([0, 1, 4, 9, 64]), 8).tolist() == [0, 1, 1, 3, 16]
    fixed5 = RoutingPolicy(capacity_mode="fixed", fixed_capacity=5)
    assert fixed5.capacity(torch.tensor([1, 99]), 4).tolist() == [5, 5]
    assert RoutingPolicy().capacity(torch.tensor([3]), 4).tolist() == [-2]


# ---- the policy object ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_round_trip_through_json(name):
    policy = RoutingPolicy.preset(name)
    data = json.loads(json.dumps(policy.to_dict()))
    assert RoutingPolicy.from_dict(data) == policy
    assert set(data) == set(RoutingPolicy.__dataclass_fields__)


def test_preset_overrides_and_named_knobs():
    p = RoutingPolicy.preset("megatron", capacity_factor=1.25)
    assert (p.flatten, p.priority, p.norm, p.capacity_factor) == ("seq_major", "probs", "before_drop", 1.25)
    assert RoutingPolicy.preset("dropless").dropless and not RoutingPolicy.preset("gshard").dropless
    assert RoutingPolicy.preset("expert_choice").candidates_per_token(8) == 8
    assert RoutingPolicy.preset("gshard").candidates_per_token(8) == 2


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"group_by": "row"}, "group_by"),
        ({"group_by": "fixed"}, "group_size"),
        ({"group_size": 4}, "group_size"),
        ({"flatten": "column"}, "flatten"),
        ({"capacity_mode": "auto"}, "capacity_mode"),
        ({"capacity_mode": "fixed"}, "fixed_capacity"),
        ({"capacity_factor": 0.0}, "capacity_factor"),
        ({"capacity_factor": math.nan}, "capacity_factor"),
        ({"capacity_formula": "switch"}, "capacity_formula"),
        ({"capacity_mode": "factor", "capacity_formula": "gshard_train", "capacity_factor": 2.0},
         "capacity_factor"),
        ({"min_capacity": -1}, "min_capacity"),
        ({"priority": "lottery"}, "priority"),
        ({"priority": "expert_choice"}, "capacity_mode"),
        ({"seed": -3}, "seed"),
        ({"score_fn": "relu"}, "score_fn"),
        ({"norm": "l2"}, "norm"),
        ({"pads_routed": "yes"}, "pads_routed"),
        ({"pads_routed": True}, "pads_count_toward_capacity"),
    ],
)
def test_bad_policy_values_name_the_field(knobs, field):
    with pytest.raises(ValueError, match=field):
        RoutingPolicy(**knobs)


def test_unknown_knobs_and_presets_are_named():
    with pytest.raises(ValueError, match="capacity_fator"):
        RoutingPolicy.from_dict({"capacity_fator": 1.0})
    with pytest.raises(ValueError, match="switch_hf"):  # the message lists the allowed names
        RoutingPolicy.preset("switch")


def test_bad_route_inputs_raise_clear_errors():
    z = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="valid"):
        route(z, torch.ones(2, 3), RoutingPolicy())
    with pytest.raises(ValueError, match="router_logits"):
        route(z[0], torch.ones(2, 3, dtype=torch.bool), RoutingPolicy())
    with pytest.raises(ValueError, match="top_k"):
        route(z, all_valid(z), RoutingPolicy(top_k=5))
    with pytest.raises(ValueError, match="pad"):
        route(z, all_valid(z), RoutingPolicy(), pad=torch.ones(3, 2, dtype=torch.bool))
