"""The divergence views in the main window, on the hand-built trace of known causes
(`test_inspector_divergence_data.write_known_trace`): pick the pair through the UI and check that the
highlighted t*, the cause panel, linked zoom, the shared selected position and the overview's U(N),
tree and causes match the analysis."""

from __future__ import annotations

import numpy as np
import pytest
from test_inspector_divergence_data import T, write_known_trace

from inspector.app.browser import COL
from inspector.figure_data.divergence_source import DivergenceSource
from inspector.figures.pair import PairFigure
from inspector.figures.runs import RunsFigure
from inspector.qt import Qt, QtCore, QtGui, pg
from inspector.views import VIEWS
from inspector.views.pair import PairView
from inspector.views.routing import RoutingView
from inspector.views.runs import RUNS_ROLE, RunsView
from traces import open_trace
from traces.analysis import aligned_rows, analyse_request, explain_pair
from traces.synthetic import write_synthetic_trace


@pytest.fixture(scope="module")
def known_trace(tmp_path_factory):
    """The hand-built trace of known causes (`test_inspector_divergence_data.write_known_trace`)."""
    return write_known_trace(tmp_path_factory.mktemp("divergence") / "known.h5")


@pytest.fixture
def known_window(make_window, known_trace):
    """A main window showing `known_trace`."""
    return make_window(known_trace)


pytestmark = pytest.mark.usefixtures("isolated_settings")


def view(w, cls):
    return next(v for v in w.views if isinstance(v, cls))


def show(qtbot, w, cls):
    v = view(w, cls)
    w.tabs.setCurrentWidget(v)
    qtbot.waitUntil(lambda: not v._dirty and v.data is not None, timeout=5000)
    return v


def pick_pair(qtbot, v, a: str, b: str) -> None:
    """Choose runs A and B in the view's combo boxes, as a user does."""
    for box, run in (("A", a), ("B", b)):
        with qtbot.waitSignal(v.drawn, timeout=5000):
            v.picker.pick(box, run)
    assert (v.data.run_a, v.data.run_b) == (a, b)


def analysis_verdict(known_trace, a: str, b: str):
    with open_trace(known_trace) as trace:
        rows = {r.run: r for r in aligned_rows(trace, 0)}
        return explain_pair(rows[a], rows[b])


def click_plot(qtbot, v, plot, x: float, y: float | None = None) -> None:
    """Click data point (x, y) of `plot`; y defaults to the middle of the shown range."""
    if y is None:
        y = sum(plot.vb.viewRange()[1]) / 2
    scene = plot.vb.mapViewToScene(QtCore.QPointF(x, y))
    qtbot.mouseClick(v.graphics.viewport(), Qt.MouseButton.LeftButton, pos=v.graphics.mapFromScene(scene))


def test_both_views_are_registered():
    assert PairView in VIEWS and RunsView in VIEWS
    assert PairView.area == RunsView.area == "tab"


def test_capacity_pair_highlights_t_star_and_states_the_confirmed_cause(qtbot, known_window, known_trace):
    v = show(qtbot, known_window, PairView)
    assert v.picker.current_request() == 0  # the probe's request of the first run
    pick_pair(qtbot, v, "alone", "crowded")
    verdict = analysis_verdict(known_trace, "alone", "crowded")
    assert verdict.t_star == 2 and verdict.cause == "capacity"
    assert v.data.t_star == verdict.t_star
    assert v.highlighted_positions("A") == [verdict.t_star] == v.highlighted_positions("B")
    text_a, text_b = v.text_a.toPlainText(), v.text_b.toPlainText()
    assert "A: run alone row 0" in text_a and "B: run crowded row 1" in text_b
    # Every token's characters sit where the box says (clicks and hover map through these offsets).
    box = v.text_b
    shown = [text_b[box.offsets[i]:box.offsets[i] + len(s)] for i, s in enumerate(v.data.text_b.texts)]
    assert shown == v.data.text_b.texts
    assert box.document().characterCount() - 1 == box.offsets[-1]
    v.details.setChecked(True)  # the sentence and numbers, not only the headline of a laptop's window
    cause = v.cause_box.toPlainText()
    assert "Cause: capacity — confirmed by counterfactual" in cause
    assert "rows 0, 2, 0 took slots 0-2 ahead of it" in cause
    assert v.data.cause.displacing_rows == verdict.displacement.ahead_rows == (0, 2, 0)
    assert "dropless gives A's completion" in cause
    # The figure: t* line in every panel, the cause event starred on the layer x position map (the
    # table confirms capacity by whole-batch reruns but stores no proven event: the first difference).
    assert all(line.isVisible() and line.value() == 2 for line in v.figure.t_star_lines)
    x, y = v.figure.event_mark.getData()
    assert [list(x), list(y)] == [[1], [1]]
    assert v.figure.heat_b.data.run == "crowded" and v.figure.heat_a.data.run == "alone"


def test_router_flip_pair_is_stated_as_a_guess(qtbot, known_window, known_trace):
    v = show(qtbot, known_window, PairView)
    pick_pair(qtbot, v, "alone", "flip")
    verdict = analysis_verdict(known_trace, "alone", "flip")
    assert verdict.cause == "router_flip" and v.data.t_star == verdict.t_star == 4
    assert v.highlighted_positions("B") == [4]
    v.details.setChecked(True)
    cause = v.cause_box.toPlainText()
    assert "Cause: first difference (no proof yet): router flip at position 3" in cause
    assert "router flip at a near-tie" in cause
    # Swap: B becomes the reference; the token at t* stays highlighted.
    with qtbot.waitSignal(v.drawn, timeout=5000):
        qtbot.mouseClick(v.picker.swap, Qt.MouseButton.LeftButton)
    assert (v.data.run_a, v.data.run_b) == ("flip", "alone") and v.highlighted_positions("A") == [4]


def test_heatmaps_and_panels_share_the_x_axis(qtbot, known_window):
    v = show(qtbot, known_window, PairView)
    pick_pair(qtbot, v, "alone", "crowded")
    v.figure.heat_a.plot.vb.setXRange(1.0, 5.0, padding=0)  # the heatmaps keep at least 4 positions
    for plot in v.figure.plots:
        lo, hi = plot.vb.viewRange()[0]
        assert lo == pytest.approx(1.0) and hi == pytest.approx(5.0)
    v.figure.drops.vb.setXRange(0.0, 4.0, padding=0)  # zooming any panel moves the heatmaps
    assert v.figure.heat_b.plot.vb.viewRange()[0] == pytest.approx([0.0, 4.0])


def test_clicking_a_position_selects_it_in_every_plot_and_view(qtbot, known_window):
    v = show(qtbot, known_window, PairView)
    pick_pair(qtbot, v, "alone", "crowded")
    click_plot(qtbot, v, v.figure.heat_b.plot, 3, 1)
    qtbot.waitUntil(lambda: known_window.state.position == 3, timeout=3000)
    assert all(line.isVisible() and line.value() == 3 for line in v.figure.selected_lines)
    assert view(known_window, RoutingView).focus_line.value() == 3
    # A click on a token of B's text selects its position too.
    box = v.text_b
    rect = box.token_rect(4)
    qtbot.mouseClick(box.viewport(), Qt.MouseButton.LeftButton, pos=rect.center() + QtCore.QPoint(3, 0))
    qtbot.waitUntil(lambda: known_window.state.position == 4, timeout=3000)
    assert all(line.value() == 4 for line in v.figure.selected_lines)
    # The curve panels answer too.
    click_plot(qtbot, v, v.figure.kl, 1)
    qtbot.waitUntil(lambda: known_window.state.position == 1, timeout=3000)


def test_hover_names_what_differs_at_the_cause(qtbot, known_window):
    v = show(qtbot, known_window, PairView)
    pick_pair(qtbot, v, "alone", "crowded")
    scene = v.figure.map.vb.mapViewToScene(QtCore.QPointF(1, 1))
    qtbot.mouseMove(v.graphics.viewport(), v.graphics.mapFromScene(scene))
    qtbot.waitUntil(lambda: "position 1, layer 1" in v.hover.text(), timeout=3000)
    assert "kept set" in v.hover.text() and "the first difference (no proof yet)" in v.hover.text()
    assert "3✗" in v.hover.text()  # B's 2nd choice expert 3, dropped


def test_layer_follows_the_navigation_bar(qtbot, known_window):
    v = show(qtbot, known_window, PairView)
    pick_pair(qtbot, v, "alone", "crowded")
    # A new pair opens on its cause: B's candidate dropped at layer 1, position 1.
    assert (known_window.state.layer, known_window.state.position) == (1, 1) and v.data.layer == 1
    with qtbot.waitSignal(v.drawn, timeout=5000):
        known_window.navigation.layer.setValue(0)
    assert v.data.layer == 0 and v.figure.heat_a.data.layer == v.figure.heat_b.data.layer == 0
    assert not (v.data.strip() == 1).any()  # nothing differs at layer 0 before t*
    with qtbot.waitSignal(v.drawn, timeout=5000):
        known_window.navigation.layer.setValue(1)
    assert v.data.layer == 1 and v.figure.heat_a.data.layer == v.figure.heat_b.data.layer == 1
    assert v.data.strip()[2, 1] == 1  # dropped in B only, at position 1


def test_run_b_follows_the_run_browser(qtbot, known_window):
    v = show(qtbot, known_window, PairView)
    with qtbot.waitSignal(v.drawn, timeout=5000):
        known_window.browser.table.setCurrentIndex(known_window.browser.proxy_index("flip", COL["run"]))
    assert v.data.run_b == "flip" and v.data.run_a == "alone"


def test_overview_headline_tree_and_causes_match_the_analysis(qtbot, known_window, known_trace):
    v = show(qtbot, known_window, RunsView)
    with open_trace(known_trace) as trace:
        analysis = analyse_request(aligned_rows(trace, 0), reference=0)
    comp = analysis.completions
    assert (v.data.n_unique, v.data.mode_count) == (comp.n_unique, comp.mode_count)
    assert v.data.n_new == comp.n_new_tokens
    assert v.data.reference_run == "alone"
    headline = v.figure.headline.plain_text()
    assert "U(4) = 3 distinct completions of 4 new tokens; the most common one 2/4 (50%)" in headline
    # The tree widget: counts at every branch equal the analysis' prefix tree.
    root = v.tree.topLevelItem(0)
    assert tree_counts(root) == node_counts(analysis.tree)
    assert root.text(1) == "4" and [root.child(i).text(1) for i in range(root.childCount())] == ["3", "1"]
    # The table of causes: the capacity run is confirmed by the explanation table, the flip is not.
    table = [[v.causes.item(r, c).text() for c in range(4)] for r in range(v.causes.rowCount())]
    assert table == [["capacity", "1", "50%", "none (1 of 1 confirmed by whole-batch reruns)"],
                     ["router flip", "1", "50%", "first difference (no proof yet)"]]
    assert "2 of 4 runs diverge" in v.causes_note.text()
    # The cluster map: one row per run, t* framed for the two divergent runs.
    assert v.figure.image.image.shape[:2] == (4, T - 2)
    x, y = v.figure.t_star.cells()
    assert sorted(x.astype(int).tolist()) == [2, 4]


def tree_counts(item) -> list:
    return [int(item.text(1)), [tree_counts(item.child(i)) for i in range(item.childCount())]]


def node_counts(node) -> list:
    return [node.count, [node_counts(c) for c in node.children]]


def test_overview_branch_selects_its_run_and_positions_are_shared(qtbot, known_window):
    v = show(qtbot, known_window, RunsView)
    leaf = v.tree.topLevelItem(0).child(1)  # the crowded branch
    assert leaf.data(0, RUNS_ROLE) == ("crowded",)
    v.tree.itemDoubleClicked.emit(leaf, 0)
    assert known_window.state.run.name == "crowded" and known_window.state.row == 1
    scene = v.figure.map.vb.mapViewToScene(QtCore.QPointF(3, 1))
    qtbot.mouseClick(v.graphics.viewport(), Qt.MouseButton.LeftButton, pos=v.graphics.mapFromScene(scene))
    qtbot.waitUntil(lambda: known_window.state.position == 3, timeout=3000)
    assert v.figure.selected_line.isVisible() and v.figure.selected_line.value() == 3


def test_figures_render_headless_with_both_panels(qtbot, known_trace):
    with open_trace(known_trace) as trace:
        source = DivergenceSource(trace)
        from test_inspector_divergence_data import pair
        data = pair(source, "alone", "crowded", 1)
        widget = pg.GraphicsLayoutWidget()
        qtbot.addWidget(widget)
        widget.resize(1400, 1000)
        figure = PairFigure(widget.ci, with_text=True)
        figure.set_data(data, selected=3)
        image = widget.grab().toImage()
        assert not image.isNull() and image.width() == 1400
        for plot in (figure.heat_a.plot, figure.heat_b.plot):
            rect = widget.mapFromScene(plot.vb.sceneBoundingRect()).boundingRect()
            assert rect.width() > 100 and rect.height() > 20 and rect.bottom() <= 1000  # inside the picture
            drawn = {QtGui.QColor(image.pixel(x, y)).name()
                     for x in range(rect.left() + 2, rect.right() - 2, 5)
                     for y in range(rect.top() + 2, rect.bottom() - 2, 3)}
            assert len(drawn) > 3  # the heatmap's colours, not an empty box
        assert "A: run alone" in figure.text_a.plain_text() and "B: run crowded" in figure.text_b.plain_text()
        # The key names what is drawn: the ★ at the first difference (this table proves nothing), t*,
        # and no selected position on a page (the line at position 3 is the app's).
        texts = figure.key.texts()
        assert "first difference (no proof)" in texts and "proven cause" not in texts
        assert "t* (the tokens split)" in texts and "selected position" in texts
        figure.set_selected(None)
        figure.set_data(data)
        assert "selected position" not in figure.key.texts()
        overview = pg.GraphicsLayoutWidget()
        qtbot.addWidget(overview)
        overview.resize(1000, 700)
        fig = RunsFigure(overview.ci)
        from inspector.figure_data.runs import runs_figure_data
        choices = source.choices(0)
        fig.set_data(runs_figure_data(source.rows(choices), choices, 0, vocab=source.vocab))
        assert not overview.grab().toImage().isNull()
        np.testing.assert_array_equal(fig.cause_bars.opts["height"], [1, 1])


def test_a_trace_with_nothing_to_compare_says_so(qtbot, tmp_path, make_window):
    path = write_synthetic_trace(tmp_path / "one.h5", 1, L=2, E=4, K=2, V=64, B=2, T=16, R=1)
    w = make_window(path)
    for cls in (PairView, RunsView):
        v = view(w, cls)
        w.tabs.setCurrentWidget(v)
        qtbot.waitUntil(lambda v=v: not v._dirty, timeout=5000)
        assert v.notice.isVisible() and "nothing to compare" in v.notice.text()
        assert not v.splitter.isVisible()


def test_both_views_read_one_divergence_source_dropped_with_the_trace(qtbot, known_window, known_trace):
    pair, runs = show(qtbot, known_window, PairView), show(qtbot, known_window, RunsView)
    source = known_window.state.divergence()
    assert pair.source is source and runs.source is source
    with qtbot.waitSignal(known_window.open_finished, timeout=10000):
        known_window.reload()
    assert known_window.state.divergence() is not source
    assert show(qtbot, known_window, RunsView).source is known_window.state.divergence()


def test_go_to_the_cause_says_what_the_headline_says_about_a_proof(qtbot, known_window, known_trace):
    v = show(qtbot, known_window, PairView)
    pick_pair(qtbot, v, "alone", "crowded")  # capacity, confirmed by whole-batch reruns, no event proven
    cause = v.data.cause
    assert cause.confirmed and not cause.proven and "confirmed by counterfactual" in cause.headline
    known_window.go_to_cause()
    status = known_window.status_text.text()
    assert status.startswith("Confirmed by counterfactual reruns") and "No proof yet" not in status
    pick_pair(qtbot, v, "alone", "flip")  # a guess: nothing reran it
    assert not v.data.cause.confirmed and "nothing is proven" in v.data.cause.headline
    known_window.go_to_cause()
    assert known_window.status_text.text().startswith("No proof yet")
