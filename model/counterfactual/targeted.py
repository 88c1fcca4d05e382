"""Targeted counterfactuals: which single routing event, changed alone, removes a pair's split?

The analysis names the first routing difference of a divergent pair (`traces.analysis.explain_pair`);
that is a description, not a proven cause: later decisions of the same batch may differ as well, and
any of them may be the one that splits the tokens. So one run is rerun with one thing changed, and
the test is whether the two rows then agree through the first divergence t* (*sufficient*):

1. At the named event, when a candidate was dropped in one run and kept in the other: (a) `keep` it
   in the run that dropped it, or give its group the other run's larger `capacity` at that step and
   layer; (b) withdraw the displacing rows' candidates from that expert's queue (`remove_rows`).
   When the router's input differed there (a numeric difference): (c) give the row the reference's
   recorded router logits at that event (`router_logits`).
2. When none of these suffices and replaying the whole of the reference's routing does, the decisive
   event is searched for: the reference's routing is replayed onto the divergent row one forward
   step at a time (the named event's step, then the step that chose token t*, then earlier ones, at
   most `MAX_STEPS`), then one layer of the first sufficient step, then, at that step and layer,
   the candidate-level changes of 1. on each candidate whose kept flag differs between the runs.

The result names the smallest sufficient intervention and its event (step, layer, position). A
`capacity` verdict requires one within one forward step and one layer (`ONE_EVENT_SCOPES`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.counterfactual.intervention import Intervention
from model.counterfactual.reruns import ReplayScope, Reruns
from traces.analysis import Verdict
from traces.analysis.displacement import displacement
from traces.analysis.rows import layer_routing

#: Forward steps tried one at a time in the search for the decisive event.
MAX_STEPS = 4
#: Candidates tried at the decisive step and layer.
MAX_CANDIDATES = 4
#: Scopes of a sufficient intervention, smallest first; the first three change one routing event.
SCOPES = ("candidate", "token", "step_layer", "step")
ONE_EVENT_SCOPES = SCOPES[:3]


@dataclass(frozen=True)
class Targeted:
    """Outcomes of the single-event interventions of one pair (None: not tried)."""

    keep: bool | None = None        # keeping the named event's dropped candidate (or its group's capacity)
    withdraw: bool | None = None    # withdrawing the displacing rows at the named event
    logits: bool | None = None      # the reference's router logits at the named event
    scope: str = ""                 # smallest sufficient scope (SCOPES), '' none found
    step: int = -1                  # its event: forward step, layer and position (-1 n/a)
    layer: int = -1
    position: int = -1
    sufficient: str = ""            # the smallest sufficient intervention, in words


def targeted(v: Verdict, reruns: Reruns, search: bool = False) -> Targeted:
    """Run the interventions at pair `v`'s named event; with `search` (the whole-routing replay restores
    the tokens), look for the decisive event when they do not suffice."""
    if not reruns.model.config.is_moe or v.layer < 0 or v.position < 0:
        return Targeted()
    pair = _Pair(v, reruns)
    keep = withdraw = logits = None
    found: tuple | None = None
    d = v.displacement
    if d is not None and not d.kept:
        keep, withdraw, found = pair.candidate(d.layer, d.position, d.rank, in_reference=d.run != v.run)
    if v.cause != "capacity" or (np.isfinite(v.router_delta) and v.router_delta > 0):
        step = pair.step_of(v.position)
        if step >= 0:
            ref_logits = pair.ref_router_logits(v.layer, v.position)
            logits_iv = Intervention("router_logits", step=step, layer=v.layer, row=v.row,
                                     position=v.position, logits=tuple(float(x) for x in ref_logits))
            logits = pair.agrees(v.run, logits_iv)
            if logits and found is None:
                found = ("token", step, v.layer, v.position, pair.restores(logits_iv, v.run))
    if found is None and search:
        found = pair.search()
    if found is None:
        return Targeted(keep, withdraw, logits)
    scope, step, layer, position, sentence = found
    return Targeted(keep, withdraw, logits, scope, step, layer, position, sentence)


class _Pair:
    """The reruns of one divergent pair: A = reference row, B = divergent row."""

    def __init__(self, v: Verdict, reruns: Reruns):
        self.v, self.reruns = v, reruns
        self.L = len(reruns.trace.moe_layers)
        self.step_b = np.asarray(reruns.trace.run(v.run).step[v.row])
        through = slice(0, v.t_star + 1)
        self.tokens = {v.run: np.asarray(reruns.trace.run(v.run).tokens[v.row, through]).tolist(),
                       v.ref_run: np.asarray(reruns.trace.run(v.ref_run).tokens[v.ref_row, through]).tolist()}

    def step_of(self, position: int) -> int:
        return int(self.step_b[position]) if 0 <= position < len(self.step_b) else -1

    def ref_router_logits(self, layer: int, position: int) -> np.ndarray:
        run = self.reruns.trace.run(self.v.ref_run)
        return np.asarray(run.router_logits[layer, self.v.ref_row, position])

    def agrees(self, run: str, iv: Intervention) -> bool:
        """Whether run `run` rerun with `iv` gives its row the other row's recorded tokens through t*."""
        v = self.v
        row, other = (v.row, v.ref_run) if run == v.run else (v.ref_row, v.run)
        tokens = self.reruns.intervened_tokens(run, iv)[row]
        return list(tokens[: v.t_star + 1]) == self.tokens[other]

    def replay_agrees(self, scope: ReplayScope) -> bool:
        v = self.v
        tokens = self.reruns.replayed_tokens(v.run, v.row, v.ref_run, v.ref_row, scope)
        return list(tokens[: v.t_star + 1]) == self.tokens[v.ref_run]

    def restores(self, iv: Intervention, run: str) -> str:
        v = self.v
        whose = "the reference's" if run == v.run else f"run {v.run}'s"
        return (f"{iv.describe(iv.position - v.prompt_len)} of run {run} alone restores {whose} tokens "
                f"through position {v.t_star}")

    def candidate(self, layer: int, position: int, rank: int, in_reference: bool):
        """(keep, withdraw, found) for the candidate (position, rank) at `layer` dropped in one run."""
        v = self.v
        run, row = (v.ref_run, v.ref_row) if in_reference else (v.run, v.row)
        lr = layer_routing(self.reruns.trace.run(run), layer)
        d = displacement(lr, row, position, rank)
        base = dict(step=d.step, layer=layer, row=row, position=position, rank=rank, expert=d.expert,
                    group=d.group)
        found = None
        iv = Intervention("keep", **base)
        keep = self.agrees(run, iv)
        other = self._counterpart_capacity(layer, position, in_reference)
        if not keep and other > d.capacity >= 0:
            iv = Intervention("capacity", **base, capacity=other)
            keep = self.agrees(run, iv)
        if keep:
            found = ("candidate", d.step, layer, position, self.restores(iv, run))
        withdraw = None
        rows = tuple(sorted(set(d.ahead_rows) - {row}))
        if rows:
            iv = Intervention("remove_rows", **base, rows=rows)
            withdraw = self.agrees(run, iv)
            if withdraw and found is None:
                found = ("candidate", d.step, layer, position, self.restores(iv, run))
        return keep, withdraw, found

    def _counterpart_capacity(self, layer: int, position: int, in_reference: bool) -> int:
        """The capacity of the group the same token had in the other run, -1 unknown."""
        v = self.v
        run, row = (v.run, v.row) if in_reference else (v.ref_run, v.ref_row)
        lr = layer_routing(self.reruns.trace.run(run), layer)
        s, g = int(lr.step[row, position]), int(lr.group[row, position])
        S, G = lr.capacity.shape
        return int(lr.capacity[s, g]) if 0 <= s < S and 0 <= g < G else -1

    def search(self) -> tuple | None:
        """The smallest sufficient replay of the reference's routing around the decisive event."""
        v = self.v
        named = self.step_of(v.position)
        last = self.step_of(v.t_star - 1)
        steps = [s for s in dict.fromkeys([named, *range(last, named, -1)]) if s >= 0][:MAX_STEPS]
        step = next((s for s in steps if self.replay_agrees(ReplayScope(s))), None)
        if step is None:
            return None
        layer = next((li for li in range(self.L) if self.replay_agrees(ReplayScope(step, li))), None)
        restores = f"alone restores the reference's tokens through position {v.t_star}"
        if layer is None:
            scope = ReplayScope(step)
            return ("step", step, -1, -1, f"giving row {v.row} of run {v.run} the reference's routing at "
                                          f"{scope.describe()} {restores}")
        for position, rank, in_reference in self._kept_differences(step, layer)[:MAX_CANDIDATES]:
            _, _, found = self.candidate(layer, position, rank, in_reference)
            if found is not None:
                return found
        scope = ReplayScope(step, layer)
        return ("step_layer", step, layer, -1, f"giving row {v.row} of run {v.run} the reference's routing "
                                              f"at {scope.describe()} {restores}")

    def _kept_differences(self, step: int, layer: int) -> list[tuple[int, int, bool]]:
        """(position, rank, dropped in the reference) of the row's candidates routed in `step` at `layer`
        whose kept flag differs between the runs (same expert), in position order."""
        v = self.v
        b = layer_routing(self.reruns.trace.run(v.run), layer)
        a = layer_routing(self.reruns.trace.run(v.ref_run), layer)
        out = []
        for p in np.nonzero(self.step_b == step)[0]:
            for j in range(b.expert.shape[-1]):
                same_expert = b.expert[v.row, p, j] == a.expert[v.ref_row, p, j] >= 0
                if same_expert and b.kept[v.row, p, j] != a.kept[v.ref_row, p, j]:
                    out.append((int(p), j, bool(b.kept[v.row, p, j])))
        return out


