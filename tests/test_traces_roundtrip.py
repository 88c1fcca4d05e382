"""Writer -> reader round trips: every array, attribute, string and table comes back as written."""

import json

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traces import FORMAT_VERSION, TraceError, TraceWriter, open_trace, schema
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays


def _attrs(B, request_ids=None, probe_row=0, **extra):
    return {"request_ids": np.zeros(B, int) if request_ids is None else request_ids, "probe_row": probe_row,
            "batch_size": B, "max_new_tokens": 4, "label": "label é", "condition": "batch cf=1.0 native",
            "experiment": "test", "routing": synthetic_routing(), "kernel_mode": "native", "seed": 7,
            "wall_time_s": 0.25, **extra}


def _random_arrays(rng, L, B, T, K, E, V, S, G, float_dtypes):
    """Arrays of the schema's shapes filled with random values of the given dtypes."""
    shapes = {"L": L, "B": B, "T": T, "K": K, "E": E, "V": V, "S": S, "G": G}
    out = {}
    for spec in schema.run_datasets():
        shape = tuple(shapes[d] for d in spec.dims)
        dtype = np.dtype(float_dtypes.get(spec.path, spec.dtypes[0]))
        if dtype.kind == "f":
            out[spec.path] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            out[spec.path] = rng.random(shape) < 0.5
        else:
            out[spec.path] = rng.integers(-1, 100, size=shape).astype(dtype)
    return out


def _writer(path, L=2, V=16, R=3, **kw):
    prompts = [np.arange(r + 1, dtype=np.int32) for r in range(R)]
    return TraceWriter(path, meta=synthetic_meta(L, 4, 2, V), vocab=byte_vocab(V),
                       requests=[f"request {r} ✓" for r in range(R)], prompt_tokens=prompts, **kw)


dims_strategy = st.fixed_dictionaries({
    "L": st.integers(1, 3), "B": st.integers(1, 4), "T": st.integers(1, 700), "K": st.integers(1, 3),
    "E": st.integers(3, 9), "V": st.integers(1, 40), "S": st.integers(1, 5), "G": st.integers(1, 3),
})
float_strategy = st.fixed_dictionaries({
    p: st.sampled_from(schema.DATASETS_BY_PATH[p].dtypes)
    for p in ("routing/gate", "routing/router_logits", "logits")
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dims=dims_strategy, floats=float_strategy, seed=st.integers(0, 2**32 - 1),
       compression=st.sampled_from(["gzip", "lzf", None]))
def test_round_trip_random_shapes_and_dtypes(tmp_path, dims, floats, seed, compression):
    rng = np.random.default_rng(seed)
    arrays = _random_arrays(rng, **dims, float_dtypes=floats)
    path = tmp_path / f"rt{seed}.h5"
    with _writer(path, L=dims["L"], V=dims["V"], compression=compression) as writer:
        writer.add_run("only", attrs=_attrs(dims["B"], probe_row=dims["B"] - 1), arrays=arrays)
    with open_trace(path) as trace:
        run = trace.run("only")
        assert run.dims == dims
        assert run.complete and run.probe_row == dims["B"] - 1 and run.batch_size == dims["B"]
        for spec in schema.run_datasets():
            lazy = run.arrays[spec.path]
            assert lazy.dims == spec.dims
            assert lazy.dtype == arrays[spec.path].dtype
            np.testing.assert_array_equal(lazy[...], arrays[spec.path])
        assert run.attrs["routing"] == synthetic_routing()
        assert run.attrs["label"] == "label é"


def test_dimension_labels_carry_schema_letters(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "labels.h5"
    with _writer(path) as writer:
        writer.add_run("r", attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 20, 2, 4, 16, rng))
    with h5py.File(path, "r") as f:
        for spec in schema.run_datasets():
            ds = f["runs/r"][spec.path]
            assert tuple(d.label for d in ds.dims) == spec.dims, spec.path
        assert f["vocab"].dims[0].label == "V"
        assert f["requests/text"].dims[0].label == "R"


def test_root_metadata_vocab_and_request_pool(tmp_path):
    path = tmp_path / "root.h5"
    with _writer(path, R=4):
        pass
    with open_trace(path) as trace:
        assert trace.meta["format"] == schema.FORMAT
        assert trace.meta["format_version"] == FORMAT_VERSION
        assert trace.meta["model_config"]["n_layers"] == 2
        assert trace.meta["routing"] == synthetic_routing()
        assert trace.meta["producer"].startswith("moe-inspector")
        assert trace.moe_layers == [0, 1]
        assert trace.vocab == byte_vocab(16)
        assert len(trace.requests) == 4
        assert trace.requests.text[3] == "request 3 ✓"
        np.testing.assert_array_equal(trace.requests.prompt_tokens(2), [0, 1, 2])
        assert trace.requests.prompt_tokens(0).dtype == np.int32
        assert trace.run_names == [] and trace.incomplete_runs == [] and trace.table_names == []


def test_chunks_follow_runs_layers_and_position_windows(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "chunks.h5"
    with _writer(path, V=16) as writer:
        writer.add_run("r", attrs=_attrs(3), arrays=synthetic_run_arrays(2, 3, 600, 2, 4, 16, rng))
    with h5py.File(path, "r") as f:
        run = f["runs/r"]
        assert run["routing/expert"].chunks == (1, 1, 512, 2)
        assert run["routing/router_logits"].chunks == (1, 1, 512, 4)
        assert run["logits"].chunks == (1, 512, 16)
        assert run["tokens"].chunks == (1, 512)
        assert run["logits"].compression == "gzip" and run["logits"].compression_opts == 1
        assert run["logits"].shuffle


def test_runs_keep_write_order_and_append_adds_more(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "order.h5"
    names = ["zeta", "alpha", "mid"]
    with _writer(path) as writer:
        for name in names:
            writer.add_run(name, attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 10, 2, 4, 16, rng))
    with TraceWriter.append(path) as writer:
        writer.add_run("beta", attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 10, 2, 4, 16, rng))
        with pytest.raises(ValueError, match="already exists"):
            writer.add_run("zeta", attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 10, 2, 4, 16, rng))
    with open_trace(path) as trace:
        assert trace.run_names == [*names, "beta"]
        assert [r.attrs["index"] for r in trace.runs()] == [0, 1, 2, 3]


def test_tables_round_trip_and_replace(tmp_path):
    path = tmp_path / "tables.h5"
    with _writer(path) as writer:
        writer.write_table("causes", {"run": ["a", "b"], "position": np.array([3, 9]),
                                      "share": [0.5, 0.25], "dropped": [True, False]},
                           {"reference": "a", "n": 2})
        writer.write_table("other", {"x": np.arange(3)})
    with TraceWriter.append(path) as writer:
        writer.write_table("other", {"y": np.array([1.5])}, {"replaced": True})
    with open_trace(path) as trace:
        assert sorted(trace.table_names) == ["causes", "other"]
        columns, attrs = trace.read_table("causes")
        assert list(columns) == ["run", "position", "share", "dropped"]
        assert columns["run"].tolist() == ["a", "b"] and columns["run"].dtype.kind == "U"
        np.testing.assert_array_equal(columns["position"], [3, 9])
        assert columns["dropped"].dtype == bool
        assert attrs == {"reference": "a", "n": 2}
        columns, attrs = trace.read_table("other")
        assert list(columns) == ["y"] and attrs == {"replaced": True}
        with pytest.raises(TraceError, match="tables/missing"):
            trace.read_table("missing")


@pytest.mark.parametrize("change, message", [
    (lambda a: a.__setitem__("routing/gate", a["routing/gate"][:, :1]), "routing/gate: expected dim B"),
    (lambda a: a.__setitem__("logits", a["logits"][..., :-1]), "logits: expected V"),
    (lambda a: a.__setitem__("routing/kept", a["routing/kept"].astype(np.float32)),
     "routing/kept: expected dtype"),
    (lambda a: a.__setitem__("routing/slot", a["routing/slot"][0]), "routing/slot: expected 4-D"),
    (lambda a: a.pop("load/capacity"), "load/capacity: required dataset missing"),
    (lambda a: a.__setitem__("routing/extra", a["tokens"]), "routing/extra: not a dataset"),
    (lambda a: a.__setitem__("routing/expert", a["routing/expert"].astype(np.int64) + 70000),
     "routing/expert: expected dtype"),
])
def test_writer_rejects_inconsistent_arrays_naming_the_dataset(tmp_path, change, message):
    arrays = synthetic_run_arrays(2, 3, 10, 2, 4, 16, np.random.default_rng(3))
    change(arrays)
    with _writer(tmp_path / "bad.h5") as writer, pytest.raises(ValueError, match=message):
        writer.add_run("r", attrs=_attrs(3), arrays=arrays)
    with open_trace(tmp_path / "bad.h5") as trace:
        assert trace.run_names == [] and trace.incomplete_runs == []


def test_writer_rejects_bad_attributes_and_meta(tmp_path):
    arrays = synthetic_run_arrays(2, 3, 10, 2, 4, 16, np.random.default_rng(4))
    with _writer(tmp_path / "attrs.h5", R=3) as writer:
        with pytest.raises(ValueError, match="request_ids"):
            writer.add_run("r", attrs=_attrs(3, request_ids=np.array([0, 1, 3])), arrays=arrays)
        with pytest.raises(ValueError, match="probe_row"):
            writer.add_run("r", attrs=_attrs(3, probe_row=3), arrays=arrays)
        with pytest.raises(ValueError, match="missing run attributes"):
            writer.add_run("r", attrs={"batch_size": 3}, arrays=arrays)
        with pytest.raises(ValueError, match="name"):
            writer.add_run("a/b", attrs=_attrs(3), arrays=arrays)
    meta = synthetic_meta(2, 4, 2, 16).to_attrs()
    del meta["routing"]
    with pytest.raises(ValueError, match="routing"):
        TraceWriter(tmp_path / "meta.h5", meta=meta, vocab=["a"], requests=[], prompt_tokens=[])


def test_lazy_arrays_read_only_what_is_asked_with_numpy_semantics(tmp_path):
    arrays = synthetic_run_arrays(3, 4, 40, 2, 5, 16, np.random.default_rng(5))
    path = tmp_path / "lazy.h5"
    with _writer(path, L=3) as writer:
        writer.add_run("r", attrs=_attrs(4), arrays=arrays)
    full = arrays["routing/router_logits"]
    keys = [np.s_[1, 2, 5:17], np.s_[..., 3], np.s_[:, ::-1], np.s_[-1, [3, 0, 0], 2:30:7],
            np.s_[0, :, [1, 4]], np.s_[:, 1, np.array([True, False] * 20)], np.s_[2, 3, 39, 4],
            np.s_[0, 0, 10:3], np.s_[1:, ..., ::-2]]
    with open_trace(path) as trace:
        lazy = trace.run("r").router_logits
        assert lazy.shape == full.shape and lazy.dims == ("L", "B", "T", "E")
        for key in keys:
            np.testing.assert_array_equal(lazy[key], full[key], err_msg=str(key))
        np.testing.assert_array_equal(np.asarray(lazy), full)
        with pytest.raises(IndexError):
            lazy[3]
        with pytest.raises(IndexError):
            lazy[0, 0, 0, 0, 0]


def test_incomplete_run_is_listed_apart_and_replaced_on_append(tmp_path):
    rng = np.random.default_rng(6)
    path = tmp_path / "inc.h5"
    with _writer(path) as writer:
        writer.add_run("done", attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 10, 2, 4, 16, rng))
        writer.add_run("cut", attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 10, 2, 4, 16, rng))
    with h5py.File(path, "r+") as f:  # what a writer killed before its last flush leaves
        f["runs/cut"].attrs["complete"] = False
    with open_trace(path) as trace:
        assert trace.run_names == ["done"] and trace.incomplete_runs == ["cut"]
        assert trace.run("cut").complete is False
    with TraceWriter.append(path) as writer:
        writer.add_run("cut", attrs=_attrs(2), arrays=synthetic_run_arrays(2, 2, 10, 2, 4, 16, rng))
    with open_trace(path) as trace:
        assert trace.run_names == ["done", "cut"] and trace.incomplete_runs == []
        assert json.loads(json.dumps(trace.run("cut").attrs["routing"])) == synthetic_routing()
