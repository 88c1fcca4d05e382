"""A running vLLM OpenAI-compatible server as a recording engine, as real clients reach it.

Each row of a composition is one `/v1/completions` request, all sent at once on their own threads;
the server batches them itself (continuous batching), so which requests share a forward step is its
scheduler's choice. The server must run with `--enable-return-routed-experts` (`routed_experts` then
comes back in each choice as a base64 `.npy`) and `--max-logprobs` at least `logprobs`. Prompts are
sent as token ids, greedy, `max_tokens = max_new_tokens + 1`, `ignore_eos`, without streaming
(streamed responses carry no routed experts). Standard library only (urllib).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from model.vllm.offline import EngineError
from model.vllm.outputs import EngineOutput, from_completion_choice

#: Seconds one request may take before the recording gives up.
TIMEOUT_S = 300


class ServerEngine:
    """The server at `url`; `generate` sends one composition as concurrent requests."""

    name = "vllm-server"

    def __init__(self, url: str, *, logprobs: int = 20):
        self.url = url.rstrip("/")
        self.logprobs = logprobs
        try:
            models = self._get("/v1/models")["data"]
            self.version = str(self._get("/version").get("version", "unknown"))
        except (KeyError, TypeError, IndexError):
            raise EngineError(f"{self.url} does not answer as an OpenAI-compatible vLLM server") from None
        if not models:
            raise EngineError(f"{self.url} serves no model")
        self.model = models[0]["id"]
        self.package = "vllm"

    def _request(self, path: str, body: dict | None = None, timeout: float = 30) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:200]
            raise EngineError(f"{self.url}{path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise EngineError(f"{self.url}{path}: {exc}") from None

    def _get(self, path: str) -> dict:
        return self._request(path)

    def _complete(self, prompt: list[int], max_new_tokens: int) -> EngineOutput:
        body = {"model": self.model, "prompt": list(prompt), "max_tokens": max_new_tokens + 1,
                "temperature": 0.0, "logprobs": self.logprobs, "ignore_eos": True, "stream": False,
                "return_tokens_as_token_ids": True}
        reply = self._request("/v1/completions", body, TIMEOUT_S)
        try:
            cached = ((reply.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            return from_completion_choice(prompt, reply["choices"][0], int(cached))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise EngineError(f"{self.url}/v1/completions: unexpected reply ({exc})") from None

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        """Every prompt as its own request, all in flight together; outputs in the prompts' order."""
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            return list(pool.map(lambda p: self._complete(p, max_new_tokens), prompts))

    def settings(self) -> dict:
        """What a client can know of the server: its address, version and model (its own arguments,
        parallelism and caching are the server's, not visible from here)."""
        return {"name": self.name, "package": self.package, "version": self.version, "url": self.url,
                "served_model": self.model, "dtype": "as the server was started", "device": "server",
                "requests": "one /v1/completions request per row, all concurrent; the server batches them"}

    def close(self) -> None:
        """Nothing to free: the server keeps running."""
