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
2. Complete scan: every candidate event is tried alone, ordered by a cheap prior (how much of the
   row's gate mass the decision moves there, largest first), stopping at the first sufficient one.
3. When none suffices: delta debugging (ddmin; Zeller and Hildebrandt 2002) over the set of all
   differing (layer, position) cells of row B, replayed from the reference, gives a 1-minimal
   sufficient set: together they restore the tokens, and leaving out any one of them does not.
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
from traces.analysis.proof import CAPACITY_KIND, NUMERIC_KIND, set_kind
from traces.analysis.rows import layer_routing

#: Trials delta debugging may spend on one pair before it gives up (the pair stays unconfirmed).
MAX_DDMIN_TRIALS = 160

#: Order of the interventions at one (layer, position): the narrowest change first.
_HOW_ORDER = ("keep", "capacity", "withdraw", "logits", "cell")


@dataclass(frozen=True)
class Event:
    """One candidate event: `how` it is changed, in which run and row, and where."""

    how: str                  # keep, capacity, withdraw, logits (an Intervention) or cell (replay)
    run: str                  # the run rerun with the change
    row: int
    layer: int
    position: int
    step: int                 # forward step that routed the token in that run
    kind: str                 # CAPACITY_KIND or NUMERIC_KIND
    prior: float              # gate mass the decision moves at this (layer, position)
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
    kind: str = ""                  # traces.analysis.proof.PROOF_KINDS, '' none
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
        return {"logits": "token", "cell": "cell"}.get(how, "candidate")

    @property
    def lead(self) -> Event | None:
        """The proof's first event in (position, layer) order: the one the views point at."""
        return min(self.events, key=lambda e: (e.position, e.layer)) if self.events else None

    def words(self, v: Verdict) -> str:
        """The intervention(s) in words, joined by '; '."""
        return "; ".join(e.describe(v) for e in self.events)


def prove(v: Verdict, reruns: Reruns) -> Proof:
    """The proven cause of divergent pair `v`, whose whole-routing replay restores the reference's
    tokens (the caller checked it): complete scan, then ddmin, then necessity and reach."""
    pair = _Pair(v, reruns)
    start = reruns.trials
    events = pair.events()
    outcome: dict[Event, bool] = {}
    found: tuple[Event, ...] = ()
    for event in events:
        outcome[event] = pair.sufficient((event,))
        if outcome[event]:
            found = (event,)
            break
    if not found:
        cells = [e for e in events if e.how == "cell"]
        found = ddmin(cells, lambda subset: pair.sufficient(tuple(subset)), MAX_DDMIN_TRIALS) or ()
    named = {e.how: ok for e, ok in outcome.items() if (e.position, e.layer) == (v.position, v.layer)}
    keeps = [named[how] for how in ("keep", "capacity") if how in named]
    keep = any(keeps) if keeps else None   # keeping the candidate, or giving its group the capacity
    if not found:
        return Proof(reruns=reruns.trials - start, keep=keep, withdraw=named.get("withdraw"),
                     logits=named.get("logits"))
    necessary = pair.necessary(found)
    reach, n_new = pair.reach(found)
    return Proof(found, set_kind([e.kind for e in found]), reruns.trials - start, necessary, reach, n_new,
                 keep, named.get("withdraw"), named.get("logits"))


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

    def __init__(self, v: Verdict, reruns: Reruns):
        self.v, self.reruns = v, reruns
        trace = reruns.trace
        self.a = row_trace(trace.run(v.ref_run), v.ref_row)
        self.b = row_trace(trace.run(v.run), v.row)
        self.tokens = {v.ref_run: self.a.tokens.astype(int).tolist(),
                       v.run: self.b.tokens.astype(int).tolist()}
        self.through = {name: tokens[: v.t_star + 1] for name, tokens in self.tokens.items()}
        self.reference = reruns.reference_routing(v.ref_run, v.ref_row)
        self.native = "native" in (reruns.settings(v.run).kernel_mode, reruns.settings(v.ref_run).kernel_mode)
        self._layers: dict[tuple[str, int], object] = {}

    # -- candidate events ---------------------------------------------------------------------------

    def events(self) -> list[Event]:
        """Every candidate event before t*, by prior (largest gate mass moved first)."""
        a, b, v = self.a, self.b, self.v
        L = a.expert.shape[0]
        out: list[Event] = []
        earlier: set[str] = set()   # kinds of the differing cells met so far, in causal order
        for p in range(min(v.t_star, a.length, b.length)):
            if a.step[p] < 0 or b.step[p] < 0:
                continue
            for layer in range(L):
                events = self._events_at(layer, p, earlier)
                earlier.update(e.kind for e in events)
                out += events
        order = {how: i for i, how in enumerate(_HOW_ORDER)}
        return sorted(out, key=lambda e: (-e.prior, -e.position, e.layer, order[e.how]))

    def _router_kind(self, earlier: set[str]) -> str:
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
        prior = _gate_mass(ea, a.gate[layer, p], eb, b.gate[layer, p])
        step_b = int(b.step[p])
        cell = dict(layer=layer, position=p, prior=prior)
        if not same_experts:
            kind = self._router_kind(earlier)
            events = [Event("cell", v.run, v.row, step=step_b, kind=kind, **cell)]
            if not np.array_equal(a.router_logits[layer, p], b.router_logits[layer, p]):
                iv = Intervention("router_logits", step=step_b, layer=layer, row=v.row, position=p,
                                  logits=tuple(float(x) for x in a.router_logits[layer, p]))
                events.append(Event("logits", v.run, v.row, step=step_b, kind=kind, intervention=iv, **cell))
            return events
        events = [Event("cell", v.run, v.row, step=step_b, kind=CAPACITY_KIND, **cell)]
        for rank in np.flatnonzero(ka != kb).tolist():
            in_reference = not ka[rank]   # A dropped it: intervene in A's run
            events += self._candidate_events(layer, p, rank, in_reference, prior)
        return events

    def _candidate_events(self, layer: int, p: int, rank: int, in_reference: bool,
                          prior: float) -> list[Event]:
        v = self.v
        run, row = (v.ref_run, v.ref_row) if in_reference else (v.run, v.row)
        other = v.run if in_reference else v.ref_run
        d = displacement(self._layer(run, layer), row, p, rank)
        if d.step < 0:
            return []
        base = dict(step=d.step, layer=layer, row=row, position=p, rank=rank, expert=d.expert, group=d.group)
        where = dict(run=run, row=row, layer=layer, position=p, step=d.step, kind=CAPACITY_KIND, prior=prior)
        events = [Event("keep", intervention=Intervention("keep", **base), **where)]
        other_row = v.row if in_reference else v.ref_row
        counterpart = self._capacity(other, other_row, layer, p)
        if counterpart > d.capacity >= 0:
            iv = Intervention("capacity", **base, capacity=counterpart)
            events.append(Event("capacity", intervention=iv, **where))
        rows = tuple(sorted(set(d.ahead_rows) - {row}))
        if rows:
            iv = Intervention("remove_rows", **base, rows=rows)
            events.append(Event("withdraw", intervention=iv, **where))
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

    def _run(self, events: tuple[Event, ...], full: bool) -> tuple[str, list[int]]:
        """(run rerun, its watched row's tokens) with the events applied (all in one run and row)."""
        first = events[0]
        run, row = first.run, first.row
        cells = [(e.layer, e.position) for e in events if e.how == "cell"]
        ivs = tuple(e.intervention for e in events if e.intervention is not None)
        replay = {row: replay_cells(self.reference, cells)} if cells else None
        intervention = ivs[0] if len(ivs) == 1 else InterventionSet(ivs) if ivs else None
        tokens = self.reruns.trial(run, row, self.through[self._other(run)], replay=replay,
                                   intervention=intervention, full=full)
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
        mine = list(tokens[P:])
        agree = 0
        for x, y in zip(mine, other, strict=False):
            if x != y:
                break
            agree += 1
        return agree, len(other)


def _gate_mass(ea: np.ndarray, ga: np.ndarray, eb: np.ndarray, gb: np.ndarray) -> float:
    """Sum over experts of |gate in A - gate in B| at one (layer, position): how much of the token's
    expert mixture the decisions there move (dropped candidates weigh 0)."""
    mix: dict[int, float] = {}
    for experts, gates, sign in ((ea, ga, 1.0), (eb, gb, -1.0)):
        for e, g in zip(np.asarray(experts).tolist(), np.asarray(gates, np.float64).tolist(), strict=True):
            if e >= 0:
                mix[e] = mix.get(e, 0.0) + sign * g
    return float(sum(abs(x) for x in mix.values()))
