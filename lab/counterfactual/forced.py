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

Many changes at once (`ForcedRun.logit_differences`: the causal map's hundreds of null draws):
the changes that resume from one kept state run as D stacked copies of the batch, one forward per
step (`model.step.StepInputs.copies`; the kept cache repeated D times, `KVCache.repeat`). Copy i
holds rows i*B..(i+1)*B-1 and its change, addressed to its own rows; routing gives every copy its
own capacity groups, so the copies never compete for slots and each takes the decisions of its own
rerun. Only the kernels' rounding with the larger batch may differ (`tests/test_lab_forced_copies.py`
bounds it). This differs from stacking trials in a *generation* (`lab.counterfactual.search`): here
every row's tokens are forced, and each copy is routed alone.

A run generated with interventions (a planted event: `model.generate.generate(intervention=...)`)
is rerun with them (`edits`): they act in every rerun, the unchanged one included, so its kept
states are the planted run's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from model.intervention import InterventionSet, SetKept
from model.kernels import KEY_BLOCK
from model.protocols import SnapshotCache
from model.replay import ReplayRouting, forced_for_step
from model.step import StepInputs
from traces.analysis.proof import EventKind

#: Cache bytes of the stacked copies of one batched rerun, at most (`ForcedRun.logit_differences`).
MAX_COPIES_BYTES = 128 * 2**20


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

    def __init__(self, model, run, policy, kernel_mode: str, edits: tuple = (), scratch: list | None = None):
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
        self.reruns = 0     # steps run by changed reruns (a step of D copies counts D)
        # the last stacked cache, whose memory the next one takes (a list shared by several runs' reruns)
        self.scratch = scratch if scratch is not None else [None]
        self.stack = True   # stack the changes as copies (False: one rerun per change, for comparison)

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
        change = Change(replay, tuple(edits))
        return float(self.logit_differences(row, position, plus, minus, [change], start=start)[0])

    def logit_differences(self, row: int, position: int, plus: int, minus: int, changes: list[Change], *,
                          start: int | None = None) -> np.ndarray:
        """`logit_difference` of each change [n], the changes run as stacked copies of the batch, one
        forward per step (`model.step.StepInputs.copies`: each copy its own capacity groups), at most
        `MAX_COPIES_BYTES` of cache at once: in the order of the steps they resume from, each copy
        joining the stack at its own step from the state kept there. Each value is its change's own
        rerun, up to the kernels' drift with the batch's shape; a model without kept states, or a
        change the copies cannot address (an intervention on a group), reruns one change at a time."""
        last = self.step_of(row, position)
        self.prepare(last)
        col = int(torch.nonzero(self.specs[last].positions[row] == position)[0])
        out = np.zeros(len(changes))
        starts = [0 if not self.snapshots else self._start(c, last) if start is None else start
                  for c in changes]
        order = sorted(range(len(changes)), key=lambda i: starts[i])
        stack = self.stack and self.snapshots and _stackable(self.edits)
        i = 0
        while i < len(order):
            chunk = self._chunk(starts[order[i]], last) if stack else 1
            idx = order[i:i + chunk]
            if len(idx) > 1 and not all(_stackable(changes[j].edits) for j in idx):
                idx = idx[:1]
            out[idx] = self._rerun([starts[j] for j in idx], last, [changes[j] for j in idx], row, col,
                                   plus, minus)
            i += len(idx)
        return out

    def _start(self, change: Change, last: int) -> int:
        """The first step the change touches (`last` when none earlier)."""
        start = last
        for r, rec in (change.replay or {}).items():
            has = np.nonzero(np.asarray(rec.expert)[..., 0] >= 0)
            if has[1].size:
                start = min(start, int(self.step[r, has[1]].min()))
        for iv in change.edits:
            start = min(start, iv.step)
        return start

    def _context(self, start: int, last: int) -> int:
        """Cache positions the steps start..last need: whole key blocks past the last one they write."""
        top = max(int(self.specs[s].positions.max()) + 1 for s in range(start, last + 1))
        return min(self.model.config.context, -(-top // KEY_BLOCK) * KEY_BLOCK)

    def _chunk(self, start: int, last: int) -> int:
        """Copies per forward that keep their caches within `MAX_COPIES_BYTES`."""
        state = self._states[start]
        B, H, _, D = state.k[0].shape
        per_copy = 2 * len(state.k) * B * H * self._context(start, last) * D * state.k[0].element_size()
        return max(1, MAX_COPIES_BYTES // per_copy)

    def _rerun(self, starts: list[int], last: int, changes: list[Change], row: int, col: int, plus: int,
               minus: int) -> np.ndarray:
        """Stacked copies, copy i with change i resumed from the state kept at step starts[i]
        (ascending): steps starts[0]..last, each running the copies that have joined; the logit
        difference of each copy's row `row` at column `col` of step `last`."""
        D = len(changes)
        B0 = self.step.shape[0]
        first = starts[0]
        if self.snapshots:
            cache = self._states[first].repeat(D, self._context(first, last), reuse=self.scratch[0])
            self.scratch[0] = cache
        else:
            cache = self.model.new_cache(B0)
        replay = {r + i * B0: rec for i, c in enumerate(changes) for r, rec in (c.replay or {}).items()}
        own = [tuple(_for_copy(iv, i, B0) for iv in (*self.edits, *c.edits)) for i, c in enumerate(changes)]
        active = 0
        with torch.no_grad():
            for s in range(first, last + 1):
                joined = active
                while active < D and starts[active] <= s:
                    active += 1
                if joined and active > joined:     # copies resuming at this step join from its kept state
                    cache.load(joined * B0, self._states[s], active - joined)
                n = active * B0
                edits = tuple(iv for i in range(active) for iv in own[i])
                here = {r: rec for r, rec in replay.items() if r < n}
                view = cache if active == D else cache.rows(n)
                logits = self._forward(s, view, here or None, InterventionSet(edits) if edits else None,
                                       active)
                if view is not cache:
                    cache.filled = view.filled
                self.reruns += active
        out = logits[torch.arange(D) * B0 + row, col]       # [D,V]
        return (out[:, plus] - out[:, minus]).double().numpy()

    def _forward(self, s: int, cache, replay, edit: InterventionSet | None, copies: int = 1) -> torch.Tensor:
        """Step s of `copies` stacked copies of the batch; `edit` holds the run's own interventions
        (`prepare`) or, in a rerun, everything `_rerun` resolved for the copies."""
        spec = self.specs[s]
        if edit is None and self.edits:
            edit = InterventionSet(self.edits)
        tokens, positions, valid = (t.repeat(copies, 1) for t in (spec.tokens, spec.positions, spec.valid))
        pad = None if spec.pad is None else spec.pad.repeat(copies, 1)
        forced = forced_for_step(replay, positions, valid, self.L, self.K) if replay else None
        layer_edit = edit.for_step(s, positions, valid) if edit is not None else None
        inputs = StepInputs(valid=valid, positions=positions, pad=pad, cache=cache,
                            forced=forced, index=s, edit=layer_edit, copies=copies)
        return self.model(tokens, self.policy, kernel_mode=self.kernel_mode, step=inputs).logits


@dataclass(frozen=True)
class Change:
    """One counterfactual of a rerun: `replay` ({row: routing}, only its recorded cells) and `edits`
    (interventions, or the causal map's `SetKept`)."""

    replay: dict[int, ReplayRouting] | None = None
    edits: tuple = ()


def _stackable(edits) -> bool:
    """Whether every edit addresses one row (it can be moved to a copy's row): not a whole group."""
    return all(isinstance(e, SetKept) or e.kind in (EventKind.KEEP, EventKind.LOGITS) for e in edits)


def _for_copy(edit, copy: int, rows: int):
    """`edit` addressed to copy `copy` of a batch of `rows` rows (its row moved by copy * rows)."""
    return edit if copy == 0 else dataclasses.replace(edit, row=edit.row + copy * rows)
