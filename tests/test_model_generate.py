"""Batched greedy generation: KV cache, batch invariance, the native positive control, replay."""

import functools

import numpy as np
import pytest
import torch
from kernel_probe import skip_unless_native_varies

from model.generate import generate
from model.recorder import Recorder
from model.replay import ReplayRouting
from model.routing import RoutingPolicy
from model.tokenizer import PAD, encode

PROBE = encode("The probe: def f(x):")
PARTNERS = [encode(t) for t in ("a", "import os, sys  # partner two", "x = [1, 2, 3]\nprint(x)",
                                "Return the value.", "zzzzzzzzzzzzzzzzzzzzzzzzzz", "#!/usr/bin/env python3")]
# Per-sequence groups whose S never counts pads: the probe's capacity cannot depend on its partners.
PER_SEQUENCE = RoutingPolicy.preset("gshard", group_by="sequence", capacity_formula="deepspeed",
                                    capacity_factor=1.0, pads_count_toward_capacity=False)


@pytest.fixture(scope="session")
def tiny_model(tiny_model):
    """The shared small model with context = 128."""
    return functools.partial(tiny_model, context=128)


def run(model, prompts, policy, mode, new=12, **kw):
    rec = Recorder()
    result = generate(model, prompts, new, policy, kernel_mode=mode, recorder=rec, **kw)
    return result, rec.arrays(result)


def row(arrays, b):
    """Row b of every per-token array (L,B,... -> L,...; B,... -> ...)."""
    out = {}
    for path, a in arrays.items():
        if path.startswith("load/"):
            continue
        out[path] = a[:, b] if path.startswith("routing/") else a[b]
    return out


@pytest.mark.parametrize("mode", ["native", "batch_invariant"])
def test_kv_cache_decoding_equals_full_recomputation(mode, tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("dropless")
    prompts = [PROBE, PARTNERS[0], PARTNERS[2]]
    result, arrays = run(model, prompts, policy, mode, new=60)  # past one 64-key attention block
    T = max(len(r) for r in result.tokens)
    tokens = torch.full((len(prompts), T), PAD)
    for b, r in enumerate(result.tokens):
        tokens[b, :len(r)] = torch.tensor(r)
    with torch.no_grad():
        full = model(tokens, policy, kernel_mode=mode)
    valid = (tokens != PAD).numpy()
    recomputed = full.logits.numpy()[valid]
    decoded = arrays["logits"][valid]
    assert arrays["step"].max() == 60  # generated tokens really came from decode steps
    if mode == "batch_invariant":  # fixed row tiles: a position's operations are those of its decode step
        assert np.array_equal(recomputed, decoded)
        for li, r in enumerate(full.routing):
            assert np.array_equal(r.router_logits.numpy()[valid], arrays["routing/router_logits"][li][valid])
    else:
        np.testing.assert_allclose(recomputed, decoded, rtol=1e-4, atol=1e-5)


def test_same_batch_twice_gives_bitwise_identical_recorded_arrays(tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("deepspeed_top2", capacity_factor=1.0, priority="random", seed=7)
    prompts = [PARTNERS[1], PROBE, PARTNERS[3]]
    (r1, a1), (r2, a2) = run(model, prompts, policy, "native"), run(model, prompts, policy, "native")
    assert r1.tokens == r2.tokens
    assert a1.keys() == a2.keys()
    for path in a1:
        assert a1[path].dtype == a2[path].dtype and np.array_equal(a1[path], a2[path]), path


def test_per_sequence_groups_with_batch_invariant_kernels_give_the_probe_identical_routing_and_logits(
        tiny_model):
    model = tiny_model()
    reference = row(run(model, [PROBE], PER_SEQUENCE, "batch_invariant")[1], 0)
    compositions = [([PARTNERS[0]], 1), ([PARTNERS[1], PARTNERS[2]], 0), (PARTNERS[:4], 2),
                    (PARTNERS, 6), (PARTNERS[3:], 3), ([PROBE, PROBE], 1)]
    for partners, probe_row in compositions:
        prompts = partners[:probe_row] + [PROBE] + partners[probe_row:]
        got = row(run(model, prompts, PER_SEQUENCE, "batch_invariant")[1], probe_row)
        T = reference["tokens"].shape[0]
        for path, want in reference.items():
            if path == "prompt_len":
                assert got[path] == want
                continue
            if path == "routing/group":  # a per-sequence group's id is its row: only its members matter
                continue
            have = got[path][:, :T] if path.startswith("routing/") else got[path][:T]
            assert np.array_equal(have, want), f"{path}: {len(prompts)} rows, probe row {probe_row}"


def test_native_kernels_show_a_bit_difference_across_batch_sizes(tiny_model):
    """The positive control: without batch-invariant kernels the probe's logits change with B."""
    model = tiny_model()
    skip_unless_native_varies(model, sizes=(3,))
    policy = RoutingPolicy.preset("dropless")
    alone_result, alone = run(model, [PROBE], policy, "native", new=4)
    batched_result, batched = run(model, [PARTNERS[1], PARTNERS[2], PROBE], policy, "native", new=4)
    assert alone_result.tokens[0] == batched_result.tokens[2]  # like with like
    alone, batched = row(alone, 0)["logits"], row(batched, 2)["logits"]
    n = alone.shape[0]  # the prompt and the decode steps (a decode step's GEMMs have B rows)
    assert not np.array_equal(alone, batched[:n])
    np.testing.assert_allclose(alone, batched[:n], rtol=1e-4, atol=1e-4)  # a few ulps, not a bug


def test_routing_replay_reproduces_the_reference_runs_tokens(tiny_model):
    model = tiny_model(seed=3)
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    mode = "batch_invariant"
    ref_result, ref = run(model, [PROBE], policy, mode, new=16)
    crowd = [PROBE, PROBE, PROBE]  # identical partners ahead of the probe take its experts' slots
    crowded_result, crowded = run(model, crowd + [PROBE], policy, mode, new=16)
    assert crowded_result.tokens[3] != ref_result.tokens[0]  # capacity changed the completion
    replay = {3: ReplayRouting.from_run_arrays(ref, 0)}
    replayed_result, replayed = run(model, crowd + [PROBE], policy, mode, new=16, replay=replay)
    assert replayed_result.tokens[3] == ref_result.tokens[0]
    T = len(ref_result.tokens[0])
    for path in ("routing/expert", "routing/kept", "routing/gate"):
        assert np.array_equal(row(replayed, 3)[path][:, :T], row(ref, 0)[path])
    assert np.array_equal(row(replayed, 3)["logits"][:T], row(ref, 0)["logits"])


def test_rows_stop_at_eos_and_positions_are_per_row(tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("dropless")
    result, arrays = run(model, [PROBE, PARTNERS[0]], policy, "native", new=6)
    for b, p in enumerate(result.prompt_len):
        n = len(result.tokens[b])
        assert (arrays["step"][b, :p] == 0).all()
        assert list(arrays["step"][b, p:n]) == list(range(1, n - p + 1))
        assert (arrays["step"][b, n:] == -1).all() and (arrays["routing/expert"][:, b, n:] == -1).all()
        assert (arrays["routing/expert"][:, b, :n] >= 0).all()  # every token routed once per layer


@pytest.mark.parametrize("prompts, new, message", [
    ([], 4, "non-empty"), ([[]], 4, "prompt 0"), ([[1, 2], [300]], 4, "prompt 1"), ([[1, PAD]], 4, "PAD"),
    ([[1] * 120], 9, "context"), ([[1]], -1, "max_new_tokens"),
])
def test_bad_generation_input_raises_a_clear_error(prompts, new, message, tiny_model):
    with pytest.raises(ValueError, match=message):
        generate(tiny_model(), prompts, new, RoutingPolicy.preset("dropless"))


def test_bad_kernel_mode_and_replay_raise_clear_errors(tiny_model):
    model = tiny_model()
    with pytest.raises(ValueError, match="kernel_mode"):
        generate(model, [PROBE], 2, RoutingPolicy.preset("dropless"), kernel_mode="fast")
    with pytest.raises(ValueError, match="replay row 5"):
        bad = ReplayRouting(np.zeros((2, 3, 2)), np.zeros((2, 3, 2), bool), np.zeros((2, 3, 2)))
        generate(model, [PROBE], 2, RoutingPolicy.preset("dropless"), replay={5: bad})


# ---- continuous batching -------------------------------------------------------------------------


def test_arrivals_at_zero_are_the_static_batch_bit_for_bit(tiny_model):
    model = tiny_model()
    prompts = [PROBE] + PARTNERS[:3]
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    _, static = run(model, prompts, policy, "native")
    _, zero = run(model, prompts, policy, "native", arrivals=[0, 0, 0, 0])
    assert static.keys() == zero.keys()
    for path in static:
        assert np.array_equal(static[path], zero[path]), path


def test_a_late_row_joins_the_running_batch_and_shares_its_groups(tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    prompts = [PROBE, PARTNERS[1], PARTNERS[2]]
    result, arrays = run(model, prompts, policy, "batch_invariant", new=6, arrivals=[0, 3, 3])
    # Row 0 prefills at step 0 and decodes alone at steps 1-2; rows 1 and 2 prefill at step 3,
    # together with row 0's fourth decode token: one step, one group.
    step = arrays["step"]
    P0, P1 = len(PROBE), len(PARTNERS[1])
    assert (step[0, :P0] == 0).all() and list(step[0, P0:P0 + 6]) == [1, 2, 3, 4, 5, 6]
    assert (step[1, :P1] == 3).all() and list(step[1, P1:P1 + 6]) == [4, 5, 6, 7, 8, 9]
    assert result.steps == 10 and arrays["load/requested"].shape[0] == 10
    requested = arrays["load/requested"][3, 0, 0].sum()  # step 3, layer 0, group 0
    assert requested == 2 * (1 + len(PARTNERS[1]) + len(PARTNERS[2]))
    # Every row generated its 6 tokens; after row 0 left (step 6), the others went on without it.
    assert [len(r) - p for r, p in zip(result.tokens, result.prompt_len, strict=True)] == [6, 6, 6]
    assert (step[0] <= 6).all()


def test_with_dropless_routing_and_invariant_kernels_a_late_arrival_changes_nothing_of_a_row(tiny_model):
    model = tiny_model()
    dropless = RoutingPolicy.preset("dropless")
    alone = row(run(model, [PROBE], dropless, "batch_invariant", new=8)[1], 0)
    _, late = run(model, [PARTNERS[0], PROBE, PARTNERS[3]], dropless, "batch_invariant", new=8,
                  arrivals=[0, 2, 5])
    got = row(late, 1)
    T = alone["tokens"].shape[0]
    for path in ("tokens", "routing/expert", "routing/kept", "routing/router_logits", "logits"):
        have = got[path][:, :T] if path.startswith("routing/") else got[path][:T]
        assert np.array_equal(have, alone[path]), path


@pytest.mark.parametrize("arrivals, message", [([0], "one tick per row"), ([0, -1], "integers >= 0"),
                                                ([0, 1.5], "integers >= 0")])
def test_bad_arrivals_are_refused(arrivals, message, tiny_model):
    with pytest.raises(ValueError, match=message):
        generate(tiny_model(), [PROBE, PARTNERS[0]], 4, PER_SEQUENCE, arrivals=arrivals)


@pytest.mark.parametrize("arrivals", [None, [0, 3, 3]])
def test_a_generation_resumed_from_a_kept_state_equals_the_whole_run(arrivals, tiny_model):
    """States kept at the start of chosen steps; a generation resumed from one, with the same
    settings, gives the same tokens bit for bit and records the same routing for the steps it ran."""
    model = tiny_model()
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    prompts = [PROBE, PARTNERS[1], PARTNERS[2]]
    kept = {2: None, 5: None}
    whole, arrays = run(model, prompts, policy, "native", new=8, arrivals=arrivals, snapshots=kept)
    assert set(kept) == {2, 5} and all(state is not None and state.steps == s for s, state in kept.items())
    for s, state in kept.items():
        resumed, part = run(model, prompts, policy, "native", new=8, arrivals=arrivals, resume=state)
        assert resumed.tokens == whole.tokens and resumed.steps == whole.steps
        later = arrays["step"] >= s   # [B,T] positions routed from step s on
        for path in ("routing/expert", "routing/kept", "routing/gate", "routing/router_logits"):
            assert np.array_equal(part[path][:, later], arrays[path][:, later]), (s, path)
        resumed_again, _ = run(model, prompts, policy, "native", new=8, arrivals=arrivals, resume=state)
        assert resumed_again.tokens == whole.tokens   # the kept state is not changed by a resume
