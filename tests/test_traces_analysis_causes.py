"""Cause of the first divergence on hand-built runs where the cause is known (docs/experiments.md).

The fixture: request 0 (the probe, prompt [1, 2], one generated token) run alone ("alone") and in a
batch of three with partners that crowd expert 3 at layer 1 under capacity 2 ("crowded"). Slots
follow the k-major position priority (docs/routing.md) with batch-major arrival; the test checks them by
hand before trusting them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from traces import TraceWriter, open_trace
from traces.analysis import (
    LayerArrays,
    RunArrays,
    aligned_rows,
    displacement,
    explain_pair,
    request_rows,
    requests_with_several_runs,
    row_trace,
    runs_of_request,
)
from traces.synthetic import synthetic_meta

L, K, E, V, T, P = 2, 2, 4, 6, 3, 2


def _kmajor_slots(expert, step, group):
    """Slots under k-major position priority: every 1st choice, then every 2nd, each by b*T + t."""
    L_, B, T_, K_ = expert.shape
    slot = np.full(expert.shape, -1, np.int32)
    for l in range(L_):
        taken: dict[tuple[int, int, int], int] = {}
        for j in range(K_):
            for b in range(B):
                for t in range(T_):
                    e = int(expert[l, b, t, j])
                    if e >= 0:
                        key = (int(step[b, t]), int(group[l, b, t]), e)
                        slot[l, b, t, j] = taken.get(key, 0)
                        taken[key] = slot[l, b, t, j] + 1
    return slot


def make_run(name, request_ids, probe_row, tokens, expert, capacity) -> RunArrays:
    """A consistent run: steps, router logits favouring the chosen experts, slots, kept, after-drop
    gates, loads, and next-token logits with 1.0 on the next token (its argmax)."""
    tokens, expert = np.asarray(tokens, np.int32), np.asarray(expert, np.int16)
    B = tokens.shape[0]
    step = np.broadcast_to(np.maximum(np.arange(T) - P + 1, 0), (B, T)).astype(np.int16)
    group = np.zeros((L, B, T), np.int32)
    router_logits = np.zeros((L, B, T, E), np.float32)
    for j, score in enumerate((2.0, 1.0)):
        np.put_along_axis(router_logits, expert[..., j:j + 1].astype(np.int64), score, axis=-1)
    slot = _kmajor_slots(expert, step, group)
    capacity = np.asarray(capacity, np.int32)  # [S, L, G]
    kept = slot < capacity[step.astype(int)[None], np.arange(L)[:, None, None], group][..., None]
    chosen = np.exp(np.take_along_axis(router_logits, expert.astype(np.int64), axis=-1)) * kept
    gate = (chosen / chosen.sum(axis=-1, keepdims=True)).astype(np.float32)
    requested = np.zeros((2, L, 1, E), np.int32)
    load_kept = np.zeros((2, L, 1, E), np.int32)
    ll, bb, tt, kk = np.nonzero(expert >= 0)
    ee, ss = expert[ll, bb, tt, kk], step[bb, tt]
    np.add.at(requested, (ss, ll, 0, ee), 1)
    np.add.at(load_kept, (ss[kept[ll, bb, tt, kk]], ll[kept[ll, bb, tt, kk]], 0, ee[kept[ll, bb, tt, kk]]), 1)
    logits = np.zeros((B, T, V), np.float32)
    for b in range(B):
        for t in range(T - 1):
            logits[b, t, tokens[b, t + 1]] = 1.0
    return RunArrays(name=name, request_ids=np.asarray(request_ids), probe_row=probe_row, tokens=tokens,
                     prompt_len=np.full(B, P, np.int32), step=step, expert=expert, gate=gate, kept=kept,
                     slot=slot, group=group, router_logits=router_logits, requested=requested,
                     load_kept=load_kept, capacity=capacity, logits=logits)


PROBE_EXPERTS = [[[0, 1], [2, 3], [1, 0]],   # layer 0: positions 0, 1, 2 (1st, 2nd choice)
                 [[0, 1], [1, 3], [2, 0]]]   # layer 1


def alone() -> RunArrays:
    return make_run("alone", [0], 0, [[1, 2, 3]], np.array(PROBE_EXPERTS)[:, None],
                    capacity=[[[8], [8]], [[8], [8]]])


def crowded() -> RunArrays:
    expert = np.zeros((L, 3, T, K), np.int16)
    expert[:, 1] = PROBE_EXPERTS
    expert[0, 0], expert[0, 2] = [[0, 1], [1, 2], [3, 0]], [[2, 1], [0, 3], [1, 2]]
    expert[1, 0] = [[3, 0], [2, 3], [0, 1]]     # crowds expert 3: a 1st choice at position 0 ...
    expert[1, 2] = [[3, 2], [0, 1], [1, 0]]     # ... and another one
    return make_run("crowded", [4, 0, 7], 1, [[5, 5, 1], [1, 2, 4], [2, 2, 2]], expert,
                    capacity=[[[8], [2]], [[8], [8]]])


def variant(run: RunArrays, name: str, edit) -> RunArrays:
    """A copy of `run` named `name` after `edit(arrays)` changed some of its (copied) arrays."""
    arrays = {f: np.array(getattr(run, f)) for f in ("tokens", "expert", "gate", "kept", "router_logits",
                                                       "logits")}
    edit(arrays)
    return dataclasses.replace(run, name=name, **arrays)


def verdict(ref: RunArrays, other: RunArrays, ref_row: int = 0, row: int = 0):
    return explain_pair(row_trace(ref, ref_row), row_trace(other, row))


def test_fixture_slots_follow_kmajor_priority_by_hand():
    run = crowded()
    # Layer 1, step 0: 1st choices r0p0 e3 -> 0, r2p0 e3 -> 1; 2nd choices r0p1 e3 -> 2, probe r1p1 e3 -> 3.
    assert run.slot[1, 0, 0, 0] == 0 and run.slot[1, 2, 0, 0] == 1 and run.slot[1, 0, 1, 1] == 2
    assert run.slot[1, 1, 1, 1] == 3 and not run.kept[1, 1, 1, 1]
    assert run.kept[1, 1, 0].all() and run.kept[1, 1, 1, 0]
    assert alone().kept.all()


def test_capacity_drop_names_the_displacing_rows():
    v = verdict(alone(), crowded(), 0, 1)
    assert v.cause == "capacity"
    assert (v.position, v.layer, v.rank) == (1, 1, 1)
    assert v.t_star == 2 and (v.ref_token, v.token) == (3, 4)
    d = v.displacement
    assert (d.run, d.row, d.expert, d.capacity, d.group, d.step, d.slot) == ("crowded", 1, 3, 2, 0, 0, 3)
    ahead = [(c.row, c.position, c.rank, c.slot) for c in d.ahead]
    assert ahead == [(0, 0, 0, 0), (2, 0, 0, 1), (0, 1, 1, 2)]
    assert [c.kept for c in d.ahead] == [True, True, False]
    assert (v.counterpart.run, v.counterpart.slot, v.counterpart.kept) == ("alone", 0, True)
    assert v.root.kind == "kept" and (v.root.position, v.root.layer) == (1, 1)
    assert v.describe() == (
        "Position 1, layer 1: the probe's 2nd choice expert 3 was dropped in run crowded (capacity 2 in "
        "group 0 of step 0, slot 3); rows 0, 2, 0 took slots 0-2 ahead of it. In run alone it was kept "
        "(slot 0, capacity 8). The tokens split at position 2 (new token 0): token 3 in run alone, "
        "token 4 in run crowded; the reference's top-2 logit margin at position 1 was 1 against a logit "
        "difference of up to 1.")
    assert "'\\x03'" in v.describe(vocab=[chr(i) for i in range(V)])


def test_capacity_drop_in_the_reference_run_is_named_there():
    v = verdict(crowded(), alone(), 1, 0)
    assert v.cause == "capacity" and v.displacement.run == "crowded" and v.dropped_in == "crowded"
    assert v.displacement.ahead_rows == (0, 2, 0)


def test_capacity_without_the_whole_run_still_classified():
    ref, other = row_trace(alone(), 0), row_trace(crowded(), 1)
    other = dataclasses.replace(other, layer_source=None)
    v = explain_pair(ref, other)
    assert v.cause == "capacity" and v.displacement is None and v.slots[1] == 3
    assert "was dropped in run crowded (slot 3;" in v.describe()


def test_numeric_root_before_a_capacity_drop_keeps_capacity_as_the_cause():
    def nudge(a):
        a["router_logits"][0, 1, 0, 3] = np.nextafter(a["router_logits"][0, 1, 0, 3], np.float32(1))
    v = verdict(alone(), variant(crowded(), "crowded", nudge), 0, 1)
    assert v.cause == "capacity" and (v.position, v.layer) == (1, 1)
    assert (v.root.position, v.root.layer, v.root.kind) == (0, 0, "router_logits")
    assert "(The runs first differ bitwise at position 0, layer 0 (router logits).)" in v.describe()


def test_router_flip_at_a_near_tie_reports_the_margin():
    def tie(a):
        a["router_logits"][0, 0, 1] = [0.1, 0.4999, 1.0, 0.5]   # experts 2, 3; expert 1 a near-tie 3rd
    def flip(a):
        tie(a)
        a["router_logits"][0, 0, 1] = [0.1, 0.5001, 1.0, 0.5]
        a["expert"][0, 0, 1] = [2, 1]
    ref, other = variant(alone(), "a", tie), variant(alone(), "b", flip)
    v = verdict(ref, other)
    assert v.cause == "router_flip" and (v.position, v.layer, v.rank) == (1, 0, 1)
    assert v.ref_experts == (2, 3) and v.experts == (2, 1)
    assert v.router_margin == pytest.approx(1e-4, rel=1e-2)
    assert v.router_delta == pytest.approx(2e-4, rel=1e-2)
    assert not v.diverged
    assert v.describe().startswith("Position 1, layer 0: router flip at a near-tie: the probe's experts "
                                   "changed from [2, 3] in run a to [2, 1] in run b (router margin 0.0001 "
                                   "between its 2nd and 3rd choice")


def test_same_router_logits_other_experts_is_a_seeded_random_choice():
    v = verdict(alone(), variant(alone(), "b", lambda a: a["expert"][0, 0, 1].__setitem__(1, 1)))
    assert v.cause == "seeded_random" and (v.position, v.layer) == (1, 0)


def test_renormalization_found_at_the_earlier_position_before_a_lower_layer():
    def edit(a):
        a["gate"][1, 0, 0, 0] = np.nextafter(a["gate"][1, 0, 0, 0], np.float32(0))  # position 0, layer 1
        a["router_logits"][0, 0, 1, 0] += np.float32(1e-6)                          # position 1, layer 0
    v = verdict(alone(), variant(alone(), "b", edit))
    assert v.cause == "renormalization" and (v.position, v.layer) == (0, 1)
    assert v.root == v.root.__class__(position=0, layer=1, kind="gate")
    assert "same router logits and kept experts [0, 1], different weights" in v.describe()


def test_upstream_numeric_difference_without_a_decision():
    def ulp(a):
        a["router_logits"][1, 0, 0, 2] = np.nextafter(np.float32(0), np.float32(1))
    v = verdict(alone(), variant(alone(), "b", ulp))
    assert v.cause == "upstream_numeric" and (v.position, v.layer) == (0, 1)
    assert v.router_delta == pytest.approx(float(np.nextafter(np.float32(0), np.float32(1))))
    assert v.router_margin == pytest.approx(1.0)  # z_(2) - z_(3) = 1 - 0 in the reference
    assert not v.diverged and "still agree over the 1 new token compared" in v.describe()


def test_logit_near_tie_flip_is_output_numeric():
    def ref_edit(a):
        a["logits"][0, 1, 3:5] = [1.0, 0.9995]
    def other_edit(a):
        a["logits"][0, 1, 3:5] = [1.0, 1.0004]
        a["tokens"][0, 2] = 4
    v = verdict(variant(alone(), "a", ref_edit), variant(alone(), "b", other_edit))
    assert v.cause == "output_numeric" and (v.position, v.layer) == (1, -1)
    assert v.t_star == 2 and (v.ref_token, v.token) == (3, 4)
    assert v.logit_margin == pytest.approx(0.0005, abs=1e-6)
    assert v.logit_delta == pytest.approx(0.0009, abs=1e-6)
    assert v.flip_within_perturbation and v.kl > 0
    assert v.describe().startswith("Routing is identical up to the divergence; the next-token logits "
                                   "first differ at position 1")


def test_identical_runs_and_unexplained_tokens():
    v = verdict(alone(), variant(alone(), "copy", lambda a: None))
    assert v.cause == "identical" and v.root is None and not v.diverged
    assert v.describe() == ("Run copy row 0 and run alone row 0 agree bitwise on tokens, routing and logits "
                            "over 3 positions.")

    def token_only(a):
        a["tokens"][0, 2] = 4
        a["kept"][0, 0, 2, 1] = False  # a difference at t* itself is not before the divergence
    v = verdict(alone(), variant(alone(), "b", token_only))
    assert v.cause == "unexplained" and v.t_star == 2 and v.root is None


def test_pairs_of_different_requests_or_prompts_are_refused():
    with pytest.raises(ValueError, match="only runs of one request"):
        verdict(crowded(), crowded(), 0, 1)
    with pytest.raises(ValueError, match="different prompts"):
        verdict(alone(), variant(alone(), "b", lambda a: a["tokens"][0].__setitem__(0, 5)))


def test_displacement_of_a_kept_first_choice_has_nobody_ahead():
    run = crowded()
    layer = LayerArrays(run="crowded", layer=1, request_ids=run.request_ids, probe_row=1, step=run.step,
                         group=run.group[1], expert=run.expert[1], slot=run.slot[1], kept=run.kept[1],
                         capacity=run.capacity[:, 1], requested=run.requested[:, 1],
                         load_kept=run.load_kept[:, 1])
    d = displacement(layer, 0, 0, 0)
    assert d.slot == 0 and d.kept and d.ahead == () and d.describe_ahead() == "no candidate was ahead of it"
    with pytest.raises(ValueError, match="outside run"):
        displacement(layer, 5, 0, 0)


def _write(path, runs):
    meta = synthetic_meta(L, E, K, V)
    requests = [f"request {r}" for r in range(8)]
    with TraceWriter(path, meta=meta, vocab=[chr(65 + i) for i in range(V)], requests=requests,
                     prompt_tokens=[[1, 2]] * 8, compression=None) as writer:
        for run in runs:
            attrs = {"request_ids": run.request_ids, "probe_row": run.probe_row, "batch_size": run.batch_size,
                     "max_new_tokens": 1, "label": run.name, "condition": "hand-built", "experiment": "test",
                     "routing": meta.routing, "kernel_mode": "native", "seed": 0, "wall_time_s": 0.0}
            writer.add_run(run.name, attrs=attrs, arrays=run.arrays())


def test_verdict_from_a_trace_file_equals_the_one_in_memory(tmp_path):
    path = tmp_path / "hand.h5"
    _write(path, [alone(), crowded()])
    with open_trace(path) as trace:
        assert request_rows(trace) == {0: [("alone", 0), ("crowded", 1)], 4: [("crowded", 0)],
                                       7: [("crowded", 2)]}
        assert requests_with_several_runs(trace) == [0]
        assert runs_of_request(trace, 0) == [("alone", 0), ("crowded", 1)]
        ref, other = aligned_rows(trace, 0)
        from_file = explain_pair(ref, other)
        assert from_file.describe(trace.vocab) == verdict(alone(), crowded(), 0, 1).describe(trace.vocab)
        assert from_file.displacement == verdict(alone(), crowded(), 0, 1).displacement
        with pytest.raises(ValueError, match="no run holds request 3"):
            aligned_rows(trace, 3)
