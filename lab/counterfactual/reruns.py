"""Reruns of recorded batches: as recorded (checked against the recording), dropless, batch-invariant,
with replay or interventions.

A `Reruns` holds the model and an open trace and reruns whole runs (batch compositions) under one
of the `VARIANTS`, each at most once: a run that is the reference of several rows, or that holds
several divergent requests, is generated once per variant. Counterfactual trials (`trial`: a
replay of some (layer, position) cells of another row's routing, or interventions) stop as soon as
the watched row leaves the tokens it must reproduce. Prompts and the number of new tokens
come from the recorded run itself, the routing policy and kernel mode from its attributes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from model.generate import GenerationState, generate
from model.protocols import GenerationModel
from model.recorder import Recorder
from model.replay import ReplayRouting
from model.routing_policy import RoutingPolicy
from traces.analysis.reproduction import Reproduction, compare_run
from traces.reader import Trace
from traces.records import RootMeta

log = logging.getLogger(__name__)

#: How a run is rerun: with its recorded settings, dropless, or with batch-invariant kernels.
VARIANTS = ("recorded", "dropless", "batch_invariant")


class RerunError(ValueError):
    """A recorded run that cannot be rerun with this model (its message names the run)."""


@dataclass(frozen=True)
class RunSettings:
    """How a recorded run was generated: what a rerun needs."""

    name: str
    prompts: list[list[int]]          # [B][P_b] the recorded prompt tokens of each row
    max_new_tokens: int
    policy: RoutingPolicy | None      # None for a dense model
    kernel_mode: str
    arrivals: list[int] | None = None  # [B] step each row was prefilled in (continuous batching)

    @property
    def coupled(self) -> bool:
        """Whether rows of this batch compete for expert slots (docs/routing.md: groups spanning rows, or a
        row's capacity growing with the pads its batch adds)."""
        p = self.policy
        if p is None or p.dropless or len(self.prompts) < 2:
            return False
        return p.group_by != "sequence" or p.pads_count_toward_capacity


def replay_cells(rec: ReplayRouting, cells, *, outside: bool = False) -> ReplayRouting:
    """`rec` replayed only at the (layer, position) `cells` (or, with `outside`, everywhere but there):
    every other (layer, position) is left to the router (expert -1)."""
    L, T, _ = rec.expert.shape
    inside = np.zeros((L, T), dtype=bool)
    for layer, position in cells:
        if 0 <= layer < L and 0 <= position < T:
            inside[layer, position] = True
    keep = ~inside if outside else inside
    expert = np.where(keep[..., None], np.asarray(rec.expert), -1)
    return ReplayRouting(expert, np.asarray(rec.kept), np.asarray(rec.gate))


def _joined(before: ReplayRouting, after: ReplayRouting, since: int) -> ReplayRouting:
    """`before`'s routing at positions before `since`, `after`'s from there on (a resumed rerun records
    only the steps it ran)."""
    T = max(np.asarray(before.expert).shape[1], np.asarray(after.expert).shape[1])

    def join(a, b, fill):
        a, b = np.asarray(a), np.asarray(b)
        out = np.full((a.shape[0], T, a.shape[2]), fill, dtype=b.dtype)
        out[:, :min(since, a.shape[1])] = a[:, :since]
        out[:, since:b.shape[1]] = b[:, since:]
        return out

    return ReplayRouting(join(before.expert, after.expert, -1), join(before.kept, after.kept, False),
                         join(before.gate, after.gate, 0.0))


def _watch(row: int, target: list[int]):
    """`until` of a generation: stop once row `row`'s tokens leave `target` or reach its length."""
    n = len(target)

    def until(rows: list[list[int]]) -> bool:
        tokens = rows[row]
        return len(tokens) >= n or tokens[-1] != target[len(tokens) - 1]

    return until


def recorded_kernels(meta: RootMeta) -> int:
    """The kernel version a trace was recorded with (its machine fingerprint; 1 where it has none)."""
    value = (meta.machine or {}).get("kernels")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def recorded_isa(meta: RootMeta) -> str | None:
    """The instruction-set path of a trace's compiled kernels (`avx512` of `3-avx512`), or None."""
    path = (meta.machine or {}).get("kernel_path")
    return path.partition("-")[2] or None if isinstance(path, str) else None


class Reruns:
    """Reruns of the runs of one open trace with one model; each (run, variant) is generated once."""

    def __init__(self, trace: Trace, model: GenerationModel):
        self.trace = trace
        self.model = model
        # The trace's kernels where this build has them: its bits reproduce.
        model.use_kernels(recorded_kernels(trace.record), recorded_isa(trace.record))
        self._settings: dict[str, RunSettings] = {}
        self._tokens: dict[tuple[str, str], list[list[int]]] = {}
        self._reproduction: dict[str, Reproduction] = {}
        self.generations = 0   # batches generated
        self.trials = 0        # of which counterfactual trials (`trial`)

    # -- settings -------------------------------------------------------------------------------

    def settings(self, name: str) -> RunSettings:
        """The recorded settings of run `name`; RerunError when the model cannot rerun it."""
        if name not in self._settings:
            self._settings[name] = self._read_settings(name)
        return self._settings[name]

    def _read_settings(self, name: str) -> RunSettings:
        run = self.trace.run(name)
        record = run.record
        tokens = np.asarray(run.tokens[...])
        prompt_len = np.asarray(run.prompt_len[...])
        lengths = [run.row_length(b) for b in range(run.batch_size)]
        prompts = [tokens[b, :prompt_len[b]].astype(int).tolist() for b in range(run.batch_size)]
        longest = max((n - int(p) for n, p in zip(lengths, prompt_len, strict=True)), default=0)
        max_new = longest if record.max_new_tokens is None else int(record.max_new_tokens)
        routing = record.routing or self.trace.record.routing
        mode = record.kernel_mode
        config = self.model.config
        try:
            policy = RoutingPolicy.from_dict(routing) if config.is_moe else None
        except (TypeError, ValueError) as exc:
            raise RerunError(f"run {name}: its routing attribute is not a routing policy ({exc})") from None
        if config.is_moe and policy.candidates_per_token(config.n_experts) != run.dims.get("K"):
            raise RerunError(f"run {name}: its routing has K = {run.dims.get('K')} candidates per token, "
                             f"the policy gives {policy.candidates_per_token(config.n_experts)}")
        # A row joined the batch at the step that prefilled it; idle ticks were never run, so these
        # steps reproduce the recorded schedule step for step.
        first = np.asarray(run.step[:, 0]).astype(int).tolist()
        arrivals = first if any(first) else None
        return RunSettings(name, prompts, max_new, policy, mode, arrivals)

    def variant_settings(self, name: str, variant: str) -> tuple[RoutingPolicy | None, str] | None:
        """(policy, kernel mode) of a variant of run `name`, or None when the variant does not apply
        (dropless for a dense model, or for expert choice, which has no dropless form)."""
        s = self.settings(name)
        if variant == "recorded":
            return s.policy, s.kernel_mode
        if variant == "batch_invariant":
            return s.policy, "batch_invariant"
        if variant != "dropless":
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if s.policy is None or s.policy.priority == "expert_choice":
            return None
        return s.policy.replace(capacity_mode="dropless", fixed_capacity=None), s.kernel_mode

    def as_recorded(self, name: str, variant: str) -> bool:
        """Whether `variant` of run `name` is its recorded setting (a dropless or invariant condition)."""
        s = self.settings(name)
        return self.variant_settings(name, variant) == (s.policy, s.kernel_mode)

    # -- generation -----------------------------------------------------------------------------

    def reproduction(self, name: str) -> Reproduction:
        """Rerun run `name` as recorded and compare every dataset with the trace: bitwise, the same
        decisions with float drift, or not reproduced (`traces.analysis.reproduction`)."""
        if name not in self._reproduction:
            s = self.settings(name)
            run = self.trace.run(name)
            topk = run.logits_form == "topk"
            recorder = Recorder("topk", run.logits.k) if topk else Recorder()  # as the trace holds them
            result = self._generate(s, s.policy, s.kernel_mode, recorder=recorder)
            self._tokens[(name, "recorded")] = result.tokens
            reproduction = compare_run(run, recorder.arrays(result))
            self._reproduction[name] = reproduction
            log.info("run %s %s", name, reproduction.describe())
        return self._reproduction[name]

    def reproductions(self) -> list[Reproduction]:
        """Every run rerun as recorded so far, compared with its recording."""
        return [self._reproduction[name] for name in sorted(self._reproduction)]

    def levels(self) -> dict[str, str]:
        """Run -> reproduction level of every run rerun as recorded so far."""
        return {name: r.level for name, r in sorted(self._reproduction.items())}

    def not_reproduced(self) -> list[str]:
        """Runs rerun as recorded so far whose rerun took another decision than the recording."""
        return sorted(name for name, r in self._reproduction.items() if not r.reproduced)

    def tokens(self, name: str, variant: str) -> list[list[int]] | None:
        """Every row's tokens (prompt + new) of run `name` rerun under `variant`; None when it does not
        apply. A variant whose settings equal the recorded ones reuses the recorded rerun."""
        key = (name, variant)
        if key in self._tokens:
            return self._tokens[key]
        settings = self.variant_settings(name, variant)
        if settings is None:
            return None
        if self.as_recorded(name, variant):
            self.reproduction(name)
            tokens = self._tokens[(name, "recorded")]
        else:
            tokens = self._generate(self.settings(name), *settings).tokens
        self._tokens[key] = tokens
        return tokens

    def reference_routing(self, name: str, row: int) -> ReplayRouting:
        """The recorded routing of row `row` of run `name`, to replay onto another row."""
        return ReplayRouting.from_run_arrays(self.trace.run(name), row)

    def trial(self, name: str, row: int, target: list[int], *, replay: dict | None = None,
              intervention=None, full: bool = False, resume: GenerationState | None = None) -> list[int]:
        """Row `row`'s tokens when run `name` is rerun as recorded with `replay` ({row: ReplayRouting})
        and/or `intervention`. Unless `full`, the generation stops as soon as the row's tokens leave
        `target` or reach its length: a sufficiency test needs no more (`trials` counts these reruns).
        `resume` starts it from a state of a rerun whose changes agree with these before that state."""
        s = self.settings(name)
        self.trials += 1
        until = None if full else _watch(row, list(target))
        return self._generate(s, s.policy, s.kernel_mode, replay=replay, intervention=intervention,
                              until=until, resume=resume).tokens[row]

    def states(self, name: str, steps: list[int]) -> dict[int, GenerationState]:
        """Run `name` rerun as recorded, its generation's state at the start of each of `steps` (none
        when the model's cache keeps no states): a trial whose changes begin at or after a step
        resumes from it instead of rerunning the batch from the prefill."""
        if not steps:
            return {}
        s = self.settings(name)
        snapshots: dict[int, GenerationState | None] = {step: None for step in steps}
        ran = [0]

        def enough(rows) -> bool:   # after the last step asked for
            ran[0] += 1
            return ran[0] > max(steps)

        self._generate(s, s.policy, s.kernel_mode, snapshots=snapshots, until=enough)
        return {step: state for step, state in snapshots.items() if state is not None}

    def routed(self, name: str, row: int, position: int, *, replay: dict | None = None, intervention=None,
               resume: tuple[GenerationState, ReplayRouting, int] | None = None
               ) -> tuple[list[int], ReplayRouting, GenerationState | None]:
        """Row `row`'s tokens and routing when run `name` is rerun to its end with `replay` and/or
        `intervention` (recorded without logits; counted as a trial), and the generation's state at the
        start of the step that routes the row's `position` in the recorded schedule (None when the
        recording has no such step or the model's cache keeps no states): trials that change only that
        position or later resume from it. `resume` (state, that rerun's routing, the position its
        state was taken at) starts from an earlier such state: the routing before that position is
        the earlier rerun's."""
        s = self.settings(name)
        self.trials += 1
        steps = np.asarray(self.trace.run(name).step[row])
        step = int(steps[position]) if 0 <= position < len(steps) else -1
        recorder, snapshots = Recorder(None), ({step: None} if step >= 0 else None)
        result = self._generate(s, s.policy, s.kernel_mode, recorder=recorder, replay=replay,
                                intervention=intervention, snapshots=snapshots,
                                resume=resume[0] if resume else None)
        routing = ReplayRouting.from_run_arrays(recorder.arrays(result), row)
        if resume is not None:
            _, before, since = resume
            routing = _joined(before, routing, since)
        state = snapshots.get(step) if snapshots else None
        return result.tokens[row], routing, state

    def _generate(self, s: RunSettings, policy, kernel_mode: str, recorder=None, replay=None,
                  intervention=None, until=None, snapshots=None, resume=None):
        self.generations += 1
        log.debug("rerun %s (%s, %s)", s.name, kernel_mode, "replay" if replay else "no replay")
        try:
            return generate(self.model, s.prompts, s.max_new_tokens, policy, kernel_mode, recorder=recorder,
                            replay=replay, intervention=intervention, arrivals=s.arrivals, until=until,
                            snapshots=snapshots, resume=resume)
        except ValueError as exc:
            raise RerunError(f"run {s.name}: cannot be rerun with this model ({exc})") from None
