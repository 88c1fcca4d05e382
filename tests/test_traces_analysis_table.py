"""Cause summaries and explanation tables: columns for `write_table`, read back through the reader."""

import dataclasses
import math

import numpy as np
import pytest

from traces import TraceWriter, open_trace
from traces.analysis import Difference, Displacement, ExplainRecord, Verdict, summarize
from traces.analysis.cause_table import first_difference_causes
from traces.analysis.displacement import Candidate
from traces.analysis.explain_table import (
    COLUMNS,
    from_columns,
    summarize_records,
    table_attrs,
    table_name,
    to_columns,
    with_counterfactuals,
)
from traces.synthetic import byte_vocab, synthetic_meta


def make_verdict(run: str, cause: str, t_star: int, **extra) -> Verdict:
    base = dict(run=run, row=2, ref_run="r000", ref_row=0, request=0, is_probe=True, ref_is_probe=True,
                prompt_len=10, compared=t_star if t_star >= 0 else 30, t_star=t_star,
                token=65 if t_star >= 0 else -1, ref_token=66 if t_star >= 0 else -1, cause=cause,
                position=-1, layer=-1, root=None)
    return Verdict(**{**base, **extra})


def capacity_verdict() -> Verdict:
    ahead = tuple(Candidate(row=r, position=p, rank=0, slot=i, kept=True)
                  for i, (r, p) in enumerate([(3, 1), (3, 4), (7, 0)]))
    d = Displacement(run="r005", layer=2, row=2, position=12, rank=1, expert=5, step=0, group=0, slot=3,
                     capacity=3, kept=False, is_probe=True, ahead=ahead)
    return make_verdict("r005", "capacity", 20, position=12, layer=2, rank=1, ref_experts=(1, 5),
                        experts=(1, 5), ref_kept=(True, True), kept=(True, False), displacement=d,
                        root=Difference(position=0, layer=0, kind="router_logits"), router_margin=0.25,
                        router_delta=1e-7, logit_margin=0.01, logit_delta=0.3)


def verdicts() -> list[Verdict]:
    return [make_verdict("r000", "identical", -1), capacity_verdict(),
            make_verdict("r001", "router_flip", 15, position=11, layer=0, rank=1, router_margin=1e-4),
            make_verdict("r002", "capacity", 17, position=11, layer=1, rank=0, ref_experts=(4, 1),
                         experts=(4, 1), ref_kept=(False, True), kept=(True, True), slots=(1, 0),
                         ref_slots=(6, 2)),
            make_verdict("r003", "output_numeric", 25, position=24),
            make_verdict("r004", "upstream_numeric", -1, position=3, layer=1)]


def test_summary_counts_and_shares_of_divergent_runs():
    s = summarize(verdicts())
    assert (s.n_runs, s.n_divergent) == (6, 4)
    assert list(s.counts)[: len(first_difference_causes())] == list(first_difference_causes())
    assert s.counts["capacity"] == 2 and s.counts["router_flip"] == 1 and s.counts["upstream_numeric"] == 0
    assert s.shares["capacity"] == 0.5 and s.unexplained_share == 0.0
    assert s.rows() == [("capacity", 2, 0.5), ("router_flip", 1, 0.25), ("output_numeric", 1, 0.25)]
    assert s.describe() == ("4 of 6 runs diverge: capacity 2 (50%), router_flip 1 (25%), output_numeric 1 "
                            "(25%); unexplained 0%.")
    assert summarize([make_verdict("r9", "unexplained", 12)]).unexplained_share == 1.0
    assert summarize([]).describe() == "0 of 0 runs diverge."


def test_record_of_a_capacity_verdict():
    r = ExplainRecord.from_verdict(capacity_verdict())
    assert (r.cause, r.position, r.layer, r.rank, r.t_star, r.new_index) == ("capacity", 12, 2, 1, 20, 10)
    assert (r.dropped_in, r.capacity, r.group, r.step, r.slot) == ("r005", 3, 0, 0, 3)
    assert r.displacing_rows == "3 3 7"
    assert (r.first_kind, r.first_position, r.first_layer) == ("router_logits", 0, 0)
    assert r.sentence.startswith("Position 12, layer 2: the probe's 2nd choice expert 5 was dropped in run "
                                 "r005 (capacity 3 in group 0 of step 0, slot 3); rows 3, 3, 7 took slots "
                                 "0-2")
    assert (r.dropless_same, r.invariant_same, r.replay_same, r.confirmed_cause) == (None, None, None, "")


def same(a: ExplainRecord, b: ExplainRecord) -> bool:
    for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b), strict=True):
        if isinstance(x, float) and math.isnan(x):
            if not (isinstance(y, float) and math.isnan(y)):
                return False
        elif x != y:
            return False
    return True


def test_columns_round_trip_through_a_trace_file(tmp_path):
    records = [ExplainRecord.from_verdict(v) for v in verdicts()]
    records[1] = with_counterfactuals(records[1], dropless_same=True, invariant_same=False,
                                      confirmed_cause="capacity")
    records[2] = with_counterfactuals(records[2], replay_same=True, confirmed_cause="router_flip")
    columns = to_columns(records)
    assert list(columns) == list(COLUMNS) and {len(c) for c in columns.values()} == {6}
    assert columns["dropless_same"].tolist() == [-1, 1, -1, -1, -1, -1]
    assert columns["invariant_same"].dtype == np.int8 and columns["t_star"].dtype == np.int32
    path = tmp_path / "t.h5"
    with TraceWriter(path, meta=synthetic_meta(1, 2, 1, 4), vocab=byte_vocab(4), requests=["a"],
                     prompt_tokens=[[1]], compression=None) as writer:
        writer.write_table(table_name("E1 cf=1.0 native"), columns, table_attrs(experiment="E1"))
    with open_trace(path) as trace:
        assert trace.table_names == ["explain_E1_cf_1.0_native"]
        read, attrs = trace.read_table("explain_E1_cf_1.0_native")
    assert attrs["kind"] == "explain" and attrs["experiment"] == "E1"
    back = from_columns(read)
    assert len(back) == 6 and all(same(a, b) for a, b in zip(records, back, strict=True))
    assert back[1].dropless_same is True and back[1].invariant_same is False and back[1].replay_same is None
    summary = summarize_records(back)
    assert summary.counts["capacity"] == 2 and summary.n_divergent == 4


def test_confirmed_cause_overrides_the_walk_in_summaries():
    records = [ExplainRecord.from_verdict(v) for v in verdicts()]
    records[3] = with_counterfactuals(records[3], confirmed_cause="router_flip")
    s = summarize_records(records)
    assert s.counts["capacity"] == 1 and s.counts["router_flip"] == 2


def test_bad_tables_give_clear_errors():
    columns = to_columns([ExplainRecord.from_verdict(v) for v in verdicts()])
    with pytest.raises(ValueError, match="lacks column\\(s\\) sentence"):
        from_columns({k: v for k, v in columns.items() if k != "sentence"})
    with pytest.raises(ValueError, match="differ in length"):
        from_columns({**columns, "cause": columns["cause"][:2]})
    with pytest.raises(ValueError, match="replay_same holds 2"):
        from_columns({**columns, "replay_same": np.full(6, 2, np.int8)})
    with pytest.raises(ValueError, match="no usable characters"):
        table_name(" / ")
    assert to_columns([])["cause"].shape == (0,) and from_columns(to_columns([])) == []


def test_version_6_stores_the_maps_outcome_and_reads_versions_5_4_3_2_and_1():
    from traces.analysis.explain_table import (
        _ADDED_IN_2,
        _ADDED_IN_3,
        _ADDED_IN_4,
        _ADDED_IN_5,
        _ADDED_IN_6,
        TABLE_VERSION,
        proof_cells,
    )

    records = [ExplainRecord.from_verdict(v) for v in verdicts()]
    single = dataclasses.replace(records[1], confirmed_cause="capacity", sufficient="keeping expert 5",
                                 scope="candidate", proof_step=3, proof_layer=2, proof_position=12,
                                 proof_kind="capacity", proof_cells="2:12", proof_size=1, proof_reruns=9,
                                 necessary=True, reach=3, reach_of=20, proof_how="keep",
                                 proof_run=records[1].ref_run, candidates=57, alternatives=3,
                                 alternative_cells="2:12 0:13", placebo=0.3, chain_cells="0:14 1:15+2:15",
                                 chain_reach="9 20", chain_end="whole")
    minimal = dataclasses.replace(records[3], confirmed_cause="mixed", sufficient="replaying ...; replaying",
                                  scope="set", proof_step=1, proof_layer=0, proof_position=10,
                                  proof_kind="mixed", proof_cells="0:10 1:11", proof_size=2, proof_reruns=40,
                                  necessary=False, reach=7, reach_of=7, map_baseline=-1.8,
                                  map_baseline_ref=-0.42, map_joint=2.2, map_joint_ref=2.2, map_sum=6.1,
                                  map_sum_ref=0.3, map_cells=12, map_exact=8, decisive_cells="B:0:28 A:3:28",
                                  null_flip=0.03, concentration=0.8,
                                  map_chain="decisive:0:28:1 capacity:0:28:1", map_seconds=1.5,
                                  outcome="decisive", tie_share=0.12, tie_share_ref=0.3, tie_draws=200,
                                  tie_draws_ref=200, outcome_cell="B:0:28", outcome_effect=7.5,
                                  outcome_percentile=100.0, outcome_p=0.03, outcome_cells=6,
                                  outcome_draws=200)
    records[1], records[3] = single, minimal
    assert TABLE_VERSION == 6 and table_attrs()["version"] == 6
    columns = to_columns(records)
    assert columns["placebo"].tolist() == [-1.0, 0.3, -1.0, -1.0, -1.0, -1.0]
    assert columns["alternatives"].dtype == np.int32 and columns["chain_cells"][1] == "0:14 1:15+2:15"
    assert columns["necessary"].tolist() == [-1, 1, -1, 0, -1, -1] and columns["necessary"].dtype == np.int8
    back = from_columns(columns)
    assert len(back) == len(records) and all(same(a, b) for a, b in zip(records, back, strict=True))
    assert back[1].proven and back[3].proven and not back[2].proven
    assert proof_cells(back[3]) == [(0, 10), (1, 11)] and proof_cells(back[0]) == []
    assert back[3].outcome == "decisive" and back[0].outcome == ""
    assert back[3].map_chain.startswith("decisive")
    assert back[3].map_outcome().ties[0].share == 0.12 and back[0].map_outcome() is None
    assert columns["outcome"].tolist() == ["", "", "", "decisive", "", ""]
    # A version-5 table: its map is kept, its outcome not stated (its `near_tie` column is dropped).
    version5 = {k: v for k, v in columns.items() if k not in _ADDED_IN_6}
    version5["near_tie"] = np.array([-1, -1, -1, 1, -1, -1], dtype=np.int8)
    old5 = from_columns(version5)
    assert old5[3].map_cells == 12 and old5[3].decisive_cells == "B:0:28 A:3:28" and old5[3].outcome == ""
    assert old5[3].map_outcome().kind == "" and math.isnan(old5[3].map_outcome().ties[0].share)
    assert old5[3].outcome_untested and not back[3].outcome_untested and not old5[0].outcome_untested
    # An outcome this version does not know reads as not stated.
    odd = dict(columns, outcome=np.array(["", "", "", "sure", "", ""]))
    assert from_columns(odd)[3].outcome == ""
    # A version-4 table: no map (its columns empty), the first difference under its old names.
    version4 = {k: v for k, v in columns.items() if k not in (*_ADDED_IN_5, *_ADDED_IN_6)}
    for old_name, new_name in (("root_kind", "first_kind"), ("root_position", "first_position"),
                               ("root_layer", "first_layer")):
        version4[old_name] = version4.pop(new_name)
    old4 = from_columns(version4)
    assert [r.first_position for r in old4] == [r.first_position for r in records]
    assert all(r.map_cells == -1 and r.outcome == "" and math.isnan(r.map_baseline) for r in old4)
    assert old4[1].placebo == 0.3 and old4[1].chain_end == "whole"
    # A version-3 table: no root-event scan; its proofs stay, the scan's columns are empty.
    version3 = {k: v for k, v in columns.items() if k not in (*_ADDED_IN_4, *_ADDED_IN_5, *_ADDED_IN_6)}
    old3 = from_columns(version3)
    assert old3[1].proven and old3[1].proof_kind == "capacity" and old3[1].reach == 3
    assert all(r.alternatives == r.candidates == -1 and r.placebo == -1.0 and not r.proof_run
               and not r.chain_end for r in old3)
    # A version-2 table: no proof columns; a proof at one event keeps its place, size 1.
    version2 = {k: v for k, v in columns.items() if k not in _ADDED_IN_3}
    version2["scope"] = np.array(["", "candidate", "", "step", "", ""])
    old = from_columns(version2)
    assert old[1].proven and old[1].proof_size == 1 and proof_cells(old[1]) == [(2, 12)]
    assert not old[3].proven and old[3].proof_size == 0          # a whole step is not one event
    assert all(r.necessary is None and r.reach == r.reach_of == r.proof_reruns == -1 and not r.proof_kind
               for r in old)
    # A version-1 table lacks the single-event columns too.
    version1 = {k: v for k, v in version2.items() if k not in _ADDED_IN_2}
    assert not any(r.proven for r in from_columns(version1))
