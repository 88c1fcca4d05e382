"""The causal map of a split: exact teacher-forced patching checked against independent generation
reruns, the joint effect, A/B symmetry, near-ties and the stored columns."""

import math
import shutil

import numpy as np
import pytest
import torch
from paths import EXAMPLE

from lab.counterfactual.causal_map import MapRunner, differing_cells, queue_kept
from lab.counterfactual.reruns import Reruns, replay_cells
from lab.counterfactual.source import load_model, resolve_checkpoint
from model.generate import generate
from model.recorder import Recorder
from traces import open_trace
from traces.analysis import explain_pair, row_trace
from traces.analysis.causal_map import (
    CellEffect,
    PairMap,
    cell_columns,
    cells_from_columns,
    format_links,
    map_text,
    parse_links,
    record_headline,
)
from traces.analysis.map_outcome import Outcome, pair_outcome

#: The shipped example's first divergent pair: the probe in c01 against the reference c00.
REFERENCE, DIVERGENT = ("c00-gshard-cf1.0-batch-native", 2), ("c01-gshard-cf1.0-batch-native", 0)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    copy = tmp_path_factory.mktemp("map") / "example.h5"
    shutil.copy(EXAMPLE, copy)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # the trace was recorded with one thread
    with open_trace(copy) as trace:
        model = load_model(trace.record, resolve_checkpoint(trace.record, copy, None), torch.device("cpu"))
        reruns = Reruns(trace, model)
        a = row_trace(trace.run(REFERENCE[0]), REFERENCE[1])
        b = row_trace(trace.run(DIVERGENT[0]), DIVERGENT[1])
        v = explain_pair(a, b)
        runner = MapRunner(reruns)
        yield trace, reruns, runner, v, runner.pair(v)
    torch.set_num_threads(threads)


def _logit_difference(reruns, run: str, row: int, position: int, plus: int, minus: int, replay=None) -> float:
    """An independent generation of the whole batch (no teacher forcing, no kept state), its row's logits at
    `position`: plus minus minus."""
    s = reruns.settings(run)
    recorder = Recorder()
    out = generate(reruns.model, s.prompts, s.max_new_tokens, s.policy, s.kernel_mode, recorder=recorder,
                   replay=replay, arrivals=s.arrivals)
    logits = recorder.arrays(out)["logits"]
    return float(logits[row, position, plus] - logits[row, position, minus])


def test_a_patched_cell_equals_an_independent_generation_rerun(example):
    trace, reruns, _, v, m = example
    q = v.t_star - 1
    own = int(trace.run(v.run).tokens[v.row, v.t_star])
    other = int(trace.run(v.ref_run).tokens[v.ref_row, v.t_star])
    assert own != other
    # unpatched: the teacher-forced rerun from kept states gives the generation's logits at t*-1
    base = _logit_difference(reruns, v.run, v.row, q, other, own)
    assert base < 0 and m.baseline["B"] == pytest.approx(base, abs=1e-4)
    # one cell at t*-1 (layer 0) set to A's decision: tokens before t* cannot change, so a plain
    # generation with that cell replayed is the same experiment
    cell = next(c for c in m.cells if c.patched == "B" and (c.layer, c.position) == (0, q))
    replay = {v.row: replay_cells(reruns.reference_routing(v.ref_run, v.ref_row), [(0, q)])}
    patched = _logit_difference(reruns, v.run, v.row, q, other, own, replay=replay)
    assert cell.exact and cell.effect == pytest.approx(patched - base, abs=1e-4)
    assert cell.effect > 1.0       # it moves B far toward A's token (by about +7.5)
    # every differing cell at once gives B A's routing: B then prefers A's token as A does
    assert m.baseline["B"] + m.joint["B"] == pytest.approx(-m.baseline["A"], abs=0.05)
    # effects do not add: the single cells' sum is not the joint effect
    assert not math.isclose(m.sum_singles["B"], m.joint["B"], rel_tol=0.1)


def test_every_differing_cell_of_both_runs_is_mapped_with_its_null(example):
    trace, reruns, _, v, m = example
    a = reruns.reference_routing(v.ref_run, v.ref_row)
    b = reruns.reference_routing(v.run, v.row)
    cells_b = {(c.layer, c.position) for c in m.cells if c.patched == "B"}
    cells_a = {(c.layer, c.position) for c in m.cells if c.patched == "A"}
    assert cells_b == cells_a == {(layer, p) for layer, p, _ in differing_cells(b, a, v.t_star)}
    assert all(c.position < v.t_star for c in m.cells)
    for c in m.cells:
        assert not math.isnan(c.effect) and c.null_draws >= 200 and 0 <= c.percentile <= 100
        near = not c.prefill and v.t_star - c.position <= 2
        assert c.null_exact == (near and c.exact)    # t*-1, t*-2: exact effect, exact null
        assert c.prefill == (c.position < v.prompt_len)
        # the queue patch exists exactly where a shared expert's kept flag differs
        own, other = (b, a) if c.patched == "B" else (a, b)
        assert math.isnan(c.queue) == (queue_kept(own, other, c.layer, c.position) is None or not c.exact)
    # every decode cell is patched exactly
    assert all(c.exact for c in m.cells if not c.prefill)


def test_swapping_a_and_b_names_the_same_cells(example):
    trace, reruns, runner, v, m = example
    a = row_trace(trace.run(REFERENCE[0]), REFERENCE[1])
    b = row_trace(trace.run(DIVERGENT[0]), DIVERGENT[1])
    swapped = runner.pair(explain_pair(b, a))
    flip = {"A": "B", "B": "A"}
    assert swapped.baseline["A"] == m.baseline["B"] and swapped.baseline["B"] == m.baseline["A"]
    mine = {(flip[c.patched], c.layer, c.position): c for c in m.cells}
    theirs = {(c.patched, c.layer, c.position): c for c in swapped.cells}
    assert mine.keys() == theirs.keys()
    for key, c in mine.items():
        assert c.effect == theirs[key].effect and c.p_value == theirs[key].p_value
    assert {(flip[c.patched], c.layer, c.position) for c in m.decisive()} == \
        {(c.patched, c.layer, c.position) for c in swapped.decisive()}
    assert pair_outcome(swapped).kind == pair_outcome(m).kind


def _cell(effect: float, p_value: float, flip: float = 0.5, exceed: float = 0.1, **kw) -> CellEffect:
    where = dict(patched="B", layer=0, position=5, step=1, prefill=False, changed=1)
    where.update(kw)
    return CellEffect(**where, estimate=effect, effect=effect, exact=True, queue=float("nan"),
                      percentile=50.0, p_value=p_value, null_flip=flip, null_draws=200, null_exceed=exceed)


def test_the_outcome_reads_the_cells_nulls_and_the_strongest_cell_carries_its_share():
    tie = PairMap(t_star=6, prompt_len=4, cells=[_cell(0.03, 0.6, 0.41, 0.8), _cell(-0.01, 1.0, layer=1)],
                  baseline={"B": -0.02, "A": -0.01}, joint={"B": 0.05}, sum_singles={"B": 0.02})
    assert pair_outcome(tie).kind == Outcome.NEAR_TIE and not tie.decisive()
    text = map_text(tie, "c01", "c00")
    assert "near-tie" in text and "41%" in text and "80% of 200 draws" in text
    decided = PairMap(t_star=6, prompt_len=4, cells=[_cell(3.0, 0.01), _cell(0.2, 0.9, layer=1)],
                      baseline={"B": -1.0, "A": -2.0}, joint={"B": 2.5}, sum_singles={"B": 3.2})
    assert pair_outcome(decided).kind == Outcome.DECISIVE and decided.decisive()[0].effect == 3.0
    assert "A near-tie" not in map_text(decided, "c01", "c00")
    assert decided.concentration() == pytest.approx(3.0 / 3.2)


def test_the_map_table_round_trips():
    m = PairMap(t_star=6, prompt_len=4, cells=[_cell(3.0, 0.01), _cell(0.2, 0.9, layer=1, prefill=True)])
    key = ("c01", 0, "c00", 2)
    back = cells_from_columns(cell_columns([(key, m)]))
    assert list(back) == [key] and repr(back[key]) == repr(m.cells)   # repr: nan equals nan
    with pytest.raises(ValueError, match="lacks column"):
        cells_from_columns({"run": np.array(["x"])})
    links = "decisive:3:28:1 router:1:28:1 capacity:0:28:1"
    assert format_links([]) == "" and [k[0] for k in parse_links(links)] == ["decisive", "router", "capacity"]


def test_the_side_by_side_headline_reads_the_chain_from_the_batch_to_the_token():
    decided = PairMap(t_star=29, prompt_len=20,
                      cells=[_cell(3.0, 0.01, position=28), _cell(0.2, 0.9, layer=1)],
                      baseline={"B": -1.6, "A": -2.0})
    o = pair_outcome(decided)
    said = record_headline(o, "B:3:28 A:1:28", "decisive:3:28:1 router:1:28:1 capacity:0:28:1")
    batch, router, token = (said.index(x) for x in ("the batch's queue", "B's router", "toward A's"))
    assert batch < router < token and "step 1, layer 0" in said and said.startswith("Causal map: decisive.")
    tie = PairMap(t_star=29, prompt_len=20, cells=[_cell(0.03, 0.6, 0.04, 0.9)], baseline={"B": -0.026})
    said = record_headline(pair_outcome(tie), "", "")
    assert "near-tie of B's token" in said and "4%" in said and "0.026" in said and "90% of 200" in said
    assert record_headline(None, "", "") == ""
