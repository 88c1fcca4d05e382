"""Level 2 of the causal map: why the decisive cell's decision differs, back to the batch.

From the decisive cell (the strongest cell beating its null), link by link:

- when the queue patch alone carries the cell's effect (its row's kept flags as the other batch's
  queue set them give half of it or more), the decision differs because of capacity: the batch at
  that step took the slots. The chain ends at this *capacity* event of the batch;
- else the router chose other experts: the router margin between the experts in question (the
  other run's expert minus the own one, negative in the patched run) moved. Every upstream
  differing cell (earlier position, or the same position at a lower layer) gets its estimated
  effect on that margin (`lab.counterfactual.estimate`, the margin as target); the largest one
  toward the other run's choice is the next link, tested against its position-matched null
  (`lab.counterfactual.nulls`), and the chain goes on from it;
- with no upstream cell that moves the margin toward the other choice, the chain ends at the
  *first* difference.

Links after the first are estimates (the exact reruns measure the logits at t*, not router margins).
"""

from __future__ import annotations

import math

import numpy as np

from lab.counterfactual.estimate import effects, linearize
from lab.counterfactual.nulls import null_test
from traces.analysis.map_cells import ALPHA, CellEffect, ChainLink

#: Links a chain holds at most.
MAX_LINKS = 8


def _experts_in_question(side, layer: int, p: int) -> tuple[int, int] | None:
    """(own expert, other run's expert) where the chosen experts differ; None when only kept flags do."""
    own = [int(e) for e in np.asarray(side.own.expert)[layer, p]]
    other = [int(e) for e in np.asarray(side.other.expert)[layer, p]]
    mine = [e for e in own if e not in other]
    theirs = [e for e in other if e not in own]
    return (mine[0], theirs[0]) if mine and theirs else None


def follow_chain(model, policy, side, top: CellEffect, t_star: int, prompt_len: int) -> list[ChainLink]:
    links = [ChainLink("decisive", top.layer, top.position, top.step, top.effect, math.nan, True)]
    if top.capacity:
        return links + [ChainLink("capacity", top.layer, top.position, top.step, top.queue, math.nan, True)]
    layer, p = top.layer, top.position
    while len(links) < MAX_LINKS:
        pair = _experts_in_question(side, layer, p)
        if pair is None:        # the same experts, other kept flags: the queue decided it
            last = links[-1]
            links[-1] = ChainLink("capacity", last.layer, last.position, last.step, last.effect, last.margin,
                                  last.beats_null)
            return links
        mine, theirs = pair
        lin = linearize(model, policy, side.tokens[:p + 1], side.own,
                        lambda logits, router, li=layer, q=p, up=theirs, down=mine:
                        router[li][q, up] - router[li][q, down])
        upstream = [(c_l, c_p, ch) for c_l, c_p, ch in side.cells if c_p < p or (c_p == p and c_l < layer)]
        if not upstream:
            return _ended(links, "first", lin.value)
        est = np.zeros(len(upstream))
        queue = np.zeros(len(upstream))
        for li in {c[0] for c in upstream}:
            idx = [i for i, c in enumerate(upstream) if c[0] == li]
            pos = np.array([upstream[i][1] for i in idx])
            est[idx] = effects(model, lin, li, pos, np.asarray(side.other.expert)[li, pos],
                               np.asarray(side.other.kept)[li, pos], np.asarray(side.other.gate)[li, pos],
                               policy.norm)
            kept = np.where(_same_expert(side, li, pos), np.asarray(side.other.kept)[li, pos],
                            np.asarray(side.own.kept)[li, pos])
            queue[idx] = effects(model, lin, li, pos, np.asarray(side.own.expert)[li, pos], kept, None,
                                 policy.norm)
        best = int(np.argmax(est))
        if est[best] <= 0:
            return _ended(links, "first", lin.value)
        sub = _Upstream(side, upstream)
        test = null_test(model, policy, lin, sub, est, p + 1, min(prompt_len, p + 1), lin.value)[0][best]
        c_l, c_p, _ = upstream[best]
        step = side.forced.step_of(side.row, c_p)
        links[-1] = ChainLink(links[-1].kind, links[-1].layer, links[-1].position, links[-1].step,
                              links[-1].effect, lin.value, links[-1].beats_null)
        capacity = est[best] != 0 and queue[best] / est[best] >= 0.5
        beats = not math.isnan(test.p_value) and test.p_value <= ALPHA
        links.append(ChainLink("capacity" if capacity else "router", c_l, c_p, step, float(est[best]),
                               math.nan, beats))
        if capacity:
            return links
        layer, p = c_l, c_p
    return links


def _ended(links: list[ChainLink], kind: str, margin: float) -> list[ChainLink]:
    last = links[-1]
    end = ChainLink(kind if len(links) > 1 else last.kind, last.layer, last.position, last.step, last.effect,
                    margin, last.beats_null)
    if len(links) == 1:
        return [end, ChainLink(kind, last.layer, last.position, last.step, 0.0, margin, last.beats_null)]
    return links[:-1] + [end]


def _same_expert(side, layer: int, pos: np.ndarray) -> np.ndarray:
    """[n,K] whether the own candidate's expert is the other run's at the same rank."""
    return np.asarray(side.own.expert)[layer, pos] == np.asarray(side.other.expert)[layer, pos]


class _Upstream:
    """The side seen from a router margin: its differing cells upstream of the link."""

    def __init__(self, side, cells):
        self.own, self.other, self.name, self.cells = side.own, side.other, side.name, cells
        self.run, self.row = side.run, side.row
