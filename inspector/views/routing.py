"""Routing heatmap view: one (run, layer, row) as positions x experts."""

from __future__ import annotations

import numpy as np

from inspector.figures.routing import RoutingFigure
from inspector.figures.style import COLORMAPS, FigureStyle
from inspector.qt import QtWidgets, pg
from inspector.specs.selection import Selection
from inspector.views.base import MIN_PLOT_PX, View, ViewSettings
from inspector.views.hover import HoverLine, connect_hover
from traces import TraceError
from traces.analysis.displacement import displacement

LEGEND = ("white frame = chosen and kept · red ✕ (a red tick in narrow cells) = chosen but dropped "
          "(over capacity) · "
          "dashed line = prompt | generation · click a cell to focus its token")


class RoutingView(View):
    """Experts x positions coloured by router probability, chosen experts framed, drops crossed."""

    name = "routing"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.colormap = QtWidgets.QComboBox()
        self.colormap.addItems(COLORMAPS)
        self.colormap.setToolTip("Colour map of the router probability")
        self.fit = QtWidgets.QCheckBox("Fit colours to data")
        self.fit.setToolTip("Stretch the colour bar from 0 to the largest probability shown "
                            "(otherwise 0 to 1); drag the colour bar to set it by hand")
        reset = QtWidgets.QPushButton("Reset zoom")
        reset.setToolTip("Show every position and expert (mouse wheel zooms, drag pans)")
        reset.clicked.connect(self.reset_zoom)
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(QtWidgets.QLabel("Colour map:"))
        bar.addWidget(self.colormap)
        bar.addWidget(self.fit)
        bar.addWidget(reset)
        bar.addStretch(1)
        bar.addWidget(self.export_button())
        legend = QtWidgets.QLabel(LEGEND)
        legend.setWordWrap(True)
        legend.setStyleSheet("color: #505050;")
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(FigureStyle().background)
        self.figure = RoutingFigure(self.graphics.ci)
        self.focus_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#00e5ff", width=1))
        self.focus_line.setZValue(30)
        self.focus_line.hide()
        self.figure.plot.addItem(self.focus_line)
        self.hover = HoverLine("Hover over a cell: token, position, layer, expert, probability, kept or "
                               "dropped, slot against capacity, group and step.")
        connect_hover(self.graphics, self.figure.plot, self.hover_text, self.hover, self._clicked)
        self.figure.plot.vb.setMinimumHeight(MIN_PLOT_PX)
        self.keep_graphics_at_least(self.graphics, 600, MIN_PLOT_PX + 110)
        layout = self.scrolled_layout()
        layout.addLayout(bar)
        layout.addWidget(legend)
        layout.addWidget(self.message)
        layout.addWidget(self.graphics, 1)
        self.pin_below(self.hover)
        self.colormap.currentTextChanged.connect(self.figure.set_colormap)
        self.fit.toggled.connect(self._apply_levels)
        self._shown_key: tuple | None = None
        for signal in (state.trace_changed, state.run_changed, state.row_changed, state.layer_changed):
            signal.connect(self.invalidate)
        state.position_changed.connect(self._show_focus)

    def selection(self, d) -> Selection:
        low, high = self.figure.colorbar.levels()
        return Selection(run=d.run, row=d.row, layer=d.layer, colormap=self.colormap.currentText(),
                         levels=(float(low), float(high)))

    def redraw(self) -> None:
        data = self.state.routing_data()
        key = (data.request, data.n_positions)  # same request and length: positions line up, keep the zoom
        self.figure.set_data(data, keep_view=key == self._shown_key)
        self._shown_key = key
        self._apply_levels()
        self._show_focus()

    def clear(self) -> None:
        self._shown_key = None
        self.hover.show_text(None)

    def reset_zoom(self) -> None:
        if self.figure.data is not None:
            E, T = self.figure.data.probs.shape
            self.figure.plot.vb.setRange(xRange=(-0.5, T - 0.5), yRange=(-0.5, E - 0.5), padding=0)

    def _apply_levels(self, *args) -> None:
        data = self.figure.data
        if data is None:
            return
        high = float(data.probs.max(initial=0.0)) if self.fit.isChecked() else 1.0
        self.figure.set_levels(0.0, max(high, 1e-6))

    def _show_focus(self) -> None:
        t = self.state.position
        self.focus_line.setVisible(t is not None)
        if t is not None:
            self.focus_line.setPos(t)

    def _clicked(self, x: float, y: float) -> None:
        cell = self.figure.cell_at(x, y)
        if cell is not None:
            self.state.set_position(cell[0])

    def hover_text(self, x: float, y: float) -> str | None:
        """The figure's description of the cell, plus who took the slots ahead of a dropped one."""
        text = self.figure.hover_text(x, y)
        cell = self.figure.cell_at(x, y)
        data = self.figure.data
        if text is None or cell is None or data is None:
            return text
        t, e = cell
        ranks = np.flatnonzero((data.expert[t] == e) & ~data.kept[t])
        if ranks.size and self.state.run is not None and self.state.run.name == data.run:
            try:
                layer = self.state.layer_routing(data.layer)
                text += "\n" + displacement(layer, data.row, t, int(ranks[0])).describe_ahead()
            except (TraceError, ValueError) as exc:
                text += f"\n(who took the slots ahead is unknown: {exc})"
        return text

    def save_settings(self, settings: ViewSettings) -> None:
        settings.set("view/colormap", self.colormap.currentText())
        settings.set("view/fit_levels", self.fit.isChecked())

    def restore_settings(self, settings: ViewSettings) -> None:
        name = settings.value("view/colormap", "viridis", str)
        if name in COLORMAPS:
            self.colormap.setCurrentText(name)
        self.fit.setChecked(str(settings.value("view/fit_levels", "false")).lower() == "true")


