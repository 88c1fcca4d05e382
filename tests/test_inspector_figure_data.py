"""Figure data of the inspector (no Qt): the numbers every view and export draws."""

import subprocess
import sys

import numpy as np
import pytest

from inspector.figure_data.browser import (
    Mark,
    RunStats,
    default_references,
    divergence_mark,
    first_difference,
    references,
    routing_summary,
    run_info,
    run_stats,
)
from inspector.figure_data.layers import describe_layers_cell, read_layers
from inspector.figure_data.load import load_data
from inspector.figure_data.routing import describe_cell, read_routing, softmax
from inspector.figure_data.text import SHADE_MODES, margin_shade, read_text
from inspector.figure_data.tokens import display_token, preview
from traces import open_trace
from traces.analysis.rows import layer_routing, row_trace
from traces.synthetic import write_synthetic_trace


def cells(x, y) -> list[tuple[int, int]]:
    """Sorted (x, y) integer pairs, for comparing marked cells whatever their order."""
    return sorted(zip(np.asarray(x, dtype=int).tolist(), np.asarray(y, dtype=int).tolist(), strict=True))


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("fd") / "t.h5"
    # cf 0.5 makes sure there are drops to check.
    write_synthetic_trace(path, 4, L=3, E=6, K=2, V=128, B=5, T=40, R=3, capacity_factor=0.5)
    with open_trace(path) as t:
        yield t


def test_routing_data_matches_the_trace(trace):
    run = trace.run(trace.run_names[1])
    row, layer = int(run.probe_row), 2
    T = run.row_length(row)
    data = read_routing(trace, run, row_trace(run, row), layer)
    logits = run.router_logits[layer, row, :T].astype(np.float64)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert data.probs.shape == (run.dims["E"], T)
    np.testing.assert_allclose(data.probs, p.T, rtol=1e-6, atol=1e-7)
    expert, kept = run.expert[layer, row, :T], run.kept[layer, row, :T]
    t, e = data.candidates(kept=False)
    tt, kk = np.nonzero(~kept)
    assert tt.size > 0, "the fixture must have drops"
    assert cells(t, e) == cells(tt, expert[tt, kk])
    t, e = data.candidates(kept=True)
    tt, kk = np.nonzero(kept)
    assert cells(t, e) == cells(tt, expert[tt, kk])
    assert data.prompt_len == int(run.prompt_len[row])
    assert data.labels[0] == display_token(trace.vocab[int(run.tokens[row, 0])])


def test_hover_text_names_every_fact_of_a_dropped_candidate(trace):
    run = trace.run(trace.run_names[0])
    row = int(run.probe_row)
    data = read_routing(trace, run, row_trace(run, row), 0)
    t, e = (int(a[0]) for a in data.candidates(kept=False))
    k = int(np.flatnonzero(data.expert[t] == e)[0])
    text = describe_cell(data, t, e)
    cap = int(run.capacity[int(run.step[row, t]), 0, int(run.group[0, row, t])])
    assert f"position {t}" in text and f"expert {e}" in text and "layer 0" in text
    assert "DROPPED" in text
    assert f"slot {int(run.slot[0, row, t, k])} ≥ capacity {cap}" in text
    assert f"group {int(run.group[0, row, t])}" in text and f"step {int(run.step[row, t])}" in text
    assert f"{data.probs[e, t]:.4f}" in text
    assert describe_cell(data, -1, 0) is None and describe_cell(data, 0, data.n_experts) is None


def test_overview_top1_and_drops(trace):
    run = trace.run(trace.run_names[2])
    row = 0
    T = run.row_length(row)
    data = read_layers(trace, row_trace(run, row))
    np.testing.assert_array_equal(data.top1, run.expert[:, row, :T, 0])
    np.testing.assert_array_equal(data.n_dropped, (~run.kept[:, row, :T]).sum(-1))
    t, l, n = data.drop_points()
    assert np.all(n > 0) and len(t) == int((data.n_dropped > 0).sum())
    assert "top-1 expert" in describe_layers_cell(data, int(t[0]), int(l[0]))


def test_load_data_adds_up_to_the_stored_loads(trace):
    run = trace.run(trace.run_names[0])
    layer = layer_routing(run, 1)
    for step in (0, 3):
        data = load_data(layer, step)
        np.testing.assert_array_equal(data.requested, run.requested[step, 1, data.group])
        np.testing.assert_array_equal(data.kept, run.load_kept[step, 1, data.group])
        assert data.consistent
        assert data.capacity == int(run.capacity[step, 1, data.group])
        mine = run.step[...] == step
        assert data.row_kept.sum() == int((run.kept[1] & mine[..., None]).sum())


def test_text_shades(trace):
    run = trace.run(trace.run_names[0])
    data = read_text(trace, row_trace(run, int(run.probe_row)))
    shade, caption = data.shade(SHADE_MODES[0])
    assert shade.max() == 1.0 and "layers" in caption
    shade, _ = data.shade(SHADE_MODES[1], layer=1)
    np.testing.assert_allclose(shade, data.drops[1] / 2)
    shade, _ = data.shade(SHADE_MODES[2])
    assert ((shade >= 0) & (shade <= 1)).all()
    with pytest.raises(ValueError, match="unknown shading mode"):
        data.shade("colour by mood")
    np.testing.assert_allclose(margin_shade(np.array([0.0, 1e-4, 1e-2, 1.0, 5.0])), [1, 1, 0.5, 0, 0])


def test_run_browser_rows(trace):
    infos = [run_info(r) for r in trace.runs()]
    assert [i.name for i in infos] == trace.run_names
    assert all(i.focus_request == 0 for i in infos)  # the synthetic probe is request 0
    assert "batch" in infos[0].routing and "kmajor_position" in infos[0].routing
    stats = {i.name: run_stats(trace.run(i.name), trace.vocab) for i in infos}
    run = trace.run(infos[0].name)
    assert stats[run.name].batch_dropped == int(run.requested[...].sum() - run.load_kept[...].sum()) > 0
    refs = default_references(infos)
    assert set(refs.values()) == {infos[0].name}
    assert divergence_mark(infos[0].name, infos[0].name, stats) == Mark("ref")
    assert references(infos, infos[2].name)[infos[1].name] == infos[2].name


def test_divergence_marks():
    def stats(name, tokens, prompt_len=5):
        return RunStats(name, 0, 0, 0, prompt_len, np.array(tokens), "")
    s = {"a": stats("a", [1, 2, 3]), "b": stats("b", [1, 2, 3]), "c": stats("c", [1, 9, 3]),
         "d": stats("d", [1, 2])}
    assert divergence_mark("b", "a", s) == Mark("same")
    assert divergence_mark("c", "a", s) == Mark("differs", 6) and Mark("differs", 6).text() == "≠ @6"
    assert divergence_mark("d", "a", s) == Mark("differs", 7) and divergence_mark("d", "a", s).differs
    assert divergence_mark("e", "a", s).text() == ""
    keys = [m.sort_key() for m in (Mark("ref"), Mark("same"), Mark("differs", 3), Mark("unknown"))]
    assert keys == sorted(keys)
    assert first_difference(np.array([1, 2]), np.array([1, 2])) is None


def test_routing_summary_and_tokens():
    knobs = {"group_by": "batch", "priority": "kmajor_position", "norm": "after_drop",
             "capacity": {"kind": "factor", "cf": 1.25}}
    assert routing_summary(knobs) == "group batch · cf 1.25 · kmajor_position · norm after_drop"
    flat = {"top_k": 2, "group_by": "fixed", "group_size": 512, "flatten": "seq_major",
            "capacity_mode": "fixed", "fixed_capacity": 64, "priority": "random", "seed": 3,
            "norm": "none", "score_fn": "softmax"}
    assert routing_summary(flat) == "k=2 · group fixed (512) · C=64 · random seed 3 · norm none · seq_major"
    assert routing_summary({"capacity_mode": "dropless"}) == "dropless"
    assert routing_summary(None) == ""
    assert display_token("a\nb\t") == "a↵b→" and display_token(" ", show_spaces=True) == "·"
    assert display_token("\x00") == "\\x00" and display_token("") == "∅"
    assert preview(["ab", "c"], np.array([0, 1, 0]), max_chars=4) == "abc…"
    np.testing.assert_allclose(softmax(np.array([[0.0, np.log(3.0)]])), [[0.25, 0.75]], rtol=1e-6)


def test_figure_data_imports_no_qt():
    code = ("import sys, inspector.figure_data.routing, inspector.figure_data.layers, "
            "inspector.figure_data.load, inspector.figure_data.text, inspector.figure_data.browser; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
