"""Text strip view: the selected row's text, each token shaded by its drops or router margin."""

from __future__ import annotations

from inspector.figure_data.text import SHADE_MODES
from inspector.figures.style import FigureStyle
from inspector.figures.text import TextFigure
from inspector.qt import Qt, QtCore, QtWidgets, pg
from inspector.specs.selection import Selection
from inspector.views.base import View, ViewSettings
from inspector.views.hover import HoverLine

#: The least height of the strip's scroll area: its caption and one line of text stay in view.
TEXT_MIN_PX = 84


class TextView(View):
    """The completion as text under the tabs; clicking a token focuses it in every view."""

    name = "text"
    defer_ms = 30  # under the tabs, always visible: let the heatmap paint first on every change

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.mode = QtWidgets.QComboBox()
        self.mode.addItems(SHADE_MODES)
        self.mode.setToolTip("What the shade of each token shows")
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(QtWidgets.QLabel("Shade tokens by:"))
        bar.addWidget(self.mode)
        bar.addStretch(1)
        bar.addWidget(self.export_button())
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(FigureStyle().background)
        self.graphics.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.graphics.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.figure = TextFigure(self.graphics.ci)
        self.scroll = QtWidgets.QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.graphics)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.hover = HoverLine("Hover over a token: drops and the smallest router margin; click to focus it.",
                               lines=1)  # under the tabs, where every line counts
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.scroll, 1)
        self.scroll.setMinimumHeight(TEXT_MIN_PX)  # the two-line caption and a line of text
        layout.addWidget(self.hover)
        self.graphics.scene().sigMouseMoved.connect(self._moved)
        self.graphics.scene().sigMouseClicked.connect(self._clicked)
        self.mode.currentTextChanged.connect(self.invalidate)
        for signal in (state.trace_changed, state.run_changed, state.row_changed):
            signal.connect(self.invalidate)
        state.layer_changed.connect(self._layer_changed)

    def selection(self, d) -> Selection:
        return Selection(run=d.run, row=d.row, layer=self.state.layer, shade=self.mode.currentText())

    def redraw(self) -> None:
        self.figure.set_data(self.state.text_data(), self.mode.currentText(), self.state.layer)
        self._fit_height()

    def _layer_changed(self) -> None:
        if self.mode.currentText() == SHADE_MODES[1]:
            self.invalidate()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        QtCore.QTimer.singleShot(0, self._fit_height)

    def _fit_height(self) -> None:
        width = self.scroll.viewport().width()
        height = int(self.figure.preferred_height(width)) if self.figure.data is not None else 40
        self.graphics.setMinimumHeight(max(height, self.scroll.viewport().height() - 2, 40))

    def _moved(self, scene_pos) -> None:
        self.hover.show_text(self.figure.hover_text_at(scene_pos))

    def _clicked(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            t = self.figure.token_at(event.scenePos())
            if t is not None:
                self.state.set_position(t)

    def save_settings(self, settings: ViewSettings) -> None:
        settings.set("text/mode", self.mode.currentText())

    def restore_settings(self, settings: ViewSettings) -> None:
        mode = settings.value("text/mode", SHADE_MODES[0], str)
        if mode in SHADE_MODES:
            self.mode.setCurrentText(mode)
