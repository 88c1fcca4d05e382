"""The layers view (All layers tab): every MoE layer of one row, top-1 expert per token, drops marked."""

from __future__ import annotations

from inspector.figures.layers import LayersFigure
from inspector.figures.style import FigureStyle
from inspector.qt import QtWidgets, pg
from inspector.views.base import MIN_PLOT_PX, View
from inspector.views.hover import HoverLine, connect_hover


class LayersView(View):
    """Layers x positions of the selected row; clicking a cell selects that layer and token."""

    name = "layers"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        legend = QtWidgets.QLabel("colour = first-choice (top-1) expert · red ✕ (a red tick in narrow "
                                  "cells) = at least one candidate dropped · dashed line = "
                                  "prompt | generation · the selected layer is "
                                  "framed · click a cell to select its layer and token")
        legend.setWordWrap(True)
        legend.setStyleSheet("color: #505050;")
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(FigureStyle().background)
        self.figure = LayersFigure(self.graphics.ci)
        self.layer_band = pg.LinearRegionItem(orientation="horizontal", movable=False,
                                              brush=pg.mkBrush(0, 0, 0, 0), pen=pg.mkPen("#000000", width=3))
        self.layer_band.setZValue(25)
        self.figure.plot.addItem(self.layer_band)
        self.focus_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#00b8d4", width=1))
        self.focus_line.setZValue(30)
        self.focus_line.hide()
        self.figure.plot.addItem(self.focus_line)
        self.hover = HoverLine("Hover over a cell: token, layer, top-1 expert and every choice kept or "
                               "dropped.")
        connect_hover(self.graphics, self.figure.plot, self.figure.hover_text, self.hover, self._clicked)
        self.figure.plot.vb.setMinimumHeight(MIN_PLOT_PX)
        self.keep_graphics_at_least(self.graphics, 600, MIN_PLOT_PX + 90)
        layout = self.scrolled_layout()
        top = QtWidgets.QHBoxLayout()
        top.addWidget(legend, 1)
        top.addWidget(self.export_button())
        layout.addLayout(top)
        layout.addWidget(self.message)
        layout.addWidget(self.graphics, 1)
        self.pin_below(self.hover)
        self._shown_key: tuple | None = None
        for signal in (state.trace_changed, state.run_changed, state.row_changed):
            signal.connect(self.invalidate)
        state.layer_changed.connect(self._show_layer)
        state.position_changed.connect(self._show_focus)

    def redraw(self) -> None:
        data = self.state.layers_data()
        key = (data.request, data.n_positions)  # same request and length: positions line up, keep the zoom
        self.figure.set_data(data, keep_view=key == self._shown_key)
        self._shown_key = key
        self._show_layer()
        self._show_focus()

    def clear(self) -> None:
        self._shown_key = None

    def _show_layer(self) -> None:
        l = self.state.layer
        self.layer_band.setRegion((l - 0.5, l + 0.5))

    def _show_focus(self) -> None:
        t = self.state.position
        self.focus_line.setVisible(t is not None)
        if t is not None:
            self.focus_line.setPos(t)

    def _clicked(self, x: float, y: float) -> None:
        cell = self.figure.cell_at(x, y)
        if cell is not None:
            self.state.set_layer(cell[1])
            self.state.set_position(cell[0])
