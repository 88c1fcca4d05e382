"""The proven cause of a divergent pair: the causal map's strongest cells tried alone, else a minimal set.

The analysis names the *first difference* of a pair (`traces.analysis.explain_pair`: the first
routing decision that differs, walking positions then layers). That is an observation, not a cause.
How much each differing cell moves the split is the causal map's business
(`lab.counterfactual.causal_map`: graded effects against position-matched nulls). The *proven
cause* here is the binary check beside it: the event, or the smallest set of events, whose
intervention removes the split: run B (or A) rerun as recorded with only that changed gives the
other row's tokens through the first differing token t* (*sufficient*, judged through the first
split only).

1. Candidate events: every (layer, position) before t* where the two rows' routing decisions differ
   (chosen experts, or the kept set of the same experts). At each, every intervention the generation
   loop knows (`model.intervention`): keeping a candidate the run dropped (in the run
   that dropped it), giving its group the other run's larger capacity, withdrawing the rows that took
   the slots ahead of it, giving the row the reference's router logits, and replaying the reference's
   routing of that one (layer, position) onto row B. A kept-set change is a capacity event; a change
   of the chosen experts (or the router logits) is a change of the router's input, which is upstream
   numeric when no decision differed before it (causal order: earlier positions, lower layers) and
   otherwise carries the kinds of those earlier decisions.
2. The events at the map's strongest cells of B (at most `MAX_MAP_CELLS`, strongest first, the
   narrowest intervention first at each) are tried alone; the first that suffices is the proof.
3. When none suffices: delta debugging (ddmin; Zeller and Hildebrandt 2002) over the set of all
   differing (layer, position) cells of row B in time order, replayed from the reference, gives a
   1-minimal sufficient set: together they restore the tokens, and leaving out any one of them does
   not (ddmin tries earlier chunks first, so it prefers earlier cells).
4. Necessity: row B replays the reference's routing everywhere except at the proven event(s); if the
   tokens still split, the event is necessary as well as sufficient.
5. Reach: the proven intervention rerun to the end; how many new tokens of the completion then
   agree with the other row's, from the first on (the whole completion, or only the first few).

Every trial stops as soon as the watched row leaves the tokens it must reproduce (`Reruns.trial`).
Trials are not stacked as rows of one batch: under native kernels a batch of stacked copies rounds
every row differently from the recorded batch, and under capacity grouped per batch the copies would
compete for the same slots; either changes the very computation studied
(`bench/intervention_batching.py` measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lab.counterfactual.reruns import Reruns, replay_cells
from model.intervention import Intervention, InterventionSet
from traces.analysis import Verdict, row_trace
from traces.analysis.displacement import displacement
from traces.analysis.proof import CAPACITY_KIND, NUMERIC_KIND, EventKind, ProofKind, set_kind
from traces.analysis.rows import layer_routing
from traces.records import KernelMode

#: Cells of the causal map whose events are tried alone, at most, strongest first.
MAX_MAP_CELLS = 3

#: Trials delta debugging may spend on one pair before it gives up (the pair stays unconfirmed).
MAX_DDMIN_TRIALS = 160


#: Generation states kept per run and pair for the scan's trials to resume from (at most; spread over
#: the steps of the candidate events).
MAX_STATES = 24

#: Order of the interventions at one (layer, position): the narrowest change first (the declaration's).
_HOW_ORDER = tuple(EventKind)


@dataclass(frozen=True)
class Event:
    """One candidate event: `how` it is changed, in which run and row, and where."""

    how: EventKind            # an Intervention's kind, or CELL (a replay of the other row's cell)
    run: str                  # the run rerun with the change
    row: int
    layer: int
    position: int
    step: int                 # forward step that routed the token in that run
    kind: ProofKind           # CAPACITY_KIND or NUMERIC_KIND
    intervention: Intervention | None = None

    def describe(self, v: Verdict) -> str:
        new = self.position - v.prompt_len
        if self.intervention is not None:
            return f"{self.intervention.describe(new if new >= 0 else None)} of run {self.run}"
        where = f"new token {new}" if new >= 0 else f"position {self.position}"
        return (f"replaying run {v.ref_run}'s routing at {where}, layer {self.layer} onto row {self.row} of "
                f"run {self.run}")


@dataclass(frozen=True)
class Proof:
    """What the search proved for one pair (events empty: nothing found, or nothing searched)."""

    events: tuple[Event, ...] = ()
    kind: ProofKind | str = ""      # '' none
    reruns: int = 0                 # trials spent on this pair (scan, ddmin, necessity, reach)
    necessary: bool | None = None   # the split stays with the reference's routing everywhere else
    reach: int = -1                 # new tokens agreeing with the other row from the first on
    n_new: int = -1                 # of how many new tokens
    keep: bool | None = None        # outcomes at the first difference, when the scan reached them
    withdraw: bool | None = None
    logits: bool | None = None

    @property
    def scope(self) -> str:
        """candidate, token, cell (one event), set (several), '' none."""
        if not self.events:
            return ""
        if len(self.events) > 1:
            return "set"
        how = self.events[0].how
        return {EventKind.LOGITS: "token", EventKind.CELL: "cell"}.get(how, "candidate")

    @property
    def lead(self) -> Event | None:
        """The proof's first event in (position, layer) order: the one the views point at."""
        return min(self.events, key=lambda e: (e.position, e.layer)) if self.events else None

    def words(self, v: Verdict) -> str:
        """The intervention(s) in words, joined by '; '."""
        return "; ".join(e.describe(v) for e in self.events)


def prove(v: Verdict, reruns: Reruns, cells: Sequence[tuple[int, int]] = (), resume: bool = True) -> Proof:
    """The proven cause of divergent pair `v`, whose whole-routing replay restores the reference's
    tokens (the caller checked it): the events at the causal map's strongest cells of B (`cells`,
    (layer, position), strongest first; at most `MAX_MAP_CELLS`) tried alone in that order, the first
    sufficient one the proof; else ddmin over every differing cell. Then necessity and reach. Without
    `resume` trials rerun their batch from the prefill (the same results, slower: for measuring)."""
    pair = _Pair(v, reruns, resume)
    start = reruns.trials
    events = pair.events()
    where = {c: i for i, c in enumerate(list(dict.fromkeys(cells))[:MAX_MAP_CELLS])}
    tried = sorted((e for e in events if (e.layer, e.position) in where),
                   key=lambda e: (where[(e.layer, e.position)], _HOW_ORDER.index(e.how)))
    outcome: dict[Event, bool] = {}
    for event in tried:
        outcome[event] = pair.sufficient((event,))
        if outcome[event]:
            break
    found: tuple[Event, ...] = tuple(e for e in tried if outcome.get(e))[:1]
    if not found:
        differing = [e for e in events if e.how == EventKind.CELL]
        found = tuple(ddmin(differing, lambda subset: pair.sufficient(tuple(subset)), MAX_DDMIN_TRIALS) or ())
    named = {e.how: ok for e, ok in outcome.items() if (e.position, e.layer) == (v.position, v.layer)}
    keeps = [named[how] for how in (EventKind.KEEP, EventKind.CAPACITY) if how in named]
    keep = any(keeps) if keeps else None   # keeping the candidate, or giving its group the capacity
    if not found:
        return Proof(reruns=reruns.trials - start, keep=keep, withdraw=named.get(EventKind.WITHDRAW),
                     logits=named.get(EventKind.LOGITS))
    necessary = pair.necessary(found)
    reach, n_new = pair.reach(found)
    return Proof(found, set_kind([e.kind for e in found]), reruns.trials - start, necessary, reach, n_new,
                 keep, named.get(EventKind.WITHDRAW), named.get(EventKind.LOGITS))


def _time(e: Event) -> tuple[int, int, int]:
    """Causal order of events: position, then layer, then the narrowest intervention first."""
    return e.position, e.layer, _HOW_ORDER.index(e.how)


def ddmin(items: Sequence, test: Callable[[Sequence], bool], budget: int) -> list | None:
    """A 1-minimal subset of `items` for which `test` holds (delta debugging), None when `test(items)`
    fails or more than `budget` tests would be needed. Subsets keep the items' order."""
    seen: dict[tuple, bool] = {}

    def holds(subset: list) -> bool:
        key = tuple(subset)
        if key not in seen:
            if len(seen) >= budget:
                raise _Budget
            seen[key] = test(subset)
        return seen[key]

    current, n = list(items), 2
    try:
        if not current or not holds(current):
            return None
        while len(current) >= 2:
            chunks = [current[i * len(current) // n:(i + 1) * len(current) // n] for i in range(n)]
            chunks = [c for c in chunks if c]
            reduced = next((c for c in chunks if holds(c)), None)
            if reduced is not None:
                current, n = reduced, 2
                continue
            rests = [[x for x in current if x not in c] for c in chunks] if n > 2 else []
            rest = next((r for r in rests if r and holds(r)), None)
            if rest is not None:
                current, n = rest, max(n - 1, 2)
                continue
            if n >= len(current):
                break
            n = min(len(current), 2 * n)
    except _Budget:
        return None
    return current


class _Budget(Exception):
    """ddmin spent its budget of tests."""


class _Pair:
    """The reruns of one divergent pair: A = reference row, B = divergent row, compared through t*."""

    def __init__(self, v: Verdict, reruns: Reruns, resume: bool = True):
        self.v, self.reruns, self.resume = v, reruns, resume
        trace = reruns.trace
        self.a = row_trace(trace.run(v.ref_run), v.ref_row)
        self.b = row_trace(trace.run(v.run), v.row)
        self.tokens = {v.ref_run: self.a.tokens.astype(int).tolist(),
                       v.run: self.b.tokens.astype(int).tolist()}
        self.through = {name: tokens[: v.t_star + 1] for name, tokens in self.tokens.items()}
        self.reference = reruns.reference_routing(v.ref_run, v.ref_row)
        self.native = KernelMode.NATIVE in (reruns.settings(v.run).kernel_mode,
                                          reruns.settings(v.ref_run).kernel_mode)
        self._layers: dict[tuple[str, int], object] = {}
        self._steps: dict[str, set[int]] = {}        # run -> forward steps of its candidate events
        self._states: dict[str, dict] = {}           # run -> step -> GenerationState

    # -- candidate events ---------------------------------------------------------------------------

    def events(self) -> list[Event]:
        """Every candidate event before t*, in time order (`_time`)."""
        a, b, v = self.a, self.b, self.v
        L = a.expert.shape[0]
        out: list[Event] = []
        earlier: set[ProofKind] = set()   # kinds of the differing cells met so far, in causal order
        for p in range(min(v.t_star, a.length, b.length)):
            if a.step[p] < 0 or b.step[p] < 0:
                continue
            for layer in range(L):
                events = self._events_at(layer, p, earlier)
                earlier.update(e.kind for e in events)
                out += events
        for e in out:
            self._steps.setdefault(e.run, set()).add(e.step)
        return sorted(out, key=_time)

    def _resume_at(self, run: str, step: int):
        """The latest kept state of `run` rerun as recorded at or before `step` (None: from the prefill).
        The states are taken once per run, at the steps of its candidate events (`MAX_STATES` at most)."""
        if not self.resume or step <= 0:
            return None
        if run not in self._states:
            steps = sorted(s for s in self._steps.get(run, ()) if s > 0)
            if len(steps) > MAX_STATES:
                steps = [steps[i * len(steps) // MAX_STATES] for i in range(MAX_STATES)]
            self._states[run] = self.reruns.states(run, steps)
        kept = [s for s in self._states[run] if s <= step]
        return self._states[run][max(kept)] if kept else None

    def _router_kind(self, earlier: set[ProofKind]) -> ProofKind:
        """The kind of a change of the router's choice: the router's input differs. With no decision
        differing before it (in causal order), only the native kernels' numerics can have changed that
        input (upstream numeric); after earlier differing decisions, it carries their kinds (under
        batch-invariant kernels those can only be capacity)."""
        if earlier:
            return set_kind(earlier)
        return NUMERIC_KIND if self.native else CAPACITY_KIND

    def _events_at(self, layer: int, p: int, earlier: set[str]) -> list[Event]:
        a, b, v = self.a, self.b, self.v
        ea, eb = a.expert[layer, p], b.expert[layer, p]
        ka, kb = a.kept[layer, p], b.kept[layer, p]
        same_experts = np.array_equal(ea, eb)
        if same_experts and np.array_equal(ka, kb):
            return []
        step_b = int(b.step[p])
        cell = dict(layer=layer, position=p)
        if not same_experts:
            kind = self._router_kind(earlier)
            events = [Event(EventKind.CELL, v.run, v.row, step=step_b, kind=kind, **cell)]
            if not np.array_equal(a.router_logits[layer, p], b.router_logits[layer, p]):
                iv = Intervention(EventKind.LOGITS, step=step_b, layer=layer, row=v.row, position=p,
                                  logits=tuple(float(x) for x in a.router_logits[layer, p]))
                events.append(Event(EventKind.LOGITS, v.run, v.row, step=step_b, kind=kind, intervention=iv,
                                    **cell))
            return events
        events = [Event(EventKind.CELL, v.run, v.row, step=step_b, kind=CAPACITY_KIND, **cell)]
        for rank in np.flatnonzero(ka != kb).tolist():
            in_reference = not ka[rank]   # A dropped it: intervene in A's run
            events += self._candidate_events(layer, p, rank, in_reference)
        return events

    def _candidate_events(self, layer: int, p: int, rank: int, in_reference: bool) -> list[Event]:
        v = self.v
        run, row = (v.ref_run, v.ref_row) if in_reference else (v.run, v.row)
        other = v.run if in_reference else v.ref_run
        d = displacement(self._layer(run, layer), row, p, rank)
        if d.step < 0:
            return []
        base = dict(step=d.step, layer=layer, row=row, position=p, rank=rank, expert=d.expert, group=d.group)
        where = dict(run=run, row=row, layer=layer, position=p, step=d.step, kind=CAPACITY_KIND)
        events = [Event(EventKind.KEEP, intervention=Intervention(EventKind.KEEP, **base), **where)]
        other_row = v.row if in_reference else v.ref_row
        counterpart = self._capacity(other, other_row, layer, p)
        if counterpart > d.capacity >= 0:
            iv = Intervention(EventKind.CAPACITY, **base, capacity=counterpart)
            events.append(Event(EventKind.CAPACITY, intervention=iv, **where))
        rows = tuple(sorted(set(d.ahead_rows) - {row}))
        if rows:
            iv = Intervention(EventKind.WITHDRAW, **base, rows=rows)
            events.append(Event(EventKind.WITHDRAW, intervention=iv, **where))
        return events

    def _layer(self, run: str, layer: int):
        key = (run, layer)
        if key not in self._layers:
            self._layers[key] = layer_routing(self.reruns.trace.run(run), layer)
        return self._layers[key]

    def _capacity(self, run: str, row: int, layer: int, p: int) -> int:
        """The capacity of the group token p of (run, row) had at `layer`, -1 unknown."""
        lr = self._layer(run, layer)
        s, g = int(lr.step[row, p]), int(lr.group[row, p])
        S, G = lr.capacity.shape
        return int(lr.capacity[s, g]) if 0 <= s < S and 0 <= g < G else -1

    # -- trials -------------------------------------------------------------------------------------

    def _other(self, run: str) -> str:
        return self.v.ref_run if run == self.v.run else self.v.run

    def _changes(self, events: tuple[Event, ...], later: list[tuple[int, int]] = ()):
        """(replay, intervention) of the events (all in one run and row) plus the `later` cells, replayed
        from the other row's recorded routing."""
        first = events[0]
        cells = [(e.layer, e.position) for e in events if e.how == EventKind.CELL] + list(later)
        ivs = tuple(e.intervention for e in events if e.intervention is not None)
        replay = {first.row: replay_cells(self._source(first.run), cells)} if cells else None
        intervention = ivs[0] if len(ivs) == 1 else InterventionSet(ivs) if ivs else None
        return replay, intervention

    def _source(self, run: str):
        """The routing a row of `run` replays: the other row's, as recorded."""
        if run == self.v.run:
            return self.reference
        return self.reruns.reference_routing(self.v.run, self.v.row)

    def _run(self, events: tuple[Event, ...], full: bool) -> tuple[str, list[int]]:
        """(run rerun, its watched row's tokens) with the events applied (all in one run and row),
        resumed from the run's state at the first event's step."""
        run, row = events[0].run, events[0].row
        replay, intervention = self._changes(events)
        tokens = self.reruns.trial(run, row, self.through[self._other(run)], replay=replay,
                                   intervention=intervention, full=full,
                                   resume=self._resume_at(run, min(e.step for e in events)))
        return run, tokens

    def sufficient(self, events: tuple[Event, ...]) -> bool:
        """Whether the events, applied together, give the watched row the other row's tokens through t*."""
        run, tokens = self._run(events, full=False)
        target = self.through[self._other(run)]
        return list(tokens[: len(target)]) == target

    def necessary(self, events: tuple[Event, ...]) -> bool:
        """Whether row B, given the reference's routing everywhere except at the events' (layer, position)
        cells, still splits from the reference through t*."""
        v = self.v
        cells = [(e.layer, e.position) for e in events]
        replay = {v.row: replay_cells(self.reference, cells, outside=True)}
        target = self.through[v.ref_run]
        tokens = self.reruns.trial(v.run, v.row, target, replay=replay)
        return list(tokens[: len(target)]) != target

    def reach(self, events: tuple[Event, ...]) -> tuple[int, int]:
        """(new tokens agreeing with the other row from the first on, the other row's new tokens) when
        the events' rerun runs to its end."""
        run, tokens = self._run(events, full=True)
        P = self.v.prompt_len
        other = self.tokens[self._other(run)][P:]
        return _agreement(tokens[P:], other), len(other)


def _agreement(mine, other) -> int:
    """How many tokens agree from the first on."""
    agree = 0
    for x, y in zip(mine, other, strict=False):
        if x != y:
            break
        agree += 1
    return agree


def _differing(routing, source, start: int, end: int) -> list[tuple[int, int]]:
    """(layer, position) cells in [start, end), in time order, where `routing` (a rerun's row) and
    `source` (the other row, recorded) differ in their experts or kept sets."""
    a_expert, a_kept = np.asarray(routing.expert), np.asarray(routing.kept)
    b_expert, b_kept = np.asarray(source.expert), np.asarray(source.kept)
    L = min(a_expert.shape[0], b_expert.shape[0])
    end = min(end, a_expert.shape[1], b_expert.shape[1])
    cells = []
    for p in range(max(start, 0), end):
        for layer in range(L):
            if b_expert[layer, p, 0] < 0:
                continue
            if not (np.array_equal(a_expert[layer, p], b_expert[layer, p])
                    and np.array_equal(a_kept[layer, p], b_kept[layer, p])):
                cells.append((layer, p))
    return cells

