"""The top-k form of next-token logits (schema v2): recorded as the full form reduces, written and
read back, measured like full logits where the measure is exact, and v1 traces still read."""

import numpy as np
import pytest

from model.generate import generate
from model.recorder import Recorder
from model.routing import RoutingPolicy
from model.tokenizer import encode
from tests.test_traces_locking import add_run
from traces import TraceWriter, open_trace, schema, validate
from traces.analysis import explain_pair, pair_curves, row_trace
from traces.analysis.next_token import kl, max_difference
from traces.analysis.rows import RunArrays
from traces.synthetic import synthetic_run_arrays, topk_arrays, write_synthetic_trace
from traces.toplogits import TopLogits

#: A trace written by the format-version-1 writer (the shipped examples are version 2 since kernel version 2)
GOLDEN_V1 = "tests/data/golden_v1.h5"
PROMPTS = ["def f(x):", "import os", "x = [1, 2, 3]"]


def test_top_k_runs_round_trip_and_validate(tmp_path):
    full = write_synthetic_trace(tmp_path / "full.h5", 2, L=2, E=4, V=300, B=3, T=40, seed=5)
    top = write_synthetic_trace(tmp_path / "top.h5", 2, L=2, E=4, V=300, B=3, T=40, seed=5, logits_k=8)
    assert validate(top, read_data=True) == []
    with open_trace(full) as f, open_trace(top) as t:
        assert t.meta["format_version"] == schema.FORMAT_VERSION == 2
        for name in t.run_names:
            a, b = f.run(name), t.run(name)
            assert a.logits_form == "full" and b.logits_form == "topk" and b.dims["J"] == 8
            assert "V" not in b.dims and "logits" not in b.arrays
            want = TopLogits.from_full(a.logits[...], a.tokens[...], 8, valid=a.step[...] >= 0)
            got = b.logits[:, :]
            for field in ("index", "value", "lse", "chosen"):
                np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)
            row = b.logits[1, 3:9]
            assert row.shape == (6, 8) and row.vocab_size == 300


def test_margins_and_near_tie_tests_agree_exactly_between_the_forms(tmp_path):
    full = write_synthetic_trace(tmp_path / "full.h5", 4, L=2, E=4, V=64, B=4, T=60, R=3, seed=2,
                                 capacity_factor=0.75)
    top = write_synthetic_trace(tmp_path / "top.h5", 4, L=2, E=4, V=64, B=4, T=60, R=3, seed=2,
                                capacity_factor=0.75, logits_k=16)
    compared = 0
    with open_trace(full) as f, open_trace(top) as t:
        rows = [(row_trace(f.run(n), b), row_trace(t.run(n), b)) for n in f.run_names for b in range(4)]
        for (ref_f, ref_t), (oth_f, oth_t) in zip(rows, rows[1:], strict=False):
            if ref_f.request != oth_f.request:
                continue
            compared += 1
            np.testing.assert_array_equal(ref_t.logit_margin, ref_f.logit_margin)  # exact in both forms
            vf, vt = explain_pair(ref_f, oth_f), explain_pair(ref_t, oth_t)
            assert (vt.cause, vt.t_star, vt.position) == (vf.cause, vf.t_star, vf.position)
            assert vt.logit_margin == vf.logit_margin or np.isnan(vf.logit_margin)
            assert vt.logit_delta <= vf.logit_delta or np.isnan(vf.logit_delta)  # a lower bound
            cf, ct = pair_curves(ref_f, oth_f), pair_curves(ref_t, oth_t)
            assert cf.exact_logits and not ct.exact_logits
            np.testing.assert_array_equal(ct.logit_margin, cf.logit_margin)
            routed = cf.differences.routed
            assert np.all(ct.kl[routed] <= cf.kl[routed] + 1e-9)  # the coarsened KL never exceeds KL
            assert np.all(ct.max_logit_diff[routed] <= cf.max_logit_diff[routed])
            np.testing.assert_array_equal(ct.differences.logits, cf.differences.logits)
    assert compared > 0


def test_kl_bound_is_exact_when_the_kept_ids_hold_all_the_mass():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 12)).astype(np.float32), rng.standard_normal((5, 12)).astype(np.float32)
    tokens = np.zeros(5, np.int32)
    ta, tb = TopLogits.from_full(a, tokens, 12), TopLogits.from_full(b, tokens, 12)
    from traces.analysis.measures import kl_divergence, max_logit_difference
    np.testing.assert_allclose(kl(ta, tb), kl_divergence(a, b), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(max_difference(ta, tb), max_logit_difference(a, b))
    ta4, tb4 = ta.top(4), tb.top(4)
    assert np.all(kl(ta4, tb4) <= kl_divergence(a, b) + 1e-12)


def test_recorder_top_k_is_the_full_form_reduced(tiny_model):
    model = tiny_model()
    policy = RoutingPolicy.preset("gshard", capacity_factor=1.0)
    prompts = [encode(p) for p in PROMPTS]
    full, top = Recorder("full"), Recorder("topk", k=5)
    r_full = generate(model, prompts, 8, policy, recorder=full)
    r_top = generate(model, prompts, 8, policy, recorder=top)
    assert r_full.tokens == r_top.tokens
    a_full, a_top = full.arrays(r_full), top.arrays(r_top)
    assert "logits" not in a_top and a_top["logits_topk/index"].shape[-1] == 5
    want = TopLogits.from_full(a_full["logits"], a_full["tokens"], 5, valid=a_full["step"] >= 0)
    got = TopLogits.from_schema(a_top)
    routed = a_full["step"] >= 0
    for field in ("index", "value", "chosen"):
        np.testing.assert_array_equal(getattr(got, field)[routed], getattr(want, field)[routed], field)
    np.testing.assert_allclose(got.lse[routed], want.lse[routed], rtol=1e-6)
    # the token after each prompt position is the prompt's next token, its logit as the full form holds it
    b, t = 0, 2
    assert got.chosen[b, t] == a_full["logits"][b, t, a_full["tokens"][b, t + 1]]


def test_v1_traces_read_explain_and_take_tables_but_not_top_k_runs(tmp_path):
    import shutil
    path = tmp_path / "v1.h5"
    shutil.copy(GOLDEN_V1, path)
    with open_trace(path) as trace:
        assert trace.meta["format_version"] == 1
        run = trace.run(trace.run_names[0])
        assert run.logits_form == "full" and run.logits.dims == ("B", "T", "V")
        row = row_trace(run, 0)
        assert row.logit_margin is not None and row.log_probs is not None
        d = run.dims
    assert [(p.where, p.severity) for p in validate(path)] == [("/runs/cut", "warning")]  # as written
    writer = TraceWriter.append(path)
    try:
        writer.write_table("added", {"x": np.arange(2)})
        arrays = topk_arrays(synthetic_run_arrays(d["L"], 1, 6, d["K"], d["E"], d["V"],
                                                  np.random.default_rng(0)), 4)
        with pytest.raises(ValueError, match="format version 1, which holds full logits only"):
            writer.prepare_run("top", attrs={}, arrays=arrays)
    finally:
        writer.close()
    with open_trace(path) as trace:
        assert "added" in trace.table_names and trace.meta["format_version"] == 1


def test_a_run_must_hold_exactly_one_logits_form(tmp_path):
    from tests.test_traces_locking import B, E, K, L, T, V, new_writer
    arrays = synthetic_run_arrays(L, B, T, K, E, V, np.random.default_rng(0), prompt_len=2,
                                  request_ids=np.zeros(B, int))
    both = {**arrays, **topk_arrays(arrays, 4)}
    partial = {k: v for k, v in topk_arrays(arrays, 4).items() if k != "logits_topk/lse"}
    with new_writer(tmp_path / "forms.h5") as writer:
        add_run(writer, "ok")
        for bad in (both, partial):
            with pytest.raises(ValueError, match="one logits form"):
                writer.prepare_run("bad", attrs={}, arrays=bad)
        bad_ids = topk_arrays(arrays, 4)
        bad_ids["logits_topk/index"] = bad_ids["logits_topk/index"] + V
        with pytest.raises(ValueError, match=r"logits_topk/index: expected ids in \[0, 16\)"):
            writer.prepare_run("bad", attrs={}, arrays=bad_ids)


def test_run_arrays_carry_top_k_logits_both_ways():
    arrays = topk_arrays(synthetic_run_arrays(2, 3, 10, 2, 4, 20, np.random.default_rng(0)), 6)
    run = RunArrays.from_schema("r", arrays, request_ids=np.zeros(3, int))
    assert run.dims["J"] == 6 and isinstance(run.logits, TopLogits)
    assert set(run.arrays()) == set(arrays)
    assert row_trace(run, 1).logits.shape == (run.row_length(1), 6)


def test_large_vocabularies_are_chunked_within_a_mebibyte():
    for path, shape in (("logits", (8, 512, 152064)), ("logits", (8, 512, 262144 + 5)),
                        ("logits_topk/index", (8, 512, 64)), ("logits_topk/lse", (8, 512))):
        spec = schema.DATASETS_BY_PATH[path]
        chunk = schema.chunk_shape(spec, shape, 4)
        assert int(np.prod(chunk)) * 4 <= schema.MAX_CHUNK_BYTES, (path, chunk)
    assert schema.chunk_shape(schema.DATASETS_BY_PATH["logits"], (8, 512, 152064), 4) == (1, 1, 152064)


def test_session_writes_top_k_by_default_above_the_threshold():
    from model.recorder import AUTO_TOPK_ABOVE, logits_form_for
    assert logits_form_for("auto", 259) == "full" and logits_form_for("auto", AUTO_TOPK_ABOVE + 1) == "topk"
    assert logits_form_for("full", 152064) == "full"
    with pytest.raises(ValueError):
        logits_form_for("half", 10)
