"""Synthetic traces are internally consistent the way recorded runs are; the summary describes them."""

import itertools

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces import open_trace, schema, validate
from traces.summary import describe
from traces.synthetic import synthetic_run_arrays, write_synthetic_trace


def reference_slots(expert, step, group, valid):
    """Slots by the definition, one candidate at a time: k-major, then arrival b*T + t, per queue."""
    L, B, T, K = expert.shape
    slot = np.full(expert.shape, -1)
    for l in range(L):
        counts: dict = {}
        order = sorted(itertools.product(range(B), range(T), range(K)), key=lambda c: (c[2], c[0] * T + c[1]))
        for b, t, k in order:
            if valid[b, t]:
                queue = (step[b, t], group[l, b, t], expert[l, b, t, k])
                slot[l, b, t, k] = counts.get(queue, 0)
                counts[queue] = slot[l, b, t, k] + 1
    return slot


@pytest.mark.parametrize("group_by", ["batch", "sequence"])
def test_arrays_are_internally_consistent(group_by):
    L, B, T, K, E, V = 2, 4, 24, 2, 4, 20
    a = synthetic_run_arrays(L, B, T, K, E, V, np.random.default_rng(3), prompt_len=(3, 8),
                             capacity_factor=0.75, group_by=group_by)
    for spec in schema.run_datasets():
        assert a[spec.path].dtype.name == spec.dtypes[0], spec.path
    dims, problems = schema.collect_dims({p: x.shape for p, x in a.items()})
    assert problems == [] and dims == {"B": B, "T": T, "L": L, "K": K, "E": E, "S": dims["S"], "G": dims["G"],
                                       "V": V}
    valid = a["step"] >= 0
    plen = a["prompt_len"]
    n_new = dims["S"] - 1
    assert valid.sum(axis=1).tolist() == (plen + n_new).tolist() and valid.sum(axis=1).max() == T
    for b in range(B):  # steps: prefill 0, then 1..n
        assert a["step"][b, :plen[b]].tolist() == [0] * plen[b]
        assert a["step"][b, plen[b]:plen[b] + n_new].tolist() == list(range(1, n_new + 1))
        gen = np.arange(plen[b], plen[b] + n_new)  # generated tokens are the greedy choice
        assert (a["tokens"][b, gen] == a["logits"][b, gen - 1].argmax(-1)).all()
    assert (a["tokens"][~valid] == -1).all() and (a["logits"][~valid] == 0).all()

    rl = a["routing/router_logits"]
    top = np.argsort(-rl, axis=-1, kind="stable")[..., :K]
    assert (a["routing/expert"][:, valid] == top[:, valid]).all()
    assert (a["routing/expert"][:, ~valid] == -1).all()
    kept, gate = a["routing/kept"], a["routing/gate"]
    assert (gate[~kept] == 0).all() and (gate[kept] > 0).all()
    all_kept = kept.all(axis=-1) & valid[None]
    np.testing.assert_allclose(gate.sum(-1)[all_kept], 1.0, rtol=1e-5)

    group = a["routing/group"]
    slot = reference_slots(a["routing/expert"], a["step"], group, valid)
    np.testing.assert_array_equal(a["routing/slot"], slot)
    cap = a["load/capacity"]
    step_i, layer_i = np.broadcast_to(a["step"], (L, B, T)), np.arange(L)[:, None, None]
    C = cap[step_i, np.broadcast_to(layer_i, (L, B, T)), group]
    np.testing.assert_array_equal(kept, (slot < C[..., None]) & valid[None, :, :, None])
    assert 0 < (~kept[:, valid]).mean() < 0.5  # capacity 0.75 drops some candidates, not most

    requested, load_kept = a["load/requested"], a["load/kept"]
    assert requested.sum() == valid.sum() * L * K and load_kept.sum() == kept.sum()
    assert (load_kept <= requested).all() and (load_kept <= np.maximum(cap, 0)[..., None]).all()
    sizes = np.zeros(cap.shape[::2], int)  # tokens per (step, group)
    np.add.at(sizes, (a["step"][valid], group[0][valid]), 1)
    expected = np.where(sizes == 0, -1, np.maximum(np.ceil(0.75 * sizes * K / E), 1))
    np.testing.assert_array_equal(cap[:, 0], expected)


def test_rows_of_one_request_share_their_prompt_and_mostly_their_completion(tmp_path):
    path = write_synthetic_trace(tmp_path / "s.h5", 3, L=2, E=4, K=2, V=64, B=4, T=40, R=3, seed=5)
    with open_trace(path) as trace:
        probes = []
        for run in trace.runs():
            b = run.probe_row
            assert run.request_ids[b] == 0
            n = run.prompt_len[b]
            np.testing.assert_array_equal(run.tokens[b, :n], trace.requests.prompt_tokens(0))
            probes.append(run.tokens[b])
        assert np.mean(probes[0] == probes[1]) > 0.8
    assert validate(path, read_data=True) == []


def test_describe_names_settings_runs_and_sizes(tmp_path):
    path = write_synthetic_trace(tmp_path / "d.h5", 2, L=2, E=4, K=2, V=32, B=3, T=20, R=4,
                                 capacity_factor=1.25)
    with open_trace(path) as trace:
        text = describe(trace)
    for expected in ("moe-routing-trace v2", "MoE layers (L=2): [0, 1]", "cf=1.25", "kernel mode: native",
                     "runs: 2 complete, 0 incomplete", "r000: B=3 T=20", "probe row", "request ids:",
                     "condition: synthetic batch cf=1.25 native",
                     "routing/router_logits  float32  [L=2 x B=3 x T=20 x E=4]",
                     "on disk", "tables: none"):
        assert expected in text, expected


def test_bad_synthetic_parameters():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="K = 5 exceeds E = 4"):
        synthetic_run_arrays(1, 2, 8, 5, 4, 16, rng)
    with pytest.raises(ValueError, match="prompt lengths"):
        synthetic_run_arrays(1, 2, 8, 2, 4, 16, rng, prompt_len=9)


def test_chunk_shapes():
    spec = schema.DATASETS_BY_PATH
    assert schema.chunk_shape(spec["routing/expert"], (8, 32, 1000, 2), 2) == (1, 1, 512, 2)
    assert schema.chunk_shape(spec["routing/router_logits"], (8, 32, 100, 8), 4) == (1, 1, 100, 8)
    assert schema.chunk_shape(spec["logits"], (32, 512, 256), 4) == (1, 512, 256)
    assert schema.chunk_shape(spec["prompt_len"], (32,), 4) == (32,)
    assert schema.chunk_shape(spec["load/requested"], (400, 8, 1, 8), 4) == (256, 8, 1, 8)
    assert schema.chunk_shape(spec["routing/expert"], (0, 32, 100, 2), 2) is None
    # A large vocabulary: fewer positions per chunk, the whole vocabulary still in one chunk.
    assert schema.chunk_shape(spec["logits"], (32, 512, 32_000), 4) == (1, 8, 32_000)
    assert schema.chunk_shape(spec["logits"], (32, 512, 152_064), 4) == (1, 1, 152_064)


@settings(max_examples=200, deadline=None)
@given(sizes=st.dictionaries(st.sampled_from(schema.DIM_LETTERS), st.integers(1, 1 << 19)),
       itemsize=st.sampled_from([1, 2, 4]))
def test_no_chunk_exceeds_the_cap_whatever_the_sizes(sizes, itemsize):
    for spec in schema.RUN_DATASETS:
        shape = tuple(sizes.get(letter, 3) for letter in spec.dims)
        chunk = schema.chunk_shape(spec, shape, itemsize)
        assert len(chunk) == len(shape) and all(1 <= c <= n for c, n in zip(chunk, shape, strict=True))
        assert int(np.prod(chunk)) * itemsize <= schema.MAX_CHUNK_BYTES, (spec.path, shape, chunk)


def test_a_large_vocabulary_trace_round_trips_in_capped_chunks(tmp_path):
    path = write_synthetic_trace(tmp_path / "big_v.h5", 1, L=1, E=4, K=2, V=40_000, B=2, T=12, R=1)
    chunks = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: chunks.update({name: (obj.chunks, obj.dtype.itemsize)})
                     if isinstance(obj, h5py.Dataset) and obj.chunks else None)
    assert any(name.endswith("/logits") for name in chunks)
    for name, (chunk, itemsize) in chunks.items():
        assert int(np.prod(chunk)) * itemsize <= schema.MAX_CHUNK_BYTES, name
    with open_trace(path) as trace:
        logits = trace.run(trace.run_names[0]).arrays["logits"]
        assert logits.shape[-1] == 40_000
        np.testing.assert_array_equal(logits[1, 3:9], logits[...][1, 3:9])
