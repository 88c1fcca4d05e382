"""Figure data of the divergence views on a hand-built trace whose causes are known.

The trace (`write_known_trace`): request 0 (the probe, prompt [1, 2], four new tokens) in four runs.
- "alone": the probe alone, capacity 8 everywhere: completion 3 4 5 6.
- "twin": the probe with a partner that crowds nothing: the same completion, bit for bit.
- "crowded": partners crowd expert 3 at layer 1 in the prefill under capacity 2, so the probe's
  2nd choice expert 3 at position 1 is dropped (slot 3; rows 0, 2, 0 hold slots 0-2) and the next
  token becomes 7: t* = 2, cause capacity. An explanation table confirms it by counterfactual.
- "flip": router logits at layer 0, position 3 sit at a near-tie (1.0 against 0.9999) that flips
  in this run, the 2nd choice changes from expert 0 to expert 2 and the token at position 4 becomes
  7: cause router_flip, not confirmed by any table.
Slots follow the k-major position priority (docs/routing.md) with batch-major arrival, as in the recorder.
"""

from __future__ import annotations

import copy
import gc
import subprocess
import sys
import weakref
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from inspector.figure_data.divergence_source import DivergenceSource, find_record, table_reference
from inspector.figure_data.pair import (
    EXPERTS,
    IDENTICAL,
    KEPT_SET,
    NOT_COMPARED,
    drop_differences,
    pair_figure_data,
)
from inspector.figure_data.runs import completion_clusters, runs_figure_data
from traces import TraceWriter, open_trace
from traces.analysis import ExplainRecord, RunArrays, explain_pair, prefix_tree, row_trace, to_columns
from traces.analysis.explain_table import table_attrs, table_name, with_counterfactuals
from traces.analysis.request import analyse_request
from traces.synthetic import byte_vocab, synthetic_meta

L, K, E, V, T, P = 2, 2, 4, 8, 6, 2
S = T - P + 1
PROMPTS = [[1, 2], [5, 5], [2, 2], [6, 1]]
#: The probe's experts per layer and position (1st, 2nd choice); position 3 of layer 0 is the near-tie.
PROBE_EXPERTS = [[[0, 1], [2, 3], [1, 0], [1, 0], [3, 2], [0, 1]],
                 [[0, 1], [1, 3], [2, 0], [0, 1], [2, 1], [3, 0]]]
QUIET = [[[2, 1], [0, 2], [1, 2], [1, 2], [2, 1], [1, 2]]] * L   # a partner that crowds nothing much
NEAR_TIE = 0.9999


def _kmajor_slots(expert: np.ndarray, step: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Slots under k-major position priority: every 1st choice, then every 2nd, each by b * T + t."""
    slot = np.full(expert.shape, -1, np.int32)
    for l in range(expert.shape[0]):
        taken: dict[tuple[int, int, int], int] = {}
        for j in range(expert.shape[3]):
            for b in range(expert.shape[1]):
                for t in range(expert.shape[2]):
                    key = (int(step[b, t]), int(group[l, b, t]), int(expert[l, b, t, j]))
                    slot[l, b, t, j] = taken.get(key, 0)
                    taken[key] = slot[l, b, t, j] + 1
    return slot


def make_arrays(tokens, expert, capacity, near_tie: tuple[int, int] | None = None,
                flipped: bool = False) -> dict[str, np.ndarray]:
    """Consistent arrays of one run: router logits favouring the chosen experts (2.0, 1.0), slots,
    kept, after-drop gates, loads, and next-token logits with 1.0 on the next token.

    `near_tie` = (row, position): at layer 0 there, experts 0 and 2 tie within 1e-4 below the first
    choice; `flipped` gives expert 2 the edge (else expert 0).
    """
    tokens, expert = np.asarray(tokens, np.int32), np.asarray(expert, np.int16)
    B = tokens.shape[0]
    step = np.broadcast_to(np.maximum(np.arange(T) - P + 1, 0), (B, T)).astype(np.int16)
    group = np.zeros((L, B, T), np.int32)
    router_logits = np.zeros((L, B, T, E), np.float32)
    for j, score in enumerate((2.0, 1.0)):
        np.put_along_axis(router_logits, expert[..., j:j + 1].astype(np.int64), score, axis=-1)
    if near_tie is not None:
        b, t = near_tie
        router_logits[0, b, t, [0, 2]] = (NEAR_TIE, 1.0) if flipped else (1.0, NEAR_TIE)
    slot = _kmajor_slots(expert, step, group)
    capacity = np.asarray(capacity, np.int32)  # [S, L, G]
    kept = slot < capacity[step.astype(int)[None], np.arange(L)[:, None, None], group][..., None]
    chosen = np.exp(np.take_along_axis(router_logits, expert.astype(np.int64), axis=-1)) * kept
    gate = (chosen / chosen.sum(axis=-1, keepdims=True)).astype(np.float32)
    requested = np.zeros((S, L, 1, E), np.int32)
    load_kept = np.zeros((S, L, 1, E), np.int32)
    ll, bb, tt, kk = np.nonzero(expert >= 0)
    ee, ss = expert[ll, bb, tt, kk], step[bb, tt]
    np.add.at(requested, (ss, ll, 0, ee), 1)
    k = kept[ll, bb, tt, kk]
    np.add.at(load_kept, (ss[k], ll[k], 0, ee[k]), 1)
    logits = np.zeros((B, T, V), np.float32)
    for b in range(B):
        for t in range(T - 1):
            logits[b, t, tokens[b, t + 1]] = 1.0
    return {"tokens": tokens, "prompt_len": np.full(B, P, np.int32), "step": step, "routing/expert": expert,
            "routing/gate": gate, "routing/kept": kept, "routing/slot": slot, "routing/group": group,
            "routing/router_logits": router_logits, "load/requested": requested, "load/kept": load_kept,
            "load/capacity": capacity, "logits": logits}


def roomy() -> np.ndarray:
    return np.full((S, L, 1), 8, np.int32)


def known_runs() -> list[tuple[str, list[int], int, dict[str, np.ndarray]]]:
    """(name, request ids, probe row, arrays) of the four runs described in the module docstring."""
    probe = np.array(PROBE_EXPERTS)
    alone = make_arrays([[1, 2, 3, 4, 5, 6]], probe[:, None], roomy(), near_tie=(0, 3))
    twin_expert = np.stack([probe, np.array(QUIET)], axis=1)
    twin = make_arrays([[1, 2, 3, 4, 5, 6], [2, 2, 1, 1, 1, 1]], twin_expert, roomy(), near_tie=(0, 3))
    crowded_expert = np.zeros((L, 3, T, K), np.int16)
    crowded_expert[:, 1] = probe
    crowded_expert[:, 0], crowded_expert[:, 2] = QUIET, QUIET
    crowded_expert[1, 0, :2] = [[3, 0], [2, 3]]   # crowds expert 3: a 1st choice at position 0 ...
    crowded_expert[1, 2, :2] = [[3, 2], [0, 1]]   # ... and another one
    tight = roomy()
    tight[0, 1, 0] = 2
    crowded = make_arrays([[5, 5, 0, 0, 0, 0], [1, 2, 7, 4, 5, 6], [6, 1, 1, 1, 1, 1]], crowded_expert, tight,
                          near_tie=(1, 3))
    flip_expert = np.stack([probe, np.array(QUIET)], axis=1)
    flip_expert[0, 0, 3] = [1, 2]
    flip = make_arrays([[1, 2, 3, 4, 7, 6], [5, 5, 3, 3, 3, 3]], flip_expert, roomy(), near_tie=(0, 3),
                       flipped=True)
    return [("alone", [0], 0, alone), ("twin", [0, 2], 0, twin), ("crowded", [1, 0, 3], 1, crowded),
            ("flip", [0, 1], 0, flip)]


def write_known_trace(path, *, confirm: bool = True, bad_table: bool = False) -> str:
    """Write the known trace (and, with `confirm`, an explanation table confirming crowded's cause)."""
    meta = replace(synthetic_meta(L, E, K, V),
                   routing={"group_by": "batch", "priority": "kmajor_position", "capacity": "fixed"})
    runs = known_runs()
    with TraceWriter(path, meta=meta, vocab=byte_vocab(V), requests=["probe", "one", "two", "three"],
                     prompt_tokens=PROMPTS, compression=None) as writer:
        for i, (name, ids, probe_row, arrays) in enumerate(runs):
            attrs = {"request_ids": np.asarray(ids), "probe_row": probe_row, "batch_size": len(ids),
                     "max_new_tokens": T - P, "label": f"{name} ({len(ids)} rows)", "condition": "known",
                     "experiment": "test", "routing": meta.routing, "kernel_mode": "native", "seed": i,
                     "wall_time_s": 0.0}
            writer.add_run(name, attrs=attrs, arrays=arrays)
        if confirm:
            by_name = {name: RunArrays.from_schema(name, arrays, request_ids=ids, probe_row=probe_row)
                       for name, ids, probe_row, arrays in runs}
            v = explain_pair(row_trace(by_name["alone"], 0), row_trace(by_name["crowded"], 1))
            record = with_counterfactuals(ExplainRecord.from_verdict(v), dropless_same=True, replay_same=True,
                                          confirmed_cause="capacity")
            writer.write_table(table_name("E1 test"), to_columns([record]), attrs=table_attrs())
        if bad_table:
            writer.write_table(table_name("broken"), {"run": np.array(["alone"])}, attrs=table_attrs())
    return str(path)


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    path = write_known_trace(tmp_path_factory.mktemp("known") / "known.h5", bad_table=True)
    with open_trace(path) as trace:
        yield DivergenceSource(trace)


def pair(source, a: str, b: str, layer: int):
    choices = {c.run: c for c in source.choices(0)}
    ca, cb = choices[a], choices[b]
    record = find_record(source.records(), cb.run, cb.row, ca.run, ca.row)
    return pair_figure_data(source.row(ca.run, ca.row), source.row(cb.run, cb.row), layer, vocab=source.vocab,
                            capacity_a=source.capacity(a, layer), capacity_b=source.capacity(b, layer),
                            record=record, request_ids={a: source.request_ids(a), b: source.request_ids(b)})


def test_fixture_drops_the_probe_candidate_by_capacity_by_hand(known):
    crowded = known.row("crowded", 1)
    assert crowded.slot[1, 1, 1] == 3 and not crowded.kept[1, 1, 1]
    assert crowded.kept[0].all() and crowded.kept[1, 0].all() and crowded.kept[1, 1, 0]
    assert known.row("alone", 0).kept.all() and known.row("flip", 0).kept.all()


def test_source_lists_requests_runs_and_explanations(known):
    assert known.requests() == [0, 1]  # request 1 is a partner in crowded and in flip
    assert known.default_request() == 0 and known.default_request("crowded", 0) == 1
    assert known.default_request("crowded", 1) == 0
    assert [(c.run, c.row, c.is_probe) for c in known.choices(0)] == [
        ("alone", 0, True), ("twin", 0, True), ("crowded", 1, True), ("flip", 0, True)]
    assert known.conditions(0) == ["known"]
    assert len(known.records()) == 1 and known.records()[0].confirmed_cause == "capacity"
    assert known.table_problems and "explain_broken" in known.table_problems[0]
    assert find_record(known.records(), "alone", 0, "crowded", 1) is known.records()[0]  # either direction
    assert find_record(known.records(), "flip", 0, "alone", 0) is None
    assert table_reference(known.records(), known.choices(0)) == "alone"


def test_capacity_pair_marks_t_star_the_drop_and_the_confirmed_cause(known):
    data = pair(known, "alone", "crowded", 1)
    assert (data.t_star, data.compared, data.length) == (2, 2, T)
    assert data.verdict.cause == "capacity" and (data.verdict.position, data.verdict.layer) == (1, 1)
    assert data.cause.cause == "capacity" and data.cause.confirmed
    assert "confirmed by counterfactual" in data.cause.headline
    assert data.cause.displacing_rows == (0, 2, 0) and data.cause.displacing_run == "crowded"
    assert [c.request for c in data.cause.displacing] == [1, 3, 1]
    assert any("dropless" in line and "gives A's completion" in line
               for line in data.cause.counterfactuals)
    # The strip at layer 1: B dropped a candidate A kept, at position 1 only; past t* nothing is compared.
    strip = data.strip()
    np.testing.assert_array_equal(strip[:, :2], [[0, 0], [0, 0], [0, 1]])
    assert (strip[:, 2:] == -1).all()
    assert data.kinds[1, 1] == KEPT_SET and data.kinds[0, 1] == IDENTICAL
    assert (data.kinds[:, 0] == IDENTICAL).all()
    assert (data.kinds[:, 2:] == NOT_COMPARED).all()
    np.testing.assert_array_equal(data.first_differences(), [-1, 1])
    # Next-token curves: the logits differ at position 1 (they produce t*), not at 0.
    assert data.kl[0] == 0 and data.kl[1] > 0 and np.isnan(data.kl[2:]).all()
    assert data.logit_diff[1] == pytest.approx(1.0) and data.logit_margin[1] == pytest.approx(1.0)
    np.testing.assert_array_equal(data.drops_a, np.zeros(T))
    np.testing.assert_array_equal(data.drops_b, [0, 1, 0, 0, 0, 0])
    assert [data.text_a.kind(i) for i in range(T)] == ["prompt", "prompt", "t*", "after", "after", "after"]
    assert data.text_b.texts[2] == byte_vocab(V)[7]


def test_router_flip_pair_is_a_guess_until_confirmed(known):
    data = pair(known, "alone", "flip", 0)
    v = data.verdict
    assert v.cause == "router_flip" and (v.position, v.layer, v.rank) == (3, 0, 1) and data.t_star == 4
    assert v.router_margin == pytest.approx(1.0 - NEAR_TIE, rel=1e-3)
    assert not data.cause.confirmed and not data.cause.proven
    assert data.cause.headline.startswith("Cause: first difference (no proof yet): router flip at position 3")
    assert "nothing is proven until explain reruns the pair" in data.cause.headline
    assert data.cause.event == (3, 0) and data.cause_event == (3, 0) and data.cause.cells == ()
    assert data.changed[0, 3] and data.kinds[0, 3] == EXPERTS and data.strip()[0, 3] == 1
    assert not data.changed[1].any() and (data.kinds[:, 4:] == NOT_COMPARED).all()
    assert "router flip" in data.cause.sentence


def test_identical_pair_says_so(known):
    data = pair(known, "alone", "twin", 0)
    assert data.t_star == -1 and data.verdict.cause == "identical" and data.compared == T
    assert (data.kinds == IDENTICAL).all() and data.cause.headline.startswith("No divergence")


def test_bad_pairs_raise_clear_errors(known):
    with pytest.raises(ValueError, match="MoE layer 5"):
        pair_figure_data(known.row("alone", 0), known.row("crowded", 1), 5, vocab=known.vocab,
                         capacity_a=known.capacity("alone", 0), capacity_b=known.capacity("crowded", 0))
    other = known.row("crowded", 0)  # request 1
    with pytest.raises(ValueError, match="request"):
        pair_figure_data(known.row("alone", 0), other, 0, vocab=known.vocab,
                         capacity_a=known.capacity("alone", 0), capacity_b=known.capacity("crowded", 0))


def test_drop_differences_match_experts_as_sets():
    ea = np.array([[[1, 2], [1, 2]]])
    eb = np.array([[[2, 1], [1, 3]]])
    ka = np.array([[[True, False], [False, True]]])
    kb = np.array([[[True, True], [True, True]]])
    a_only, b_only = drop_differences(ea, ka, eb, kb)
    np.testing.assert_array_equal(a_only, [[True, True]])  # expert 2 at t=0 (order swapped), 1 at t=1
    assert not b_only.any()


def test_overview_counts_completions_tree_and_causes(known):
    choices = known.choices(0)
    data = runs_figure_data(known.rows(choices), choices, 0, vocab=known.vocab, records=known.records())
    assert (data.n_runs, data.n_unique, data.mode_count, data.n_new) == (4, 3, 2, 4)
    assert data.headline == "U(4) = 3 distinct completions of 4 new tokens; the most common one 2/4 (50%)"
    assert data.first_split == "the 4 runs split 3/1 at the first new token (position 2)"
    assert [(n.depth, n.count, n.start, n.split, n.runs) for n in data.tree] == [
        (0, 4, 0, 0, ("alone", "twin", "crowded", "flip")),
        (1, 3, 1, 2, ("alone", "twin", "flip")),
        (2, 2, 3, 4, ("alone", "twin")),
        (2, 1, 3, 4, ("flip",)),
        (1, 1, 1, 4, ("crowded",))]
    vocab = byte_vocab(V)
    assert [n.token for n in data.tree[1:]] == [vocab[3], vocab[5], vocab[7], vocab[7]]
    assert data.split_points == ((2, (3, 1)), (4, (2, 1)))
    np.testing.assert_array_equal(data.t_star, [-1, -1, 2, 4])
    assert data.run_causes == ("identical", "identical", "capacity", "router_flip")
    assert data.run_confirmed == (False, False, True, False)
    assert [(c.cause, c.count, c.share, c.confirmed) for c in data.causes] == [
        ("capacity", 1, 0.5, 1), ("router_flip", 1, 0.5, 0)]
    assert data.n_divergent == 2
    # Display order follows the tree; colours change where a run leaves its majority group.
    assert [data.choices[i].run for i in data.order] == ["alone", "twin", "flip", "crowded"]
    np.testing.assert_array_equal(data.clusters, [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 2, 2], [1, 1, 1, 1]])


def test_completion_clusters_follow_the_majority_path():
    new = np.array([[1, 2, 3], [1, 2, 3], [1, 2, 4], [1, 5, 6], [1, 5, 6]])
    labels = np.array([0, 0, 2, 1, 1])
    order, clusters = completion_clusters(prefix_tree(new), labels, 3)
    assert order.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(clusters, [[0, 0, 0], [0, 0, 0], [0, 0, 2], [0, 1, 1], [0, 1, 1]])


def test_figure_data_needs_no_qt():
    code = ("import sys; import inspector.figure_data.pair, inspector.figure_data.runs, "
            "inspector.figure_data.divergence_source, inspector.figure_data.divergence_cause; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_panel_leads_with_the_proven_cause_and_names_the_first_difference_apart(known):
    import dataclasses

    from inspector.figure_data.divergence_cause import cause_text, counterfactual_lines

    choices = {c.run: c for c in known.choices(0)}
    a, b = choices["alone"], choices["crowded"]
    v = explain_pair(known.row(a.run, a.row), known.row(b.run, b.row))
    base = dataclasses.replace(known.records()[0], dropless_same=True, invariant_same=False, replay_same=True)
    words = "keeping expert 3 (2nd choice) for row 1 at position 0, layer 0 of run crowded"
    proved = dataclasses.replace(base, confirmed_cause="capacity", keep_same=False, sufficient=words,
                                 scope="candidate", proof_step=0, proof_layer=0, proof_position=0,
                                 proof_kind="capacity", proof_cells="0:0", proof_size=1, proof_reruns=7,
                                 necessary=True, reach=1, reach_of=4)
    text = cause_text(v, proved)
    assert text.proven and text.event == (0, 0) and text.cells == ((0, 0),)
    assert text.headline.startswith("Proven cause: capacity — at position 0 (prompt), layer 0; the first "
                                    "difference, at position 1 (prompt), layer 1, is not it.")
    lettered = words  # the intervention's words are shown as explain stored them
    assert text.sentence.startswith(f"Proven cause: {lettered} alone restores the other run's tokens through "
                                    f"the first split (position 2, new token 0).")
    assert "Necessary as well" in text.sentence and "agrees for its first 1 of 4 new tokens" in text.sentence
    assert "First difference (observed): Position 1, layer 1:" in text.sentence
    assert dict(text.facts)["proven cause"] == f"capacity: {lettered}"
    assert dict(text.facts)["runs"].startswith("A = run alone row 0, B = run crowded row 1")  # named once
    assert "the search for the proven cause took 7 reruns" in counterfactual_lines(proved)
    assert "at the first difference (position 1, layer 1), keeping the dropped candidate alone does not " \
           "remove the split" in counterfactual_lines(proved)
    pair_set = dataclasses.replace(proved, proof_cells="0:0 1:1", proof_size=2, scope="set",
                                   proof_kind="mixed", confirmed_cause="mixed", necessary=False, reach=4)
    text = cause_text(v, pair_set)
    assert text.cells == ((0, 0), (1, 1))
    assert "a minimal set of 2 events, the first at position 0" in text.headline
    assert "1-minimal set of 2 events (mixed)" in text.sentence and "Not necessary" in text.sentence
    assert "restores the whole completion (4 of 4 new tokens)" in text.sentence
    # The root-event scan: which run is changed, the alternatives, a weak placebo, the chain, a router
    # event (not a drop: the meaning says so).
    scanned = dataclasses.replace(proved, proof_how="cell", proof_run="crowded", candidates=40,
                                  candidates_all=40, alternatives=3, alternative_cells="0:0 1:1", placebo=0.4,
                                  chain_cells="0:2 1:3+0:3", chain_reach="2 4", chain_end="whole")
    text = cause_text(v, scanned)
    assert "weak: a near-tie" in text.headline and "not a drop" in text.headline
    assert "makes B give A's tokens through the first split" in text.sentence
    assert "Root event: the earliest of 3 of 40 candidate events that each suffice alone (at 2 cells" \
           in text.sentence and "proximate trigger" in text.sentence
    assert "Weak: 4 of 10 random routings at that cell restore the tokens too" in text.sentence
    assert "Chain: 4 events restore all 4 new tokens." in text.sentence
    facts = dict(text.facts)
    assert facts["changed run"] == "B (it then gives A's tokens)"
    assert facts["alternatives"] == "1 of 3 events that each suffice (of 40 scanned)"
    assert facts["chain"] == "4 events restore 4 of 4 new tokens (the whole completion)"
    assert facts["the event changes"] == "the router's choice: the experts routed to"
    unproved = dataclasses.replace(base, confirmed_cause="unconfirmed", proof_reruns=30)
    text = cause_text(v, unproved)
    assert not text.proven and not text.confirmed and text.event == (1, 1)
    assert text.headline.startswith("Cause: first difference (no proof yet): capacity at position 1")
    assert "explain found no proof: unconfirmed" in text.headline
    assert counterfactual_lines(unproved)[-1].endswith("the cause is unconfirmed")


def test_the_cause_names_its_own_model_layer_not_the_one_on_screen(known):
    # The capacity pair's cause is at MoE layer 1; shown at layer 0 of a model whose MoE blocks are
    # model layers 2 and 5, the facts must say model layer 5, the heatmaps model layer 2.
    choices = {c.run: c for c in known.choices(0)}
    a, b = choices["alone"], choices["crowded"]
    data = pair_figure_data(known.row(a.run, a.row), known.row(b.run, b.row), 0, vocab=known.vocab,
                            capacity_a=known.capacity("alone", 0), capacity_b=known.capacity("crowded", 0),
                            moe_layers=[2, 5])
    assert data.verdict.layer == 1 and data.model_layer == 2
    facts = dict(data.cause.facts)
    assert facts["first difference"] == "position 1, layer 1 (model layer 5)"


def test_a_cause_added_to_the_table_reaches_the_summary_the_views_and_the_csv(known, monkeypatch, tmp_path):
    import csv
    import dataclasses

    from inspector.export import Export, Selection, save
    from inspector.figure_data.divergence_cause import cause_text
    from traces.analysis.cause_table import CAUSE_TABLE, Cause, unexplained

    meaning = "a cosmic ray flipped a bit of the router's input"
    monkeypatch.setitem(CAUSE_TABLE, "cosmic_ray", Cause("cosmic_ray", meaning, "numeric", "#123456",
                                                         explained=True, observed=False))
    choices = known.choices(0)
    records = [dataclasses.replace(r, confirmed_cause="cosmic_ray") for r in known.records()]
    data = runs_figure_data(known.rows(choices), choices, 0, vocab=known.vocab, records=records)
    row = next(c for c in data.causes if c.cause == "cosmic_ray")
    assert (row.count, row.confirmed, row.colour) == (1, 1, "#123456")
    assert "cosmic ray 1 (50%)" in data.causes_line and "cosmic_ray" not in unexplained()
    columns = data.to_columns()
    i = list(columns["cause"]).index("cosmic_ray")
    assert columns["cause_meaning"][i] == meaning and columns["confirmed"][i]
    csv_path = tmp_path / "runs.csv"   # the file `export --view runs` writes
    save(Export("runs", data, Selection()), csv_path)
    header, *lines = csv.reader(csv_path.read_text(encoding="utf-8").splitlines())
    written = [dict(zip(header, line, strict=True)) for line in lines]
    assert [(r["cause"], r["cause_meaning"]) for r in written if r["cause"] == "cosmic_ray"] == [
        ("cosmic_ray", meaning)]
    by_run = {c.run: c for c in choices}
    a, b = by_run[records[0].ref_run], by_run[records[0].run]
    v = explain_pair(known.row(a.run, a.row), known.row(b.run, b.row))
    text = cause_text(v, records[0])
    assert text.cause == "cosmic_ray" and meaning[1:] in text.headline


def test_the_source_compares_a_pair_once_whatever_the_layer(tmp_path, monkeypatch):
    from inspector.figure_data import divergence_source

    calls = []
    real = divergence_source.compare_rows
    monkeypatch.setattr(divergence_source, "compare_rows", lambda a, b: calls.append(1) or real(a, b))
    with open_trace(write_known_trace(tmp_path / "known.h5")) as trace:
        source = DivergenceSource(trace)
        choices = {c.run: c for c in source.choices(0)}
        a, b = choices["alone"], choices["crowded"]
        first, second = source.pair(a, b, 0), source.pair(a, b, 1)
        assert (first.layer, second.layer) == (0, 1) and first.verdict is second.verdict
        assert first.kinds is second.kinds or (first.kinds == second.kinds).all()
        assert len(calls) == 1
        by_hand = pair(source, "alone", "crowded", 1)
        assert by_hand.verdict == second.verdict and by_hand.cause == second.cause


def test_runs_are_called_a_and_b_by_whole_name_only():
    from traces.analysis.verdict_text import letter_labels, run_label

    label = letter_labels("r1", "r1.0")  # names that share a prefix or end in a full stop
    assert [label(r) for r in ("r1", "r1.0", "r10", "r1.5")] == ["A", "B", "run r10", "run r1.5"]
    same = letter_labels("r1", "r1")  # one run: no letters
    assert same("r1") == run_label("r1") == "run r1"


def test_a_requests_analysis_keeps_the_rows_it_was_given_not_a_copy_of_them_all(known):
    """`export --view runs` goes through thousands of runs read on demand (a bounded memo): the analysis
    keeps the sequence it was given, so the rows it went through can be freed (a copy of them all held
    2.6 GB at 2,000 runs)."""
    source = known.rows(known.choices(0))
    alive: weakref.WeakSet = weakref.WeakSet()

    class Fresh(Sequence):  # 400 runs of the request, each read built anew, as past the source's memo
        def __len__(self) -> int:
            return 400

        def __getitem__(self, i):
            if isinstance(i, slice):
                return [self[j] for j in range(len(self))[i]]
            row = copy.copy(source[range(len(self))[i] % len(source)])  # IndexError past the end
            alive.add(row)
            return row

    rows = Fresh()
    analysis = analyse_request(rows, reference=0)
    gc.collect()
    assert len(alive) <= 2, f"{len(alive)} of 400 rows still held after the analysis"
    assert analysis.rows is rows
    assert len(analysis.verdicts) == 400
