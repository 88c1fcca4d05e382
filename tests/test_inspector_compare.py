"""The compare view: runs A and B of one request over the same axes. Its difference map is A − B of
the router probabilities on a scale centred on 0; its split panel shows A left of the split and B
from it on, or either whole, and flickers between them; one crosshair runs through both panels and
the readout gives both runs' values at that (layer, position, expert). It exports as every view
does, and a cell with no value is drawn as absent, never as a value."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from paths import EXAMPLES

from inspector.cli import main
from inspector.figure_data.compare import compare_data
from inspector.figure_data.divergence_source import DivergenceSource
from inspector.qt import QtCore, pg
from inspector.specs.registry import SPECS, read_export
from inspector.specs.selection import Selection
from traces import open_trace

EXAMPLE = EXAMPLES / "example.h5"
PAIR = ("c00-gshard-cf1.0-batch-native", "c01-gshard-cf1.0-batch-native")


@pytest.fixture(scope="module")
def data():
    with open_trace(EXAMPLE) as trace:
        return read_export(trace, "compare", Selection(request=0, pair=PAIR, layer=0)).data


def test_the_difference_is_a_minus_b_and_the_split_shows_a_then_b(data):
    pair = data.pair
    T = data.length
    a = np.full((pair.a.n_experts, T), np.nan, np.float32)
    a[:, :pair.a.n_positions] = pair.a.probs
    b = np.full_like(a, np.nan)
    b[:, :pair.b.n_positions] = pair.b.probs
    np.testing.assert_array_equal(data.difference, a - b)
    assert data.split == pair.t_star == 29  # a bare compare splits at the first differing token
    view = data.split_view()
    np.testing.assert_array_equal(view[:, :29], a[:, :29])
    np.testing.assert_array_equal(view[:, 29:], b[:, 29:])
    whole_a, whole_b = data.with_split(T).split_view(), data.with_split(0).split_view()
    np.testing.assert_array_equal(whole_a, a)
    np.testing.assert_array_equal(whole_b, b)
    # The prompt is routed alike before the capacity drop: A − B is 0 there, not merely small.
    assert np.all(data.difference[:, :pair.prompt_len] == 0)
    assert data.largest() == pytest.approx(float(np.nanmax(np.abs(a - b))))


def test_the_readout_gives_both_runs_at_layer_position_expert(data):
    t, e = 40, 3
    text = data.readout(t, e)
    pa, pb = float(data.prob_a[e, t]), float(data.prob_b[e, t])
    assert text.startswith(f"layer 0, position {t}, expert {e}: A ")
    assert f"A {pa:.3f}" in text and f"B {pb:.3f}" in text
    assert f"A − B {pa - pb:+.3f}".replace("-", "−") in text.replace("-", "−")
    assert data.readout(data.length, 0) is None


def test_the_csv_holds_one_row_per_position_and_expert_with_float32_text(tmp_path):
    out = tmp_path / "compare.csv"
    assert main(["export", str(EXAMPLE), "--view", "compare", "--pair", ",".join(PAIR), "-o", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    header = [c.name for c in SPECS["compare"].columns.columns]
    assert list(rows[0]) == header
    assert len(rows) == 8 * int(rows[-1]["position"]) + 8
    for row in rows[:400]:
        pa, pb, d = (np.float32(row[k]) for k in ("probability_a", "probability_b", "difference"))
        assert d == pa - pb  # float32 text reads back to the very float32 values
        assert row["split_shows"] == ("A" if int(row["position"]) < int(row["split"]) else "B")
        for key in ("probability_a", "difference"):
            assert str(np.float32(row[key])) == row[key]  # float32's shortest text, not a float64's


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_it_exports_as_every_view(tmp_path, fmt):
    out = tmp_path / f"compare.{fmt}"
    assert main(["export", str(EXAMPLE), "--view", "compare", "--size", "column", "-o", str(out)]) == 0
    assert out.stat().st_size > 10_000


def test_the_figure_is_centred_on_zero_and_keys_what_it_draws(qapp, data):
    from inspector.figures.compare import ABSENT, CompareFigure

    widget = pg.GraphicsLayoutWidget()
    figure = CompareFigure(widget.ci)
    figure.set_data(data)
    low, high = figure.diff.bar.levels()
    assert low == -high and high == pytest.approx(data.largest())
    assert figure.diff.image.levels[0] == -figure.diff.image.levels[1]
    texts = figure.key.texts()
    assert {"one run chose it", "kept", "dropped", "prompt | generation",
            "t*: first different token", "split: A | B"} <= set(texts)
    assert ABSENT not in texts  # every cell of this pair has a value
    # The split line and the split's name are at the split.
    assert figure.split_line.value() == data.split - 0.5
    assert figure.split.marks.marks()["split"][0] == data.split - 0.5
    figure.show_run("A")
    assert not figure.split_line.isVisible() and "split: A | B" not in figure.key.texts()
    np.testing.assert_array_equal(figure.split.image.image, data.with_split(data.length).split_view())
    widget.close()


def test_a_run_without_router_logits_is_absent_not_zero(qapp, data):
    from dataclasses import replace

    from inspector.figures.compare import ABSENT, CompareFigure

    engine_b = replace(data.pair, b=replace(data.pair.b, probabilities=False))  # an engine's run B
    absent = compare_data(engine_b)
    assert np.isnan(absent.prob_b).all() and np.isnan(absent.difference).all()
    widget = pg.GraphicsLayoutWidget()
    figure = CompareFigure(widget.ci)
    figure.set_data(absent)
    assert np.isnan(figure.diff.image.image).all()  # no cell of the map has a drawn value
    assert figure.diff.absent.isVisible() and ABSENT in figure.key.texts()
    columns = absent.to_columns()
    assert np.ma.getmaskarray(columns["difference"]).all()
    assert set(columns["not_recorded"]) == {"B:routing/router_logits"}
    widget.close()


def test_the_app_shares_one_crosshair_splits_and_flickers(qtbot, make_window):
    w = make_window(EXAMPLE)
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)
    view = next(v for v in w.views if v.name == "compare")
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view._dirty and view.data is not None, timeout=10000)
    data, figure = view.data, view.figure
    assert (data.run_a, data.run_b) == PAIR
    # Hover a cell of the difference map: the crosshair is in both panels, the readout has A and B.
    scene = figure.diff.plot.vb.mapViewToScene(QtCore.QPointF(40, 3))
    view._moved(scene)
    for panel in figure.panels:
        assert panel.cross_x.isVisible() and panel.cross_x.value() == 40
        assert panel.cross_y.isVisible() and panel.cross_y.value() == 3
    assert view.hover.text() == " · ".join(data.readout(40, 3).splitlines())
    # The same cell hovered in the split panel reads the same.
    view._moved(figure.split.plot.vb.mapViewToScene(QtCore.QPointF(40, 3)))
    assert view.hover.text() == " · ".join(data.readout(40, 3).splitlines())
    # The slider moves the split; the export takes it.
    view.split.setValue(10)
    assert figure.data.split == 10 and view.export_state().data.split == 10
    np.testing.assert_array_equal(figure.split.image.image[:, 10:], data.prob_b[:, 10:])
    # Flicker shows A and B whole in turn, then the chosen view again.
    view.flicker.setChecked(True)
    seen = set()
    qtbot.waitUntil(lambda: seen.add(figure.shown) or seen >= {"A", "B"}, timeout=3000)
    view.flicker.setChecked(False)
    assert figure.shown == "split"
    view.shown.setCurrentText("B")
    assert view.export_state().data.split == 0
    # A click selects the position in every view.
    w.state.set_position(33)
    assert figure.diff.cross_x.value() == 33


def test_the_compare_view_reads_the_shared_source():
    with open_trace(EXAMPLE) as trace:
        source = DivergenceSource(trace)
        choices = source.choices(0)
        a, b = (next(c for c in choices if c.run == name) for name in PAIR)
        data = compare_data(source.pair(a, b, 1))
    assert data.layer == 1 and data.split == data.t_star
    # Another layer of the same pair: the same runs and split, other router probabilities.
    np.testing.assert_array_equal(data.prob_a[:, :data.pair.a.n_positions], data.pair.a.probs)
