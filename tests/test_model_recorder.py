"""The recorder: schema-valid arrays that round-trip through the trace writer and reader."""

import functools

import numpy as np
import pytest
import torch

from model.generate import generate
from model.recorder import Recorder, trace_meta
from model.replay import ReplayRouting
from model.routing import RoutingPolicy
from model.tokenizer import decode, encode, vocab_strings
from traces import TraceWriter, open_trace, validate
from traces.schema import DATASETS_BY_PATH, run_datasets

REQUESTS = ["The probe: def f(x):", "import os", "x = [1, 2, 3]"]


@pytest.fixture(scope="session")
def tiny_model(tiny_model):
    """The shared small model with n_layers = 3, moe_layers = [0, 2]."""
    return functools.partial(tiny_model, n_layers=3, moe_layers=[0, 2])


def record(model, policy, request_ids, new=10, mode="native"):
    rec = Recorder()
    prompts = [encode(REQUESTS[r]) for r in request_ids]
    result = generate(model, prompts, new, policy, kernel_mode=mode, recorder=rec)
    return rec, result


def test_recorded_arrays_follow_the_schema(tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    rec, result = record(model, policy, [0, 1, 2])
    arrays = rec.arrays(result)
    assert set(arrays) == {spec.path for spec in run_datasets()}
    B, T = arrays["tokens"].shape
    L, S = 2, result.steps
    for path, array in arrays.items():
        spec = DATASETS_BY_PATH[path]
        assert array.dtype.name == spec.dtypes[0], path
        assert array.ndim == spec.ndim, path
    assert arrays["routing/expert"].shape == (L, B, T, 2)
    assert arrays["routing/router_logits"].shape == (L, B, T, 4)
    assert arrays["load/capacity"].shape[:2] == (S, L) and arrays["logits"].shape == (B, T, 259)
    # Loads agree with the per-token routing they summarise, step by step.
    for s in range(S):
        for li in range(L):
            at_step = arrays["step"] == s  # [B,T]
            experts = arrays["routing/expert"][li][at_step]  # [n,K]
            kept = arrays["routing/kept"][li][at_step]
            requested = np.bincount(experts.ravel(), minlength=4)
            kept_count = np.bincount(experts[kept], minlength=4)
            assert np.array_equal(arrays["load/requested"][s, li].sum(0), requested)
            assert np.array_equal(arrays["load/kept"][s, li].sum(0), kept_count)
    assert (arrays["load/capacity"][0] > 0).all()  # one batch group at prefill with a capacity
    assert (arrays["routing/gate"][~arrays["routing/kept"]] == 0).all()
    for b, row in enumerate(result.tokens):
        assert list(arrays["tokens"][b, :len(row)]) == row and (arrays["tokens"][b, len(row):] == -1).all()


def test_dropless_capacity_is_recorded_as_minus_two(tiny_model):
    rec, result = record(tiny_model(), RoutingPolicy.preset("dropless"), [0, 1])
    capacity = rec.arrays(result)["load/capacity"]
    assert (capacity == -2).all()


def test_recorded_run_validates_and_round_trips_through_the_trace(tmp_path, tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.25)
    path = tmp_path / "trace.h5"
    meta = trace_meta(model, policy, kernel_mode="batch_invariant", seed=11)
    prompts = [encode(t) for t in REQUESTS]
    with TraceWriter(path, meta=meta, vocab=vocab_strings(), requests=REQUESTS,
                     prompt_tokens=prompts) as writer:
        runs = {}
        for name, ids, probe in (("alone", [0], 0), ("batch", [1, 0, 2], 1)):
            rec, result = record(model, policy, ids, mode="batch_invariant")
            runs[name] = rec.write_run(writer, name, result, policy=policy, request_ids=ids, probe_row=probe,
                                       label=f"probe with {len(ids) - 1} partners", condition="test",
                                       experiment="example", seed=11, max_new_tokens=10)
    problems = validate(path)
    assert not [p for p in problems if p.severity == "error"], problems
    with open_trace(path) as trace:
        assert trace.moe_layers == [0, 2]
        assert trace.vocab == vocab_strings()
        assert trace.meta["routing"] == policy.to_dict()
        assert trace.run_names == ["alone", "batch"]
        for name, arrays in runs.items():
            run = trace.run(name)
            assert run.complete and run.attrs["kernel_mode"] == "batch_invariant"
            assert run.attrs["routing"] == policy.to_dict()
            for attr, path_ in (
                    ("tokens", "tokens"), ("expert", "routing/expert"), ("gate", "routing/gate"),
                    ("kept", "routing/kept"), ("slot", "routing/slot"), ("group", "routing/group"),
                    ("router_logits", "routing/router_logits"), ("requested", "load/requested"),
                    ("load_kept", "load/kept"), ("capacity", "load/capacity"), ("logits", "logits"),
                    ("step", "step"), ("prompt_len", "prompt_len")):
                assert np.array_equal(getattr(run, attr)[...], arrays[path_]), (name, attr)
        # A replay can be built straight from a trace run.
        run = trace.run("batch")
        replay = ReplayRouting.from_run_arrays(run, run.probe_row)
        assert replay.expert.shape == (2, run.dims["T"], 2)
        assert decode(trace.requests.prompt_tokens(0).tolist()) == REQUESTS[0]


def test_dense_model_records_no_routing_but_the_logits(tiny_model):
    dense = tiny_model(moe_layers=[])
    rec = Recorder()
    result = generate(dense, [encode("abc")], 4, None, recorder=rec)
    arrays = rec.arrays(result)
    assert arrays["routing/expert"].shape[0] == 0 and arrays["logits"].shape[:2] == (1, 8)


def test_recorder_without_steps_raises_a_clear_error():
    with pytest.raises(ValueError, match="no steps"):
        Recorder().arrays(None)


def test_the_log_sum_exp_is_float64_accurate_and_the_same_for_a_row_in_any_batch():
    from model.recorder import log_sum_exp

    z = torch.randn(5, 3, 4099, generator=torch.Generator().manual_seed(0)) * 4  # V not a multiple of 16
    got = log_sum_exp(z)
    exact = torch.logsumexp(z.double(), -1).numpy()
    assert got.dtype == np.float32
    assert np.abs(got - exact).max() <= np.spacing(np.abs(exact).astype(np.float32)).max()
    for b in range(5):  # one row alone, or among others: the same bits
        assert np.array_equal(log_sum_exp(z[b:b + 1, 1:2]), got[b:b + 1, 1:2])


def test_the_recorders_arrays_are_the_schemas():
    from traces.schema import RUN_DATASETS, empty_run_arrays

    sizes = {"B": 2, "T": 3, "L": 1, "K": 2, "E": 4, "S": 1, "G": 1, "J": 5}
    arrays = empty_run_arrays(sizes, "topk")
    for spec in RUN_DATASETS:
        if spec.path == "logits":
            assert spec.path not in arrays
            continue
        a = arrays[spec.path]
        assert a.dtype == np.dtype(spec.dtypes[0]) and a.ndim == spec.ndim
        assert (a == spec.fill).all()
    assert "logits_topk/index" not in empty_run_arrays(sizes, None)
