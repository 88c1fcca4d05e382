"""The search for the proven cause: the causal map's strongest cells tried alone, delta debugging,
necessity, reach."""

import shutil

import pytest
import torch
from paths import EXAMPLE

from lab.counterfactual.reruns import Reruns
from lab.counterfactual.search import ddmin, prove
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
    # the causal map's strongest cell of B (position 28, layer 0) is tried first
    proof = prove(v, reruns, [(0, v.t_star - 1)])
    lead = proof.lead
    # proven: new token 0 (position 28), layer 0, expert 3, by a capacity intervention alone
    assert len(proof.events) == 1 and proof.kind == "capacity" and proof.scope == "candidate"
    assert (lead.position - v.prompt_len, lead.layer, lead.intervention.expert) == (0, 0, 3)
    assert proof.necessary is True
    # it restores the first split, and the completion splits again soon after
    assert v.new_index < proof.reach < proof.n_new == 64
    assert 0 < proof.reruns == reruns.trials
    # an independent rerun from scratch gives the other run's tokens through the split
    other = v.run if lead.run == v.ref_run else v.ref_run
    row = v.row if other == v.run else v.ref_row
    target = trace.run(other).tokens[row, : v.t_star + 1].astype(int).tolist()
    s = reruns.settings(lead.run)
    out = generate(reruns.model, s.prompts, s.max_new_tokens, s.policy, s.kernel_mode,
                   intervention=lead.intervention, arrivals=s.arrivals)
    assert out.tokens[lead.row][: v.t_star + 1] == target
