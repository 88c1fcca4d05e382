"""A batch composition's `EngineOutput`s as the datasets of one trace run (`traces/schema.py`).

An engine is asked for `max_new_tokens + 1` tokens, without stopping at EOS, and the last one is
dropped, so that, as in the project's own loop, every kept token was fed to the model (its routing is
known) and the last kept position holds the distribution of the token that would follow; a row is
cut after its first EOS, where the project's loop stops it (the engine kept the row running in its
batch meanwhile). Positions are each sequence's own.

- `step`: 0 for the prompt, `j + 1` for the `j`-th generated token: the decode step that fed it as
  the engine's request saw it. An engine does not say which requests shared a forward step (its
  scheduler may split a prefill, or join requests mid-way), so steps are per request, not per batch.
- `routing/expert`: the routed expert ids in the router's order.
- `logits_topk/*`: the engine's top-k log-probabilities of each generated position, stored as the
  top-k form with `lse = 0` (so `value - lse` is the log-probability, and top-1 minus top-2 the same
  margin as on the logits). Prompt positions hold none (asking vLLM for prompt log-probabilities
  turns its prefix cache off for that request): their ids are -1, their values 0.

The datasets an engine cannot give (router logits, gates, kept, slot, group, loads and capacity)
are not written; `ENGINE_NOT_RECORDED` names them for the trace's `not_recorded` attribute, and
`cached_tokens` gives the run attribute of that name (each row's prompt tokens served from the
prefix cache, whose routing is that of the request that first computed them).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from model.vllm.outputs import EngineOutput
from traces import schema
from traces.schema import ENGINE_OMITTABLE, MISSING

#: What a serving engine's trace leaves out: every dataset the schema lets an engine omit.
ENGINE_NOT_RECORDED = ENGINE_OMITTABLE


def run_arrays(outputs: list[EngineOutput], max_new_tokens: int, k: int,
               eos_ids: tuple[int, ...] = (), layers: list[int] | None = None) -> dict[str, np.ndarray]:
    """The run's datasets for the rows' outputs (each asked for `max_new_tokens + 1` tokens without
    stopping): a row ends after its first token of `eos_ids`, as in the project's loop. `layers` are
    the rows of the engine's routes that hold the MoE layers (`model.hf.moe_layers.engine_rows`;
    default all)."""
    if not outputs:
        raise ValueError("a run needs at least one row")
    if layers is not None:
        outputs = [dataclasses.replace(o, routed=o.routed[:, layers]) for o in outputs]
    B = len(outputs)
    kept = [min(len(o.generated) - 1, max_new_tokens, _eos_end(o.generated, eos_ids)) for o in outputs]
    if min(kept) < 0:
        raise ValueError("every row needs at least one generated token")
    lengths = [len(o.prompt) + n for o, n in zip(outputs, kept, strict=True)]
    T = max(lengths)
    L, K = outputs[0].routed.shape[1:]
    tokens = np.full((B, T), MISSING, np.int32)
    step = np.full((B, T), MISSING, np.int16)
    expert = np.full((L, B, T, K), MISSING, np.int16)
    index = np.full((B, T, k), MISSING, np.int32)
    value = np.zeros((B, T, k), np.float32)
    chosen = np.zeros((B, T), np.float32)
    for b, (o, n) in enumerate(zip(outputs, kept, strict=True)):
        P = len(o.prompt)
        if o.routed.shape[1:] != (L, K):
            raise ValueError(f"row {b}: routed experts of shape {o.routed.shape}, expected [*, {L}, {K}]")
        tokens[b, :P + n] = o.prompt + o.generated[:n]
        step[b, :P] = 0
        step[b, P:P + n] = np.arange(1, n + 1)
        expert[:, b, :P + n] = o.routed[:P + n].transpose(1, 0, 2)
        for j in range(n + 1):  # position P - 1 + j predicts generated token j
            ids, values = _top(o.logprobs[j], k)
            index[b, P - 1 + j, :len(ids)] = ids
            value[b, P - 1 + j, :len(ids)] = values
            chosen[b, P - 1 + j] = o.logprobs[j][o.generated[j]]
    return {
        schema.TOKENS: tokens,
        schema.PROMPT_LEN: np.asarray([len(o.prompt) for o in outputs], np.int32),
        schema.STEP: step,
        schema.EXPERT: expert,
        schema.TOPK_INDEX: index,
        schema.TOPK_VALUE: value,
        schema.TOPK_LSE: np.zeros((B, T), np.float32),
        schema.TOPK_CHOSEN: chosen,
    }


def cached_tokens(outputs: list[EngineOutput]) -> list[int]:
    """Per row, the prompt tokens the engine served from its prefix cache (-1 where it did not say):
    the run attribute `cached_tokens`."""
    return [min(o.cached_tokens, len(o.prompt)) for o in outputs]


def _eos_end(generated: list[int], eos_ids: tuple[int, ...]) -> int:
    """New tokens up to and including the first end-of-sequence token (all when there is none)."""
    return next((j + 1 for j, t in enumerate(generated) if t in eos_ids), len(generated))


def _top(logprobs: dict[int, float], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest log-probabilities, largest first, ties by smaller id (the trace's order)."""
    ranked = sorted(logprobs.items(), key=lambda item: (-item[1], item[0]))[:k]
    return (np.asarray([i for i, _ in ranked], np.int32), np.asarray([v for _, v in ranked], np.float32))
