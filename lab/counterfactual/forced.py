"""A recorded run rerun step by step with every row's tokens teacher-forced, from kept states.

The causal map (`lab.counterfactual.causal_map`) measures how one routing change moves a row's
logits at its first split t*. Teacher forcing keeps that measurement about routing alone: every
row of the batch is fed its recorded tokens, so a change can move the logits but never the inputs,
and the rerun keeps the recorded step structure (which rows, positions and pads each forward step
routes, as `model.generate.generate` built them) and batch (the other rows compete for the same
expert slots). With no change, the rerun takes the recorded decisions again
(`ForcedRun.logit_difference` of nothing equals the recorded logits up to the kernels' drift).

States: `ForcedRun.prepare(last)` runs the batch once to the step `last` and keeps the KV cache at
the start of every step; a change at step s resumes from the state kept there and runs steps
s..last only.

A run generated with interventions (a planted event: `model.generate.generate(intervention=...)`)
is rerun with them (`edits`): they act in every rerun, the unchanged one included, so its kept
states are the planted run's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.intervention import InterventionSet
from model.protocols import SnapshotCache
from model.replay import ReplayRouting, forced_for_step
from model.step import StepInputs


@dataclass(frozen=True)
class StepSpec:
    """One forward step's inputs as the generation loop built them: tokens, positions, valid[B,Ts],
    pads (None when the step has none)."""

    tokens: torch.Tensor
    positions: torch.Tensor
    valid: torch.Tensor
    pad: torch.Tensor | None


def step_specs(run, filler: int) -> list[StepSpec]:
    """Every forward step of a recorded run, rebuilt from its tokens, prompt lengths and step array
    (the loop of `model.generate.generate`, with the recorded tokens as the chosen ones)."""
    step = np.asarray(run.step[...]).astype(int)            # [B,T] forward step of each position
    tokens = np.asarray(run.tokens[...]).astype(int)        # [B,T]
    prompt = np.asarray(run.prompt_len[...]).astype(int)    # [B]
    B = step.shape[0]
    lengths = [run.row_length(b) for b in range(B)]
    arrival = step[:, 0]
    S = int(step.max()) + 1
    specs = []
    for s in range(S):
        joining = [b for b in range(B) if arrival[b] == s]
        Ts = max([int(prompt[b]) for b in joining], default=1)
        tok, pos, ok, pad = [], [], [], []
        for b in range(B):
            if b in joining:
                n = int(prompt[b])
                tok.append(tokens[b, :n].tolist() + [filler] * (Ts - n))
                pos.append(list(range(Ts)))
                ok.append([True] * n + [False] * (Ts - n))
                pad.append([False] * n + [True] * (Ts - n))
                continue
            here = np.nonzero(step[b, :lengths[b]] == s)[0]
            if here.size:       # a running row feeds its recorded token at its own position
                q = int(here[0])
                tok.append([int(tokens[b, q])] + [filler] * (Ts - 1))
                pos.append([q] * Ts)
                ok.append([True] + [False] * (Ts - 1))
            else:               # a finished row sits at its last position, a waiting one at 0..Ts-1
                last = lengths[b] - 1 if arrival[b] < s else None
                tok.append([filler] * Ts)
                pos.append([last] * Ts if last is not None else list(range(Ts)))
                ok.append([False] * Ts)
            pad.append([False] * Ts)
        pads = torch.tensor(pad) if joining and any(map(any, pad)) else None
        specs.append(StepSpec(torch.tensor(tok), torch.tensor(pos), torch.tensor(ok), pads))
    return specs


class ForcedRun:
    """One recorded run of a trace, rerun with teacher-forced tokens (see the module docstring)."""

    def __init__(self, model, run, policy, kernel_mode: str, edits: tuple = ()):
        self.model = model
        self.edits = tuple(edits)   # interventions the run was generated with, applied in every rerun
        self.policy = policy
        self.kernel_mode = kernel_mode
        filler = model.fill_id if model.fill_id is not None else (model.pad_id or 0)
        self.specs = step_specs(run, filler)
        self.step = np.asarray(run.step[...]).astype(int)   # [B,T]
        self.L = len(model.config.moe_layers)
        self.K = int(np.asarray(run.expert).shape[-1])
        self._states: dict[int, object] = {}
        # A cache that keeps states (`model.protocols.SnapshotCache`) lets a rerun resume at the step a
        # change touches; another (a Hugging Face model's) reruns from the first step.
        self.snapshots = isinstance(model.new_cache(1), SnapshotCache)
        self.reruns = 0     # steps run by changed reruns

    def step_of(self, row: int, position: int) -> int:
        return int(self.step[row, position])

    def prepare(self, last: int) -> None:
        """Run steps 0..last unchanged and keep the cache at the start of each (once per run)."""
        have = max(self._states, default=-1)
        if have >= last or not self.snapshots:
            return
        cache = self._states[have].clone() if have >= 0 else self.model.new_cache(self.step.shape[0])
        start = max(have, 0)
        with torch.no_grad():
            for s in range(start, last + 1):
                if s not in self._states:
                    self._states[s] = cache.compact()
                self._forward(s, cache, None, None)

    def logit_difference(self, row: int, position: int, plus: int, minus: int, *,
                         replay: dict[int, ReplayRouting] | None = None, edits=(),
                         start: int | None = None) -> float:
        """logits[plus] - logits[minus] of row `row` at `position` (the token that predicts the next),
        with `replay` ({row: routing}, only its recorded cells) and `edits` (interventions) applied,
        resumed from the kept state at step `start` (default: the first step any change touches)."""
        last = self.step_of(row, position)
        self.prepare(last)
        if start is None:
            start = last
            for r, rec in (replay or {}).items():
                has = np.nonzero(np.asarray(rec.expert)[..., 0] >= 0)
                if has[1].size:
                    start = min(start, int(self.step[r, has[1]].min()))
            for iv in edits:
                start = min(start, iv.step)
        edit = InterventionSet(tuple(edits)) if edits else None
        if self.snapshots:
            cache = self._states[start].clone()
        else:
            start, cache = 0, self.model.new_cache(self.step.shape[0])
        with torch.no_grad():
            for s in range(start, last + 1):
                logits = self._forward(s, cache, replay, edit)
                self.reruns += 1
        col = int(torch.nonzero(self.specs[last].positions[row] == position)[0])
        out = logits[row, col]
        return float(out[plus] - out[minus])

    def _forward(self, s: int, cache, replay, edit: InterventionSet | None) -> torch.Tensor:
        spec = self.specs[s]
        if self.edits:   # the run's own interventions first, then the change tried
            edit = InterventionSet((*self.edits, *(edit.interventions if edit is not None else ())))
        forced = forced_for_step(replay, spec.positions, spec.valid, self.L, self.K) if replay else None
        layer_edit = edit.for_step(s, spec.positions, spec.valid) if edit is not None else None
        inputs = StepInputs(valid=spec.valid, positions=spec.positions, pad=spec.pad, cache=cache,
                            forced=forced, index=s, edit=layer_edit)
        return self.model(spec.tokens, self.policy, kernel_mode=self.kernel_mode, step=inputs).logits
