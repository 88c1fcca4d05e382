"""The layers figure (All layers tab): layers x positions of one row, top-1 expert as a categorical colour
(with a legend), cells with dropped candidates crossed in red (a red tick where cells are narrow)."""

from __future__ import annotations

import html
import math

import numpy as np

from inspector.figure_data.layers import LayersData, describe_layers_cell
from inspector.figures.axes import CategoryAxis, TokenAxis, XZoomViewBox
from inspector.figures.key import Key, square
from inspector.figures.marks import CellMarks, MarkAxis
from inspector.figures.style import PALETTE, FigureStyle, categorical_colors, place_legend
from inspector.qt import QtCore, QtGui, pg

#: Legend entries per column before the legend wraps to another column.
LEGEND_ROWS = 16
NB = "\u00a0"  # a number stays on the line of its word when a title wraps


def top1_rgb(top1: np.ndarray, n_experts: int, palette: str = PALETTE) -> np.ndarray:
    """[L, T, 3] uint8 image: the palette colour of each cell's top-1 expert (black if missing)."""
    colors = np.vstack([categorical_colors(n_experts, palette), np.zeros((1, 3), dtype=np.uint8)])
    idx = np.where((top1 >= 0) & (top1 < n_experts), top1, n_experts)
    return colors[idx]


class LayersFigure:
    """Draws `LayersData` into a `pg.GraphicsLayout`: the plot at (row, 0), the key of the experts'
    colours beside it at (row, 1), or (`key_below`, for a narrow page) under it at (row + 1, 0)."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0,
                 key_below: bool = False) -> None:
        self.style = style or FigureStyle()
        self.data: LayersData | None = None
        self.key_below = key_below
        self.x_axis = TokenAxis("bottom")
        self.y_axis = CategoryAxis("left")
        self.marks = MarkAxis()
        self.plot: pg.PlotItem = layout.addPlot(row=row, col=0, viewBox=XZoomViewBox(),
                                                axisItems={"bottom": self.x_axis, "left": self.y_axis,
                                                           "top": self.marks})
        self.plot.showAxis("top")
        self.plot.setLabel("bottom", "position (token)")
        self.plot.setLabel("left", "MoE layer (model layer)")
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.style.style_plot(self.plot)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.drops = CellMarks("cross", self.style.dropped, width=2.0, shadow="#ffffff")
        self.drops.setZValue(10)
        self.plot.addItem(self.drops)
        self.boundary = pg.InfiniteLine(
            angle=90, movable=False,
            pen=pg.mkPen(self.style.foreground, width=2, style=QtCore.Qt.PenStyle.DashLine))
        self.boundary.setZValue(20)
        self.plot.addItem(self.boundary)
        # Beside the plot one expert a row (a column of LEGEND_ROWS at most); under it as many a row
        # as the page's width holds.
        self.legend = Key(self.style, max_columns=12 if key_below else 1)
        if key_below:
            layout.addItem(self.legend, row=row + 1, col=0)
        else:
            place_legend(layout, self.legend, row, 1)
        self._legend_size = -1

    def set_data(self, data: LayersData, *, keep_view: bool = False) -> None:
        self.data = data
        L, T = data.top1.shape
        self.image.setImage(top1_rgb(data.top1, data.n_experts, self.style.palette), autoLevels=False,
                            levels=(0, 255))
        self.image.setRect(QtCore.QRectF(-0.5, -0.5, T, L))
        self.x_axis.set_labels([label.replace(" ", "·") for label in data.labels])
        self.y_axis.set_labels([f"{l} ({m})" for l, m in enumerate(data.model_layers)])
        t, l, _ = data.drop_points()
        self.drops.set_cells(t, l)
        self.boundary.setPos(data.prompt_len - 0.5)
        self.boundary.setVisible(0 < data.prompt_len < T)
        self.marks.set_mark("boundary", data.prompt_len - 0.5 if 0 < data.prompt_len < T else None,
                            "prompt | generation", self.style.foreground)
        self._set_legend(data.n_experts)
        self.plot.setTitle(f"run {html.escape(data.run)} · row{NB}{data.row} (request{NB}{data.request})"
                           f"<br>top-1 expert "
                           f"per layer · {int(data.n_dropped.sum())}{NB}dropped candidates (red)",
                           color=self.style.foreground, size=f"{self.style.font_size + 1}pt")
        self.plot.vb.setLimits(xMin=-0.5 - 0.05 * T, xMax=T - 0.5 + 0.05 * T, yMin=-1.5, yMax=L + 0.5)
        if not keep_view:
            self.plot.vb.setRange(xRange=(-0.5, T - 0.5), yRange=(-0.5, L - 0.5), padding=0)

    def _set_legend(self, n_experts: int) -> None:
        if self._legend_size == n_experts:
            return
        self._legend_size = n_experts
        self.legend.clear()
        colors = categorical_colors(n_experts, self.style.palette)
        for e in range(n_experts):
            self.legend.add(square(QtGui.QColor(*(int(c) for c in colors[e]))), f"expert{NB}{e}")
        if not self.key_below:
            self.legend.max_columns = max(1, math.ceil(n_experts / LEGEND_ROWS))

    def cell_at(self, x: float, y: float) -> tuple[int, int] | None:
        """(position, layer) of the cell containing (x, y), or None outside."""
        if self.data is None:
            return None
        t, l = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
        if 0 <= t < self.data.n_positions and 0 <= l < self.data.n_layers:
            return t, l
        return None

    def hover_text(self, x: float, y: float) -> str | None:
        cell = self.cell_at(x, y)
        return None if cell is None or self.data is None else describe_layers_cell(self.data, *cell)
