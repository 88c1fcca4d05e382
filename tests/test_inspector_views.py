"""The views draw the trace's numbers: open a trace, pick runs, rows and layers through the UI,
and compare the drawn image and markers with the file."""

import numpy as np
import pytest

from inspector.app.browser import COL, NAME_ROLE
from inspector.app.main_window import MainWindow
from inspector.app.settings import Settings
from inspector.figures.layers import top1_rgb
from inspector.figures.style import categorical_colors
from inspector.qt import Qt, QtCore
from inspector.views import VIEWS, View
from inspector.views.layers import LayersView
from inspector.views.load import LoadView
from inspector.views.routing import RoutingView
from inspector.views.text import TextView
from traces import open_trace
from traces.synthetic import write_synthetic_trace


def cells(x, y) -> list[tuple[int, int]]:
    """Sorted (x, y) integer pairs, for comparing marked cells whatever their order."""
    return sorted(zip(np.asarray(x, dtype=int).tolist(), np.asarray(y, dtype=int).tolist(), strict=True))


pytestmark = pytest.mark.usefixtures("isolated_settings")


@pytest.fixture
def drawn_window(window, qtbot):
    """The shared window on the shared trace, its routing drawn."""
    qtbot.waitUntil(lambda: view(window, RoutingView).data is not None, timeout=5000)
    return window


def view(w, cls):
    return next(v for v in w.views if isinstance(v, cls))


def show(qtbot, w, cls):
    v = view(w, cls)
    if v.area == "tab":
        w.tabs.setCurrentWidget(v)
    qtbot.waitUntil(lambda: not v._dirty and v.data is not None, timeout=5000)
    return v


def softmax_t(logits):
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)).T


def assert_routing_drawn(v, trace_path, run_name, row, layer):
    with open_trace(trace_path) as trace:
        run = trace.run(run_name)
        T = run.row_length(row)
        np.testing.assert_allclose(v.figure.image.image, softmax_t(run.router_logits[layer, row, :T]),
                                   rtol=1e-6, atol=1e-7)
        expert, kept = run.expert[layer, row, :T], run.kept[layer, row, :T]
        prompt_len = int(run.prompt_len[row])
    for marks, want in ((v.figure.kept, kept), (v.figure.dropped, ~kept)):
        t, k = np.nonzero(want)
        x, y = marks.cells()
        assert cells(x, y) == cells(t, expert[t, k])
    assert v.figure.boundary.value() == pytest.approx(prompt_len - 0.5)
    assert v.data.run == run_name and v.data.row == row and v.data.layer == layer


def test_views_are_registered_in_one_list(qtbot, tmp_path):
    assert VIEWS[0] is RoutingView  # the first tab, shown when a trace opens
    assert {RoutingView, LayersView, LoadView, TextView} <= set(VIEWS)
    assert all(issubclass(v, View) and v.title and v.area in ("tab", "bottom") for v in VIEWS)
    # The window makes one tab per "tab" view and puts the others under the tabs.
    w = MainWindow(Settings(QtCore.QSettings(str(tmp_path / "s.ini"), QtCore.QSettings.Format.IniFormat)))
    qtbot.addWidget(w)
    tabs = [w.tabs.tabText(i) for i in range(w.tabs.count())]
    assert tabs == [v.title for v in VIEWS if v.area == "tab"]
    assert [type(v) for v in w.views] == VIEWS


def test_open_shows_first_divergent_run_probe_row(qtbot, drawn_window, trace_path):
    v = view(drawn_window, RoutingView)
    run = drawn_window.state.run
    assert drawn_window.state.row == run.probe_row
    assert_routing_drawn(v, trace_path, run.name, int(run.probe_row), 0)
    model = drawn_window.browser.model
    qtbot.waitUntil(lambda: len(model.stats) == 4, timeout=10000)
    # The first run in write order whose probe completion leaves its reference's, as the browser marks it.
    assert run.name == next(n for n in model.names if model.mark(n).differs)
    assert len(drawn_window.browser.shown_names()) == 4
    assert drawn_window.stack.currentWidget() is drawn_window.main


def test_pick_run_row_and_layer_through_the_ui(qtbot, drawn_window, trace_path):
    v = view(drawn_window, RoutingView)
    # Run: click the third row of the browser table.
    table = drawn_window.browser.table
    name = "r002" if drawn_window.state.run.name != "r002" else "r003"
    index = drawn_window.browser.proxy_index(name, COL["run"])
    assert index.data(NAME_ROLE) == name
    with qtbot.waitSignal(v.drawn, timeout=5000):
        table.setCurrentIndex(index)
    assert drawn_window.state.run.name == name
    # Row: the navigation bar's combo box.
    combo = drawn_window.navigation.row
    target = 1 if drawn_window.state.row != 1 else 2
    with qtbot.waitSignal(v.drawn, timeout=5000):
        combo.setCurrentIndex(combo.findData(target))
        combo.activated.emit(combo.currentIndex())
    assert drawn_window.state.row == target
    # Layer: the slider.
    with qtbot.waitSignal(v.drawn, timeout=5000):
        drawn_window.navigation.layer.setValue(2)
    assert_routing_drawn(v, trace_path, "r002", target, 2)
    assert "layer 2" in drawn_window.navigation.layer_label.text()


def test_left_right_keys_change_layer(qtbot, drawn_window, trace_path):
    v = view(drawn_window, RoutingView)
    drawn_window.activateWindow()
    qtbot.waitUntil(lambda: drawn_window.isActiveWindow(), timeout=3000)
    v.graphics.setFocus()
    with qtbot.waitSignal(v.drawn, timeout=5000):
        qtbot.keyClick(v.graphics, Qt.Key.Key_Right)
    assert drawn_window.state.layer == 1 and drawn_window.navigation.layer.value() == 1
    with qtbot.waitSignal(v.drawn, timeout=5000):
        qtbot.keyClick(v.graphics, Qt.Key.Key_Right)
    qtbot.keyClick(v.graphics, Qt.Key.Key_Right)  # already at the last layer: stays
    assert drawn_window.state.layer == 2
    with qtbot.waitSignal(v.drawn, timeout=5000):
        qtbot.keyClick(v.graphics, Qt.Key.Key_Left)
    assert drawn_window.state.layer == 1
    assert_routing_drawn(v, trace_path, drawn_window.state.run.name, drawn_window.state.row, 1)
    with qtbot.waitSignal(v.drawn, timeout=5000):
        qtbot.keyClick(v.graphics, Qt.Key.Key_PageDown)
    probe = int(drawn_window.state.run.probe_row)
    assert drawn_window.state.row == (probe + 1 if probe < 4 else 4)


def test_hover_describes_the_cell_under_the_mouse(qtbot, drawn_window):
    v = view(drawn_window, RoutingView)
    data = v.data
    t, e = (int(a[0]) for a in data.candidates(kept=False))
    scene = v.figure.plot.vb.mapViewToScene(QtCore.QPointF(t, e))
    qtbot.mouseMove(v.graphics.viewport(), v.graphics.mapFromScene(scene))
    qtbot.waitUntil(lambda: f"position {t}" in v.hover.text(), timeout=3000)
    text = v.hover.text()
    assert f"expert {e}" in text and "DROPPED" in text and "capacity" in text
    assert "ahead of it" in text  # who took the slots ahead of the dropped candidate
    # A click focuses that token in every view.
    qtbot.mouseClick(v.graphics.viewport(), Qt.MouseButton.LeftButton, pos=v.graphics.mapFromScene(scene))
    qtbot.waitUntil(lambda: drawn_window.state.position == t, timeout=3000)
    assert v.focus_line.isVisible() and v.focus_line.value() == t


def test_overview_draws_top1_colours_and_drops(qtbot, drawn_window, trace_path):
    v = show(qtbot, drawn_window, LayersView)
    row = drawn_window.state.row
    with open_trace(trace_path) as trace:
        run = trace.run(drawn_window.state.run.name)
        T = run.row_length(row)
        top1 = run.expert[:, row, :T, 0]
        dropped = (~run.kept[:, row, :T]).sum(-1)
    np.testing.assert_array_equal(v.figure.image.image, top1_rgb(top1, 6))
    assert (v.figure.image.image[0, 0] == categorical_colors(6)[top1[0, 0]]).all()
    x, y = v.figure.drops.cells()
    l, t = np.nonzero(dropped)
    assert cells(x, y) == cells(t, l)
    assert len(v.figure.legend.items) == 6
    # Clicking a cell selects its layer.
    scene = v.figure.plot.vb.mapViewToScene(QtCore.QPointF(3, 2))
    qtbot.mouseClick(v.graphics.viewport(), Qt.MouseButton.LeftButton, pos=v.graphics.mapFromScene(scene))
    qtbot.waitUntil(lambda: drawn_window.state.layer == 2 and drawn_window.state.position == 3, timeout=3000)


def test_load_view_bars_equal_the_load_tables(qtbot, drawn_window, trace_path):
    v = show(qtbot, drawn_window, LoadView)
    with open_trace(trace_path) as trace:
        run = trace.run(drawn_window.state.run.name)
        requested, kept, capacity = run.requested[0, 0, 0], run.load_kept[0, 0, 0], int(run.capacity[0, 0, 0])
    np.testing.assert_array_equal(v.figure.requested_bars.opts["height"], requested)
    np.testing.assert_array_equal(v.figure.kept_bars.opts["height"], kept)
    assert v.figure.capacity_lines[0].value() == capacity
    # The stacked shares of all rows add up to what each expert kept.
    shares = np.zeros(len(kept))
    np.add.at(shares, v.figure.share_bars.opts["x"].astype(int), v.figure.share_bars.opts["height"])
    np.testing.assert_array_equal(shares, kept)
    # Another step through the spin box.
    with qtbot.waitSignal(v.drawn, timeout=5000):
        v.step.setValue(5)
    with open_trace(trace_path) as trace:
        np.testing.assert_array_equal(v.figure.requested_bars.opts["height"],
                                      trace.run(drawn_window.state.run.name).requested[5, 0, v.data.group])


def test_focusing_a_generated_token_moves_the_load_view_to_its_step(qtbot, drawn_window):
    v = show(qtbot, drawn_window, LoadView)
    row = drawn_window.state.row
    layer = drawn_window.state.layer_routing()
    t = int(np.flatnonzero(layer.step[row] > 0)[2])
    with qtbot.waitSignal(v.drawn, timeout=5000):
        drawn_window.state.set_position(t)
    assert v.step.value() == int(layer.step[row, t])
    assert v.data.group == int(layer.group[row, t])


def test_text_strip_shows_the_row_and_follows_the_mode(qtbot, drawn_window, trace_path):
    v = show(qtbot, drawn_window, TextView)
    row = drawn_window.state.row
    with open_trace(trace_path) as trace:
        run = trace.run(drawn_window.state.run.name)
        T = run.row_length(row)
        drops = (~run.kept[:, row, :T]).sum(axis=(0, 2))
    assert v.data.n_positions == T
    np.testing.assert_allclose(v.figure.shade, drops / drops.max())
    plain = v.figure.strip.text.toPlainText()
    assert v.data.texts[0] in plain and "▌" in plain  # prompt | generation marker
    with qtbot.waitSignal(v.drawn, timeout=5000):
        v.mode.setCurrentIndex(1)
    with open_trace(trace_path) as trace:
        kept = trace.run(drawn_window.state.run.name).kept[0, row, :T]
        np.testing.assert_allclose(v.figure.shade, (~kept).sum(-1) / 2)
    assert v.figure.token_at_char(0) == 0


def test_browser_fills_drops_completions_and_reference_marks(qtbot, drawn_window):
    model = drawn_window.browser.model
    qtbot.waitUntil(lambda: len(model.stats) == 4, timeout=10000)
    marks = [model.mark(name) for name in model.names]
    assert marks[0].kind == "ref" and all(m.kind in ("same", "differs") for m in marks[1:])
    assert all(m.text() == "=" or m.text() == f"≠ @{m.position}" for m in marks[1:])
    completion = model.index_of(model.names[0], COL["completion"]).data()
    assert completion and completion != "…"
    drawn_window._reference_chosen("r001")
    assert model.mark("r001").kind == "ref" and model.mark("r000").kind != "ref"
    qtbot.waitUntil(lambda: not drawn_window.progress.isVisible(), timeout=5000)
    assert "4 runs" in drawn_window.status_text.text()


def test_hidden_views_wait_until_shown(qtbot, drawn_window):
    overview = view(drawn_window, LayersView)
    routing = view(drawn_window, RoutingView)
    assert drawn_window.tabs.currentWidget() is routing and not overview.isVisible()
    with qtbot.waitSignal(routing.drawn, timeout=5000):
        drawn_window.state.set_row((drawn_window.state.row + 1) % 5)
    assert overview._dirty  # out of date, but nothing read or drawn for it yet
    v = show(qtbot, drawn_window, LayersView)
    assert v.data.row == drawn_window.state.row


def test_browser_filter_and_sort(qtbot, drawn_window):
    browser = drawn_window.browser
    qtbot.waitUntil(lambda: len(browser.model.stats) == 4, timeout=10000)
    browser.filter.setText("r003")
    assert browser.shown_names() == ["r003"] and "1 of 4 runs shown" in browser.count.text()
    browser.filter.setText("")
    browser.table.sortByColumn(COL["probe drops"], Qt.SortOrder.DescendingOrder)
    qtbot.waitUntil(lambda: len(browser.model.groups) == 1, timeout=3000)  # one condition, once regrouped
    drops = [browser.proxy_index(n, COL["probe drops"]).data() for n in browser.shown_names()]
    assert drops == sorted(drops, reverse=True)


def test_load_figure_draws_a_group_without_drops(qtbot, tmp_path):
    """Dropless runs have no dropped segments: the figure draws the kept shares and no hatched bars."""
    from inspector.figure_data.load import load_data
    from inspector.figures.load import LoadFigure
    from inspector.qt import pg
    from traces.analysis import layer_routing

    path = tmp_path / "roomy.h5"
    write_synthetic_trace(path, 1, L=2, E=4, K=2, V=64, B=3, T=12, R=2, capacity_factor=50.0)
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    figure = LoadFigure(widget.ci)
    with open_trace(path) as trace:
        data = load_data(layer_routing(trace.run("r000"), 0), step=0)
    assert data.dropped.sum() == 0
    figure.set_data(data)
    assert len(figure.dropped_bars.opts["x"]) == 0
    np.testing.assert_array_equal(figure.kept_bars.opts["height"], data.kept)
