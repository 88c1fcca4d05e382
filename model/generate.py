"""Batched greedy generation with a KV cache; every token is routed once per layer.

Step 0 (prefill) routes every prompt token of every row as one forward step; pads are excluded by the
`valid` mask. Step s >= 1 feeds each running row the token chosen at step s-1, at that row's own
position, so the token is routed in the step that consumed it. The last step feeds the last chosen
token too: its routing and logits are recorded, no token is appended. A row stops after its EOS has
been fed (when `stop_at_eos`) or after `max_new_tokens` tokens.

Continuous batching (`arrivals`): row b's request arrives at tick `arrivals[b]`; until then it is not
in the batch. At its tick its prompt is prefilled in the same forward step as the decode tokens of
the rows already running, so the new prompt's tokens and the running rows' tokens share that step's
capacity groups, as in a server that admits requests between decode steps; rows leave as they
finish. Ticks with nothing to run are skipped, so forward steps stay numbered 0..S-1. With every
arrival at 0 this is the static batch above, step for step.

A generation can keep its state at the start of chosen forward steps (`snapshots`) and another can
resume from one (`resume`): a rerun whose changes (replay, interventions) lie at or after that step
skips the steps before it, which it would compute exactly as the run the state was taken from. Only
a cache with `compact()` and `clone()` (`model.protocols.SnapshotCache`, the shipped model's `KVCache`)
keeps states.

The model is a `model.protocols.GenerationModel`. It names its own special tokens: `model.pad_id` (the
filler of short rows; None when the model masks pads itself and reserves no id, as the Hugging Face
bridge of `model.hf` does), `model.fill_id` (the id written at pad positions when no id is reserved: a
model that routes pads, as transformers' MoE blocks do, computes them, and their routing shapes the
batch's expert GEMMs) and `model.eos_ids` (the ids that end a row); the shipped byte-level model uses
`PAD` and `EOS`. `model.admits_arrivals` says whether rows may join a running batch.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch

from model.kernels import check_mode
from model.protocols import GenerationModel, SnapshotCache
from model.replay import ReplayRouting, check_replay, forced_for_step
from model.step import StepInputs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationState:
    """The loop's state at the start of forward step `steps` (tick `tick`): what a resumed generation
    starts from. Never changed in place: a resumed generation copies it."""

    tick: int
    steps: int
    rows: tuple[tuple[int, ...], ...]
    running: tuple[bool, ...]
    last: torch.Tensor | None   # [B,V] each row's logits at its last routed token
    cache: SnapshotCache

    def resumed(self) -> tuple[list[list[int]], list[bool], torch.Tensor | None, SnapshotCache]:
        return ([list(r) for r in self.rows], list(self.running), self.last,
                self.cache.clone())


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


def _check_arrivals(arrivals, B: int) -> list[int]:
    if arrivals is None:
        return [0] * B
    arrivals = list(arrivals)
    if len(arrivals) != B:
        raise ValueError(f"arrivals must give one tick per row ({B}), got {len(arrivals)}")
    if any(isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in arrivals):
        raise ValueError(f"arrivals must be integers >= 0, got {arrivals}")
    return arrivals


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
def generate(model: GenerationModel, prompts: list[list[int]], max_new_tokens: int, policy,
             kernel_mode: str = "native", recorder=None, replay: dict[int, ReplayRouting] | None = None,
             stop_at_eos: bool = True, intervention=None, arrivals=None, until=None,
             snapshots: dict[int, GenerationState | None] | None = None,
             resume: GenerationState | None = None) -> GenerationResult:
    """Greedy completions of a batch of prompts of different lengths (right padding).

    `recorder.record_step(step, positions, valid, routing, logits, tokens=...)` receives every forward
    step (`tokens` are the step's input ids).
    `replay` maps a row to the routing it must use (see `model.replay`): the router still routes that
    row, so its candidates keep their places in the queues the other rows see, but the row's own
    experts, kept flags and gates are replaced by the recorded ones wherever a position was recorded.
    `intervention` (`model.intervention.Intervention`) changes one routing event of
    one step and layer, nothing else (or an `InterventionSet`: several events at once).
    `arrivals[b]` is the tick at which row b joins the batch (continuous batching, see the module
    docstring; default every row at 0). `until(rows)` is asked after every forward step with each
    row's tokens so far; True ends the generation there (a counterfactual that has its answer
    stops early: the steps it skips cannot change the tokens it already has).
    `snapshots` maps forward steps to None; the generation fills in its state at the start of each
    (when its cache can be cloned). `resume` starts from such a state of a generation of the same
    prompts and settings whose replay and interventions agree with this one's before that step.
    """
    check_mode(kernel_mode)
    cfg = model.config
    pad_id = model.pad_id
    eos_ids = frozenset(model.eos_ids)
    _check_prompts(prompts, max_new_tokens, cfg.vocab_size, cfg.context, pad_id)
    filler = model.fill_id
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
    arrival = _check_arrivals(arrivals, B)
    if len(set(arrival)) > 1 and not model.admits_arrivals:
        raise ValueError("this model's cache holds one shared column per step, so it cannot admit rows "
                         "into a running batch (arrivals)")
    if resume is not None:
        rows, running, last, cache = resume.resumed()
        steps, first_tick = resume.steps, resume.tick
    else:
        rows, running, last = [list(p) for p in prompts], [False] * B, None   # last: [B,V]
        cache = model.new_cache(B)
        steps, first_tick = 0, 0
    keep = snapshots if snapshots is not None and isinstance(cache, SnapshotCache) else None

    def step(s: int, tok: torch.Tensor, pos: torch.Tensor, ok: torch.Tensor, pad: torch.Tensor | None):
        forced = forced_for_step(replay, pos, ok, L, K) if replay else None
        edit = intervention.for_step(s, pos, ok) if intervention is not None else None
        inputs = StepInputs(valid=ok, positions=pos, pad=pad, cache=cache, forced=forced, index=s, edit=edit)
        out = model(tok, policy, kernel_mode=kernel_mode, step=inputs)
        if recorder is not None:
            recorder.record_step(s, pos, ok, out.routing, out.logits, tokens=tok)
        return out.logits

    for tick in range(first_tick, max(arrival) + max_new_tokens + 1):
        if keep is not None and keep.get(steps, 0) is None:
            keep[steps] = GenerationState(tick, steps, tuple(map(tuple, rows)), tuple(running), last,
                                          cache.compact())
        joining = {b for b in range(B) if arrival[b] == tick}
        if not joining and not any(running):
            if tick > max(arrival):
                break
            continue  # nothing in the batch at this tick: no forward step
        # The running rows feed the token chosen from their last logits; joining rows their prompt.
        Ts = max([lengths[b] for b in joining], default=1)
        chosen = last.argmax(-1).tolist() if last is not None else [filler] * B  # [B]
        fed = list(running)
        tok, pos, ok, pad = [], [], [], []  # [B][Ts] each, built as lists: one tensor per step
        for b in range(B):
            if b in joining:
                n = lengths[b]
                tok.append(list(prompts[b]) + [filler] * (Ts - n))
                pos.append(list(range(Ts)))
                ok.append([True] * n + [False] * (Ts - n))
                pad.append([False] * n + [True] * (Ts - n))  # the prompt's right padding, as in a prefill
                continue
            if running[b]:
                rows[b].append(chosen[b])
            here = len(rows[b]) - 1 if arrival[b] < tick else None  # waiting rows sit at 0..Ts-1
            tok.append([chosen[b] if running[b] else filler] + [filler] * (Ts - 1))
            pos.append([here] * Ts if here is not None else list(range(Ts)))
            ok.append([running[b]] + [False] * (Ts - 1))
            pad.append([False] * Ts)
        pads = torch.tensor(pad, device=device) if joining and any(map(any, pad)) else None
        logits = step(steps, torch.tensor(tok, device=device), torch.tensor(pos, device=device),
                      torch.tensor(ok, device=device), pads)
        steps += 1
        cols = torch.tensor([lengths[b] - 1 if b in joining else 0 for b in range(B)], device=device)
        now = logits[torch.arange(B, device=device), cols]  # [B,V]
        if last is None or len(joining) + sum(fed) == B:
            last = now
        else:
            live = torch.tensor([b in joining or fed[b] for b in range(B)], device=device)
            last = torch.where(live[:, None], now, last)
        for b in range(B):
            if b in joining:
                running[b] = max_new_tokens > 0
            elif fed[b]:
                done = len(rows[b]) - lengths[b] >= max_new_tokens or (stop_at_eos and rows[b][-1] in eos_ids)
                running[b] = not done
        if until is not None and until(rows):
            break
    if was_training:
        model.train()
    wall = time.perf_counter() - started
    log.debug("generated %d rows in %d steps, %.3f s", B, steps, wall)
    return GenerationResult(rows, lengths, steps, kernel_mode, wall)
