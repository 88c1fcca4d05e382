"""The proven cause of a divergent pair: a complete scan of single events, then a minimal set of events.

The analysis names the *first difference* of a pair (`traces.analysis.explain_pair`: the first
routing decision that differs, walking positions then layers). That is an observation, not a cause:
later decisions of the same batch differ as well, and any of them, or several together, may be what
splits the tokens. The *proven cause* is the event, or the smallest set of events, whose intervention
removes the split: run B (or A) rerun as recorded with only that changed gives the other row's tokens
through the first differing token t* (*sufficient*, judged through the first split only).

1. Candidate events: every (layer, position) before t* where the two rows' routing decisions differ
   (chosen experts, or the kept set of the same experts). At each, every intervention the generation
   loop knows (`model.intervention`): keeping a candidate the run dropped (in the run
   that dropped it), giving its group the other run's larger capacity, withdrawing the rows that took
   the slots ahead of it, giving the row the reference's router logits, and replaying the reference's
   routing of that one (layer, position) onto row B. A kept-set change is a capacity event; a change
   of the chosen experts (or the router logits) is a change of the router's input, which is upstream
   numeric when no decision differed before it (causal order: earlier positions, lower layers) and
   otherwise carries the kinds of those earlier decisions.
2. Complete scan: every candidate event is tried alone, in time order (position, then layer, then the
   narrowest intervention first), with no early stop, up to `MAX_SCAN_TRIALS` events (a split late in
   a long completion has a thousand candidates, each trial running to t*). The *root event* is the
   earliest sufficient one (exact within the budget too: the scan goes in time order); every
   sufficient event scanned is kept (the *alternatives*: "1 of N events that each suffice"), and the
   latest of them, often at t*-1, is the *proximate trigger*.
3. When none suffices: delta debugging (ddmin; Zeller and Hildebrandt 2002) over the set of all
   differing (layer, position) cells of row B in time order, replayed from the reference, gives a
   1-minimal sufficient set: together they restore the tokens, and leaving out any one of them does
   not (ddmin tries earlier chunks first, so it prefers earlier cells).
4. Specificity (a placebo): the root event's row is given `PLACEBO_TRIALS` random expert sets (seeded,
   neither its own nor the other row's) at the root's (layer, position); the share of those that also
   restore the tokens says whether the cell is a near-tie any change flips (`WEAK_PLACEBO`) or the
   event is specific.
5. Necessity: row B replays the reference's routing everywhere except at the proven event(s); if the
   tokens still split, the event is necessary as well as sufficient.
6. Reach: the proven intervention rerun to the end; how many new tokens of the completion then
   agree with the other row's, from the first on (the whole completion, or only the first few).
7. The chain: while the changed run still splits from the other later on (at position t2), the
   earliest (layer, position) between the previous split and t2 where its routing still differs
   from the other row's and whose replay, added to the fixes so far, restores the tokens through t2
   is the next link (when no single cell does, a 1-minimal set, by delta debugging, of those cells
   or else of every differing cell before t2); until the whole completion agrees, no set is found
   within the budget, or `MAX_CHAIN_LINKS` / `MAX_CHAIN_TRIALS` are spent. Each link stores its
   cell(s) and the reach after it.

Every trial stops as soon as the watched row leaves the tokens it must reproduce (`Reruns.trial`).
Trials are not stacked as rows of one batch: under native kernels a batch of stacked copies rounds
every row differently from the recorded batch, and under capacity grouped per batch the copies would
compete for the same slots; either changes the very computation studied
(`bench/intervention_batching.py` measures it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lab.counterfactual.reruns import Reruns, replay_cells
from model.intervention import Intervention, InterventionSet
from model.replay import ReplayRouting
from traces.analysis import Verdict, row_trace
from traces.analysis.displacement import displacement
from traces.analysis.proof import CAPACITY_KIND, NUMERIC_KIND, PLACEBO_TRIALS, EventKind, ProofKind, set_kind
from traces.analysis.rows import layer_routing
from traces.records import KernelMode

#: Candidate events the scan tries alone, at most, in time order (the rest are counted, not tried).
MAX_SCAN_TRIALS = 400

#: Trials delta debugging may spend on one pair before it gives up (the pair stays unconfirmed).
MAX_DDMIN_TRIALS = 160

#: Links the chain may add after the proof, and trials it may spend on one pair (delta debugging of
#: one link at most `MAX_LINK_DDMIN_TRIALS` of them).
MAX_CHAIN_LINKS = 12
MAX_CHAIN_TRIALS = 160
MAX_LINK_DDMIN_TRIALS = 60

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
class Link:
    """One link of the chain: the cell(s) replayed from the other row (one cell, or a 1-minimal set of
    the cells between two splits when no single one restores), and the reach after adding them."""

    cells: tuple[tuple[int, int], ...]   # (layer, position)
    reach: int


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

    alternatives: tuple[Event, ...] = ()   # every single event that suffices alone, in time order
    candidates: int = 0             # candidate events scanned, the earliest first
    candidates_all: int = 0         # candidate events before t* (more than scanned past the budget)
    placebo: float | None = None    # share of random routings at the root's cell that also restore
    chain: tuple[Link, ...] = ()    # the later cells that, added one by one, restore more of the completion
    chain_end: str = ""             # why the chain ended: whole, no_single_cell, budget ('' no chain)

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


def prove(v: Verdict, reruns: Reruns, placebo_seed: int = 0, resume: bool = True) -> Proof:
    """The proven cause of divergent pair `v`, whose whole-routing replay restores the reference's
    tokens (the caller checked it): complete scan in time order (the root event and its
    alternatives), else ddmin; then the placebo, necessity, reach and chain. Without `resume` every
    trial of the chain reruns its batch from the prefill (the same results, slower: for measuring)."""
    pair = _Pair(v, reruns, resume)
    start = reruns.trials
    events = pair.events()
    outcome = {event: pair.sufficient((event,)) for event in events[:MAX_SCAN_TRIALS]}
    alternatives = tuple(e for e in events if outcome.get(e))
    found: tuple[Event, ...] = alternatives[:1]
    if not found:
        cells = [e for e in events if e.how == EventKind.CELL]
        found = tuple(ddmin(cells, lambda subset: pair.sufficient(tuple(subset)), MAX_DDMIN_TRIALS) or ())
    named = {e.how: ok for e, ok in outcome.items() if (e.position, e.layer) == (v.position, v.layer)}
    keeps = [named[how] for how in (EventKind.KEEP, EventKind.CAPACITY) if how in named]
    keep = any(keeps) if keeps else None   # keeping the candidate, or giving its group the capacity
    if not found:
        return Proof(reruns=reruns.trials - start, keep=keep, withdraw=named.get(EventKind.WITHDRAW),
                     logits=named.get(EventKind.LOGITS), candidates=len(outcome), candidates_all=len(events))
    placebo = pair.placebo(min(found, key=_time), PLACEBO_TRIALS, placebo_seed) if len(found) == 1 else None
    necessary = pair.necessary(found)
    reach, n_new = pair.reach(found)
    chain, end = pair.chain(found, reach, n_new)
    return Proof(found, set_kind([e.kind for e in found]), reruns.trials - start, necessary, reach, n_new,
                 keep, named.get(EventKind.WITHDRAW), named.get(EventKind.LOGITS), alternatives, len(outcome),
                 len(events), placebo, chain, end)


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

    def placebo(self, event: Event, trials: int, seed: int) -> float | None:
        """Share of `trials` random expert sets at `event`'s (layer, position), given to its row in its run
        (seeded; never the row's own set nor the other row's), that also restore the other row's
        tokens through t*. None when the cell admits no such set."""
        run, row, layer, p = event.run, event.row, event.layer, event.position
        own = self.reruns.reference_routing(run, row)
        other = self.a if run == self.v.run else self.b
        E = self.reruns.model.config.n_experts
        K = own.expert.shape[-1]
        taken = {frozenset(np.asarray(own.expert[layer, p]).tolist()),
                 frozenset(np.asarray(other.expert[layer, p]).tolist())}
        rng = np.random.default_rng([seed, layer, p])
        target = self.through[self._other(run)]
        restored = tried = 0
        for _ in range(trials * 20):
            if tried == trials:
                break
            experts = rng.choice(E, size=K, replace=False)
            if frozenset(experts.tolist()) in taken:
                continue
            tried += 1
            expert = np.full(np.asarray(own.expert).shape, -1, dtype=np.asarray(own.expert).dtype)
            expert[layer, p] = experts
            kept = np.array(own.kept, copy=True)
            kept[layer, p] = True
            replay = {row: ReplayRouting(expert, kept, np.asarray(own.gate))}
            tokens = self.reruns.trial(run, row, target, replay=replay,
                                       resume=self._resume_at(run, event.step))
            restored += list(tokens[: len(target)]) == target
        return restored / tried if tried else None

    def necessary(self, events: tuple[Event, ...]) -> bool:
        """Whether row B, given the reference's routing everywhere except at the events' (layer, position)
        cells, still splits from the reference through t*."""
        v = self.v
        cells = [(e.layer, e.position) for e in events]
        replay = {v.row: replay_cells(self.reference, cells, outside=True)}
        target = self.through[v.ref_run]
        tokens = self.reruns.trial(v.run, v.row, target, replay=replay)
        return list(tokens[: len(target)]) != target

    def chain(self, events: tuple[Event, ...], reach: int, n_new: int) -> tuple[tuple[Link, ...], str]:
        """The links after the proven events that restore more and more of the completion, and why the
        chain ended (see the module's step 7)."""
        run, row = events[0].run, events[0].row
        other = self.tokens[self._other(run)]
        source = self._source(run)
        P = self.v.prompt_len
        split, links, cells = self.v.t_star, [], []
        start = self.reruns.trials
        replay, intervention = self._changes(events)
        _, routing, state = self.reruns.routed(run, row, split, replay=replay, intervention=intervention)
        state = state if self.resume else None
        while reach < n_new:
            if len(links) >= MAX_CHAIN_LINKS or self.reruns.trials - start >= MAX_CHAIN_TRIALS:
                return tuple(links), "budget"
            t2 = P + reach
            target = other[: t2 + 1]
            restores = functools.partial(self._restores, events, list(cells), target, state)
            window = _differing(routing, source, split, t2)
            found = None
            for cell in window:
                if self.reruns.trials - start >= MAX_CHAIN_TRIALS:
                    return tuple(links), "budget"
                if restores([cell]):
                    found = [cell]
                    break
            if found is None:   # a set: the cells between the splits, else every differing cell before t2
                anywhere = functools.partial(self._restores, events, list(cells), target, None)
                wide = _differing(routing, source, 0, t2)
                for cells_before, test in ((window, restores), (wide, anywhere)):
                    budget = min(MAX_LINK_DDMIN_TRIALS, MAX_CHAIN_TRIALS - (self.reruns.trials - start))
                    found = ddmin(cells_before, test, budget) if budget > 0 and cells_before else None
                    if found:
                        break
            if not found:
                return tuple(links), "no_cells"
            cells += found
            # The rerun with the new link resumes where its cells begin to act, when they lie after the
            # last split; it gives the reach, the routing to search next and the state at the new split.
            later = state is not None and all(p >= split for _, p in found)
            replay, intervention = self._changes(events, cells)
            resume = (state, routing, split) if later else None
            tokens, routing, state = self.reruns.routed(run, row, t2, replay=replay,
                                                        intervention=intervention, resume=resume)
            state = state if self.resume else None
            reach = _agreement(tokens[P:], other[P:])
            links.append(Link(tuple(found), reach))
            split = t2
        return tuple(links), "whole"

    def _restores(self, events: tuple[Event, ...], cells: list, target: list[int], state,
                  added: list) -> bool:
        """Whether the events plus the `cells` and `added` cells replayed give `target` (tokens through a
        split); resumed from `state` (a rerun with the events and `cells`, before the added cells)."""
        replay, intervention = self._changes(events, cells + list(added))
        tokens = self.reruns.trial(events[0].run, events[0].row, target, replay=replay,
                                   intervention=intervention, resume=state)
        return list(tokens[: len(target)]) == target

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

