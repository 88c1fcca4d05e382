"""The outcome of a causal map on constructed cells: a margin within what random changes do is a
near-tie (whichever run's), a cell beating its null is decisive, else no decisive cell; borderline
shares are said to be; swapping A and B keeps the outcome; the words state each null with its
draws and interval; the stored record reads back the same words."""

import dataclasses
import math

import pytest

from traces.analysis.causal_map import CellEffect, PairMap, map_text, record_headline
from traces.analysis.explain_table import ExplainRecord, from_columns, outcome_fields, to_columns
from traces.analysis.map_outcome import Outcome, TieTest, pair_outcome, wilson


def cell(patched: str, layer: int, effect: float, p_value: float, exceed: float, *, percentile: float = 90.0,
         flip: float = 0.1, draws: int = 200, position: int = 28) -> CellEffect:
    return CellEffect(patched=patched, layer=layer, position=position, step=1, prefill=False, changed=1,
                      estimate=effect, effect=effect, exact=True, queue=math.nan, percentile=percentile,
                      p_value=p_value, null_flip=flip, null_draws=draws, null_exact=True, null_exceed=exceed)


def pair(cells: list[CellEffect], base_b: float, base_a: float) -> PairMap:
    return PairMap(t_star=29, prompt_len=20, cells=cells, baseline={"B": base_b, "A": base_a},
                   joint={"B": 1.0, "A": 1.0}, sum_singles={"B": 1.0, "A": 1.0})


def swapped(m: PairMap) -> PairMap:
    flip = {"A": "B", "B": "A"}
    return PairMap(t_star=m.t_star, prompt_len=m.prompt_len,
                   cells=[dataclasses.replace(c, patched=flip[c.patched]) for c in m.cells],
                   baseline={flip[k]: v for k, v in m.baseline.items()},
                   joint={flip[k]: v for k, v in m.joint.items()},
                   sum_singles={flip[k]: v for k, v in m.sum_singles.items()})


#: Like the shipped example's c01/0: B prefers its token by 1.80 logits; its strongest cell (+7.49, above
#: 97.5% of its null, corrected p 0.24) beats no null; random changes there reach 1.80 in 12% of draws.
C01 = pair([cell("B", 0, 7.49, 0.24, 0.12, percentile=97.5, flip=0.06), cell("B", 2, 0.4, 1.0, 0.3),
            cell("A", 2, -5.56, 0.72, 0.40, percentile=91.5, flip=0.56), cell("A", 0, 0.2, 1.0, 0.9)],
           base_b=-1.80, base_a=-0.42)


def test_wilson_interval():
    low, high = wilson(0.5, 100)
    assert low == pytest.approx(0.4038, abs=1e-4) and high == pytest.approx(0.5962, abs=1e-4)
    assert wilson(0.0, 10) == (0.0, pytest.approx(3.8415 / 13.8415, abs=1e-4))
    assert all(math.isnan(v) for v in wilson(0.3, 0))


def test_a_bare_logit_tie_of_either_run_is_a_near_tie_even_where_a_cell_beats_its_null():
    # B's margin is a thousandth of a logit: every random change at its strongest cell's position reaches it
    tie_b = pair([cell("B", 3, 0.166, 1.0, 1.0, draws=550), cell("A", 1, 0.9, 0.01, 0.30)],
                 base_b=-0.0008, base_a=-0.137)
    o = pair_outcome(tie_b)
    assert o.kind == Outcome.NEAR_TIE and o.tied() == ("B",) and o.cell == "B:3:28"
    assert o.ties[0].draws == 550 and not o.ties[0].borderline
    words = map_text(tie_b, "c20", "c05")
    assert "near-tie of run c20's token" in words and "100% of 550 draws" in words and "95% interval" in words
    assert "0.0008 logits" in words and "Decisive" not in words
    # A's margin tied instead (the bare-tie test of the suite): A's token
    tie_a = swapped(tie_b)
    assert pair_outcome(tie_a).kind == Outcome.NEAR_TIE and pair_outcome(tie_a).tied() == ("A",)
    assert "near-tie of run c05's token" in map_text(tie_a, "c20", "c05")
    both = pair([cell("B", 3, 0.2, 1.0, 0.8), cell("A", 3, 0.2, 1.0, 0.95)], base_b=-0.01, base_a=-0.01)
    o = pair_outcome(both)
    assert o.tied() == ("B", "A") and o.cell.startswith("A:")       # the larger share is named
    assert "run c20's and run c05's tokens" in map_text(both, "c20", "c05")


def test_no_single_cell_beating_its_null_is_not_a_near_tie():
    o = pair_outcome(C01)
    assert o.kind == Outcome.NO_DECISIVE_CELL and o.tied() == ()
    assert (o.cell, o.effect, o.p_value, o.cells, o.null_flip) == ("B:0:28", 7.49, 0.24, 2, 0.06)
    words = map_text(C01, "c01", "c00")
    for said in ("No decisive cell", "layer 0, position 28", "+7.49", "97.5%", "corrected p 0.24",
                 "over run c01's 2 cells", "flips run c01's token in 6% of its draws", "Not a near-tie",
                 "run c01's margin of 1.8 logits in 12% of 200 draws",
                 "run c00's margin of 0.42 logits in 40%"):
        assert said in words, said
    assert "near-tie:" not in words.lower().replace("not a near-tie:", "")
    # the same cells with one beating its null: decisive, and the words still say why it is no near-tie
    decided = pair([dataclasses.replace(C01.cells[0], p_value=0.03), *C01.cells[1:]], -1.80, -0.42)
    o = pair_outcome(decided)
    assert o.kind == Outcome.DECISIVE and o.cell == "B:0:28"
    words = map_text(decided, "c01", "c00")
    assert "Decisive." in words and "decisive cell is layer 0, position 28" in words
    assert "Not a near-tie" in words


def test_a_share_whose_interval_holds_one_half_is_borderline_in_the_words():
    just = pair([cell("B", 0, 2.0, 1.0, 0.52), cell("A", 0, 1.0, 1.0, 0.1)], base_b=-1.0, base_a=-3.0)
    o = pair_outcome(just)
    assert o.kind == Outcome.NEAR_TIE and o.ties[0].borderline
    assert "borderline" in map_text(just, "c01", "c00")
    under = pair([cell("B", 0, 2.0, 1.0, 0.46), cell("A", 0, 1.0, 1.0, 0.1)], base_b=-1.0, base_a=-3.0)
    o = pair_outcome(under)
    assert o.kind == Outcome.NO_DECISIVE_CELL and o.ties[0].borderline and not o.ties[1].borderline
    assert "borderline" in map_text(under, "c01", "c00")
    # the same share over many draws is not borderline
    assert not TieTest(-1.0, 0.46, 4000).borderline and TieTest(-1.0, 0.46, 200).borderline
    assert "borderline" not in map_text(C01, "c01", "c00")


@pytest.mark.parametrize("m", [C01, pair([dataclasses.replace(C01.cells[0], p_value=0.03), *C01.cells[1:]],
                                         -1.80, -0.42),
                               pair([cell("B", 3, 0.166, 1.0, 1.0), cell("A", 1, 0.9, 0.01, 0.3)], -0.0008,
                                    -0.137)])
def test_swapping_a_and_b_gives_the_same_outcome_on_the_mirrored_cell(m):
    o, s = pair_outcome(m), pair_outcome(swapped(m))
    assert o.kind == s.kind and o.tied() == tuple({"A": "B", "B": "A"}[x] for x in s.tied())
    mirror = {"A": "B", "B": "A"}[o.cell[0]] + o.cell[1:]
    assert s.cell == mirror and s.effect == o.effect and s.p_value == o.p_value


def test_no_null_no_outcome():
    untested = pair([cell("B", 0, 1.0, math.nan, math.nan, draws=0)], -1.0, -1.0)
    assert pair_outcome(untested) is None and "no outcome is stated" in map_text(untested, "c01", "c00")


def test_the_stored_record_reads_back_the_outcome_and_its_words():
    base = ExplainRecord(run="c01", row=0, ref_run="c00", ref_row=2, request=0, probe=True, t_star=29,
                         new_index=9, token=5, ref_token=6, cause="capacity", position=28, layer=0,
                         first_kind="capacity", first_position=28, first_layer=0, rank=1, router_margin=0.1,
                         router_delta=0.0, logit_margin=1.0, logit_delta=0.0, dropped_in="", capacity=-1,
                         group=-1, step=-1, slot=-1, displacing_rows="", sentence="")
    for m in (C01, pair([cell("B", 3, 0.166, 1.0, 1.0, draws=550)], -0.0008, -0.137)):
        o = pair_outcome(m)
        r = dataclasses.replace(base, map_cells=2, map_baseline=m.baseline["B"],
                                map_baseline_ref=m.baseline["A"],
                                **outcome_fields(o))
        back = from_columns(to_columns([r]))[0]
        assert repr(back.map_outcome()) == repr(o)     # repr: nan equals nan
        said = record_headline(back.map_outcome(), back.decisive_cells, back.map_chain)
        assert said.startswith("Causal map: ") and said.endswith(".")
        assert ("near-tie of B's token" in said) == (o.kind == Outcome.NEAR_TIE)
        assert ("No decisive cell" in said) == (o.kind == Outcome.NO_DECISIVE_CELL)
    decisive = dataclasses.replace(base, map_cells=2, map_baseline=-1.8, map_baseline_ref=-0.42,
                                   decisive_cells="B:0:28", map_chain="decisive:0:28:1 capacity:0:28:1",
                                   **outcome_fields(pair_outcome(pair([dataclasses.replace(
                                       C01.cells[0], p_value=0.03), *C01.cells[1:]], -1.8, -0.42))))
    said = record_headline(decisive.map_outcome(), decisive.decisive_cells, decisive.map_chain)
    assert said.index("the batch's queue") < said.index("toward A's") < said.index("Not a near-tie")
    # a map stored before the outcome (version 5) says that its outcome is not stated
    old = dataclasses.replace(base, map_cells=2, decisive_cells="", map_baseline=-1.8, outcome_cells=-1)
    assert old.outcome_untested and not r.outcome_untested
    untested = dataclasses.replace(old, outcome_cells=0).map_outcome()      # mapped, no null drawn
    assert "no null was tested" in record_headline(untested, "", "")
    assert "not stated" in record_headline(old.map_outcome(), "", "")
    assert "not stated" in record_headline(old.map_outcome(), "B:0:28", "decisive:0:28:1")
    assert record_headline(dataclasses.replace(base).map_outcome(), "", "") == ""


def test_the_summary_counts_the_outcomes_and_where_decisive_cells_lie():
    from traces.analysis.root_summary import map_summary

    base = ExplainRecord(run="c01", row=0, ref_run="c00", ref_row=2, request=0, probe=True, t_star=29,
                         new_index=9, token=5, ref_token=6, cause="capacity", position=28, layer=0,
                         first_kind="capacity", first_position=28, first_layer=0, rank=1, router_margin=0.1,
                         router_delta=0.0, logit_margin=1.0, logit_delta=0.0, dropped_in="", capacity=-1,
                         group=-1, step=-1, slot=-1, displacing_rows="", sentence="", map_cells=3,
                         map_joint=1.0, map_sum=2.0, map_seconds=1.0)
    decisive = pair([dataclasses.replace(C01.cells[0], p_value=0.03), *C01.cells[1:]], -1.80, -0.42)
    tie = pair([cell("B", 3, 0.166, 0.01, 0.52, draws=200, position=20)], -0.0008, -0.137)
    records = [dataclasses.replace(base, decisive_cells="B:0:28", map_chain="decisive:0:28:1 capacity:0:28:1",
                                   **outcome_fields(pair_outcome(decisive))),
               # a near-tie whose cell beats its null (its chain kept): not counted among decisive cells
               dataclasses.replace(base, decisive_cells="B:3:20", map_chain="decisive:3:20:1 capacity:3:20:1",
                                   **outcome_fields(pair_outcome(tie))),
               dataclasses.replace(base, **outcome_fields(pair_outcome(C01))),
               dataclasses.replace(base, decisive_cells="B:1:28", outcome_cells=-1)]   # version 5: not stated
    s = map_summary(records)
    assert (s.mapped, s.near_ties, s.decisive, s.no_decisive, s.unstated, s.borderline) == (4, 1, 1, 1, 1, 1)
    assert s.chains == 1 and s.reach_batch == 1 and s.just_before == 2 and s.layers == {0: 1, 1: 1}
    said = s.describe()
    assert "1 near-ties" in said and "1 decisive" in said and "1 with no decisive cell" in said
    assert "1 not stated" in said and "in 1 the near-tie test is borderline" in said
    old = map_summary([records[3]]).describe()
    assert "not stated" in old and "1 hold a cell beating its null" in old


def test_a_cell_beating_its_null_decides_only_if_it_alone_moves_its_run_past_its_margin():
    # like the example's c22/0: a cell beats its null by a ten-thousandth of a logit against 0.026
    small = pair([cell("B", 0, 0.00015, 0.04, 0.09, percentile=100.0, flip=0.0),
                  cell("A", 2, 0.02, 1.0, 0.0)], base_b=-0.026, base_a=-0.031)
    o = pair_outcome(small)
    assert o.kind == Outcome.NO_DECISIVE_CELL and o.cell == "B:0:28" and small.decisive()
    words = map_text(small, "c22", "c03")
    assert "no cell that beats its null moves its run's token past its margin alone" in words
    assert "+0.00015 of the 0.026 logits that would flip its token" in words
    # one that beats its null pushing away from the other token decides nothing either
    away = pair([cell("B", 0, -0.218, 0.04, 0.29), cell("A", 0, 0.1, 1.0, 0.09)], base_b=-0.625, base_a=-5.27)
    assert pair_outcome(away).kind == Outcome.NO_DECISIVE_CELL
    # past the margin, it decides; the swap names the mirrored cell
    past = pair([cell("B", 0, 0.03, 0.04, 0.09), cell("A", 2, 0.02, 1.0, 0.0)], base_b=-0.026, base_a=-0.031)
    assert pair_outcome(past).kind == pair_outcome(swapped(past)).kind == Outcome.DECISIVE


def test_a_near_tie_of_one_run_states_the_other_runs_share_too():
    # like c01/0: B prefers its token by 1.80 (6% of draws reach it), A by 0.42 (97% reach it)
    m = pair([cell("B", 0, 7.49, 0.24, 0.06, percentile=97.5, flip=0.06),
              cell("A", 2, -5.56, 0.72, 0.97, percentile=91.5, flip=0.56)], base_b=-1.80, base_a=-0.42)
    o = pair_outcome(m)
    assert o.kind == Outcome.NEAR_TIE and o.tied() == ("A",) and o.cell == "A:2:28"
    words = map_text(m, "c01", "c00")
    assert "A near-tie of run c00's token" in words and "0.42 logits in 97% of 200 draws" in words
    assert "Run c01's own margin of 1.8 logits is reached in only 6% of 200 draws" in words
