"""Batched greedy generation with a KV cache; every token is routed once per layer.

Step 0 (prefill) routes every prompt token of every row as one forward step; pads are excluded by the
`valid` mask. Step s >= 1 feeds each running row the token chosen at step s-1, at that row's own
position, so the token is routed in the step that consumed it. The last step feeds the last chosen
token too: its routing and logits are recorded, no token is appended. A row stops after its EOS has
been fed (when `stop_at_eos`) or after `max_new_tokens` tokens.

A model may name its own special tokens: `model.pad_id` (the filler of short rows; None when the model
masks pads itself and reserves no id, as the Hugging Face bridge of `model.hf` does), `model.fill_id`
(the id written at pad positions when no id is reserved: a model that routes pads, as transformers'
MoE blocks do, computes them, and their routing shapes the batch's expert GEMMs) and `model.eos_ids`
(the ids that end a row); the shipped byte-level model uses `PAD` and `EOS`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch

from model.kernels import check_mode
from model.replay import ReplayRouting, check_replay, forced_for_step
from model.tokenizer import EOS, PAD

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationResult:
    """Token ids of each row (prompt + generated), prompt lengths and how the run went."""

    tokens: list[list[int]]  # [B][P_b + n_b]
    prompt_len: list[int]  # [B]
    steps: int  # forward steps S (prefill included)
    kernel_mode: str
    wall_time_s: float

    @property
    def new_tokens(self) -> list[list[int]]:
        return [row[p:] for row, p in zip(self.tokens, self.prompt_len, strict=True)]


def _check_prompts(prompts, max_new_tokens: int, vocab_size: int, context: int, pad: int | None) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise ValueError("prompts must be a non-empty list of token-id lists")
    for b, prompt in enumerate(prompts):
        if not isinstance(prompt, (list, tuple)) or not prompt:
            raise ValueError(f"prompt {b} must be a non-empty list of token ids")
        bad = [t for t in prompt if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"prompt {b} holds {bad[0]!r}, not a token id in 0..{vocab_size - 1}")
        if pad is not None and [t for t in prompt if t == pad]:
            raise ValueError(f"prompt {b} holds the PAD token {pad}")
        if len(prompt) + max_new_tokens > context:
            raise ValueError(f"prompt {b}: {len(prompt)} tokens + max_new_tokens={max_new_tokens} exceed the "
                             f"context length {context}")


@torch.no_grad()
def generate(model, prompts: list[list[int]], max_new_tokens: int, policy, kernel_mode: str = "native",
             recorder=None, replay: dict[int, ReplayRouting] | None = None,
             stop_at_eos: bool = True, intervention=None) -> GenerationResult:
    """Greedy completions of a batch of prompts of different lengths (right padding).

    `recorder.record_step(step, positions, valid, routing, logits)` receives every forward step.
    `replay` maps a row to the routing it must use (see `model.replay`): the router still routes that
    row, so its candidates keep their places in the queues the other rows see, but the row's own
    experts, kept flags and gates are replaced by the recorded ones wherever a position was recorded.
    `intervention` (`model.counterfactual.intervention.Intervention`) changes one routing event of
    one step and layer, nothing else.
    """
    check_mode(kernel_mode)
    cfg = model.config
    pad_id = getattr(model, "pad_id", PAD)
    eos_ids = frozenset(getattr(model, "eos_ids", (EOS,)))
    _check_prompts(prompts, max_new_tokens, cfg.vocab_size, cfg.context, pad_id)
    filler = getattr(model, "fill_id", None)
    if filler is None:
        filler = 0 if pad_id is None else pad_id
    L = len(cfg.moe_layers)
    K = policy.candidates_per_token(cfg.n_experts) if policy is not None else cfg.top_k
    B = len(prompts)
    check_replay(replay, B, L, K)
    if cfg.is_moe and policy is None:
        raise ValueError("a routing policy is needed for an MoE model "
                         "(e.g. RoutingPolicy.preset('dropless'))")
    device = model.device
    was_training = model.training
    model.eval()
    started = time.perf_counter()

    lengths = [len(p) for p in prompts]
    Tp = max(lengths)
    rows = [list(p) for p in prompts]
    tokens = torch.full((B, Tp), filler, dtype=torch.long)
    for b, p in enumerate(prompts):
        tokens[b, :len(p)] = torch.tensor(p)
    tokens = tokens.to(device)
    positions = torch.arange(Tp, device=device).expand(B, Tp)
    length_t = torch.tensor(lengths, device=device)
    valid = positions < length_t[:, None]  # [B,Tp]
    cache = model.new_cache(B)

    def step(s: int, tok: torch.Tensor, pos: torch.Tensor, ok: torch.Tensor, pad: torch.Tensor | None):
        forced = forced_for_step(replay, pos, ok, L, K) if replay else None
        edit = intervention.for_step(s, pos, ok) if intervention is not None else None
        out = model(tok, policy, valid=ok, positions=pos, pad=pad, kernel_mode=kernel_mode, cache=cache,
                    forced=forced, step=s, edit=edit)
        if recorder is not None:
            recorder.record_step(s, pos, ok, out.routing, out.logits)
        return out.logits

    logits = step(0, tokens, positions, valid, ~valid if bool((~valid).any()) else None)  # [B,Tp,V]
    last = logits[torch.arange(B, device=device), length_t - 1]  # [B,V]
    running = [max_new_tokens > 0] * B
    steps = 1
    for s in range(1, max_new_tokens + 1):
        if not any(running):
            break
        chosen = last.argmax(-1).tolist()  # [B]
        feed = [chosen[b] if running[b] else filler for b in range(B)]
        pos = [len(rows[b]) if running[b] else len(rows[b]) - 1 for b in range(B)]
        ok_rows = list(running)
        for b in range(B):
            if running[b]:
                rows[b].append(feed[b])
        tok = torch.tensor(feed, device=device)[:, None]  # [B,1]
        pos_t = torch.tensor(pos, device=device)[:, None]  # [B,1]
        ok = torch.tensor(ok_rows, device=device)[:, None]  # [B,1]
        last = step(s, tok, pos_t, ok, None)[:, 0]  # [B,V]
        steps += 1
        for b in range(B):
            done = len(rows[b]) - lengths[b] >= max_new_tokens or (stop_at_eos and feed[b] in eos_ids)
            if running[b] and done:
                running[b] = False
    if was_training:
        model.train()
    wall = time.perf_counter() - started
    log.debug("generated %d rows in %d steps, %.3f s", B, steps, wall)
    return GenerationResult(rows, lengths, steps, kernel_mode, wall)
