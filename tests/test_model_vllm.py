"""Recording through vLLM on the shipped trained Mixtral (assets/mixtral-docs), in process and over HTTP.

vLLM starts in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) once for the module; the server test
starts `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 and stops it. Skipped, with the
reason, where vLLM is not installed (`bash scripts/setup.sh --with-vllm`; docs/engines.md).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from inspector.cli import main
from traces import open_trace, validate

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "assets" / "mixtral-docs"
VIEWS = ("routing", "layers", "load", "pair", "runs", "text")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/setup.sh --with-vllm; see "
                                       "docs/engines.md for the platforms it installs on)")


@pytest.fixture(scope="module", autouse=True)
def importable():
    """Skip, with vLLM's own error, where vLLM is installed but cannot be imported."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # e.g. CUDA builds of torchvision beside a CPU torch
        pytest.skip(f"vLLM is installed but cannot be imported: {type(exc).__name__}: {exc}")


@pytest.fixture(scope="module")
def engine():
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from model.vllm.offline import OfflineEngine

    eng = OfflineEngine(str(MODEL), dtype="float32", logprobs=20)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def pool():
    from transformers import AutoTokenizer

    from lab.experiments.compositions import read_partners
    from lab.experiments.options import DEFAULT_PARTNERS, DEFAULT_PROBE
    from lab.experiments.session import RequestPool

    tok = AutoTokenizer.from_pretrained(MODEL, local_files_only=True)
    return RequestPool.build(DEFAULT_PROBE, read_partners(DEFAULT_PARTNERS)[:8],
                             encode=lambda text: list(tok(text)["input_ids"])), tok


def _settings(tmp_path, experiment: str, **kw):
    from lab.experiments.options import Settings

    return Settings(experiment=experiment, output=tmp_path / f"{experiment}.h5", hf_model=str(MODEL), **kw)


def test_vllm_probe_equals_the_hugging_face_path_in_float32(engine, pool):
    """Greedy tokens and each token's set of experts, every layer, prompt and generated: vLLM alone
    and in a batch of four against the project's loop on transformers' model, both in float32."""
    from lab.experiments.compositions import Composition
    from lab.experiments.engine import eos_ids
    from model.generate import generate
    from model.hf.load import load_hf
    from model.recorder import Recorder
    from model.routing_policy import RoutingPolicy
    from model.vllm.arrays import run_arrays

    requests, tok = pool
    n = 24
    hf = load_hf(str(MODEL), dtype="float32")
    try:
        policy = hf.adapt_policy(RoutingPolicy.preset("dropless"))
        for comp in (Composition((0,), 0), Composition((3, 0, 5, 1), 1)):
            prompts = requests.prompts(comp)
            recorder = Recorder("full")
            result = generate(hf, prompts, n, policy, recorder=recorder)
            ref = recorder.arrays(result)
            got = run_arrays(engine.generate(prompts, n), n, 20, eos_ids(str(MODEL), tok))
            for b in range(comp.batch_size):
                length = int((ref["tokens"][b] >= 0).sum())
                assert got["tokens"][b, :length].tolist() == ref["tokens"][b, :length].tolist()
                assert (got["tokens"][b, length:] == -1).all()
                np.testing.assert_array_equal(np.sort(got["routing/expert"][:, b, :length], -1),
                                              np.sort(ref["routing/expert"][:, b, :length], -1))
            probe = comp.probe_row
            P = len(prompts[probe])
            # The engine's top-1 log-probability is the greedy token, as the loop's largest logit.
            assert (got["logits_topk/index"][probe, P - 1:P + n - 1, 0]
                    == ref["tokens"][probe, P:P + n]).all()
    finally:
        hf.close()


@pytest.fixture(scope="module")
def e1_trace(engine, pool, tmp_path_factory):
    from lab.experiments.engine import eos_ids, record_e1, trace_meta

    requests, tok = pool
    tmp = tmp_path_factory.mktemp("vllm-e1")
    settings = _settings(tmp, "e1", compositions=4, batch_sizes=(1, 2, 3, 4), new_tokens=(16,), repeats=1)
    first = engine.generate([list(requests.tokens[0])], 1)[0]
    meta, vocab = trace_meta(str(MODEL), engine, settings, tok, first.routed.shape[1])
    result = record_e1(settings, engine, requests, meta, vocab, eos_ids(str(MODEL), tok))
    assert "vllm, dropless" in result.table()
    return settings.output


def test_vllm_trace_validates_and_says_what_it_does_not_hold(e1_trace, capsys):
    assert [p for p in validate(e1_trace, read_data=True) if p.severity == "error"] == []
    assert main(["info", "--check", str(e1_trace)]) == 0
    assert "0 errors" in capsys.readouterr().out
    with open_trace(e1_trace) as t:
        engine = t.meta["engine"]
        assert engine["name"] == "vllm" and engine["version"]
        for key in ("dtype", "tensor_parallel_size", "expert_parallel", "prefix_caching", "chunked_prefill",
                    "max_num_batched_tokens", "batch_invariant"):
            assert key in engine
        run = t.run(t.run_names[0])
        assert "routing/router_logits" in run.not_recorded and "load/capacity" in run.not_recorded
        assert run.logits_form == "topk"
        assert bool(np.asarray(run.kept[...])[np.asarray(run.expert[...]) >= 0].all())  # dropless
        assert np.isnan(run.gate[0, 0, 0]).all()
    assert main(["explain", str(e1_trace)]) == 0
    out = capsys.readouterr().out
    assert "cannot be intervened on" in out and "4 of 4 runs match this unbatched reference" in out


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_exports_a_vllm_trace(e1_trace, tmp_path, view):
    for fmt in ("png", "csv"):
        out = tmp_path / f"{view}.{fmt}"
        assert main(["export", str(e1_trace), "--view", view, "--format", fmt, "-o", str(out)]) == 0
        assert out.stat().st_size > 0


def test_engine_against_engine_trace(engine, pool, tmp_path):
    """The probe through the project's loop and through vLLM in one trace: in float32 vLLM's routing
    never leaves the reference's: the same tokens and experts everywhere (the project's own batches
    may differ from its probe alone in router-logit bits, upstream of any decision)."""
    from lab.experiments.engine import eos_ids, record_against, trace_meta
    from traces.analysis.causes import explain_pair
    from traces.analysis.rows import row_trace

    requests, tok = pool
    settings = _settings(tmp_path, "against", compositions=2, batch_sizes=(2, 3), new_tokens=(16,))
    meta, vocab = trace_meta(str(MODEL), engine, settings, tok, 2)
    result = record_against(settings, engine, requests, meta, vocab, eos_ids(str(MODEL), tok))
    assert "both together" in result.table()
    assert [p for p in validate(settings.output) if p.severity == "error"] == []
    with open_trace(settings.output) as t:
        assert t.run_names[:2] == ["alone-project", "alone-vllm"]
        assert not t.run("alone-project").not_recorded and t.run("alone-vllm").not_recorded
        ref = row_trace(t.run("alone-project"), 0)
        for name in t.run_names[1:]:
            run = t.run(name)
            verdict = explain_pair(ref, row_trace(run, run.probe_row))
            assert verdict.t_star == -1, name  # the same tokens, and no routing decision differs:
            assert verdict.cause in ("identical", "upstream_numeric", "output_numeric"), (name, verdict.cause)
    out = tmp_path / "pair.png"
    assert main(["export", str(settings.output), "--view", "pair", "--pair", "alone-project,alone-vllm",
                 "-o", str(out)]) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_record_two_compositions_through_a_vllm_server(tmp_path):
    """A server on 127.0.0.1, two compositions as concurrent requests, then the server stops."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL),
         "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
         "--enable-return-routed-experts", "--max-logprobs", "20", "--kv-cache-memory-bytes", str(256 << 20)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2):
                    break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"the vLLM server exited: {server.stderr.read()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail("the vLLM server did not answer within 300 s")
                time.sleep(1)
        trace = tmp_path / "server.h5"
        assert main(["record", "-e", "example", "--engine", "vllm-server", "--url", url, "--model",
                     str(MODEL), "-n", "2", "--batch-sizes", "3", "--new-tokens", "12", "-o", str(trace),
                     "-q"]) == 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert [p for p in validate(trace) if p.severity == "error"] == []
    with open_trace(trace) as t:
        assert t.meta["engine"]["name"] == "vllm-server" and t.meta["engine"]["url"] == url
        assert len(t.run_names) == 3  # the probe alone, then two compositions
        run = t.run(t.run_names[-1])
        assert run.batch_size == 3 and int((np.asarray(run.expert[...]) >= 0).sum()) > 0
