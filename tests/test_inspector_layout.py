"""The app at every window size: on the shipped example, at 1280 x 720, the first-launch 1472 x 920
and 1920 x 1080, every view keeps its plots and tables at their minimum heights and nothing is cut
(titles, axis names, labels, buttons, combo boxes, tabs, list items and headers, the toolbar) or
scrolls sideways; at 1280 x 720 the proven cause reads whole; at 800 x 500 every main plot stays in
view; readouts describe only what is on screen; marks and ticks are placed so that they hide
nothing."""

import numpy as np
import pytest

from inspector.app.errors import open_error_text
from inspector.app.example import example_path
from inspector.figures.axes import CountAxis
from inspector.figures.marks import MarkAxis
from inspector.qt import QtCore, QtGui, QtWidgets, pg
from inspector.views.base import MIN_PLOT_PX

SIZES = ((1280, 720), (1472, 920), (1920, 1080))
#: Room a list item, header, tab or button leaves around its text.
TEXT_MARGIN_PX = 3


@pytest.fixture
def example_window(make_window):
    return make_window(example_path())  # shipped with the package


def show(qtbot, w, view) -> None:
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view._dirty and view.data is not None, timeout=10000)
    qtbot.wait(30)  # the graphics take their new minimum size on the next turn of the event loop
    QtWidgets.QApplication.processEvents()


def plots(view) -> list[pg.PlotItem]:
    return [i for i in view.graphics.scene().items() if isinstance(i, pg.PlotItem) and i.isVisible()]


def cut_texts(view) -> list[str]:
    """Texts of the view's figure that do not fit their rectangle or stick out of the graphics."""
    graphics = view.graphics
    visible = graphics.mapToScene(graphics.viewport().rect()).boundingRect().adjusted(-1, -1, 1, 1)
    out = []
    for item in graphics.scene().items():
        if not item.isVisible():
            continue
        if isinstance(item, pg.LabelItem) and item.text:
            natural = item.item.boundingRect().width()
            if natural > item.size().width() + 1 or not visible.contains(item.sceneBoundingRect()):
                out.append(item.text)
        if isinstance(item, MarkAxis):
            for text, rect in item.placed:
                if not QtCore.QRectF(0, 0, item.width() + 1, item.height() + 1).contains(rect):
                    out.append(text)
            out += [f"{a} overlaps {b}" for i, (a, ra) in enumerate(item.placed)
                    for b, rb in item.placed[i + 1:] if ra.intersects(rb)]
        if isinstance(item, pg.AxisItem) and item.label.isVisible() and item.label.toPlainText():
            along = item.height() if item.orientation in ("left", "right") else item.width()
            if item.label.boundingRect().width() > along + 1:  # the axis name longer than its axis
                out.append(item.label.toPlainText())
    return out


def _item_cuts(view) -> list[str]:
    """Item texts of a list, tree or table drawn shorter than they are, and header titles likewise."""
    out = []
    header = view.header() if isinstance(view, QtWidgets.QTreeView) else view.horizontalHeader() \
        if isinstance(view, QtWidgets.QTableView) else None
    if header is not None and header.isVisible():
        model = header.model()
        for c in range(header.count()):
            if header.isSectionHidden(c):
                continue
            title = str(model.headerData(c, QtCore.Qt.Orientation.Horizontal) or "")
            if header.fontMetrics().horizontalAdvance(title) + 2 * TEXT_MARGIN_PX > header.sectionSize(c):
                out.append(f"header {title!r}")
    seen = set()
    port = view.viewport().rect()
    step = max(view.fontMetrics().height() // 2, 4)
    for y in range(2, port.height(), step):
        for x in range(2, port.width(), 8):
            index = view.indexAt(QtCore.QPoint(x, y))
            key = (index.row(), index.column(), index.internalId(), index.parent().row())
            if not index.isValid() or key in seen:
                continue
            seen.add(key)
            text = str(index.data() or "")
            if not text:
                continue
            metrics = QtGui.QFontMetrics(index.data(QtCore.Qt.ItemDataRole.FontRole) or view.font())
            rect = view.visualRect(index)  # cut sideways by the viewport's edge, not at its bottom
            rect.setLeft(max(rect.left(), port.left()))
            rect.setRight(min(rect.right(), port.right()))
            if rect.height() >= 2 * metrics.height():  # a wrapped item: its lines fit its height
                lines = metrics.boundingRect(QtCore.QRect(0, 0, rect.width() - 2 * TEXT_MARGIN_PX, 10_000),
                                             int(QtCore.Qt.TextFlag.TextWordWrap), text)
                if lines.height() > rect.height() or lines.width() > rect.width() - 2 * TEXT_MARGIN_PX:
                    out.append(text)
            elif metrics.horizontalAdvance(text) + 2 * TEXT_MARGIN_PX > rect.width():
                out.append(text)
    return out


def cut_widgets(window) -> list[str]:
    """What the window shows shorter than it is, apart from its figures: single-line labels, buttons,
    combo boxes, tabs, the items and headers of its lists, trees and tables, a toolbar that hides
    widgets behind its extension button, and every horizontal scroll bar in use."""
    out = []
    for label in window.findChildren(QtWidgets.QLabel):
        text = label.text()
        plain = text and label.textFormat() != QtCore.Qt.TextFormat.RichText and "<" not in text
        if (label.isVisible() and not label.wordWrap() and plain
                and label.fontMetrics().horizontalAdvance(text) > label.contentsRect().width() + 1):
            out.append(f"label {text!r}")
    for button in window.findChildren(QtWidgets.QAbstractButton):
        text = button.text().replace("&", "")
        boxed = isinstance(button, QtWidgets.QCheckBox | QtWidgets.QRadioButton)
        need = button.fontMetrics().horizontalAdvance(text) + 2 * TEXT_MARGIN_PX
        if button.isVisible() and text and not boxed and need > button.width():
            out.append(f"button {text!r}")
    for combo in window.findChildren(QtWidgets.QComboBox):
        if combo.isVisible() and combo.currentText():
            option = QtWidgets.QStyleOptionComboBox()
            combo.initStyleOption(option)
            field = combo.style().subControlRect(QtWidgets.QStyle.ComplexControl.CC_ComboBox, option,
                                                 QtWidgets.QStyle.SubControl.SC_ComboBoxEditField, combo)
            if combo.fontMetrics().horizontalAdvance(combo.currentText()) > field.width():
                out.append(f"combo box {combo.currentText()!r}")
    for bar in window.findChildren(QtWidgets.QTabBar):
        for i in range(bar.count() if bar.isVisible() else 0):
            need = bar.fontMetrics().horizontalAdvance(bar.tabText(i)) + 2 * TEXT_MARGIN_PX
            if need > bar.tabRect(i).width():
                out.append(f"tab {bar.tabText(i)!r}")
    for toolbar in window.findChildren(QtWidgets.QToolBar):
        extension = toolbar.findChild(QtWidgets.QToolButton, "qt_toolbar_ext_button")
        if toolbar.isVisible() and extension is not None and extension.isVisible():
            out.append(f"toolbar {toolbar.windowTitle()!r} hides widgets")
    for area in window.findChildren(QtWidgets.QAbstractScrollArea):
        if area.isVisible() and not isinstance(area, QtWidgets.QGraphicsView):
            if area.horizontalScrollBar().maximum() > 0:
                out.append(f"{type(area).__name__} {area.objectName()!r} scrolls sideways")
            if isinstance(area, QtWidgets.QAbstractItemView):
                out += [f"{type(area).__name__}: {t!r}" for t in _item_cuts(area)]
    return out


def test_every_view_holds_at_every_size(qtbot, example_window):
    w = example_window
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)  # every run summarised
    names = [n for n in w.browser.model.names if n not in w.browser.model.unusable]
    longest = max(names, key=lambda n: len(n) + len(w.state.info(n).label))
    # The run the window opens on at every size; at the smallest, also the run with the longest name
    # and label (the toolbar, the browser and the pickers) at the last layer.
    for width, height, run in (*((*size, None) for size in SIZES), (*SIZES[0], longest)):
        w.resize(width, height)
        qtbot.waitUntil(lambda size=(width, height): (w.width(), w.height()) == size, timeout=3000)
        if run is not None:
            w.state.set_run(run)
            w.state.set_layer(w.state.n_layers - 1)
            assert "(model layer" in w.navigation.layer_label.text()
        for view in [v for v in w.views if v.area == "tab"]:
            show(qtbot, w, view)
            where = f"{view.name} at {width}x{height}" + (f" on {run}" if run else "")
            for plot in plots(view):
                floor = plot.vb.minimumHeight()
                assert plot.vb.height() >= floor - 0.5, (where, plot.titleLabel.text, plot.vb.height())
            for heatmap in getattr(view.figure, "heatmaps", []) + [getattr(view.figure, "plot", None)]:
                if heatmap is not None:
                    assert heatmap.vb.height() >= MIN_PLOT_PX - 0.5, where
            tables = [t for t in view.findChildren(QtWidgets.QAbstractItemView) + [w.browser.table]
                      if t.isVisible() and not isinstance(t, QtWidgets.QHeaderView)]
            for table in tables:
                least = max(table.minimumHeight(), table.minimumSizeHint().height(), 3 * 18 + 20)  # 3 rows
                assert table.height() >= least, (where, table, table.height())
            assert cut_texts(view) == [], where
            assert not (cuts := cut_widgets(w)), (where, cuts)
            # What does not fit scrolls: the graphics are never smaller than their layout needs.
            need = view.graphics.ci.layout.effectiveSizeHint(QtCore.Qt.SizeHint.MinimumSize)
            size = view.graphics.size()
            assert size.width() >= need.width() - 1 and size.height() >= need.height() - 1, where
            # Only vertically: at 1280 x 720 by at most 120 px, the main plots (both heatmaps of Side by
            # side) in view unscrolled; at the middle size only Side by side, by no more than its
            # explanation on top takes (the plots below it fit); at 1920 x 1080 nothing.
            assert view.scroller.horizontalScrollBar().maximum() == 0, where
            scroll = view.scroller.verticalScrollBar().maximum()
            if width == SIZES[0][0]:
                assert scroll <= 120, (where, scroll)
                for plot in IN_VIEW[view.name](view.figure):
                    assert view.scroller.verticalScrollBar().value() == 0, where
                    assert in_view(view, plot) == plot.vb.sceneBoundingRect().size().toSize(), where
            elif view.name == "pair" and width == SIZES[1][0]:
                assert scroll <= view.cause_box.height() + view.texts.height(), where
            else:
                assert scroll == 0, where


#: The plots of each view that stay in view, unscrolled, at 1280 x 720.
IN_VIEW = {"routing": lambda f: [f.plot], "layers": lambda f: [f.plot], "load": lambda f: [f.totals],
           "pair": lambda f: f.heatmaps, "runs": lambda f: [f.map], "compare": lambda f: f.plots,
           "causal_map": lambda f: f.plots}


def in_view(view, plot) -> QtCore.QSize:
    """The size of the part of `plot`'s data area the view's scroll area shows now."""
    scene = plot.vb.sceneBoundingRect()
    at = view.graphics.viewport().mapTo(view.scroller.viewport(), view.graphics.mapFromScene(scene.topLeft()))
    return QtCore.QRect(at, scene.size().toSize()).intersected(view.scroller.viewport().rect()).size()


#: Laptop and desktop windows: the views comparing runs are in view whole, unscrolled.
SCREENS = ((1280, 720), (1366, 768), (1920, 1080))


def test_the_views_comparing_runs_scroll_0_px_with_every_line_whole(qtbot, example_window):
    w = example_window
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)
    for width, height in SCREENS:
        w.resize(width, height)
        qtbot.waitUntil(lambda size=(width, height): (w.width(), w.height()) == size, timeout=3000)
        for view in [v for v in w.views if v.name in ("pair", "runs", "compare")]:
            show(qtbot, w, view)
            qtbot.wait(50)
            where = f"{view.name} at {width}x{height}"
            assert view.scroller.verticalScrollBar().maximum() == 0, where
            assert view.scroller.horizontalScrollBar().maximum() == 0, where
            assert cut_texts(view) == [], where
            assert not (cuts := cut_widgets(w)), (where, cuts)
            for plot in plots(view):
                assert in_view(view, plot) == plot.vb.sceneBoundingRect().size().toSize(), where
            if view.name == "pair":
                box = view.cause_box
                # A short view holds the headline alone and whole (no half line of the sentence
                # under it); a taller one the headline and sentence whole.
                if not view.details.isChecked():
                    assert box.toPlainText().strip() == view.data.cause.headline.strip(), where
                    assert box.verticalScrollBar().maximum() == 0, where
                brief = not view.details.isChecked()
                assert box.needed_height(headline_only=brief) <= box.height() + 1, where


def test_the_second_example_has_nothing_cut_either(qtbot, make_window):
    from inspector.app.example import examples_dir

    w = make_window(examples_dir() / "tiny-mixtral-bf16.h5")  # other names, tokens and conditions
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)
    for width, height in (SIZES[0], SIZES[2]):
        w.resize(width, height)
        qtbot.waitUntil(lambda size=(width, height): (w.width(), w.height()) == size, timeout=3000)
        for view in [v for v in w.views if v.area == "tab"]:
            show(qtbot, w, view)
            where = f"{view.name} at {width}x{height}"
            assert cut_texts(view) == [], where
            assert not (cuts := cut_widgets(w)), (where, cuts)
            assert view.scroller.horizontalScrollBar().maximum() == 0, where


def test_at_1280_by_720_the_cause_headline_reads_whole_its_sentence_one_click_away(qtbot, example_window):
    w = example_window
    pair = next(v for v in w.views if v.name == "pair")
    w.resize(*SIZES[0])
    qtbot.waitUntil(lambda: (w.width(), w.height()) == SIZES[0], timeout=3000)
    show(qtbot, w, pair)
    qtbot.wait(50)
    box, data = pair.cause_box, pair.data
    assert data.cause.proven and box.brief_text().startswith("Proven cause: capacity")
    # The headline is whole in the box, the box whole in the view, nothing scrolled; the plots first.
    assert box.verticalScrollBar().value() == 0 and pair.scroller.verticalScrollBar().value() == 0
    shown = QtCore.QRect(box.mapTo(pair.scroller.viewport(), QtCore.QPoint(0, 0)), box.size())
    assert pair.scroller.viewport().rect().contains(shown), shown
    assert box.needed_height(headline_only=True) <= box.height() + 1
    assert pair.texts.height() == 0 and not pair.details.isChecked()  # the completions fold
    for plot in pair.figure.heatmaps:
        assert in_view(pair, plot) == plot.vb.sceneBoundingRect().size().toSize()
    # One click shows the sentence whole and the completions; a second gives the plots their room back.
    headline = box.height()
    qtbot.mouseClick(pair.details, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: box.needed_height() <= box.height() + 1 and pair.texts.height() >= 60,
                    timeout=3000)
    # The sentences say A and B; the full names are at the top, in the pair picker, and in the facts
    # (and in the proven intervention's words, shown as explain stored them).
    cause = data.cause
    for name in (data.run_a, data.run_b):
        built = cause.sentence.replace(cause.intervention, "") if cause.intervention else cause.sentence
        assert name not in cause.headline + built + "".join(cause.counterfactuals)
        facts = [value.replace(cause.intervention, "") if cause.intervention else value
                 for key, value in cause.facts]
        assert sum(name in value for value in facts) == 1  # the 'runs' fact
    assert "in A" in cause.sentence and "in B" in cause.sentence
    assert pair.picker.a.currentText().startswith(data.run_a)
    assert pair.picker.b.currentText().startswith(data.run_b)
    # The completions start at their start, their first line and the split (t*) in view.
    pair._set_texts(scroll_to_t_star=True)
    for text in (pair.text_a, pair.text_b):
        assert text.verticalScrollBar().value() == 0
        rect = text.token_rect(data.t_star)
        assert text.viewport().rect().contains(rect), rect
    qtbot.mouseClick(pair.details, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: box.height() == headline and pair.texts.height() == 0, timeout=3000)


def test_a_completion_scrolls_by_whole_lines_to_a_late_split(qtbot):
    from inspector.views.token_text import TokenText

    box = TokenText()
    qtbot.addWidget(box)
    box.resize(300, 80)
    box.show()
    words = [f"w{i:02d} " for i in range(200)]
    offsets = np.cumsum([0] + [len(word) for word in words])
    box.set_tokens("".join(words), offsets, np.arange(len(words)), scroll_to=3)
    assert box.verticalScrollBar().value() == 0   # in view from the start: at the start
    box.set_tokens("".join(words), offsets, np.arange(len(words)), scroll_to=150)
    value = box.verticalScrollBar().value()
    assert value > 0 and np.isclose(box.line_tops(), value).any()  # a line's top, not inside a line
    assert box.viewport().rect().contains(box.token_rect(150))


#: The main plot of each view: at 800 x 500 it stays in view.
MAIN_PLOTS = {"routing": lambda f: f.plot, "layers": lambda f: f.plot, "load": lambda f: f.totals,
              "pair": lambda f: f.heat_a.plot, "runs": lambda f: f.map, "compare": lambda f: f.diff.plot,
              "causal_map": lambda f: f.plot}


def test_a_small_window_keeps_every_main_plot_in_view(qtbot, example_window):
    w = example_window
    w.resize(800, 500)
    qtbot.waitUntil(lambda: (w.width(), w.height()) == (800, 500), timeout=3000)
    for view in [v for v in w.views if v.area == "tab"]:
        show(qtbot, w, view)
        qtbot.wait(50)
        plot = MAIN_PLOTS[view.name](view.figure)
        scene = plot.vb.sceneBoundingRect()
        top_left = view.graphics.mapFromScene(scene.topLeft())
        port = view.scroller.viewport()
        at = view.graphics.viewport().mapTo(port, top_left)
        visible = QtCore.QRect(at, scene.size().toSize()).intersected(port.rect())
        assert view.scroller.verticalScrollBar().value() == 0, view.name
        assert visible.height() >= 2 * MIN_PLOT_PX // 3 and visible.width() >= 200, (view.name, visible)
    w.resize(*SIZES[1])  # the text strip, folded away in the short window, comes back
    qtbot.waitUntil(lambda: w.right.sizes()[1] > 0, timeout=3000)


def test_hover_readout_clears_on_a_run_layer_or_file_change(qtbot, example_window):
    w = example_window
    routing = next(v for v in w.views if v.name == "routing")
    show(qtbot, w, routing)

    def hover_a_cell(t: int) -> None:  # a new cell each time: the mouse has to move
        QtWidgets.QToolTip.hideText()  # the last cell's tooltip would take the mouse
        scene = routing.figure.plot.vb.mapViewToScene(QtCore.QPointF(t, 1))
        qtbot.mouseMove(routing.graphics.viewport(), routing.graphics.mapFromScene(scene))
        qtbot.waitUntil(lambda: f"position {t}" in routing.hover.text(), timeout=3000)

    hover_a_cell(30)
    with qtbot.waitSignal(routing.drawn, timeout=5000):
        w.state.step_run(1)
    assert routing.hover.text() == routing.hover.hint
    hover_a_cell(31)
    with qtbot.waitSignal(routing.drawn, timeout=5000):
        w.state.step_layer(1 if w.state.layer == 0 else -1)
        assert routing.hover.text() == routing.hover.hint
    hover_a_cell(32)
    w.close_trace()
    assert all(line.text() == line.hint for v in w.views for line in [getattr(v, "hover", None)] if line)


def test_opens_on_the_first_divergence_and_the_proven_cause(qtbot, example_window):
    w = example_window
    model = w.browser.model
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)
    first = next(n for n in model.names if model.mark(n).differs)
    assert w.state.run.name == first  # not the reference, which has nothing to explain
    pair = next(v for v in w.views if v.name == "pair")
    show(qtbot, w, pair)
    data = pair.data
    verdict, cause = data.verdict, data.cause
    assert (data.run_a, data.run_b) == ("c00-gshard-cf1.0-batch-native", "c01-gshard-cf1.0-batch-native")
    # Observed: the first differing decision is a prompt token at layer 2. Proven by explain's reruns:
    # new token 0, layer 0, expert 3's queue. The view lands on the proven event, not the first difference.
    assert (verdict.position, verdict.layer) == (0, 2)
    proven = (data.prompt_len, 0)
    assert cause.proven and cause.event == proven and cause.cells == (proven,)
    assert cause.headline.startswith("Proven cause: capacity — at position 28 (new token 0), layer 0; the "
                                     "first difference, at position 0 (prompt), layer 2, is not it.")
    assert "Causal map: " in cause.headline   # the graded map beside the proof
    assert "expert 3" in cause.sentence.split(" First difference")[0]
    assert (w.state.layer, w.state.position) == (proven[1], proven[0])
    stars = pair.figure.event_mark.getData()
    assert (list(stars[0]), list(stars[1])) == ([proven[0]], [proven[1]])   # the ★ on the map
    w.state.set_layer(2)
    w.state.set_position(0)
    w.go_to_cause()   # Ctrl+Shift+D
    assert (w.state.layer, w.state.position) == (proven[1], proven[0])
    w.state.set_run(model.names[0])  # the reference: Go to the first divergence leaves it
    w.go_to_divergence()
    assert w.state.run.name == first and w.tabs.currentWidget() is pair
    assert w.state.position == pair.data.t_star >= 0
    shortcuts = {a.text(): a.shortcut().toString() for a in w.actions()}
    assert shortcuts["Go to the first divergence"] and shortcuts["Go to the cause"] == "Ctrl+Shift+D"


def test_browser_groups_runs_by_condition_with_their_reference(qtbot, example_window):
    w = example_window
    browser, model = w.browser, w.browser.model
    qtbot.waitUntil(lambda: not w.progress.isVisible(), timeout=20000)
    conditions = [g.key for g in model.groups]
    assert len(conditions) == len(set(conditions)) > 1
    for g, group in enumerate(model.groups):
        assert {model.infos[n].condition for n in group.names} == {group.key}
        refs = {model.refs[n] for n in group.names}
        title = model.index(g, 0).data()
        assert group.key in title and all(model.mark(r).kind == "ref" for r in refs)
        if len(refs) == 1:  # one request in the condition: its heading names the reference
            assert f"ref {refs.pop()}" in title
    # Folding a condition survives the regrouping of runs that arrive later.
    heading = browser.proxy.index(0, 0)
    browser.table.collapse(heading)
    model.regroup()
    browser._structure_changed()
    assert not browser.table.isExpanded(browser.proxy.index(0, 0))
    # Names are elided in the middle and whole in the tooltip.
    name = model.groups[1].names[1]
    index = browser.proxy_index(name)
    assert browser.table.textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle
    assert name in index.data(QtCore.Qt.ItemDataRole.ToolTipRole)


def test_mark_axis_keeps_close_labels_apart(qtbot):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    marks = MarkAxis(rows=2)
    plot = widget.addPlot(axisItems={"top": marks})
    plot.showAxis("top")
    plot.setXRange(0, 100, padding=0)
    widget.resize(400, 200)
    widget.show()
    for i, x in enumerate((0, 1, 2, 50)):  # three labels on one spot, one at the left edge
        marks.set_mark(f"m{i}", x, f"{i + 10}/{i + 3}/1", "#000000")
    qtbot.waitUntil(lambda: len(marks.placed) >= 3, timeout=3000)
    rects = [r for _, r in marks.placed]
    assert all(r.left() >= 0 and r.right() <= marks.width() + 0.5 for r in rects)  # none cut at an edge
    assert not any(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])


def test_runs_hover_names_the_split_under_the_mouse(qtbot, example_window):
    w = example_window
    runs = next(v for v in w.views if v.name == "runs")
    show(qtbot, w, runs)
    position, counts = runs.data.split_points[0]
    text = runs.data.describe_cell(position, 0)
    assert f"runs split here: {'/'.join(str(n) for n in counts)}" in text
    assert runs.figure.split_axis.marks()  # and above the map


def test_count_axis_ticks_whole_numbers_only():
    axis = CountAxis("left")
    for low, high in ((0, 1.6), (-0.2, 0.2), (0, 37.4), (0, 1200)):
        values = [v for _, level in axis.tickValues(low, high, 150) for v in level]
        assert values and all(float(v).is_integer() for v in values)
    assert axis.tickStrings([0.0, 2.0], 1, 1) == ["0", "2"]


def test_open_errors_are_sentences_about_the_file():
    h5py_text = ("/x/run.h5: /: expected an HDF5 trace, found OSError: Unable to synchronously open file "
                 "(truncated file: eof = 200000, sblock->base_addr = 0, stored_eof = 16376140)")
    text = open_error_text("/x/run.h5", h5py_text)
    assert text.startswith("run.h5 is truncated") and "200,000" in text and "16,376,140" in text
    assert "/:" not in text and "sblock" not in text and text.endswith("File: /x/run.h5")
    text = open_error_text("/x/a.h5", "/x/a.h5: /: expected an HDF5 trace, found a file that is not HDF5")
    first = text.splitlines()[0]
    assert first == "a.h5 cannot be opened: expected an HDF5 trace, found a file that is not HDF5."
    text = open_error_text("/x/b.h5", "/x/b.h5: /: expected an HDF5 trace, found OSError: Unable to "
                                      "synchronously open file (bad superblock version number)")
    assert "found a damaged HDF5 file (bad superblock version number)." in text and "OSError" not in text


def test_side_by_side_gives_the_completions_their_height_back(qtbot, example_window):
    from inspector.views.pair import TEXTS_MIN_PX, TEXTS_PX

    w = example_window
    view = next(v for v in w.views if v.name == "pair")
    heights = []
    for width, height in ((1920, 1080), (1280, 640), (1920, 1080)):
        w.resize(width, height)
        qtbot.waitUntil(lambda size=(width, height): (w.width(), w.height()) == size, timeout=3000)
        show(qtbot, w, view)
        for _ in range(30):   # the box measures its text after the resize: until the heights settle
            before = view.splitter.sizes()
            qtbot.wait(100)
            if view.splitter.sizes() == before:
                break
        heights.append(view.splitter.sizes()[1])
    assert heights[1] == 0, heights  # folded in the small window...
    # ...and given back when it grows: what the cause box's text leaves of TEXTS_PX, never less than the
    # least the completions take
    assert heights[2] == heights[0] and TEXTS_MIN_PX < heights[0] <= TEXTS_PX, heights
