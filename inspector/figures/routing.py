"""The routing heatmap: positions x experts, router probability as colour, chosen experts outlined,
dropped candidates crossed in red (a red tick in cells too narrow for a cross), and a line between
prompt and generation. A run whose router logits were not recorded (a serving engine's) is coloured
by choice, with a key of its few colours instead of a continuous scale."""

from __future__ import annotations

import html

import numpy as np

from inspector.figure_data.routing import RoutingData, describe_cell
from inspector.figures.axes import CategoryAxis, TokenAxis, XZoomViewBox
from inspector.figures.marks import CellMarks, MarkAxis
from inspector.figures.panels import attach_colour_bar
from inspector.figures.style import FigureStyle, colormap
from inspector.qt import QtCore, pg
from traces.analysis.verdict_text import ordinal


def choice_colormap(name: str, n_choices: int) -> pg.ColorMap:
    """A stepped colour map of `n_choices` + 1 bins over [0, 1]: not chosen, then the K-th to the 1st
    choice, each one colour of colour map `name` (the image holds (K - k) / K for choice k)."""
    base = colormap(name)
    bins = n_choices + 1
    colours = [base.map(k / n_choices, mode="qcolor") for k in range(bins)]
    positions, stops = [], []
    for k, colour in enumerate(colours):
        positions += [k / bins, (k + 1) / bins]
        stops += [colour, colour]
    return pg.ColorMap(positions, stops)


def choice_ticks(n_choices: int) -> list[tuple[float, str]]:
    """Ticks of the stepped colour bar: the middle of each bin, named."""
    bins = n_choices + 1
    names = ["none"] + [ordinal(n_choices - k + 1) for k in range(1, bins)]
    return [((k + 0.5) / bins, names[k]) for k in range(bins)]


class RoutingFigure:
    """Draws `RoutingData` into a `pg.GraphicsLayout`: a plot at (row, 0) with its colour bar right of
    its data area, inside the plot (`colour_bar` False: none, for a heatmap sharing another's).
    Items are created once; `set_data` replaces what they show."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0,
                 colour_bar: bool = True) -> None:
        self.style = style or FigureStyle()
        self.data: RoutingData | None = None
        self._colormap = self.style.colormap
        self.x_axis = TokenAxis("bottom")
        self.y_axis = CategoryAxis("left")
        self.marks = MarkAxis()  # the boundary (and t* in the side-by-side figure), above the cells
        self.plot: pg.PlotItem = layout.addPlot(row=row, col=0, viewBox=XZoomViewBox(),
                                                axisItems={"bottom": self.x_axis, "left": self.y_axis,
                                                           "top": self.marks})
        self.plot.showAxis("top")
        self.plot.setLabel("bottom", "position (token)")
        self.plot.setLabel("left", "expert")
        self.plot.invertY(True)  # expert 0 on top, as in a matrix
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.style.style_plot(self.plot)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.kept = CellMarks("outline", self.style.kept_pen, width=1.0, shadow=self.style.kept_shadow)
        self.dropped_outline = CellMarks("outline", self.style.dropped, width=1.0, edges=False)
        self.dropped = CellMarks("cross", self.style.dropped, width=2.0, shadow="#ffffff")
        for item in (self.kept, self.dropped_outline, self.dropped):
            item.setZValue(10)
            self.plot.addItem(item)
        self.boundary = pg.InfiniteLine(
            angle=90, movable=False,
            pen=pg.mkPen(self.style.boundary, width=2, style=QtCore.Qt.PenStyle.DashLine))
        self.boundary.setZValue(20)
        self.plot.addItem(self.boundary)
        self.colorbar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=colormap(self.style.colormap),
                                        interactive=True, width=16)
        self.colorbar.axis.setTextPen(pg.mkPen(self.style.foreground))
        self.colour_label = "router probability"
        self.colorbar.axis.setLabel(self.colour_label, color=self.style.foreground)
        self.colorbar.axis.label.setFont(self.style.font())
        self.colorbar.axis.setTickFont(self.style.font())  # the figure's font, as every other axis
        if colour_bar:
            attach_colour_bar(self.plot, self.colorbar, self.image)
        else:
            self.colorbar.setImageItem(self.image)  # keeps the levels and colours in step, unseen

    # -- drawing --------------------------------------------------------------------------------

    def set_data(self, data: RoutingData, *, keep_view: bool = False) -> None:
        """Show `data`; `keep_view` keeps the current zoom when only the layer or run changed."""
        self.data = data
        E, T = data.probs.shape
        if data.colour_label != self.colour_label:  # only runs without router logits change it
            self.colour_label = data.colour_label
            self.colorbar.axis.setLabel(data.colour_label, color=self.style.foreground)
            self.colorbar.axis.label.setFont(self.style.font())
        self._show_scale(data)
        self.image.setImage(data.probs, autoLevels=False, levels=self.colorbar.levels())
        self.image.setRect(QtCore.QRectF(-0.5, -0.5, T, E))
        self.x_axis.set_labels([label.replace(" ", "·") for label in data.labels])
        self.y_axis.set_labels([f"{e}" for e in range(E)])
        # Tall enough to name every expert (up to `LABEL_EVERY_UP_TO`): a sentence says "expert 3".
        need = self.y_axis.needed_px()
        if need > self.plot.vb.minimumHeight():
            self.plot.vb.setMinimumHeight(need)
        t, e = data.candidates(kept=True)
        self.kept.set_cells(t, e)
        t, e = data.candidates(kept=False)
        self.dropped_outline.set_cells(t, e)
        self.dropped.set_cells(t, e)
        self.boundary.setPos(data.prompt_len - 0.5)
        self.boundary.setVisible(0 < data.prompt_len < T)
        self.marks.set_mark("boundary", data.prompt_len - 0.5 if 0 < data.prompt_len < T else None,
                            "prompt | generation", self.style.boundary)
        self.marks.set_mark("cached", data.cached - 0.5 if data.cached > 0 else None, "prefix cache |",
                            self.style.boundary)
        nb = "\u00a0"  # a number stays on the line of its word when a title wraps
        self.plot.setTitle(
            f"run {html.escape(data.run)} · row{nb}{data.row} (request{nb}{data.request}) · "
            f"layer{nb}{data.layer} "
            f"(model layer{nb}{data.model_layer}) · "
            + (f"{int((~data.kept).sum())}{nb}dropped" if data.probabilities
               else "router logits not recorded"),
            color=self.style.foreground, size=f"{self.style.font_size + 1}pt")
        self.plot.vb.setLimits(xMin=-0.5 - 0.05 * T, xMax=T - 0.5 + 0.05 * T, yMin=-0.5 - E, yMax=E - 0.5 + E,
                               minXRange=min(4, T), minYRange=min(4, E))
        if not keep_view:
            self.plot.vb.setRange(xRange=(-0.5, T - 0.5), yRange=(-0.5, E - 0.5), padding=0)

    def _show_scale(self, data: RoutingData) -> None:
        """A continuous scale of probabilities, or one step per choice when only choices were recorded."""
        K = int(data.expert.shape[1])
        if self.colorbar.region is not None:  # a scale of steps has no levels to drag
            self.colorbar.region.setVisible(data.probabilities)
        if data.probabilities:
            self.colorbar.setColorMap(colormap(self._colormap))
            self.colorbar.axis.setTicks(None)
        else:
            self.colorbar.setColorMap(choice_colormap(self._colormap, K))
            self.colorbar.axis.setTicks([choice_ticks(K)])
            self.colorbar.setLevels((0.0, 1.0))

    def set_colormap(self, name: str) -> None:
        self._colormap = name
        if self.data is not None:
            self._show_scale(self.data)
        else:
            self.colorbar.setColorMap(colormap(name))

    def set_levels(self, low: float, high: float) -> None:
        if self.data is None or self.data.probabilities:  # choices keep their steps
            self.colorbar.setLevels((low, high))

    # -- reading back -----------------------------------------------------------------------------

    def cell_at(self, x: float, y: float) -> tuple[int, int] | None:
        """(position, expert) of the cell containing data point (x, y), or None outside."""
        if self.data is None:
            return None
        t, e = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
        if 0 <= t < self.data.n_positions and 0 <= e < self.data.n_experts:
            return t, e
        return None

    def hover_text(self, x: float, y: float) -> str | None:
        cell = self.cell_at(x, y)
        return None if cell is None or self.data is None else describe_cell(self.data, *cell)
