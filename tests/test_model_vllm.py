"""Recording through vLLM on the shipped trained Mixtral (assets/mixtral-docs), in process and over HTTP.

The quick-look commands of docs/engines.md are the ones run here, read from the document: the offline
recording (vLLM in this process, `VLLM_ENABLE_V1_MULTIPROCESSING=0`) and, against the server started
exactly as documented on 127.0.0.1, the server recording. One engine runs at a time: the recording
command's engine ends with it, then the module's float32 engine serves the parity test, then the
default-dtype engine the `against` test. Compiled mode is refused: offline before vLLM starts, and
its fabricated routes by the route check (in a subprocess that starts vLLM compiled on purpose).
Skipped, with the reason, where vLLM is not installed (`bash scripts/setup.sh --with-vllm`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from paths import MIXTRAL_DOCS, ROOT

from inspector.cli import main
from traces import open_trace, validate
from traces.route_check import RouteCheck

MODEL = MIXTRAL_DOCS
VIEWS = ("routing", "layers", "load", "pair", "runs", "text")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed (bash scripts/setup.sh --with-vllm; see "
                                       "docs/engines.md for the platforms it installs on)")


def assert_clean(trace) -> None:
    """No problem in the trace but rounding flips beyond the near-tie window that the route check's
    rule allows (each a warning that says so)."""
    problems = validate(trace, read_data=True)
    assert all(p.severity == "warning" and "within the rule" in p.message for p in problems), problems


def documented_commands() -> list[list[str]]:
    """The commands of docs/engines.md's quick look, each as its words (continuations joined)."""
    text = (ROOT / "docs" / "engines.md").read_text()
    block = re.search(r"## Quick look.*?```bash\n(.*?)```", text, re.S)[1]
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def documented(start: str) -> list[str]:
    """The quick look's command whose words start with `start` (its env assignments skipped)."""
    for words in documented_commands():
        command = [w for w in words if "=" not in w or w.startswith("-")]
        if " ".join(command).startswith(start):
            return words
    raise AssertionError(f"docs/engines.md's quick look has no command starting {start!r}")


@pytest.fixture(scope="module", autouse=True)
def importable():
    """Skip, with vLLM's own error, where vLLM is installed but cannot be imported."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # e.g. CUDA builds of torchvision beside a CPU torch
        pytest.skip(f"vLLM is installed but cannot be imported: {type(exc).__name__}: {exc}")


#: In-process engines the module started and has not ended (the server starts once they have).
RUNNING: list = []


@pytest.fixture(scope="module")
def documented_e1(tmp_path_factory):
    """The documented offline recording, as a user runs it (its own process, vLLM's own dtype, quiet):
    (trace, stdout, stderr)."""
    out = tmp_path_factory.mktemp("vllm-e1") / "e1-vllm.h5"
    words = documented("moe-inspector record -e e1 --engine vllm ")
    args = [w.replace("assets/mixtral-docs", str(MODEL)) for w in words[1:words.index("-o")]]
    done = subprocess.run([sys.executable, "-m", "inspector.cli", *args, "-o", str(out)], capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout, done.stderr


@pytest.fixture(scope="module")
def e1_trace(documented_e1):
    return documented_e1[0]


def test_the_documented_recording_is_quiet_and_checks_every_route(documented_e1):
    e1_trace, out, err = documented_e1
    assert err == "" and "vllm, dropless" in out  # -q: no vLLM log, no progress bar, no leak report
    assert_clean(e1_trace)
    with open_trace(e1_trace) as t:
        engine = t.meta["engine"]
        assert engine["name"] == "vllm" and engine["dtype"] == t.meta["dtype"] == "bfloat16"  # vLLM's auto
        for key in ("quantization", "kv_cache_dtype", "block_size", "compilation_mode", "cudagraph_mode",
                    "eplb", "enforce_eager", "prefix_caching", "tensor_parallel_size"):
            assert key in engine, key
        assert engine["compilation_mode"] == "NONE" and engine["kv_cache_dtype"] == "bfloat16"  # as resolved
        for name in t.run_names:
            run = t.run(name)
            check = RouteCheck.from_attr(run.attrs["route_check"])
            assert check.dtype == "bfloat16" and not check.refusal()
            assert check.rows == tuple(range(run.batch_size)) and check.checked == check.tokens  # every token
            assert run.logits.logprobs_only and len(run.cached_tokens) == run.batch_size
            assert "routing/router_logits" in run.not_recorded and run.logits_form == "topk"
            assert bool(np.asarray(run.kept[...])[np.asarray(run.expert[...]) >= 0].all())  # dropless


def test_explain_says_whether_the_runs_agree_then_whether_they_match_transformers(e1_trace, capsys):
    assert main(["explain", str(e1_trace)]) == 0
    out = capsys.readouterr().out
    assert "cannot be intervened on" in out
    among = out.index("agree with each other (U = 1")
    against = out.index("Against the transformers reference")
    assert among < against and "runs match the reference" in out[against:]


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_exports_a_vllm_trace(e1_trace, tmp_path, view):
    for fmt in ("png", "csv"):
        out = tmp_path / f"{view}.{fmt}"
        assert main(["export", str(e1_trace), "--view", view, "--format", fmt, "-o", str(out)]) == 0
        assert out.stat().st_size > 0


def test_compiled_mode_is_refused_before_vllm_starts(tmp_path, capsys):
    out = tmp_path / "compiled.h5"
    assert main(["record", "-e", "e1", "--engine", "vllm", "--model", str(MODEL), "-n", "1", "--repeats", "1",
                 "--new-tokens", "4", "--engine-arg", "enforce_eager=false", "-q", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not capture routes" in err and "eager mode" in err
    assert not out.exists()


COMPILED = """
import os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
from vllm import LLM, SamplingParams
from lab.experiments.engine_recording import RoutesRefused, refuse_unless_routed
from model.vllm.arrays import run_arrays
from model.vllm.outputs import from_request_output
from model.vllm.route_check import RouterReference
from model.vllm.settings import served_settings
llm = LLM(model=sys.argv[1], enforce_eager=False, kv_cache_memory_bytes=256 << 20,
          enable_return_routed_experts=True, max_logprobs=20)
out = llm.generate([{"prompt_token_ids": [0, 54, 262, 300, 85, 405]}],
                   SamplingParams(temperature=0, max_tokens=5, logprobs=20, ignore_eos=True), use_tqdm=False)
settings = {"name": "vllm", **served_settings(llm.llm_engine.vllm_config)}
llm.llm_engine.engine_core.shutdown()
check = RouterReference(sys.argv[1], settings["dtype"]).check(
    run_arrays([from_request_output(o) for o in out], 4, 20), 8)
try:
    refuse_unless_routed(check, settings, "a run")
except RoutesRefused as exc:
    print(exc)
"""


def test_a_compiled_engines_fabricated_routes_are_refused_by_the_route_check():
    """vLLM started compiled on purpose (the recorder refuses to): the route check refuses its routes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_LOGGING_LEVEL": "ERROR"}
    done = subprocess.run([sys.executable, "-c", COMPILED, str(MODEL)], capture_output=True, text=True,
                          timeout=600, env=env)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 1, done.stderr[-3000:]
    assert "cannot be the router's" in lines[0] and "name one expert twice (e.g. [0, 0])" in lines[0]
    assert "it runs compiled" in lines[0] and "eager mode" in lines[0]


@pytest.fixture(scope="module")
def engine(e1_trace):
    """vLLM in float32 in this process (after the documented recording's engine has ended)."""
    from model.vllm.offline import OfflineEngine

    eng = OfflineEngine(str(MODEL), dtype="float32", logprobs=20)
    RUNNING.append(eng)
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
def default_engine(engine):
    """vLLM in its own dtype, started once the float32 engine has ended (one engine at a time)."""
    from model.vllm.offline import OfflineEngine

    engine.close()
    eng = OfflineEngine(str(MODEL), logprobs=20, quiet=True)
    RUNNING.append(eng)
    yield eng
    eng.close()


def test_engine_against_engine_compares_log_probabilities(default_engine, pool, tmp_path):
    """The probe through the project's loop and through vLLM in one trace, in vLLM's own dtype: the
    side-by-side curve is the log-probability difference (by hand: log-softmax of the loop's logits
    over the engine's recorded top-k, minus the engine's), within bfloat16 rounding, and nothing
    speaks of the engine's weights or of bitwise differences it did not record."""
    from transformers import AutoConfig

    from inspector.figure_data.pair import ROUTER_LOGITS, WEIGHTS, compare_rows, difference_kinds
    from lab.experiments.engine import prepare, record_against
    from lab.experiments.options import Settings
    from traces.analysis.rows import row_trace

    requests, tok = pool
    settings = Settings(experiment="against", output=tmp_path / "against.h5", hf_model=str(MODEL),
                        compositions=2, batch_sizes=(2, 3), new_tokens=(32,))
    _, rec = prepare(settings, default_engine, requests, tok, AutoConfig.from_pretrained(MODEL))
    try:
        assert "both together" in record_against(settings, rec).table()
    finally:
        rec.reference.close()
    assert [p for p in validate(settings.output) if p.severity == "error"] == []
    with open_trace(settings.output) as t:
        assert t.meta["dtype"] == "bfloat16" and t.run_names[:2] == ["alone-project", "alone-vllm"]
        loop = row_trace(t.run("alone-project"), 0)
        for name in [n for n in t.run_names if n.endswith("-vllm")]:
            run = t.run(name)
            other = row_trace(run, run.probe_row)
            comparison = compare_rows(loop, other)
            curve, T = comparison.curves.max_logit_diff, comparison.curves.length
            P = loop.prompt_len
            held = other.logits.index[P - 1:T] >= 0  # the engine's recorded top-k of generated positions
            ids = np.where(held, other.logits.index[P - 1:T], 0)
            top = loop.logits[P - 1:T]  # the loop's top-k logits: log-softmax is value - lse
            mine = top.value.astype(np.float64) - top.lse.astype(np.float64)[:, None]
            match = top.index[:, :, None] == ids[:, None, :]  # [T, J_loop, J_engine]
            shared = match.any(axis=1) & held
            loop_lp = np.einsum("tij,ti->tj", match, mine)
            hand = np.where(shared, np.abs(loop_lp - other.logits.value[P - 1:T]), -np.inf).max(axis=-1)
            np.testing.assert_allclose(curve[P - 1:T], hand, atol=1e-6)
            # A rounding of the loop's bfloat16 logits apart at most (2 ulps at their magnitude, 0.125 at
            # 8-16), where a logit minus a log-probability measured their log-sum-exp (about 8.4).
            ulp = 2.0 ** (np.floor(np.log2(np.abs(top.value).max())) - 7)
            assert np.nanmax(curve) <= 2 * ulp, (name, np.nanmax(curve))
            assert comparison.curves.values == "log-probability" and comparison.differences.logits is None
            kinds = difference_kinds(comparison.differences, T)
            assert not np.isin(kinds, (WEIGHTS, ROUTER_LOGITS)).any()
            verdict = comparison.verdict
            assert verdict.root is None or verdict.root.kind == "expert"
            assert "weights (" not in verdict.describe() and "first differ bitwise" not in verdict.describe()


def _record_through(engine, pool, path: Path, seed: int) -> None:
    """Two random compositions (batch 2-4) of 8 new tokens through `engine`, each run checked."""
    from transformers import AutoConfig

    from lab.experiments.compositions import random_compositions
    from lab.experiments.engine import prepare
    from lab.experiments.options import Settings

    requests, tok = pool
    settings = Settings(experiment="example", output=path, hf_model=str(MODEL), seed=seed)
    reference, rec = prepare(settings, engine, requests, tok, AutoConfig.from_pretrained(MODEL))
    try:
        for i, comp in enumerate(random_compositions(seed, 2, requests.n_partners, (2, 3, 4))):
            rec.record(f"c{i}", comp, 8, seed)
    finally:
        rec.close()
        reference.close()


@pytest.mark.parametrize("kind", ["row", "uniform-0.05"])
def test_vllm_routes_corrupted_on_purpose_are_refused_every_time(default_engine, pool, tmp_path, kind):
    """vLLM's true answer to the probe, then its routes corrupted (one random row per run, or 5% of
    the (layer, token) pairs uniformly): refused at the first run, 20 seeded tries of 20."""
    from route_engines import Corrupting

    from lab.experiments.engine_recording import RoutesRefused

    refused = 0
    for seed in range(20):
        path = tmp_path / f"{kind}-{seed}.h5"
        try:
            _record_through(Corrupting(default_engine, kind, seed, 8, after=1), pool, path, seed)
        except RoutesRefused as exc:
            refused += "away from a near tie (first at row" in str(exc) and not path.exists()
    assert refused == 20


def test_a_clean_vllm_recording_passes_with_every_token_checked(default_engine, pool, tmp_path):
    path = tmp_path / "clean.h5"
    _record_through(default_engine, pool, path, 0)
    assert [p for p in validate(path, read_data=True) if p.severity == "error"] == []
    with open_trace(path) as t:
        for name in t.run_names:
            check = RouteCheck.from_attr(t.run(name).attrs["route_check"])
            assert check.checked == check.tokens and check.rows == tuple(range(t.run(name).batch_size))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """The server started exactly as docs/engines.md prints it, on a free port (its URL), after the
    in-process engines have ended; stopped after the module."""
    for eng in RUNNING:
        eng.close()
    port = _free_port()
    words = documented("python -m vllm.entrypoints.openai.api_server")
    env = {**os.environ, **dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))}
    command = [w for w in words if not ("=" in w and not w.startswith("-")) and w != "&"]
    command = [sys.executable if w == "python" else w.replace("assets/mixtral-docs", str(MODEL))
               for w in command]
    command[command.index("--port") + 1] = str(port)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"the vLLM server exited: {proc.stderr.read()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail("the vLLM server did not answer within 300 s")
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _server_record(url: str, out: Path) -> list[str]:
    """The documented server recording, at `url`, writing `out`."""
    words = documented("moe-inspector record -e example --engine vllm-server")
    args = [w.replace("http://127.0.0.1:8000", url).replace("assets/mixtral-docs", str(MODEL))
            for w in words[1:]]
    args[args.index("-o") + 1] = str(out)
    return args


def test_the_documented_server_records_true_routing_and_how_it_serves(server, tmp_path):
    trace = tmp_path / "server.h5"
    assert main(_server_record(server, trace)) == 0
    assert_clean(trace)
    with open_trace(trace) as t:
        engine = t.meta["engine"]
        assert engine["name"] == "vllm-server" and engine["url"] == server
        assert engine["settings_from"] == "/server_info" and engine["compilation_mode"] == "NONE"
        assert engine["dtype"] == "bfloat16" and engine["enforce_eager"] is True
        assert len(t.run_names) == 3  # the probe alone, then two compositions
        for name in t.run_names:
            run = t.run(name)
            check = RouteCheck.from_attr(run.attrs["route_check"])
            assert check.checked == check.tokens and not check.refusal()
            assert (run.cached_tokens >= 0).all()  # --enable-prompt-tokens-details: the server says


def test_server_failures_are_one_line_and_keep_the_complete_runs(server, tmp_path, capsys):
    """Another model's folder (by its name, or by its tokenizer under the served folder's name),
    another dtype, and the server gone mid-recording (through a proxy that
    stops answering after five completions: the warm-up, the probe alone, a composition of two, then
    the first row of the next)."""
    other = ROOT / "assets" / "tiny-mixtral"
    namesake = tmp_path / "mixtral-docs"  # another model under the served folder's name
    shutil.copytree(other, namesake)
    for extra, message in ((["--model", str(other)], f"serves {str(MODEL)!r}"),
                           (["--model", str(namesake)], "tokenizes the probe into"),
                           (["--dtype", "float32"], "computes in bfloat16")):
        out = tmp_path / "x.h5"
        assert main([*_server_record(server, out), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and not out.exists(), err
    with _Proxy(server, completions=10**6, hide="/server_info") as proxy:  # a server without dev mode
        out = tmp_path / "stated.h5"
        assert main([*_server_record(proxy, out), "--dtype", "float32"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not compute in float32" in err and not out.exists(), err
    with _Proxy(server, completions=5) as proxy:
        out = tmp_path / "cut.h5"
        assert main([*_server_record(proxy, out), "-n", "3", "--batch-sizes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stopped answering" in err, err
    assert "2 complete runs kept in" in err
    with open_trace(out) as t:
        assert len(t.run_names) == 2 and not t.incomplete_runs
    assert [p for p in validate(out) if p.severity == "error"] == []


class _Proxy:
    """An HTTP proxy to the real server that stops answering after `completions` completions (and
    answers 404 to the paths that start with `hide`)."""

    def __init__(self, upstream: str, completions: int, hide: str | None = None):
        import http.server
        import threading

        count, lock = [0], threading.Lock()

        class Forward(http.server.BaseHTTPRequestHandler):
            def _forward(self, body=None):
                if hide is not None and self.path.startswith(hide):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.startswith("/v1/completions"):
                    with lock:
                        count[0] += 1
                        gone = count[0] > completions
                    if gone:
                        self.close_connection = True
                        return
                req = urllib.request.Request(upstream + self.path, data=body,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req) as reply:
                        data, code = reply.read(), reply.status
                except urllib.error.HTTPError as exc:
                    data, code = exc.read(), exc.code
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 (http.server's names)
                self._forward()

            def do_POST(self):  # noqa: N802
                self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
