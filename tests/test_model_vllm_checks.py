"""What an engine's trace is checked against, without vLLM: the route check's counts and verdicts,
`info --check` on unchecked and failing routes, log-probabilities compared like with like, the MoE
layers of a Qwen2-MoE config, and the server errors a client meets before any vLLM is involved."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
from paths import MIXTRAL_DOCS
from test_model_vllm_adapter import GENERATED, META, PROMPT, _output, engine_attrs

from inspector.cli import main
from inspector.figure_data.pair import ROUTER_LOGITS, WEIGHTS, difference_kinds
from model.vllm.arrays import run_arrays
from traces import TraceError, TraceWriter, open_trace
from traces.analysis import pair_curves
from traces.analysis.causes import explain_pair_with_differences
from traces.analysis.rows import RowTrace
from traces.route_check import (
    CONFIDENCE,
    LEVEL,
    NULL_RATE,
    WINDOW_ULPS,
    RouteCheck,
    compare,
    gap_ulps,
    sample_rows,
    structure,
)
from traces.route_stats import tail, upper_bound
from traces.toplogits import TopLogits

MODEL = str(MIXTRAL_DOCS)


def test_structure_counts_repeated_and_out_of_range_experts():
    expert = np.zeros((2, 3, 5, 2), np.int16)  # [L, B, T, K]: vLLM compiled on a CPU, every route [0, 0]
    expert[:, 2, 3:] = -1  # past row 2's end
    held = (expert[0, :, :, 0] >= 0)  # [B, T] tokens held
    routes, repeated, out, example = structure(expert, 8, held)
    assert (routes, repeated, out, example) == (2 * 13, 26, 0, (0, 0))
    expert[..., 1] = np.where(expert[..., 0] >= 0, 1, -1)
    expert[1, 0, 0] = (3, 8)  # an id past E
    expert[0, 1, 1] = (-1, 2)  # no expert at a held token: out of range for an engine
    assert structure(expert, 8, held)[1:] == (0, 2, (-1, 2))  # the first in [L, B, T] order
    assert structure(expert, 8)[1:] == (0, 1, (3, 8))  # the project's loop: -1 is an empty slot
    check = RouteCheck(tokens=26, repeated=26, out_of_range=0, example=(0, 0), dtype="bfloat16")
    assert check.refusal() == "26 of 26 (layer, token) routes name one expert twice (e.g. [0, 0])"


def test_near_ties_are_a_few_units_in_the_last_place_of_the_gap():
    ulp = 2.0 ** -7  # bfloat16 at magnitudes in [1, 2)
    gaps = [0, WINDOW_ULPS, WINDOW_ULPS + 1]
    z = np.array([[[1.5, 1.5 - g * ulp, 0.0, -1.0] for g in gaps]])  # [L, T, E], K = 1
    assert gap_ulps(z, 1, "bfloat16").tolist() == [[0.0, WINDOW_ULPS, WINDOW_ULPS + 1]]
    assert gap_ulps(z / 4, 1, "bfloat16").tolist() == [[0.0, WINDOW_ULPS, WINDOW_ULPS + 1]]  # scales
    assert gap_ulps(z, 1, "float32")[0, 1] == WINDOW_ULPS * 2 ** 16
    swapped = np.array([[[1], [1], [1]]])  # the 2nd choice recorded at every position
    assert compare(swapped, z, "bfloat16") == (3, 0, 2, (0, 2))  # two near ties, the third unexplained
    assert compare(swapped, z, "float32")[:3] == (3, 0, 1)  # in float32 only the exact tie is near
    assert compare(np.array([[[0], [0], [0]]]), z, "bfloat16") == (3, 3, 0, None)


@pytest.mark.parametrize(("checked", "unexplained"), [(200, 0), (200, 1), (200, 2), (200, 5), (10_000, 20),
                                                      (10_000, 40), (42_024, 0), (42_024, 100)])
def test_the_rule_is_a_binomial_test_at_a_stated_level(checked, unexplained):
    check = RouteCheck(tokens=checked, repeated=0, out_of_range=0, example=(), dtype="bfloat16",
                       rows=(0, 1), checked=checked, agreeing=checked - unexplained - 3, near_ties=3,
                       logprob_difference=0.5, seconds=0.1)
    p = tail(unexplained, checked, NULL_RATE)
    assert check.p_value == p and bool(check.refusal()) == (p < LEVEL)
    assert len(check.warnings()) == (unexplained > 0)
    assert check.rate_bound == upper_bound(unexplained, checked, CONFIDENCE)
    assert RouteCheck.from_attr(check.to_attr()) == check
    if (checked, unexplained) == (42_024, 0):
        assert check.rate_bound == pytest.approx(7.13e-5, rel=1e-3)  # 0 of 42,024: below 1 in 14,000
    if (checked, unexplained) == (200, 5):
        assert "5 of 200 checked (layer, token) routes differ" in check.refusal()


def test_binomial_statistics_match_their_definitions():
    from fractions import Fraction
    from math import comb

    for x, n, p in [(1, 200, 1e-4), (3, 200, 1e-4), (5, 6000, 1e-4), (7, 10, 0.5), (30, 500, 0.05)]:
        q = Fraction(p)
        exact = float(sum(comb(n, i) * q ** i * (1 - q) ** (n - i) for i in range(x, min(n, x + 60) + 1)))
        assert tail(x, n, p) == pytest.approx(exact, rel=1e-9, abs=1e-300)
    for x, n in [(0, 42_024), (3, 100), (163, 42_024)]:
        bound = upper_bound(x, n)
        assert 1 - tail(x + 1, n, bound) == pytest.approx(0.05, rel=1e-6)  # P(X <= x | bound) = 5%


def test_a_wrong_dtype_is_refused_by_its_log_probabilities():
    def check(dtype, difference):
        return RouteCheck(tokens=10, repeated=0, out_of_range=0, example=(), dtype=dtype, rows=(0,),
                          checked=10, agreeing=10, logprob_difference=difference)

    assert "does not compute in float32" in check("float32", 0.183).refusal()
    assert check("float32", 5e-6).refusal() == "" and check("bfloat16", 1.87).refusal() == ""


def test_a_refusal_names_its_likely_cause():
    from lab.experiments.engine_recording import RoutesRefused, refuse_unless_routed

    wrong_dtype = RouteCheck(tokens=10, repeated=0, out_of_range=0, example=(), dtype="float32", rows=(0,),
                             checked=10, agreeing=10, logprob_difference=0.183)
    server = {"name": "vllm-server", "dtype_from": "--dtype (stated)", "compilation_mode": None}
    with pytest.raises(RoutesRefused, match="does not compute in float32; record with --dtype as the engine "
                                            "computes$"):
        refuse_unless_routed(wrong_dtype, server, "a run")
    zeros = RouteCheck(tokens=26, repeated=26, out_of_range=0, example=(0, 0), dtype="bfloat16")
    with pytest.raises(RoutesRefused, match=r"name one expert twice \(e.g. \[0, 0\]\); a server started "
                                            r"without --enforce-eager runs compiled"):
        refuse_unless_routed(zeros, server, "a run")


def test_a_sample_of_rows_is_drawn_from_its_draw():
    rows = sample_rows(8, 0.25, np.random.default_rng(12345))
    assert len(rows) == 2 and rows == sample_rows(8, 0.25, np.random.default_rng(12345))
    assert sample_rows(8, 1.0, np.random.default_rng(0)) == tuple(range(8))
    assert sample_rows(3, 0.01, np.random.default_rng(0)) in ((0,), (1,), (2,))


def _write(path: Path, runs: int = 1, **attrs) -> Path:
    out = _output()
    writer = TraceWriter(path, meta=META, vocab=[f"t{i}" for i in range(30)], requests=["probe"],
                         prompt_tokens=[PROMPT])
    for i in range(runs):
        writer.add_run(f"run{i}" if runs > 1 else "run", attrs=engine_attrs("run", [out], **attrs),
                       arrays=run_arrays([out], 6, 4))
    writer.close()
    return path


def test_info_check_flags_unchecked_routes_and_fails_fabricated_ones(tmp_path, capsys):
    unchecked = _write(tmp_path / "unchecked.h5")
    with __import__("h5py").File(unchecked, "a") as f:
        del f["runs/run"].attrs["route_check"]
    assert main(["info", "--check", str(unchecked)]) == 0
    out = capsys.readouterr().out
    assert "routes not checked against the router" in out and "0 errors, 1 warnings" in out
    assert "ROUTES NOT REPLAYED through the router in 1 of 1 runs" in out
    bad = RouteCheck(tokens=20, repeated=20, out_of_range=0, example=(0, 0), dtype="bfloat16", rows=(0,),
                     checked=20, agreeing=1)
    fabricated = _write(tmp_path / "fabricated.h5", route_check=bad.to_attr())
    assert main(["info", "--check", str(fabricated)]) == 2
    out = capsys.readouterr().out
    assert "routes fail the check: 20 of 20 (layer, token) routes name one expert twice" in out
    with open_trace(fabricated) as t, pytest.raises(TraceError, match="routes fail the check"):
        t.run("run")  # nothing draws routes that cannot be the router's


def test_info_check_fails_runs_that_pass_alone_but_not_together(tmp_path, capsys):
    """Ten runs, each with two unexplained disagreements in 200 pairs (p = 0.06 alone: written), fail
    together (20 of 2,000: p = 9.6e-9)."""
    one = RouteCheck(tokens=200, repeated=0, out_of_range=0, example=(), dtype="bfloat16", rows=(0,),
                     checked=200, agreeing=198)
    assert not one.refusal() and one.warnings()
    path = _write(tmp_path / "thin.h5", runs=10, route_check=one.to_attr())
    assert main(["info", "--check", str(path)]) == 2
    out = capsys.readouterr().out
    assert "over the 10 replayed runs together, 20 of 2000 checked (layer, token) routes differ" in out


def test_info_wraps_every_served_setting(tmp_path, capsys):
    served = {"name": "vllm-server", "package": "vllm", "version": "0.30.0", "experts": 8,
              **{f"setting_{i:02d}": "x" * 30 for i in range(20)}, "url": "http://127.0.0.1:8000",
              "served_model": "assets/mixtral-docs", "tensor_parallel_size": 1}
    path = tmp_path / "served.h5"
    writer = TraceWriter(path, meta={**META, "engine": served}, vocab=[f"t{i}" for i in range(30)],
                         requests=["probe"], prompt_tokens=[PROMPT])
    writer.add_run("run", attrs=engine_attrs("run", [_output()]), arrays=run_arrays([_output()], 6, 4))
    writer.close()
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    engine = lines[next(i for i, line in enumerate(lines) if line.startswith("engine: ")) + 1:
                   next(i for i, line in enumerate(lines) if line.startswith("machine: "))]
    assert len(engine) > 4 and "…" not in out and max(len(line) for line in engine) <= 102
    flat = " ".join(line.strip() for line in engine)
    for key, value in served.items():
        if key not in ("name", "package", "version"):
            assert f"{key}={value}" in flat, key


def _rows(lse: float, shift: np.ndarray) -> tuple[RowTrace, RowTrace]:
    """The project loop's row (top-4 logits, log-sum-exp `lse`) and an engine's row of the same tokens
    (log-probabilities only, `value - lse + shift`)."""
    T, L, K, E = len(PROMPT) + 3, 2, 2, 8
    tokens = np.array(PROMPT + GENERATED[:3])
    expert = np.tile(np.array([0, 1], np.int16), (L, T, 1))
    index = np.tile(np.array([7, 8, 9, 10], np.int32), (T, 1))
    value = np.tile(np.array([8.0, 7.5, 6.0, 2.0], np.float32), (T, 1))
    loop = TopLogits(index, value, np.full(T, lse, np.float32), value[:, 0], 30)
    engine = TopLogits(index, (value - lse + shift[:, None]).astype(np.float32), np.zeros(T, np.float32),
                       value[:, 0] - lse, 30, logprobs_only=True)

    def row(name, logits, z, gate, not_recorded=frozenset()):
        return RowTrace(run=name, row=0, request=0, is_probe=True, prompt_len=len(PROMPT), tokens=tokens,
                        step=np.zeros(T, np.int16), expert=expert, gate=gate, kept=np.ones((L, T, K), bool),
                        slot=np.zeros((L, T, K), np.int32), group=np.zeros((L, T), np.int32), router_logits=z,
                        logits=logits, not_recorded=not_recorded)

    z = np.tile(np.linspace(1, 0, E, dtype=np.float32), (L, T, 1))
    return (row("alone-project", loop, z, np.full((L, T, K), 0.5, np.float32)),
            row("alone-vllm", engine, np.full((L, T, E), np.nan, np.float32), np.full((L, T, K), np.nan),
                frozenset({"routing/router_logits", "routing/gate"})))


def test_a_loop_and_an_engine_compare_as_log_probabilities():
    shift = np.array([0, 0, 0, 0.01, -0.03, 0.02, 0.0])
    loop, engine = _rows(lse=8.4, shift=shift)
    curves = pair_curves(loop, engine)
    hand = np.abs((loop.logits.value - 8.4) - engine.logits.value).max(axis=-1)  # log-probabilities
    np.testing.assert_allclose(curves.max_logit_diff, hand, atol=1e-6)
    assert curves.values == "log-probability"
    assert np.nanmax(curves.max_logit_diff) == pytest.approx(0.03, 1e-5)
    verdict, diff = explain_pair_with_differences(loop, engine)
    assert diff.logits is None and "gate" not in diff.compared and "router_logits" not in diff.compared
    assert verdict.cause == "identical" and verdict.root is None
    text = verdict.describe()
    assert "agree bitwise" not in text and "the engine records no router logits or weights" in text
    assert "log-probabilities compared as values, not bitwise" in text
    kinds = difference_kinds(diff, loop.length)
    assert not np.isin(kinds, (WEIGHTS, ROUTER_LOGITS)).any()  # no "weights" or "router logits only" cell


@pytest.mark.hf
def test_moe_layers_of_a_tiny_qwen2_moe():
    transformers = pytest.importorskip("transformers")
    import torch

    from model.hf.bridge import HFMoEModel
    from model.hf.families import family_of
    from model.hf.moe_layers import engine_rows, moe_layers
    from model.hf.tiny import tiny_config

    fields = {k: v for k, v in tiny_config("qwen2_moe", 64).to_dict().items() if k != "layer_types"}
    config = transformers.Qwen2MoeConfig(**{**fields, "num_hidden_layers": 6, "decoder_sparse_step": 2,
                                            "mlp_only_layers": [3]})
    assert moe_layers(config) == [1, 5]  # every 2nd layer, but layer 3 is dense
    torch.manual_seed(0)
    hf = transformers.Qwen2MoeForCausalLM(config).eval()
    assert HFMoEModel(hf, None, family_of("qwen2_moe")).config.moe_layers == [1, 5]
    assert engine_rows(config, 6) == [1, 5] and engine_rows(config, 2) == [0, 1]  # per decoder or MoE layer
    with pytest.raises(ValueError, match="reported routes for 4 layers"):
        engine_rows(config, 4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web_page():
    """A plain HTTP server (not vLLM) on 127.0.0.1, answering every path with an HTML page."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_error(404, "Not Found", "<html><body>\n" * 10)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_url_that_is_not_a_vllm_server_is_one_line(web_page, tmp_path, capsys):
    for url, message in ((web_page, "is not a vLLM server (" + web_page + "/v1/models: HTTP 404)"),
                         (f"http://127.0.0.1:{_free_port()}", "no server answers at")):
        out = tmp_path / "x.h5"
        assert main(["record", "-e", "e1", "--engine", "vllm-server", "--url", url, "--model", MODEL,
                     "-q", "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and "<html" not in err, err
        assert not out.exists()


def test_a_reply_without_routed_experts_names_the_server_flag():
    from model.vllm.outputs import from_completion_choice

    choice = {"logprobs": {"tokens": ["token_id:7"], "token_logprobs": [-0.1], "top_logprobs": [{}]},
              "routed_experts": None}  # what a server started without --enable-return-routed-experts returns
    with pytest.raises(ValueError, match="start the server with --enable-return-routed-experts"):
        from_completion_choice(PROMPT, choice)
