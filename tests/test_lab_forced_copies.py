"""Counterfactual reruns stacked as copies of the batch (`ForcedRun.logit_differences`) against one
rerun per change, on the shipped example's first divergent pair: null draws at t*-1 and t*-2 (one
and two decode steps), the decision and queue patches of differing decode cells, and the prefill
patches with the joint one (the whole prefill and every decode step to t*-1), and patches of several
steps in one stack (each copy joining at its own step). Every copy's routing
decisions at every step and layer are the one-change rerun's, and its logit difference is within
`TOLERANCE` of it: the kernels round a batch of D*B rows other than one of B (native mode), and that
drift is all that may differ."""

import shutil

import numpy as np
import pytest
import torch
from paths import EXAMPLE

from lab.counterfactual.causal_map import MapRunner, differing_cells, draw_changes, queue_kept
from lab.counterfactual.estimate import linearize
from lab.counterfactual.forced import Change
from lab.counterfactual.nulls import null_draws
from lab.counterfactual.reruns import Reruns, replay_cells
from lab.counterfactual.source import load_model, resolve_checkpoint
from model.intervention import SetKept
from traces import open_trace
from traces.analysis import explain_pair, row_trace

REFERENCE, DIVERGENT = ("c00-gshard-cf1.0-batch-native", 2), ("c01-gshard-cf1.0-batch-native", 0)
#: The largest difference measured between a stacked copy's logit difference and its own rerun: 2.9e-6
#: (null draws) and 3.3e-6 (patches), x86-64 with AVX-512, one thread, kernel version 2 (the example's);
#: the bound leaves room for other CPUs' rounding, far below any effect the map reports (0.01 and up).
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def side(tmp_path_factory):
    copy = tmp_path_factory.mktemp("copies") / "example.h5"
    shutil.copy(EXAMPLE, copy)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with open_trace(copy) as trace:
        model = load_model(trace.record, resolve_checkpoint(trace.record, copy, None), torch.device("cpu"))
        runner = MapRunner(Reruns(trace, model))
        v = explain_pair(row_trace(trace.run(REFERENCE[0]), REFERENCE[1]),
                         row_trace(trace.run(DIVERGENT[0]), DIVERGENT[1]))
        s = runner.side("B", v.run, v.row, v.ref_run, v.ref_row, v.t_star)
        s.cells = differing_cells(s.own, s.other, v.t_star)
        yield model, runner.reruns.settings(v.run).policy, s, v
    torch.set_num_threads(threads)


class Decisions:
    """Every MoE layer's (expert, kept) of every forward step while it is active: [(step call, layer,
    expert[B,Ts,K], kept[B,Ts,K])]."""

    def __init__(self, model):
        self.model, self.seen, self.handles = model, [], []

    def __enter__(self):
        blocks = [b.ffn for b in self.model.blocks if b.is_moe]
        for li, block in enumerate(blocks):
            self.handles.append(block.register_forward_hook(
                lambda m, a, out, li=li: self.seen.append((li, out[1].decision.expert.clone(),
                                                           out[1].decision.kept.clone()))))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()


def _compare(model, f, row, q, plus, minus, changes) -> float:
    """Stacked against one rerun per change: decisions equal copy by copy at every step and layer
    (a copy joins the stack at the step its change resumes from), and the largest difference of the
    logit differences. The changes must fit one stack."""
    B0, last = f.step.shape[0], f.step_of(row, q)
    f.prepare(last)   # the kept states, made once
    starts = sorted(f._start(c, last) for c in changes)
    assert [f._start(c, last) for c in changes] == starts, "give the changes in the order of their steps"
    with Decisions(model) as stacked:
        together = f.logit_differences(row, q, plus, minus, changes)
    L = len(model.config.moe_layers)
    assert len(stacked.seen) == (last - starts[0] + 1) * L, "the changes did not run as one stack"
    assert stacked.seen[-1][1].shape[0] == len(changes) * B0
    alone = []
    for i, c in enumerate(changes):
        with Decisions(model) as one:
            alone.append(f.logit_differences(row, q, plus, minus, [c])[0])
        assert len(one.seen) == (last - starts[i] + 1) * L
        skip = (starts[i] - starts[0]) * L      # the stack's steps before this copy joined
        for (li, e, k), (li2, e2, k2) in zip(stacked.seen[skip:], one.seen, strict=True):
            rows = slice(i * B0, (i + 1) * B0)
            assert li == li2 and torch.equal(e[rows], e2) and torch.equal(k[rows], k2), \
                f"change {i}: layer {li}: the copy's routing differs from its own rerun's"
    return float(np.max(np.abs(together - np.array(alone))))


def test_null_draws_stacked_equal_one_rerun_each(side):
    model, policy, s, v = side
    q = v.t_star - 1
    lin = linearize(model, policy, s.tokens, s.own, lambda logits, router: logits[q, s.other_token]
                    - logits[q, s.own_token])
    worst = 0.0
    for klass in (1, 2):
        draws = null_draws(model, policy, lin, s, klass, 2, 24, v.t_star, v.prompt_len)
        changes = draw_changes(s, lin, policy.norm, draws)
        worst = max(worst, _compare(model, s.forced, s.row, q, s.other_token, s.own_token, changes))
    assert worst <= TOLERANCE, f"largest difference {worst}"


def test_decision_queue_and_prefill_patches_stacked_equal_one_rerun_each(side):
    model, _, s, v = side
    q, f, row = v.t_star - 1, s.forced, s.row
    by_start: dict[int, list[Change]] = {}
    for layer, p, _ in s.cells:
        changes = [Change({row: replay_cells(s.other, [(layer, p)])})]
        kept = queue_kept(s.own, s.other, layer, p)
        if kept is not None:
            changes.append(Change(edits=(SetKept(f.step_of(row, p), layer, row, p, kept),)))
        by_start.setdefault(f.step_of(row, p), []).extend(changes)
    everything = [(c[0], c[1]) for c in s.cells]
    by_start[0].append(Change({row: replay_cells(s.other, everything)}))
    assert len(by_start) >= 2 and 0 in by_start    # prefill cells and decode cells
    worst = 0.0
    for start in sorted(by_start)[:3]:     # the prefill (with the joint patch) and decode steps alone
        worst = max(worst, _compare(model, f, row, q, s.other_token, s.own_token, by_start[start][:6]))
    # patches of several steps in one stack (prefill, decode), each copy joining at its own step
    mixed = [c for start in sorted(by_start) for c in by_start[start][:2]]
    assert len({f._start(c, f.step_of(row, q)) for c in mixed}) >= 2
    worst = max(worst, _compare(model, f, row, q, s.other_token, s.own_token, mixed))
    assert worst <= TOLERANCE, f"largest difference {worst}"
