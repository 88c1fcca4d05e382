"""The causal map against known causes, on a tiny model's batch generated as it is and with one planted
withdraw: where the plant decides the split, the chain leads to it; where the split is a bare logit
tie, the map's outcome is a near-tie."""

import numpy as np
import pytest
import torch

from lab.counterfactual.causal_map import MapRunner
from lab.counterfactual.reruns import Reruns
from model.generate import generate
from model.intervention import Intervention
from model.recorder import Recorder, trace_meta
from model.routing import RoutingPolicy
from model.tokenizer import encode, vocab_strings
from traces import TraceWriter, open_trace
from traces.analysis import explain_pair, row_trace
from traces.analysis.causal_map import map_text
from traces.analysis.map_outcome import Outcome, pair_outcome

REQUESTS = ["The probe: def f(x):", "import os", "x = [1, 2, 3]", "print('hello')"]
POLICY = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=0.5)
MODE = "batch_invariant"
NEW_TOKENS = 12


def planted_trace(path, model, iv: Intervention | None):
    """The batch generated as it is (run 'natural') and with `iv` (run 'planted'), the probe in row 0."""
    prompts = [encode(r) for r in REQUESTS]
    with TraceWriter(path, meta=trace_meta(model, POLICY), vocab=vocab_strings(), requests=REQUESTS,
                     prompt_tokens=prompts) as writer:
        results = {}
        for name, intervention in (("planted", iv), ("natural", None)):
            recorder = Recorder()
            results[name] = generate(model, prompts, NEW_TOKENS, POLICY, MODE, recorder=recorder,
                                     intervention=intervention)
            recorder.write_run(writer, name, results[name], policy=POLICY, request_ids=[0, 1, 2, 3],
                               probe_row=0, condition="cf=0.5")
    return results


def probe_drop(recorded: dict, step: int, layer: int) -> Intervention:
    """A withdraw of rows 1.. from the queue where the probe (row 0) lost a candidate at `step`, `layer`:
    with it, the probe keeps that candidate."""
    steps = recorded["step"][0]
    positions = [p for p in np.nonzero(steps == step)[0] if not recorded["routing/kept"][layer, 0, p].all()]
    assert positions, f"the probe keeps every candidate at step {step}, layer {layer}"
    p = int(positions[0])
    j = int(np.nonzero(~recorded["routing/kept"][layer, 0, p])[0][0])
    rows = tuple(range(1, recorded["tokens"].shape[0]))
    expert = int(recorded["routing/expert"][layer, 0, p, j])
    group = int(recorded["routing/group"][layer, 0, p])
    return Intervention("withdraw", step, layer, 0, p, rank=j, expert=expert, group=group, rows=rows)


def mapped(path, model, iv: Intervention):
    """The verdict and causal map of the pair (A: the planted run, B: the natural one)."""
    with open_trace(path) as trace:
        runner = MapRunner(Reruns(trace, model), edits={"planted": (iv,)})
        v = explain_pair(row_trace(trace.run("planted"), 0), row_trace(trace.run("natural"), 0))
        return v, runner.pair(v)


@pytest.fixture(scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_planted_capacity_event_is_where_the_chain_leads(tmp_path, tiny_model, one_thread):
    model = tiny_model(2)
    recorder = Recorder()
    natural = generate(model, [encode(r) for r in REQUESTS], NEW_TOKENS, POLICY, MODE, recorder=recorder)
    # The plant: at step 1 (the probe's first new token), layer 1, the other rows are withdrawn from the
    # queue of the expert the probe lost there, so that the probe keeps it.
    iv = probe_drop(recorder.arrays(natural), step=1, layer=1)
    results = planted_trace(tmp_path / "planted.h5", model, iv)
    assert list(results["planted"].tokens[0]) != list(natural.tokens[0])   # it flips a later token
    v, m = mapped(tmp_path / "planted.h5", model, iv)
    assert v.diverged and v.t_star > iv.position
    # The forced reruns reproduce both runs: unpatched, each prefers its own token.
    assert m.baseline["B"] < 0 and m.baseline["A"] < 0
    # The planted cell beats its null and the chain from it ends at the batch's queue at the planted step,
    # layer and position. (Whether the pair is also a near-tie is the runs' margins' matter: on this
    # small random model the planted run's own token is within what about half of the random changes
    # at t*-1 do; the outcome says so, and names the planted cell all the same.)
    top = max(m.decisive(), key=lambda c: abs(c.effect))
    assert (top.layer, top.position, top.step) == (iv.layer, iv.position, iv.step)
    assert top.capacity and top.effect > -m.baseline[top.patched]    # alone it flips the token
    o = pair_outcome(m)
    tied = any(t.share >= 0.5 for t in o.ties)
    assert o.kind == (Outcome.NEAR_TIE if tied else Outcome.DECISIVE)
    assert m.reaches_batch
    end = m.chain[-1]
    assert (end.kind, end.layer, end.position, end.step) == ("capacity", iv.layer, iv.position, iv.step)
    said = map_text(m, "natural", "planted")
    assert f"layer {iv.layer}, position {iv.position}" in said and ("beats its null" in said or not tied)


def test_a_split_at_a_bare_logit_tie_is_a_near_tie(tmp_path, tiny_model, one_thread):
    model = tiny_model(1)
    recorder = Recorder()
    natural = generate(model, [encode(r) for r in REQUESTS], NEW_TOKENS, POLICY, MODE, recorder=recorder)
    iv = probe_drop(recorder.arrays(natural), step=2, layer=1)
    planted_trace(tmp_path / "tie.h5", model, iv)
    v, m = mapped(tmp_path / "tie.h5", model, iv)
    assert v.diverged and v.t_star == iv.position + 1
    # The planted run's own token is ahead by a few hundredths of a logit: a bare tie.
    assert -0.05 < m.baseline["A"] < 0
    # Most random changes of the strongest cell's size at its position move A's margin by more than
    # that: a near-tie of A's token, with no chain, and the share, its draws and the null's flip rate in
    # its words.
    o = pair_outcome(m)
    assert m.cells and o.kind == Outcome.NEAR_TIE and "A" in o.tied()
    assert o.ties[1].share >= 0.5 and o.ties[1].draws >= 200 and 0 < o.null_flip <= 1
    said = map_text(m, "natural", "planted")
    assert "A near-tie of run planted's token" in said and f"of {o.ties[1].draws} draws" in said
