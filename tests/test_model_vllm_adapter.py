"""Runs from a serving engine (no router logits, gates, capacity, kept or slot): written, validated,
read with stand-ins, explained and drawn, without vLLM (the arrays are what `model.vllm.arrays` makes
of an engine's outputs)."""

from __future__ import annotations

import numpy as np
import pytest
from paths import MIXTRAL_DOCS

from inspector.cli import main
from model.vllm.arrays import ENGINE_NOT_RECORDED, cached_tokens, run_arrays
from model.vllm.outputs import EngineOutput, decode_npy, from_completion_choice
from traces import TraceWriter, open_trace, validate
from traces.analysis.causes import explain_pair
from traces.analysis.rows import row_trace
from traces.route_check import RouteCheck, structure

MODEL = str(MIXTRAL_DOCS)
PROMPT = [3, 4, 5, 6]
GENERATED = [7, 8, 9, 10, 11, 12, 13]  # max_new_tokens 6, plus the one the engine is asked for beyond
META = {"model_config": {}, "moe_layers": [0, 1], "tokenizer": "ids", "routing": {}, "kernel_mode": "native",
        "device": "cpu", "dtype": "float32", "torch_version": "2", "seed": 0,
        "engine": {"name": "an engine", "version": "1", "experts": 8}}


def _output(generated=GENERATED, change=None, near_tie_at=None) -> EngineOutput:
    rng = np.random.default_rng(0)
    routed = rng.integers(0, 8, (len(PROMPT) + len(generated) - 1, 2, 2)).astype(np.uint8)  # [P+G-1, L, K]
    routed[..., 1] = (routed[..., 0] + 1) % 8
    if change is not None:
        t, layer = change
        routed[t, layer, 0] = (routed[t, layer, 0] + 3) % 8
    logprobs = [{tok: -0.1, 20: -0.2} for tok in generated]
    if near_tie_at is not None:
        logprobs[near_tie_at] = {generated[near_tie_at]: -0.1, GENERATED[near_tie_at]: -0.11}
    return EngineOutput(PROMPT, list(generated), routed, logprobs)


def engine_attrs(name: str, outputs: list[EngineOutput], **extra) -> dict:
    """The run attributes `lab.experiments.engine_recording` writes, with a passing route check."""
    arrays = run_arrays(outputs, 6, 4)
    tokens, repeated, out, example = structure(arrays["routing/expert"], 8)
    check = RouteCheck(rows=(0,), checked=tokens, agreeing=tokens, near_ties=0, tokens=tokens,
                       repeated=repeated, out_of_range=out, example=example, dtype="float32", seed=0)
    return {"request_ids": np.arange(len(outputs), dtype=np.int32), "probe_row": 0,
            "batch_size": len(outputs), "max_new_tokens": 6, "label": name, "condition": "engine",
            "experiment": "example", "routing": {}, "kernel_mode": "native", "seed": 0, "wall_time_s": 0.1,
            "not_recorded": list(ENGINE_NOT_RECORDED), "topk_values": "log_probs",
            "cached_tokens": cached_tokens(outputs), "route_check": check.to_attr(), **extra}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("engine") / "engine.h5"
    runs = {"alone": _output(), "experts": _output(change=(6, 1)),
            "token": _output(GENERATED[:5] + [20, 21], near_tie_at=5)}
    writer = TraceWriter(path, meta=META, vocab=[f"t{i}" for i in range(30)], requests=["probe"],
                         prompt_tokens=[PROMPT])
    for name, out in runs.items():
        writer.add_run(name, attrs=engine_attrs(name, [out]), arrays=run_arrays([out], 6, 4, eos_ids=(1,)))
    writer.close()
    return path


def test_engine_arrays_keep_every_fed_token_and_its_log_probabilities():
    arrays = run_arrays([_output()], 6, 4)
    P = len(PROMPT)
    assert arrays["tokens"][0].tolist() == PROMPT + GENERATED[:6]  # the 7th was never fed: dropped
    assert arrays["step"][0].tolist() == [0] * P + list(range(1, 7))
    assert (arrays["routing/expert"][:, 0] >= 0).all()
    assert (arrays["logits_topk/index"][0, :P - 1] == -1).all()  # no prompt log-probabilities
    assert arrays["logits_topk/index"][0, P - 1:, 0].tolist() == GENERATED[:7]
    assert set(ENGINE_NOT_RECORDED).isdisjoint(arrays)
    cut = run_arrays([_output()], 6, 4, eos_ids=(9,))  # a row ends after its end-of-sequence token
    assert cut["tokens"][0].tolist() == PROMPT + [7, 8, 9]


def test_engine_runs_validate_and_read_with_stand_ins(trace, capsys):
    assert validate(trace, read_data=True) == []
    assert main(["info", "--check", str(trace)]) == 0
    assert "0 errors, 0 warnings" in capsys.readouterr().out
    with open_trace(trace) as t:
        run = t.run("alone")
        assert run.not_recorded == frozenset(ENGINE_NOT_RECORDED)
        assert run.dims["E"] == 8 and run.dims["G"] == 1
        assert np.asarray(run.kept[...]).all()  # dropless: every chosen expert computed
        assert np.isnan(run.gate[...]).all() and np.isnan(run.router_logits[0, 0, :3]).all()
        assert (run.capacity[...] == -2).all()
        assert (run.group[1, 0, :10] == 0).all() and run.group.shape == run.expert.shape[:3]
        requested = run.requested[...]  # [S, L, G, E]: each step's chosen experts, counted
        assert requested[0].sum() == 2 * len(PROMPT) * 2 and requested[1:].sum(axis=(2, 3)).tolist() == \
            [[2, 2]] * 6


def test_a_run_that_lists_a_dataset_no_engine_may_omit_is_refused(tmp_path):
    writer = TraceWriter(tmp_path / "x.h5", meta=META, vocab=[f"t{i}" for i in range(30)], requests=["p"],
                         prompt_tokens=[PROMPT])
    attrs = {"request_ids": np.array([0], np.int32), "probe_row": 0, "batch_size": 1, "max_new_tokens": 6,
             "label": "", "condition": "", "experiment": "", "routing": {}, "kernel_mode": "native",
             "seed": 0, "wall_time_s": 0.0, "not_recorded": ["tokens"]}
    with pytest.raises(ValueError, match="tokens: listed as not recorded"):
        writer.add_run("r", attrs=attrs, arrays=run_arrays([_output()], 6, 4))
    writer.close()


def test_causes_without_router_logits(trace):
    with open_trace(trace) as t:
        ref = row_trace(t.run("alone"), 0)
        experts = explain_pair(ref, row_trace(t.run("experts"), 0))
        token = explain_pair(ref, row_trace(t.run("token"), 0))
        vocab = list(t.vocab)
    assert (experts.cause, experts.position, experts.layer) == ("numeric_routing", 6, 1)
    assert "routing changed without a capacity limit (numeric)" in experts.describe(vocab)
    assert token.cause == "token_near_tie" and token.t_star == len(PROMPT) + 5
    assert "near-tie" in token.describe(vocab)
    assert token.logit_margin == pytest.approx(0.1, abs=1e-6)  # the reference's recorded log-probabilities


@pytest.mark.parametrize("view", ["routing", "layers", "load", "pair", "runs", "text"])
def test_every_view_exports_engine_runs(trace, tmp_path, view):
    out = tmp_path / f"{view}.png"
    assert main(["export", str(trace), "--view", view, "-o", str(out)]) == 0 and out.stat().st_size > 0


def test_server_choice_decodes_routed_experts_and_token_ids():
    import base64
    import io

    routed = np.arange(2 * 3 * 2 * 2, dtype=np.uint8).reshape(6, 2, 2) % 8
    buffer = io.BytesIO()
    np.save(buffer, routed)
    choice = {"routed_experts": base64.b64encode(buffer.getvalue()).decode(),
              "logprobs": {"tokens": ["token_id:7", "token_id:8", "token_id:9"],
                           "token_logprobs": [-0.1, -0.2, -0.3],
                           "top_logprobs": [{"token_id:7": -0.1, "token_id:5": -2.0}, {"token_id:8": -0.2},
                                            {"token_id:9": -0.3}]}}
    out = from_completion_choice(PROMPT, choice)
    assert out.generated == [7, 8, 9] and out.logprobs[0] == {7: -0.1, 5: -2.0}
    np.testing.assert_array_equal(out.routed, routed)
    np.testing.assert_array_equal(decode_npy(choice["routed_experts"]), routed)


def test_engine_arguments_pass_through_as_json_or_text():
    from lab.experiments import ExperimentError
    from lab.experiments.engine import parse_engine_args

    assert parse_engine_args(["tensor_parallel_size=2", "enforce_eager=false", "quantization=fp8",
                              'hf_overrides={"a": 1}']) == {
        "tensor_parallel_size": 2, "enforce_eager": False, "quantization": "fp8", "hf_overrides": {"a": 1}}
    with pytest.raises(ExperimentError, match="--engine-arg: expected NAME=VALUE"):
        parse_engine_args(["tensor_parallel_size"])


@pytest.mark.parametrize(("args", "message"), [
    (["-e", "e3", "--engine", "vllm", "--model", MODEL], "runs experiments e1, example, against"),
    (["-e", "e1", "--engine", "vllm"], "--model must name a Hugging Face folder"),
    (["-e", "e1", "--engine", "vllm-server", "--model", MODEL], "--url"),
    (["-e", "e1", "--engine", "vllm", "--model", MODEL, "--capacity-factors", "1.0"],
     "capacity and kernel-mode options do not apply"),
    (["-e", "e1", "--engine-arg", "tensor_parallel_size=2"], "apply to --engine vllm"),
    (["-e", "against"], "pass --engine vllm"),
    (["-e", "e1", "--route-check-sample", "0.5"], "apply to --engine vllm"),
    (["-e", "e1", "--engine", "vllm", "--model", MODEL, "--route-check-sample", "1.5"],
     "--route-check-sample 1.5: expected a share between 0 and 1"),
    (["-e", "e1", "--engine", "vllm", "--model", MODEL, "--route-check-sample", "0.5", "--no-route-check"],
     "--no-route-check replays none"),
])
def test_engine_options_that_do_not_apply_are_one_line_errors(args, message, tmp_path, capsys):
    assert main(["record", *args, "-n", "1", "--new-tokens", "2", "-q", "-o", str(tmp_path / "x.h5")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
