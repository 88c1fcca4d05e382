"""One request as vLLM returns it, in plain Python and numpy, from the offline engine or the server.

vLLM returns, per request: the generated ids, the routed experts `[prompt + generated - 1, L, K]`
(every token the model was fed, in the router's choice order; the last generated token is never
fed) and, per generated token, the log-probabilities of the top-k ids (plus the sampled id). Router
logits and weights are not returned.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EngineOutput:
    """What one request of a batch gave."""

    prompt: list[int]  # [P] prompt ids as sent
    generated: list[int]  # [G] generated ids
    routed: np.ndarray  # [P + G - 1, L, K] expert ids of every token fed to the model
    logprobs: list[dict[int, float]]  # [G] per generated token: id -> log-probability (top-k + sampled)
    cached_tokens: int = 0  # prompt tokens from the prefix cache (routed as the cache's), -1 unknown

    def __post_init__(self) -> None:
        expected = len(self.prompt) + len(self.generated) - 1
        if self.routed.ndim != 3 or self.routed.shape[0] != expected:
            raise ValueError(f"routed experts of shape {self.routed.shape}, expected [{expected}, L, K]: "
                             f"the engine did not return the routing of every token")
        if len(self.logprobs) != len(self.generated):
            raise ValueError(f"{len(self.logprobs)} log-probability sets for {len(self.generated)} tokens")


def from_request_output(out) -> EngineOutput:
    """An `EngineOutput` from a `vllm.RequestOutput` of the offline engine."""
    completion = out.outputs[0]
    if completion.routed_experts is None:
        raise ValueError("vLLM returned no routed experts (enable_return_routed_experts is off)")
    logprobs = [{int(i): float(lp.logprob) for i, lp in step.items()} for step in (completion.logprobs or [])]
    return EngineOutput(list(out.prompt_token_ids), list(completion.token_ids),
                        np.asarray(completion.routed_experts), logprobs, int(out.num_cached_tokens or 0))


def decode_npy(text: str) -> np.ndarray:
    """A numpy array from the base64 `.npy` text of the server's `routed_experts` (never pickled)."""
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def from_completion_choice(prompt: list[int], choice: dict, cached_tokens: int = 0) -> EngineOutput:
    """An `EngineOutput` from one `choices[i]` of `/v1/completions` asked with token-id prompts,
    `logprobs` and `return_tokens_as_token_ids` (tokens come as `token_id:123`)."""
    if not choice.get("routed_experts"):
        raise ValueError("no routed experts came back: start the server with --enable-return-routed-experts")
    lp = choice.get("logprobs") or {}
    generated = [_token_id(t) for t in lp.get("tokens") or []]
    tops = lp.get("top_logprobs") or []
    logprobs = []
    for token, value, top in zip(generated, lp.get("token_logprobs") or [], tops, strict=True):
        step = {_token_id(t): float(v) for t, v in (top or {}).items()}
        step[token] = float(value)
        logprobs.append(step)
    routed = decode_npy(choice["routed_experts"])
    return EngineOutput(list(prompt), generated, routed, logprobs, cached_tokens)


def _token_id(text: str) -> int:
    if not isinstance(text, str) or not text.startswith("token_id:"):
        raise ValueError(f"expected a token as 'token_id:N' (return_tokens_as_token_ids), got {text!r:.40}")
    return int(text.removeprefix("token_id:"))
