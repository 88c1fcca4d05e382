"""Compare view: runs A and B of one request over the same axes, as two images are compared.

The difference A − B of their router probabilities at the layer, and one heatmap that shows A left
of a split and B right of it: drag the split with the slider (or the line), show A or B whole, or
flicker between them. One crosshair runs through both panels; the line below reads both runs at the
layer, position and expert under it. Runs A and B are chosen as in Side by side (B follows the run
selected in the browser, A is its reference); a click selects the position in every view.
"""

from __future__ import annotations

from inspector.figure_data.compare import CompareData, compare_data
from inspector.figures.compare import CompareFigure
from inspector.figures.style import FigureStyle
from inspector.qt import Qt, QtCore, QtGui, QtWidgets, pg
from inspector.views.base import MIN_PLOT_PX
from inspector.views.glossary import tip
from inspector.views.hover import HoverLine
from inspector.views.pair_choice import PairChoiceView

HINT = ("Hover over a panel: one crosshair through both, and A's and B's router probability at that layer, "
        "position and expert. Drag the split or flicker to see A and B over the same cells.")
#: How long each run stays on screen while flickering.
FLICKER_MS = 600
#: What the lower panel shows, as the Show box names it.
SHOWN = {"A | B split": "split", "A": "A", "B": "B"}


class CompareView(PairChoiceView):
    """Two runs of one request over the same axes: their difference, a split between them, a crosshair."""

    name = "compare"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.style = FigureStyle()
        self.split = QtWidgets.QSlider(Qt.Orientation.Horizontal)
        self.split.setToolTip(tip("split"))
        self.split.setMinimumWidth(160)
        self.split.valueChanged.connect(self._split_moved)
        self.shown = QtWidgets.QComboBox()
        self.shown.addItems(list(SHOWN))
        self.shown.setToolTip("What the lower panel shows: A left of the split and B right of it, or "
                              "one run whole\n" + tip("A − B", "split", "not recorded"))
        self.shown.currentTextChanged.connect(lambda text: self._show_run(SHOWN[text]))
        self.flicker = QtWidgets.QToolButton()
        self.flicker.setText("Flicker")
        self.flicker.setCheckable(True)
        self.flicker.setToolTip(f"{tip('flicker')} ({FLICKER_MS} ms each)")
        self.flicker.toggled.connect(self._flicker_toggled)
        self._timer = QtCore.QTimer(self)
        self._timer.setInterval(FLICKER_MS)
        self._timer.timeout.connect(self._flick)
        reset = QtWidgets.QPushButton("Reset zoom")
        reset.setToolTip("Show every position (mouse wheel zooms, drag pans; both panels follow)")
        reset.clicked.connect(self.reset_zoom)
        bar = QtWidgets.QHBoxLayout()
        split_label = QtWidgets.QLabel("Split:")
        split_label.setToolTip(self.split.toolTip())
        for widget in (split_label, self.split):
            bar.addWidget(widget)
        bar.setStretch(1, 1)
        show_label = QtWidgets.QLabel("Show:")
        show_label.setToolTip(self.shown.toolTip())
        for widget in (show_label, self.shown, self.flicker, reset, self.export_button()):
            bar.addWidget(widget)
        self.graphics = self.panels = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(self.style.background)
        self.graphics.ci.setContentsMargins(4, 4, 4, 4)
        self.figure = CompareFigure(self.graphics.ci, self.style)
        # Each panel as tall as naming every expert takes (the figure sets it), the view at least two
        # plots high: below that it scrolls.
        self.keep_graphics_at_least(self.graphics, 600, 2 * MIN_PLOT_PX)
        self.hover = HoverLine(HINT)
        self.graphics.scene().sigMouseMoved.connect(self._moved)
        self.graphics.scene().sigMouseClicked.connect(self._clicked)
        layout = self.scrolled_layout()
        layout.addWidget(self.picker)
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.notice)
        layout.addWidget(self.graphics, 1)
        self.pin_below(self.hover)
        self._cell: tuple[int, int] | None = None
        self.follow_state(self._follow_position)

    def exported(self, d: CompareData) -> CompareData:
        return {"A": d.with_split(d.length), "B": d.with_split(0)}.get(self.figure.shown, d)

    # -- drawing --------------------------------------------------------------------------------

    def redraw(self) -> None:
        chosen = self.chosen_pair()
        if chosen is None:
            return
        source, a, b, layer = chosen
        try:
            data = compare_data(source.pair(a, b, layer))
        except ValueError as exc:
            self.say(f"Runs {a.run} and {b.run} cannot be compared: {exc}")
            return
        self.say(None, blank=False)
        key = (a.key, b.key, data.request)
        if key == self._shown and self.figure.data is not None:
            data = data.with_split(self.figure.data.split)
        self.figure.set_data(data, keep_view=key == self._shown)
        self._shown = key
        self.split.blockSignals(True)
        self.split.setRange(0, data.length)
        self.split.setValue(data.split)
        self.split.blockSignals(False)
        if self._cell is not None:
            self._show_cell(*self._cell)

    def clear(self) -> None:
        self._shown = None

    def reset_zoom(self) -> None:
        self.figure.reset_zoom()

    # -- the split, the run shown, flicker ------------------------------------------------------------

    def _split_moved(self, value: int) -> None:
        self.figure.set_split(value)

    def _show_run(self, which: str) -> None:
        if not self.flicker.isChecked():
            self.figure.show_run(which)

    def _flicker_toggled(self, on: bool) -> None:
        if on:
            self.figure.show_run("A")
            self._timer.start()
        else:
            self._timer.stop()
            self.figure.show_run(SHOWN[self.shown.currentText()])

    def _flick(self) -> None:
        self.figure.show_run("B" if self.figure.shown == "A" else "A")

    def hideEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().hideEvent(event)
        self.flicker.setChecked(False)  # nothing blinks out of sight

    # -- the crosshair ---------------------------------------------------------------------------------

    def _cell_at(self, scene_pos) -> tuple[int, int] | None:
        for plot in self.figure.plots:
            if plot.vb.sceneBoundingRect().contains(scene_pos):
                p = plot.vb.mapSceneToView(scene_pos)
                return self.figure.cell_at(plot, p.x(), p.y())
        return None

    def _show_cell(self, t: int, e: int) -> None:
        self._cell = (t, e)
        self.figure.set_crosshair(t, e)
        text = self.data.readout(t, e) if self.data is not None else None
        self.hover.show_text(text)

    def _moved(self, scene_pos) -> None:
        cell = self._cell_at(scene_pos)
        if cell is None:
            return  # the crosshair stays where it was read last
        self._show_cell(*cell)
        QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), self.hover.text(), self.graphics)

    def _clicked(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton and (cell := self._cell_at(event.scenePos())):
            self.state.set_position(cell[0])

    def _follow_position(self) -> None:
        t = self.state.position
        if t is not None and self.data is not None and 0 <= t < self.data.length:
            self._show_cell(t, self._cell[1] if self._cell else 0)

    def clear_hover(self, *args) -> None:
        super().clear_hover()
        self._cell = None
        self.figure.set_crosshair(None, None)
