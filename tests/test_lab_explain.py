"""Counterfactual reruns confirm the causes of divergences and store them in the trace."""

import argparse
import dataclasses
import shutil
import time

import numpy as np
import pytest
import torch
from kernel_probe import skip_unless_native_varies
from paths import EXAMPLE

from inspector.commands import explain as explain_command
from inspector.commands.errors import UsageError
from lab.counterfactual import TABLE, Evidence, ExplainError, decide, explain, explain_trace
from lab.counterfactual.reruns import Reruns
from lab.counterfactual.source import ASSETS, checkpoint_digest
from lab.counterfactual.store import same_checkpoint, store
from model.checkpoint import checkpoint_paths, load_checkpoint, save_checkpoint
from model.config import ModelConfig
from model.generate import generate
from model.recorder import Recorder, trace_meta
from model.routing import RoutingPolicy
from model.tokenizer import encode, vocab_strings
from model.transformer import MoETransformer
from traces import TraceWriter, open_trace, validate
from traces.analysis.explain_table import from_columns, summarize_records

REQUESTS = ["The probe: def f(x):", "import os", "x = [1, 2, 3]", "print('hello')", "for i in range(3):"]
#: (request ids, probe row) of each batch composition; the first is the reference.
COMPOSITIONS = [([0], 0), ([1, 0], 1), ([0, 2, 3], 0), ([4, 3, 0, 1], 2), ([2, 0], 1)]
LOW_CAPACITY = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=0.5)
PER_SEQUENCE = LOW_CAPACITY.replace(capacity_factor=1.0, group_by="sequence",
                                    pads_count_toward_capacity=False)
CONDITIONS = [("batch cf=0.5, batch_invariant", LOW_CAPACITY, "batch_invariant"),
              ("batch cf=0.5, native", LOW_CAPACITY, "native"),
              ("sequence cf=1.0, batch_invariant", PER_SEQUENCE, "batch_invariant")]
NEW_TOKENS = 12


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the matrices are tiny; a second thread only waits on a busy machine
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, one_thread, tiny_model):
    """A checkpoint and a trace of the probe in five compositions under three conditions."""
    folder = tmp_path_factory.mktemp("explain")
    stem = folder / "tiny"
    save_checkpoint(tiny_model(0), stem)
    model, _ = load_checkpoint(stem)
    path = folder / "trace.h5"
    record_trace(path, model, CONDITIONS)
    return stem, path, model


def record_trace(path, model, conditions):
    """Record every composition under every (condition, policy, kernel mode) into a new trace."""
    with TraceWriter(path, meta=trace_meta(model, conditions[0][1]), vocab=vocab_strings(), requests=REQUESTS,
                     prompt_tokens=[encode(t) for t in REQUESTS]) as writer:
        for condition, policy, mode in conditions:
            for i, (ids, probe) in enumerate(COMPOSITIONS):
                recorder = Recorder()
                result = generate(model, [encode(REQUESTS[r]) for r in ids], NEW_TOKENS, policy, mode,
                                  recorder=recorder)
                recorder.write_run(writer, f"{condition.split(',')[0][:5]}-{mode[:3]}-{i}", result,
                                   policy=policy, request_ids=ids, probe_row=probe, condition=condition)


@pytest.fixture
def trace_copy(recorded, tmp_path):
    stem, path, model = recorded
    copy = tmp_path / "trace.h5"
    shutil.copy(path, copy)
    return stem, copy, model


def stored(path):
    with open_trace(path) as trace:
        columns, attrs = trace.read_table(TABLE)
        conditions = {run.name: run.attrs["condition"] for run in trace.runs()}
    return from_columns(columns), attrs, conditions


def test_explain_confirms_every_capacity_divergence_and_leaves_nothing_unexplained(trace_copy):
    stem, path, model = trace_copy
    result = explain_trace(path, model, checkpoint=str(stem))
    records, attrs, conditions = stored(path)
    assert attrs["kind"] == "explain" and attrs["checkpoint"] == str(stem) and attrs["not_reproduced"] == []
    assert not result.not_reproduced and not result.interrupted and not result.skipped
    assert len(records) == result.compared and result.rerun == result.divergent
    capacity = [r for r in records if r.diverged and r.cause == "capacity"]
    assert len(capacity) >= 5  # the constructed experiment does produce capacity divergences
    for r in capacity:
        assert (r.dropless_same, r.replay_same, r.confirmed_cause) == (True, True, "capacity"), r.sentence
        assert "Confirmed: capacity" in r.sentence and "reproduced bitwise" in r.sentence
        assert_proof(r)
    invariant_batch = [r for r in records if conditions[r.run] == CONDITIONS[0][0] and r.diverged]
    assert invariant_batch and all(r.confirmed_cause == "capacity" for r in invariant_batch)
    assert all(r.invariant_same is False for r in invariant_batch)  # invariant kernels keep the coupling
    per_sequence = [r for r in records if conditions[r.run] == CONDITIONS[2][0]]
    assert len(per_sequence) == len(COMPOSITIONS) - 1 + 3  # the probe in 4 runs, partners 2 and 3 again
    assert all(r.cause == r.confirmed_cause == "identical" and not r.diverged for r in per_sequence)
    for r in records:
        if not r.diverged:
            assert (r.dropless_same, r.invariant_same, r.replay_same) == (None, None, None)
    summary = summarize_records(records)
    assert summary.n_divergent == result.divergent > 0 and summary.unexplained_share == 0.0
    assert summary.counts["unexplained"] == 0 and "not_reproduced" not in summary.counts
    assert not [p for p in validate(path) if p.severity == "error"]


def assert_proof(r):
    """A capacity verdict names the event (or 1-minimal set of events) whose intervention removed the
    split, of capacity kind, with its necessity, reach and cost."""
    assert r.proven and r.proof_kind == "capacity" and r.sufficient, r.sentence
    assert r.scope in ("candidate", "token", "cell", "set") and (r.scope == "set") == (r.proof_size > 1), r
    assert r.proof_step >= 0 and r.proof_layer >= 0 and 0 <= r.proof_position < r.t_star, r
    assert len(r.proof_cells.split()) == r.proof_size
    assert f"{r.proof_layer}:{r.proof_position}" in r.proof_cells.split()
    assert r.sufficient in r.sentence and "Proven cause: " in r.sentence
    assert r.necessary is not None and "ecessary" in r.sentence
    # sufficiency holds through the first split: the new tokens agree at least through t*
    assert r.new_index < r.reach <= r.reach_of and "Reach: " in r.sentence, r.sentence
    assert r.proof_reruns >= r.proof_size
    if r.scope == "candidate":
        assert r.sufficient.startswith(("keeping expert", "giving the group capacity", "withdrawing row")), r
    # the causal map beside it: B's differing cells, both baselines (each run prefers its own token)
    assert r.map_cells > 0 and r.map_exact > 0 and "Causal map: " in r.sentence, r
    assert r.map_baseline < 0 and r.map_baseline_ref < 0 and r.map_seconds > 0, r
    # its outcome, with both runs' near-tie shares and their draws, and the cell it names
    assert r.outcome in ("near_tie", "decisive", "no_decisive_cell"), r
    assert r.tie_draws >= 200 and r.tie_draws_ref >= 200 and 0 <= r.tie_share <= 1, r
    tied = max(r.tie_share, r.tie_share_ref) >= 0.5
    assert (r.outcome == "near_tie") == tied
    if r.outcome == "decisive":    # the cell beating its null that the chain starts from flips its run alone
        margin = -(r.map_baseline if r.outcome_cell.startswith("B") else r.map_baseline_ref)
        assert r.outcome_cell == r.decisive_cells.split()[0] and r.outcome_effect > margin
    assert r.outcome_cell.split(":")[0] in ("A", "B") and r.outcome_draws > 0, r
    assert all(not x for x in (r.alternative_cells, r.chain_cells, r.chain_end)) and r.placebo == -1.0, r


def test_an_output_near_tie_is_confirmed_numeric(tmp_path, tiny_model):
    # Two output tokens whose embeddings (tied with the head) differ by one part in 1e7 tie to the last
    # ulp, so the batch-shaped rounding of native kernels (where fp32 F.linear gives a row other bits at
    # batch size 1 than at 2 or more) picks either one. Dropless routing: no capacity at all.
    model = tiny_model(0)
    skip_unless_native_varies(model, sizes=(2, 3, 4))
    dropless = RoutingPolicy.preset("dropless")
    favourite = generate(model, [encode(REQUESTS[0])], NEW_TOKENS, dropless, "native").new_tokens[0]
    t1 = max(set(favourite), key=favourite.count)
    with torch.no_grad():
        model.embed.weight[(t1 + 1) % 256] = model.embed.weight[t1] * (1 + 1e-7)
    save_checkpoint(model, tmp_path / "tie")
    model, _ = load_checkpoint(tmp_path / "tie")
    path = tmp_path / "tie.h5"
    record_trace(path, model, [("dropless, native", dropless, "native"),
                               ("dropless, batch_invariant", dropless, "batch_invariant")])
    result = explain_trace(path, model, checkpoint="tie")
    records, _, conditions = stored(path)
    divergent = [r for r in records if r.diverged]
    assert divergent and all(conditions[r.run] == "dropless, native" for r in divergent)
    for r in divergent:
        # Invariant kernels remove the flip; dropless is the recorded setting, so it still splits. Whether
        # the noise that decided the tie came through the router's weights (replay restores the tokens) or
        # through the attention, expert and head reductions (it does not) depends on the rounding.
        assert (r.invariant_same, r.dropless_same) == (True, False), r.sentence
        expected = r.cause if r.replay_same else "output_numeric"
        assert r.cause in ("upstream_numeric", "router_flip", "output_numeric")
        assert r.confirmed_cause == expected, r.sentence
    assert result.summary().unexplained_share == 0.0


def test_reruns_reproduce_each_recorded_run_bitwise(recorded):
    _, path, model = recorded
    with open_trace(path) as trace:
        reruns = Reruns(trace, model)
        assert all(reruns.reproduction(name).reproduced for name in trace.run_names)
        # A variant that changes nothing is the recorded rerun itself, not another generation.
        name = trace.run_names[0]
        n = reruns.generations
        assert reruns.tokens(name, "batch_invariant") is reruns.tokens(name, "recorded")
        assert reruns.generations == n


def test_replaying_the_reference_routing_gives_its_tokens(recorded):
    _, path, model = recorded
    with open_trace(path) as trace:
        reruns = Reruns(trace, model)
        ref, other = trace.run("batch-bat-0"), trace.run("batch-bat-3")
        row = other.probe_row
        recorded_tokens = np.asarray(other.tokens[row, :other.row_length(row)]).tolist()
        reference = np.asarray(ref.tokens[0, :ref.row_length(0)]).tolist()
        assert recorded_tokens != reference
        replay = {row: reruns.reference_routing(ref.name, 0)}
        assert reruns.trial(other.name, row, reference, replay=replay, full=True) == reference


def test_weights_other_than_the_recorded_ones_are_reported_not_reproduced(trace_copy, tiny_model):
    _, path, model = trace_copy
    result = explain_trace(path, tiny_model(1), checkpoint="same name", requests=[0])
    divergent = [r for r in result.records if r.diverged]
    assert result.not_reproduced and divergent
    assert all(r.confirmed_cause == "not_reproduced" for r in divergent)
    assert "rerun took another decision: " in divergent[0].sentence
    assert all(r.replay_same is None and r.dropless_same is None for r in divergent)
    assert result.summary().counts["not_reproduced"] == len(divergent)
    # A later call tries those pairs again rather than keeping them.
    again = explain_trace(path, model, checkpoint="same name", requests=[0])
    assert again.reused == 0 and again.rerun == len(divergent) and not again.not_reproduced
    assert all(r.confirmed_cause != "not_reproduced" for r in again.records)


def test_limit_and_request_fill_the_table_step_by_step(trace_copy):
    stem, path, model = trace_copy
    first = explain_trace(path, model, checkpoint=str(stem), requests=[0], limit=1)
    assert first.rerun == 1 and first.skipped == first.divergent - 1 > 0
    assert len([r for r in stored(path)[0] if r.diverged]) == 1
    second = explain_trace(path, model, checkpoint=str(stem))
    assert second.reused == 1 and second.rerun == second.divergent - 1  # the first call's pair is kept
    records = stored(path)[0]
    assert len(records) == second.compared and sum(r.diverged for r in records) == second.divergent
    assert all(r.confirmed_cause for r in records if r.diverged)
    assert explain_trace(path, model, checkpoint=str(stem), redo=True, limit=2).rerun == 2


def test_a_pair_stored_before_the_causal_map_is_mapped_without_redo(trace_copy):
    stem, path, model = trace_copy
    explain_trace(path, model, checkpoint=str(stem), requests=[0], limit=1)
    records = stored(path)[0]
    (done,) = [r for r in records if r.diverged and r.confirmed_cause]
    assert done.map_cells >= 0
    # The same record as a table older than the causal map holds it: confirmed, proven, not mapped.
    unmapped = [dataclasses.replace(r, map_cells=-1, map_exact=-1, decisive_cells="", map_chain="")
                if r is done else r for r in records]
    store(str(path), unmapped, checkpoint=str(stem), device="cpu")
    assert next(r for r in stored(path)[0] if r.run == done.run and r.row == done.row).map_cells == -1
    again = explain_trace(path, model, checkpoint=str(stem), requests=[0], limit=1)
    assert again.rerun == 1 and again.reused == 0   # rerun and mapped, not kept
    mapped = next(r for r in stored(path)[0] if r.run == done.run and r.row == done.row)
    assert mapped.map_cells == done.map_cells and mapped.decisive_cells == done.decisive_cells
    third = explain_trace(path, model, checkpoint=str(stem), requests=[0], limit=1)
    assert third.reused == 1   # mapped now: kept
    assert mapped.outcome and not mapped.outcome_untested


def test_limit_takes_divergent_runs_in_turns_across_conditions(trace_copy):
    stem, path, model = trace_copy
    result = explain_trace(path, model, checkpoint=str(stem), limit=2)
    records, _, conditions = stored(path)
    rerun = {conditions[r.run] for r in records if r.diverged}
    assert result.rerun == 2 and rerun == {CONDITIONS[0][0], CONDITIONS[1][0]}


def test_ctrl_c_keeps_what_is_done_and_the_file_intact(trace_copy):
    stem, path, model = trace_copy

    reruns = []

    def interrupt_after_two(done, total, label):
        # the comparisons report progress first ("compared ..."), then the reruns continue the count
        if not label.startswith("compared"):
            reruns.append(done)
        if len(reruns) == 2:
            raise KeyboardInterrupt

    result = explain_trace(path, model, checkpoint=str(stem), progress=interrupt_after_two)
    assert result.interrupted and result.rerun == 2
    records, _, _ = stored(path)
    assert sum(r.diverged for r in records) == 2
    assert not [p for p in validate(path) if p.severity == "error"]
    resumed = explain_trace(path, model, checkpoint=str(stem))
    assert resumed.reused == 2 and resumed.rerun == resumed.divergent - 2 and not resumed.interrupted


def test_checkpoint_must_be_the_trace_model(trace_copy, tmp_path):
    _, path, _ = trace_copy
    torch.manual_seed(0)
    other = MoETransformer(ModelConfig(d_model=32, n_layers=1, n_heads=2, n_experts=4, top_k=2,
                                       expert_d_ff=32, context=64, init_std=0.2))
    save_checkpoint(other, tmp_path / "other")
    with pytest.raises(ExplainError, match="not the trace's model: moe_layers .*, n_layers 1 \\(trace 2\\)$"):
        explain(path, checkpoint=str(tmp_path / "other"))
    with pytest.raises(ExplainError, match="--checkpoint: .*missing.safetensors not found"):
        explain(path, checkpoint=str(tmp_path / "missing"))


def parse(argv):
    parser = argparse.ArgumentParser()
    explain_command.add_arguments(parser)
    return parser.parse_args(argv)


def test_command_prints_the_cause_table(trace_copy, capsys):
    stem, path, _ = trace_copy
    assert explain_command.run(parse([str(path), "--checkpoint", str(stem), "-q"])) == 0
    out = capsys.readouterr().out
    assert "| confirmed cause | divergent runs | share" in out and "| capacity" in out
    assert "Unexplained share: 0.0%" in out
    assert "Proven cause (sufficient through the first split): " in out
    assert "Cost of this call: " in out and " minutes, " in out and "reruns per pair (median)" in out


@pytest.mark.parametrize("argv, message", [
    (["{trace}", "--checkpoint", "{stem}", "--request", "99"],
     "--request: the trace holds requests 0..4, not 99"),
    (["{trace}", "--checkpoint", "{stem}", "--limit", "0"], "--limit: must be at least 1"),
    (["{trace}", "--checkpoint", "{stem}", "--device", "gpu7"], "--device: 'gpu7' is not a torch device"),
    (["{trace}", "--threads", "0"], "--threads: must be at least 1"),
    (["{folder}/nothing.h5"], "nothing.h5"),
])
def test_command_rejects_bad_input_with_a_message(trace_copy, argv, message):
    stem, path, _ = trace_copy
    values = {"trace": str(path), "stem": str(stem), "folder": str(path.parent)}
    with pytest.raises(UsageError, match=message.replace("(", "\\(").replace(".", "\\.")):
        explain_command.run(parse([a.format(**values) for a in argv]))


def test_command_line_exits_2_with_the_message(trace_copy, capsys):
    from inspector.cli import main

    _, path, _ = trace_copy
    assert main(["explain", str(path.parent / "nothing.h5")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector explain: error: ") and "nothing.h5" in err and "Traceback" not in err


@pytest.mark.parametrize("evidence, cause", [
    (dict(guess="capacity", dropless_same=True, invariant_same=False, replay_same=True), "capacity"),
    (dict(guess="capacity", dropless_same=False, invariant_same=False, replay_same=True), "capacity"),
    (dict(guess="capacity", dropless_same=False, invariant_same=True, replay_same=True), "upstream_numeric"),
    (dict(guess="capacity", dropless_same=True, invariant_same=True, replay_same=False), "output_numeric"),
    (dict(guess="capacity", coupled=False, dropless_same=True, invariant_same=True, replay_same=True),
     "upstream_numeric"),
    (dict(guess="router_flip", coupled=False, dropless_same=False, invariant_same=True, replay_same=True),
     "router_flip"),
    (dict(guess="router_flip", coupled=False, dropless_same=True, invariant_same=False, replay_same=True),
     "unexplained"),
    (dict(guess="output_numeric", dropless_same=False, invariant_same=True, replay_same=False),
     "output_numeric"),
    (dict(guess="unexplained", dropless_same=False, invariant_same=True, replay_same=False),
     "output_numeric"),
    (dict(guess="output_numeric", native=False, dropless_same=False, invariant_same=False, replay_same=False),
     "unexplained"),
    (dict(guess="router_flip", native=False, dropless_same=True, invariant_same=False, replay_same=True),
     "capacity"),
    (dict(guess="output_numeric", coupled=False, dropless_same=None, invariant_same=True, replay_same=None),
     "output_numeric"),
    (dict(guess="capacity", dropless_same=True, invariant_same=False, replay_same=True, reproduced=False),
     "not_reproduced"),
])
def test_decision_table(evidence, cause):
    e = Evidence(**{**dict(reproduced=True, coupled=True, native=True, proof_kind="capacity"), **evidence})
    assert decide(e).cause == cause


@pytest.mark.parametrize("kind, cause", [("capacity", "capacity"), ("upstream_numeric", "upstream_numeric"),
                                         ("mixed", "mixed"), ("", "unconfirmed")])
def test_capacity_needs_a_proven_event_or_minimal_set_of_its_kind(kind, cause):
    for evidence in (dict(guess="capacity", dropless_same=True, invariant_same=False, replay_same=True),
                     dict(guess="router_flip", native=False, dropless_same=True, invariant_same=False,
                          replay_same=True)):
        decision = decide(Evidence(**{**dict(reproduced=True, coupled=True, native=True, proof_kind=kind),
                                      **evidence}))
        assert decision.cause == cause
        assert ("no single event and no set of events" in decision.reason) == (cause == "unconfirmed")
    numeric = Evidence(reproduced=True, coupled=True, native=True, proof_kind=kind, guess="output_numeric",
                       dropless_same=False, invariant_same=True, replay_same=False)
    assert decide(numeric).cause == "output_numeric"  # the proof rule concerns capacity only


def test_the_shipped_example_reproduces_and_proves_each_capacity_verdict(tmp_path):
    """Counterfactual reruns with the shipped checkpoint judge the example's probe divergences on this
    machine, whatever machine recorded it: the reruns must take every recorded decision again (the
    decisions level; their floats may drift), and every `capacity` verdict names its proof at one
    event or 1-minimal set of events. Pairs whose split no event or set is shown to carry are
    `unconfirmed`, never `capacity`.

    A subset keeps the suite fast: 6 divergent probe runs, taken in turns across its conditions.
    """
    import h5py

    from traces import fingerprint
    from traces.analysis import probe_request

    example = EXAMPLE
    copy = tmp_path / "example.h5"
    shutil.copy(example, copy)
    with h5py.File(copy, "r+") as f:  # drop the shipped verdicts: every one below is this machine's
        del f[f"tables/{TABLE}"]
    with open_trace(copy) as trace:
        probe = probe_request(trace)
        recorded_machine = trace.meta.get("machine", {})
    result = explain(copy, requests=[probe], limit=6)
    assert result.rerun == 6 and not result.not_reproduced, result.levels
    assert set(result.levels.values()) <= {"bitwise", "decisions"}
    records, attrs, _ = stored(copy)
    divergent = [r for r in records if r.diverged]
    assert len(divergent) == 6
    for r in divergent:
        assert r.confirmed_cause not in ("", "unexplained", "not_reproduced"), r.sentence
        assert r.reproduction in ("bitwise", "decisions"), r.sentence
        assert (r.drift == "") == (r.reproduction == "bitwise"), r.sentence
        if r.confirmed_cause == "capacity":
            assert_proof(r)
    assert any(r.confirmed_cause == "capacity" for r in divergent)
    # Native pairs carry both kinds of difference where the kernels round by batch shape: a numeric
    # root (router logits an ulp apart) before the drop that decides. The proof must be of capacity
    # kind (a router change it holds came after earlier drops), never the numeric root alone.
    both = [r for r in divergent if r.first_kind == "router_logits" and r.cause == "capacity"
            and r.confirmed_cause == "capacity"]
    for r in both:
        assert r.proof_kind == "capacity" and r.logits_same is not True, r.sentence
    assert attrs["rerun_machine"]["threads"] == torch.get_num_threads()
    if fingerprint.differences(recorded_machine, attrs["rerun_machine"]):  # kernel-relevant fields only
        assert all("Recorded on" in r.sentence for r in divergent)
    summary = result.summary()
    assert summary.counts["unexplained"] == 0 and not summary.counts.get("not_reproduced")
    unconfirmed = sum(r.confirmed_cause == "unconfirmed" for r in divergent)
    assert summary.unexplained_share == pytest.approx(unconfirmed / len(divergent))


def test_a_rerun_with_another_thread_count_confirms_at_the_decisions_level(tmp_path, tiny_model):
    """Recorded with one thread, explained with two: the verdicts hold (bitwise or at the decisions
    level), and `redo` on the second machine never loses the first call's confirmed verdicts."""
    stem = tmp_path / "tiny"
    save_checkpoint(tiny_model(0), stem)
    model, _ = load_checkpoint(stem)
    path = tmp_path / "trace.h5"
    torch.set_num_threads(1)
    record_trace(path, model, CONDITIONS[:2])
    with open_trace(path) as trace:
        assert trace.meta["machine"]["threads"] == 1
    first = explain_trace(path, model, checkpoint=str(stem))
    before = {(r.run, r.row): r for r in stored(path)[0]}
    confirmed = {k: r.confirmed_cause for k, r in before.items() if r.diverged}
    assert confirmed and all(r.reproduction == "bitwise" for r in before.values() if r.diverged)
    assert first.summary().unexplained_share == 0.0
    torch.set_num_threads(2)
    try:
        second = explain_trace(path, model, checkpoint=str(stem), redo=True,
                               device="cpu")
    finally:
        torch.set_num_threads(1)
    assert not second.not_reproduced and set(second.levels.values()) <= {"bitwise", "decisions"}
    assert second.rerun_machine["threads"] == 2
    after = {(r.run, r.row): r for r in stored(path)[0]}
    assert {k: after[k].confirmed_cause for k in confirmed} == confirmed
    assert all(after[k].reproduction in ("bitwise", "decisions") for k in confirmed)
    assert second.summary().unexplained_share == 0.0


def test_redo_keeps_a_stronger_verdict_than_its_rerun(trace_copy, monkeypatch):
    """A rerun that cannot reproduce the recording never replaces a verdict confirmed before."""
    stem, path, model = trace_copy
    explain_trace(path, model, checkpoint=str(stem))
    before = {(r.run, r.row): r for r in stored(path)[0] if r.diverged}
    with torch.no_grad():  # another model under the same checkpoint name: nothing reproduces
        broken = load_checkpoint(stem)[0]
        broken.embed.weight.mul_(1.5)
    result = explain_trace(path, broken, checkpoint=str(stem), redo=True)
    assert result.not_reproduced and result.kept_stronger == len(before)
    after = {(r.run, r.row): r for r in stored(path)[0] if r.diverged}
    assert {k: (r.confirmed_cause, r.reproduction) for k, r in after.items()} == \
        {k: (r.confirmed_cause, r.reproduction) for k, r in before.items()}


def test_sigterm_stores_the_finished_pairs_as_ctrl_c_does(trace_copy, capsys, monkeypatch):
    import os
    import signal

    stem, path, _ = trace_copy

    reruns = []

    def terminate_after_two(done, total, label):  # two pairs rerun, after all the comparisons
        if not label.startswith("compared"):
            reruns.append(label)
            if len(reruns) == 2:
                os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr("lab.experiments.progress.no_progress", terminate_after_two)
    before = signal.getsignal(signal.SIGTERM)
    assert explain_command.run(parse([str(path), "--checkpoint", str(stem), "-q"])) == 143
    assert "explain: terminated: the runs explained so far are stored" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before
    records, _, _ = stored(path)
    assert sum(r.diverged for r in records) == 2


def test_two_calls_on_one_file_keep_every_record_of_both(trace_copy):
    """A second call's write waits for the first's (the trace's one-writer lock) and keeps the records
    the first stored since the second read the table."""
    import threading

    from lab.counterfactual.store import record_key, store

    stem, path, model = trace_copy
    explain_trace(path, model, checkpoint=str(stem), requests=[0], limit=1)
    records, attrs, _ = stored(path)
    assert len(records) >= 2
    half = len(records) // 2
    first, second = records[:half], records[half:]
    store(str(path), first, checkpoint=attrs["checkpoint"])      # as if each call had only its own
    held = threading.Event()

    def other_writer():
        with TraceWriter.append(path):
            held.set()
            time.sleep(1.0)

    thread = threading.Thread(target=other_writer)
    thread.start()
    held.wait(10)
    t0 = time.perf_counter()
    store(str(path), second, checkpoint=attrs["checkpoint"])     # waits for the other writer
    thread.join()
    assert time.perf_counter() - t0 >= 0.5
    after = stored(path)[0]
    assert {record_key(r) for r in after} == {record_key(r) for r in records}


def test_a_clone_elsewhere_reuses_the_shipped_examples_table(tmp_path):
    """The shipped example's table names its checkpoint by the path of the clone that made it; any
    other clone reuses it (no pair rerun) and stores the name as `assets/...`."""
    example = EXAMPLE
    copy = tmp_path / "elsewhere" / "example.h5"
    copy.parent.mkdir()
    shutil.copy(example, copy)
    result = explain(copy)
    assert result.rerun == 0 and result.reused == result.divergent > 0
    _, attrs, _ = stored(copy)
    assert attrs["checkpoint"] == "assets/moe-default"
    assert attrs["checkpoint_sha256"].startswith("sha256:")
    # The same weights under another name beside the trace: the same content, so the table is reused;
    # changed weights under the shipped name: not the same checkpoint, the table is not reused.
    renamed = copy.parent / "my-model"
    shipped = checkpoint_paths(ASSETS / "moe-default")
    for source, target in zip(shipped, checkpoint_paths(renamed), strict=True):
        shutil.copy(source, target)
    again = explain(copy, checkpoint=str(renamed))
    assert again.rerun == 0 and again.reused == result.divergent
    changed = copy.parent / "changed"
    for source, target in zip(checkpoint_paths(renamed), checkpoint_paths(changed), strict=True):
        shutil.copy(source, target)
    with open(checkpoint_paths(changed)[0], "r+b") as f:   # one byte of the weights' end
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    assert not same_checkpoint({"checkpoint": "assets/moe-default",
                                "checkpoint_sha256": checkpoint_digest(ASSETS / "moe-default")},
                               "assets/moe-default", checkpoint_digest(changed))
