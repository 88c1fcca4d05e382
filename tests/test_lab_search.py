"""The search for the proven cause: a complete single-event scan, delta debugging, necessity, reach."""

import shutil

import pytest
import torch
from paths import EXAMPLE

from lab.counterfactual.reruns import Reruns, replay_cells
from lab.counterfactual.search import _Pair, _time, ddmin, prove
from lab.counterfactual.source import load_model, resolve_checkpoint
from model.generate import generate
from traces import open_trace
from traces.analysis import explain_pair, row_trace

#: The shipped example's first divergent pair: the probe in c01 against the reference c00.
REFERENCE, DIVERGENT = ("c00-gshard-cf1.0-batch-native", 2), ("c01-gshard-cf1.0-batch-native", 0)


def test_ddmin_finds_a_one_minimal_set_when_events_act_only_together():
    needed = {3, 11, 17}
    calls = []

    def test(subset):
        calls.append(tuple(subset))
        return needed <= set(subset)

    found = ddmin(list(range(20)), test, budget=200)
    assert set(found) == needed
    # 1-minimal: leaving out any one of them fails
    assert all(not test([x for x in found if x != y]) for y in found)
    assert ddmin(list(range(20)), lambda s: False, budget=200) is None   # the whole set does not suffice
    assert ddmin(list(range(20)), test, budget=3) is None                # the budget is spent


def test_ddmin_keeps_a_single_sufficient_item_and_the_order():
    assert ddmin(["a", "b", "c", "d"], lambda s: "c" in s, budget=50) == ["c"]
    assert ddmin(["a", "b", "c", "d"], lambda s: {"b", "d"} <= set(s), budget=50) == ["b", "d"]


@pytest.fixture
def example_reruns(tmp_path):
    copy = tmp_path / "example.h5"
    shutil.copy(EXAMPLE, copy)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # the trace was recorded with one thread
    with open_trace(copy) as trace:
        model = load_model(trace.record, resolve_checkpoint(trace.record, copy, None), torch.device("cpu"))
        yield trace, Reruns(trace, model)
    torch.set_num_threads(threads)


def test_the_first_difference_is_not_the_proven_cause_on_the_shipped_example(example_reruns):
    trace, reruns = example_reruns
    a, b = row_trace(trace.run(REFERENCE[0]), REFERENCE[1]), row_trace(trace.run(DIVERGENT[0]), DIVERGENT[1])
    v = explain_pair(a, b)
    assert (v.cause, v.position, v.layer) == ("capacity", 0, 2)     # observed: a prompt token, layer 2
    proof = prove(v, reruns)
    lead = proof.lead
    # proven: new token 0 (position 28), layer 0, expert 3, by a capacity intervention alone
    assert len(proof.events) == 1 and proof.kind == "capacity" and proof.scope == "candidate"
    assert (lead.position - v.prompt_len, lead.layer, lead.intervention.expert) == (0, 0, 3)
    assert proof.necessary is True
    # it restores the first split, and the completion splits again soon after
    assert v.new_index < proof.reach < proof.n_new == 64
    assert 0 < proof.reruns == reruns.trials


def _tokens_through(reruns, event, v):
    """The event's run rerun from scratch with `generate` (no early stop), its watched row's tokens
    through t*: an independent check of a trial."""
    s = reruns.settings(event.run)
    replay = None
    if event.intervention is None:   # a cell: the other row's routing replayed at that one cell
        reference = reruns.reference_routing(v.ref_run, v.ref_row)
        replay = {event.row: replay_cells(reference, [(event.layer, event.position)])}
    out = generate(reruns.model, s.prompts, s.max_new_tokens, s.policy, s.kernel_mode, replay=replay,
                   intervention=event.intervention, arrivals=s.arrivals)
    return out.tokens[event.row][: v.t_star + 1]


def test_the_root_event_is_the_earliest_of_the_events_that_each_suffice(example_reruns):
    trace, reruns = example_reruns
    a, b = row_trace(trace.run(REFERENCE[0]), REFERENCE[1]), row_trace(trace.run(DIVERGENT[0]), DIVERGENT[1])
    v = explain_pair(a, b)
    proof = prove(v, reruns)
    root = proof.lead
    target = {v.ref_run: a.tokens[: v.t_star + 1].astype(int).tolist(),
              v.run: b.tokens[: v.t_star + 1].astype(int).tolist()}
    other = v.ref_run if root.run == v.run else v.run
    # the scan tried every candidate event, and the root is the first sufficient one in time order
    events = _Pair(v, Reruns(trace, reruns.model)).events()
    assert proof.candidates == len(events) > len(proof.alternatives) >= 2
    assert proof.alternatives[0] == root and list(proof.alternatives) == sorted(proof.alternatives, key=_time)
    # independent reruns: the root and the last alternative each give the other run's tokens; the
    # three candidate events just before the root do not
    assert _tokens_through(reruns, root, v) == target[other]
    last = proof.alternatives[-1]
    assert _tokens_through(reruns, last, v) == target[v.ref_run if last.run == v.run else v.run]
    earlier = [e for e in events if _time(e) < _time(root)][-3:]
    assert earlier
    for e in earlier:
        assert _tokens_through(reruns, e, v) != target[v.ref_run if e.run == v.run else v.run]
    # the placebo: a share of the ten random routings at the root's cell
    assert proof.placebo is not None and round(proof.placebo * 10) == proof.placebo * 10
    assert 0.0 <= proof.placebo <= 1.0
    # the chain: its links lie after the split, each restores more, and an independent rerun with the
    # root event and every link's cells replayed from the other row agrees for the last link's reach
    assert proof.chain and proof.chain_end in ("whole", "no_cells", "budget")
    reaches = [proof.reach] + [link.reach for link in proof.chain]
    assert reaches == sorted(set(reaches)) and reaches[-1] <= proof.n_new
    assert (reaches[-1] == proof.n_new) == (proof.chain_end == "whole")
    cells = [cell for link in proof.chain for cell in link.cells]
    other_row = (v.ref_run, v.ref_row) if root.run == v.run else (v.run, v.row)
    source = reruns.reference_routing(*other_row)
    s = reruns.settings(root.run)
    if root.intervention is None:
        cells.append((root.layer, root.position))
    out = generate(reruns.model, s.prompts, s.max_new_tokens, s.policy, s.kernel_mode,
                   replay={root.row: replay_cells(source, cells)}, intervention=root.intervention,
                   arrivals=s.arrivals)
    mine, theirs = out.tokens[root.row][v.prompt_len:], (a if other_row[0] == v.ref_run else b).tokens
    theirs = theirs[v.prompt_len: v.prompt_len + proof.n_new].astype(int).tolist()
    agree = next((i for i, (x, y) in enumerate(zip(mine, theirs, strict=False)) if x != y),
                 min(len(mine), len(theirs)))
    assert agree == reaches[-1]
