"""A running vLLM OpenAI-compatible server as a recording engine, as real clients reach it.

Each row of a composition is one `/v1/completions` request, all sent at once on their own threads;
the server batches them itself (continuous batching), so which requests share a forward step is its
scheduler's choice. The server must run with `--enable-return-routed-experts` (`routed_experts` then
comes back in each choice as a base64 `.npy`) and `--max-logprobs` at least `logprobs`; with
`--enable-prompt-tokens-details` it also says how many prompt tokens came from its prefix cache.
Prompts are sent as token ids, greedy, `max_tokens = max_new_tokens + 1`, `ignore_eos`, without
streaming (streamed responses carry no routed experts). Standard library only (urllib).

What a client can know of how the server serves: its version (`/version`), the model it serves
(`/v1/models`, compared with `--model`), how it tokenizes (`/tokenize`, compared with the model's
tokenizer), its KV-cache settings (`/metrics`), and, when it runs with `VLLM_SERVER_DEV_MODE=1`,
its whole resolved configuration (`/server_info`: dtype, quantization, compilation and CUDA-graph
mode, parallelism, EPLB). Without that its dtype is not visible: it is the caller's `--dtype`.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from model.engines import EngineName
from model.vllm.offline import EngineError
from model.vllm.outputs import EngineOutput, from_completion_choice
from model.vllm.settings import COMPILED_ADVICE, SERVED, captures_routes, resolve_kv_cache, served_settings

#: Seconds one request may take before the recording gives up.
TIMEOUT_S = 300
#: The KV-cache settings `/metrics` shows (label of `vllm:cache_config_info` -> the trace's name).
CACHE_LABELS = {"block_size": "block_size", "cache_dtype": "kv_cache_dtype",
                "enable_prefix_caching": "prefix_caching"}


class ReplyError(EngineError):
    """The address answered, but not as a vLLM server does (an HTTP error, a reply that is not JSON)."""


class Unreachable(EngineError):
    """The address did not answer, or stopped answering (its reason, e.g. 'Connection refused')."""


class ServerEngine:
    """The server at `url` serving the folder `model`; `generate` sends one composition as concurrent
    requests. `dtype` is the caller's statement of the server's dtype (checked when the server shows
    its own)."""

    name = EngineName.VLLM_SERVER

    def __init__(self, url: str, model: str, *, logprobs: int = 20, dtype: str | None = None):
        self.url = url.rstrip("/")
        self.logprobs = logprobs
        self.package = "vllm"
        served = self._served_model()
        self.model, self.root = str(served.get("id")), str(served.get("root") or served.get("id"))
        if Path(self.root).name != Path(model).resolve().name and Path(self.root).resolve() != \
                Path(model).resolve():
            raise EngineError(f"--model {model}: the server at {self.url} serves {self.root!r}; pass the "
                              f"folder it serves")
        try:
            self.version = str(self._get("/version").get("version", "unknown"))
        except ReplyError as exc:
            raise EngineError(f"{self.url} is not a vLLM server ({exc})") from None
        self.served = self._server_info()
        shown = self.served.get("dtype")
        if shown is not None and dtype is not None and shown != dtype:
            raise EngineError(f"--dtype {dtype}: the server at {self.url} computes in {shown}")
        if shown is None and dtype is None:
            raise EngineError(f"the server at {self.url} does not show its dtype: pass --dtype as it was "
                              f"started, or start it with VLLM_SERVER_DEV_MODE=1 (docs/engines.md)")
        self.dtype: str | None
        self.dtype, self.dtype_source = (shown, "the server") if shown else (dtype, "--dtype (stated)")
        mode = self.served.get("compilation_mode")
        if not captures_routes(self.version, str(self.served.get("device")), mode):
            raise EngineError(f"the server at {self.url} runs in compilation mode {mode}, where vLLM "
                              f"{self.version} on a CPU does not capture routes; {COMPILED_ADVICE}")

    # ---- HTTP ------------------------------------------------------------------------------------

    def _request(self, path: str, body: dict | None = None, timeout: float = 30, text: bool = False):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise ReplyError(f"{self.url}{path}: HTTP {exc.code}{_error_detail(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise Unreachable(str(getattr(exc, "reason", None) or exc)) from None
        if text:
            return raw.decode(errors="replace")
        try:
            return json.loads(raw)
        except ValueError:
            raise ReplyError(f"{self.url}{path}: the reply is not JSON") from None

    def _get(self, path: str):
        return self._request(path)

    def _served_model(self) -> dict:
        """The first model of `/v1/models`; EngineError when the address is not a vLLM server."""
        try:
            models = self._get("/v1/models")["data"]
            return dict(models[0])
        except ReplyError as exc:
            raise EngineError(f"{self.url} is not a vLLM server ({exc})") from None
        except Unreachable as exc:
            raise EngineError(f"no server answers at {self.url} ({exc})") from None
        except (KeyError, TypeError, IndexError, ValueError):
            raise EngineError(f"{self.url} is not a vLLM server (its /v1/models lists no model)") from None

    def _server_info(self) -> dict:
        """The served settings from `/server_info` (VLLM_SERVER_DEV_MODE=1), else the KV-cache ones
        from `/metrics`; what neither shows is None."""
        try:
            config = self._get("/server_info?config_format=json")["vllm_config"]
            if isinstance(config, dict):
                return {**served_settings(config), "settings_from": "/server_info"}
        except (EngineError, KeyError, TypeError):
            pass
        out = dict.fromkeys(name for name, _, _ in SERVED)
        try:
            metrics = self._request("/metrics", text=True)
        except EngineError:
            metrics = ""
        match = re.search(r"^vllm:cache_config_info\{(.*)\}", metrics, re.M)
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match[1])) if match else {}
        for label, name in CACHE_LABELS.items():
            if label in labels:
                out[name] = _label_value(labels[label])
        out["settings_from"] = "/metrics (start the server with VLLM_SERVER_DEV_MODE=1 to record the rest)"
        return out

    def check_tokenizer(self, text: str, ids: list[int]) -> None:
        """EngineError when the server tokenizes `text` other than `ids` (the --model folder's tokenizer)."""
        try:
            theirs = self._request("/tokenize", {"model": self.model, "prompt": text})["tokens"]
        except (EngineError, KeyError, TypeError):
            return  # a server without /tokenize: the served model's name was checked
        if list(theirs) != list(ids):
            raise EngineError(f"the server at {self.url} tokenizes the probe into {len(theirs)} tokens, the "
                              f"--model folder's tokenizer into {len(ids)} (another vocabulary): pass the "
                              f"folder it serves")

    # ---- recording -------------------------------------------------------------------------------

    def _complete(self, prompt: list[int], max_new_tokens: int) -> EngineOutput:
        body = {"model": self.model, "prompt": list(prompt), "max_tokens": max_new_tokens + 1,
                "temperature": 0.0, "logprobs": self.logprobs, "ignore_eos": True, "stream": False,
                "return_tokens_as_token_ids": True}
        try:
            reply = self._request("/v1/completions", body, TIMEOUT_S)
        except Unreachable as exc:
            raise EngineError(f"the server at {self.url} stopped answering ({exc})") from None
        try:
            details = (reply.get("usage") or {}).get("prompt_tokens_details")
            cached = -1 if details is None else int(details.get("cached_tokens") or 0)
            return from_completion_choice(prompt, reply["choices"][0], cached)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise EngineError(f"{self.url}/v1/completions: unexpected reply ({exc})") from None
        except ValueError as exc:
            raise EngineError(f"the server at {self.url}: {exc}") from None

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        """Every prompt as its own request, all in flight together; outputs in the prompts' order."""
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            return list(pool.map(lambda p: self._complete(p, max_new_tokens), prompts))

    def settings(self) -> dict:
        """What a client can know of how the server serves (None: not visible from a client)."""
        return resolve_kv_cache({
            **self.served, "name": self.name, "package": self.package, "version": self.version,
            "url": self.url, "served_model": self.model, "served_root": self.root, "dtype": self.dtype,
            "dtype_from": self.dtype_source,
            "requests": "one /v1/completions request per row, all concurrent; the server batches them"})

    def close(self) -> None:
        """Nothing to free: the server keeps running."""


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """': message' of a JSON error reply (an OpenAI-style `error.message`), '' for anything else (an
    HTML page is not repeated)."""
    try:
        body = json.loads(exc.read().decode(errors="replace"))
        message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
    except (ValueError, AttributeError, OSError):
        return ""
    return f": {str(message).splitlines()[0][:200]}" if message else ""


def _label_value(text: str):
    """A Prometheus label's value as JSON: booleans and integers as such, 'None' as null."""
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    return int(text) if text.isdigit() else text
