"""The side-by-side figure of two runs of one request: A's and B's routing heatmaps at the chosen
layer, the difference strip at that layer (left column); the layer x position map of what differs,
the KL, logit-difference/top-2-margin and drop curves (right column, or under the left one when
`stacked`). Every panel shares one x axis (positions) and one x mapping: in a column every data
area has the same left edge and width (`inspector.figures.panels`), so t* and the selected position
are one vertical line through all of them; the bottom panel of each column numbers the positions.

With `with_text` both completions sit above the panels, their headers naming the runs A and B;
`names_below` names them under the panels instead; `with_key` puts the key of what is drawn
(`inspector.figures.pair_key`) under them.
"""

from __future__ import annotations

import html
import math

import numpy as np

from inspector.figure_data.pair import STRIP_ROWS, PairData
from inspector.figure_data.routing import describe_cell
from inspector.figures.axes import CategoryAxis, CountAxis, TokenAxis, XZoomViewBox
from inspector.figures.divergence_text import A_COLOR, B_COLOR, HtmlBlock, completion_html
from inspector.figures.log_axis import DecadeAxis
from inspector.figures.marks import CellMarks, MarkAxis
from inspector.figures.pair_key import STRIP_COLORS, kinds_rgb, not_recorded_brush, pair_key, strip_rgb
from inspector.figures.panels import left_axis_px, reserve_right, set_title, share_left_width
from inspector.figures.routing import RoutingFigure
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, pg

#: Short tick labels of the strip rows (`STRIP_ROWS` are the full names).
STRIP_TICKS = ("experts ≠", "✗ A only", "✗ B only")
#: Zero KL or logit difference is drawn at this value on the log axes.
LOG_FLOOR = 1e-12
T_STAR_COLOR = "#000000"
SELECTED_COLOR = "#00b8d4"
DIFF_COLOR = "#c0392b"
MARGIN_COLOR = "#606060"
#: Tick labels the left axes must hold (the strip's rows, a log axis's widest, a layer, an expert).
LEFT_TICKS = (*STRIP_TICKS, "2·10⁻¹⁰", "0.001", "88")
#: Above these, the markers of the map (★ over ○), then the position lines, then the cells.
LINES_Z, ROOT_Z, EVENT_Z = 40, 60, 61
NB = "\u00a0"  # keeps a number on the line of its word when a title wraps


def spans(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a 1-D mask."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _plot(layout: pg.GraphicsLayout, row: int, style: FigureStyle, left: pg.AxisItem | None = None,
          ylabel: str = "", top: pg.AxisItem | None = None) -> pg.PlotItem:
    axes = {"bottom": TokenAxis("bottom")}
    if left is not None:
        axes["left"] = left
    if top is not None:
        axes["top"] = top
    plot = layout.addPlot(row=row, col=0, axisItems=axes, viewBox=XZoomViewBox())
    if top is not None:
        plot.showAxis("top")
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.setLabel("left", ylabel)
    style.style_plot(plot)
    return plot


class PairFigure:
    """Draws `PairData` into a `pg.GraphicsLayout` (rows from `row` on, columns 0 and 1)."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0,
                 with_text: bool = False, stacked: bool = False, with_key: bool = True,
                 names_below: bool = False) -> None:
        self.style = style or FigureStyle()
        self.data: PairData | None = None
        self.layout = layout
        self.with_text = with_text
        self.stacked = stacked
        self.names_below = names_below
        self.text_a = self.text_b = self.names = self.key = None
        if with_text:
            texts = layout.addLayout(row=row, col=0, colspan=2)
            self.text_a, self.text_b = HtmlBlock(self.style), HtmlBlock(self.style)
            texts.addItem(self.text_a, row=0, col=0)
            texts.addItem(self.text_b, row=0, col=1)
            row += 1
        # Side by side, or (`stacked`, for a narrow page) the right column under the left one.
        left = layout.addLayout(row=row, col=0, colspan=2 if stacked else 1)
        if stacked:
            row += 1
        right = layout.addLayout(row=row, col=0 if stacked else 1, colspan=2 if stacked else 1)
        for part in (left, right):
            part.setContentsMargins(0, 0, 0, 0)
        self.columns = (left, right)
        layout.layout.setColumnStretchFactor(0, 1)
        layout.layout.setColumnStretchFactor(1, 1)
        self._key_row = row + 1
        if names_below:
            self.names = HtmlBlock(self.style)
            layout.addItem(self.names, row=self._key_row, col=0, colspan=2)
            self._key_row += 1
        # Left: the two heatmaps (the routing view's own figure) and the strip at the chosen layer.
        self.heat_a = RoutingFigure(left, self.style, row=0)
        self.heat_b = RoutingFigure(left, self.style, row=1)
        self.heat_a.marks.set_rows(2, push=False)  # t* at its line, above the boundary's name
        # Its three rows are short: their names may sit closer than other ticks, never left out.
        self.strip = _plot(left, 2, self.style, CategoryAxis("left", STRIP_TICKS, min_gap_px=12))
        self.strip.invertY(True)
        self.strip_image = pg.ImageItem(axisOrder="row-major")
        self.strip.addItem(self.strip_image)
        for i, s in enumerate((3, 3, 1.4)):
            left.layout.setRowStretchFactor(i, s)
        # Right: the map of what differs, and the curves.
        self.map_axis = CategoryAxis("left")
        self.map_marks = MarkAxis(rows=2, push=False)  # t* at its line, above the boundary's name
        self.map = _plot(right, 0, self.style, self.map_axis, "layer", top=self.map_marks)
        self.map.invertY(True)
        self.map_image = pg.ImageItem(axisOrder="row-major")
        self.map.addItem(self.map_image)
        self.first_marks = CellMarks("outline", "#000000", width=1.5, inset=0.0)
        self.first_marks.setZValue(10)
        self.map.addItem(self.first_marks)
        self.event_mark = pg.ScatterPlotItem(symbol="star", size=16, brush=pg.mkBrush("#ffeb3b"),
                                             pen=pg.mkPen("#000000", width=1.2))
        self.root_mark = pg.ScatterPlotItem(symbol="o", size=13, brush=None, pen=pg.mkPen("#000000", width=2))
        self.event_mark.setZValue(EVENT_Z)  # the ★ over the ○ and over the position lines
        self.root_mark.setZValue(ROOT_Z)
        for item in (self.root_mark, self.event_mark):
            self.map.addItem(item)
        # Where each marker belongs (position, layer); drawn moved inward where a cell at the map's
        # edge would show half of one (a ★ at position 0 stays whole).
        self._marker_cells: dict[int, tuple[list[float], list[float]]] = {}
        self.map.vb.sigResized.connect(self._place_markers)
        self.map.vb.sigRangeChanged.connect(self._place_markers)
        self.kl = _plot(right, 1, self.style, DecadeAxis("left"), "KL(A‖B)")
        self.kl.setLogMode(y=True)
        self.kl_curve = self.kl.plot(pen=pg.mkPen("#6a51a3", width=1.5), connect="finite", name="KL")
        self.logits = _plot(right, 2, self.style, DecadeAxis("left"), "logits")
        self.logits.setLogMode(y=True)
        self.diff_curve = self.logits.plot(pen=pg.mkPen(DIFF_COLOR, width=1.5), connect="finite",
                                           name="max |logit difference|")
        self.margin_curve = self.logits.plot(pen=pg.mkPen(MARGIN_COLOR, width=1.2), connect="finite",
                                             name="A's top-2 margin")
        self.drops = _plot(right, 3, self.style, CountAxis("left"), "dropped")
        self.drops_a = self.drops.plot(pen=pg.mkPen(A_COLOR, width=1.5), stepMode="center", name="A")
        self.drops_b = self.drops.plot(pen=pg.mkPen(B_COLOR, width=1.5, style=QtCore.Qt.PenStyle.DashLine),
                                       stepMode="center", name="B")
        for i, s in enumerate((2.2, 1.6, 1.6, 1.6)):
            right.layout.setRowStretchFactor(i, s)

        self.heatmaps = [self.heat_a.plot, self.heat_b.plot]
        self.plots = [*self.heatmaps, self.strip, self.map, self.kl, self.logits, self.drops]
        self._line_up()
        for plot in (self.heat_a.plot, self.heat_b.plot, self.map, self.kl, self.logits):
            # x-linked with the panel below, whose axis shows the positions.
            plot.hideAxis("bottom")
        self.heat_b.plot.hideAxis("top")  # x-linked with A, whose marks name the boundary and t*
        self.drops.setLabel("bottom", "position (token)")
        if stacked:  # one column: the positions are named once, under the curves
            self.strip.hideAxis("bottom")
        else:
            self.strip.setLabel("bottom", "position (token)")
        for plot in (self.kl, self.logits, self.drops):
            # Short panels: label only the major ticks (powers of ten on the log axes), no SI prefix.
            plot.getAxis("left").enableAutoSIPrefix(False)
            plot.getAxis("left").setStyle(maxTextLevel=0)
            plot.setAutoVisible(y=True)
            plot.enableAutoRange(y=True)
            plot.showGrid(y=True, alpha=0.2)
        self.drops.enableAutoRange(y=False)  # counts from 0: an all-zero curve gets 0..1, not ±0.2
        # Past t* nothing is compared: the curves' panels are grey there, as the map's cells.
        self.not_compared = [self._band(plot, pg.mkBrush(*STRIP_COLORS["not compared"])) for plot in
                             (self.kl, self.logits)]
        self.not_recorded: list[pg.LinearRegionItem] = []  # hatched spans (engine runs' prompt)
        self.t_star_lines = self._lines(T_STAR_COLOR, QtCore.Qt.PenStyle.DashLine, 1.5)
        self.selected_lines = self._lines(SELECTED_COLOR, QtCore.Qt.PenStyle.SolidLine, 1.5)
        self.set_selected(None)
        self._key_shown = with_key
        if with_key:
            self.key = pg.GraphicsLayout()  # filled by `set_data` with what the figure draws
            layout.addItem(self.key, row=self._key_row, col=0, colspan=2)

    def _line_up(self) -> None:
        """One left-axis width and one right margin (A's colour bar, or a blank as wide) for all."""
        share_left_width(self.plots, left_axis_px(self.style, LEFT_TICKS))
        bar = self.heat_a.colorbar
        self.margins = [reserve_right(plot, bar) for plot in self.plots[2:]]
        for plot in self.plots[1:]:
            plot.setXLink(self.heat_a.plot)

    @staticmethod
    def _band(plot: pg.PlotItem, brush) -> pg.LinearRegionItem:
        band = pg.LinearRegionItem(movable=False, brush=brush, pen=pg.mkPen(None))
        band.setZValue(-10)
        plot.addItem(band)
        band.hide()
        return band

    def _lines(self, color: str, dash, width: float) -> list[pg.InfiniteLine]:
        lines = []
        for i, plot in enumerate(self.plots):
            pen = pg.mkPen(color, width=width, style=dash)
            line = pg.InfiniteLine(angle=90, movable=False, pen=pen)
            line.setZValue(LINES_Z + i)
            plot.addItem(line, ignoreBounds=True)
            lines.append(line)
        return lines

    # -- drawing --------------------------------------------------------------------------------

    def set_data(self, data: PairData, *, keep_view: bool = False, selected: int | None = None) -> None:
        """Show `data`; `keep_view` keeps the zoom (a layer change), `selected` is the selected position."""
        self.data = data
        T, L = data.length, data.n_layers
        self.heat_a.set_data(data.a, keep_view=True)
        self.heat_b.set_data(data.b, keep_view=True)
        for fig, name, color in ((self.heat_a, "A", A_COLOR), (self.heat_b, "B", B_COLOR)):
            d = fig.data
            what = f"{int((~d.kept).sum())}{NB}dropped" if d.probabilities else "router logits not recorded"
            # The runs are named above (the completions' headers), under the panels, or in the app's
            # picker: a run's name is about as wide as a heatmap, and broken at its hyphens it reads
            # as two names.
            set_title(fig.plot, f"{name} row{NB}{d.row} · layer{NB}{data.layer} · {what}", color=color,
                      size=f"{self.style.font_size + 1}pt")
            fig.plot.vb.setLimits(xMin=-0.5 - 0.05 * T, xMax=T - 0.5 + 0.05 * T)
        # B's bar repeats A's scale unnamed, or names its own (probabilities against choices).
        shared = data.a.probabilities == data.b.probabilities
        self.heat_b.colorbar.axis.setStyle(showValues=not shared)
        self.heat_b.colorbar.axis.setLabel("" if shared else data.b.colour_label, color=self.style.foreground)
        self.strip_image.setImage(strip_rgb(data.strip()), autoLevels=False, levels=(0, 255))
        self.strip_image.setRect(QtCore.QRectF(-0.5, -0.5, T, 3))
        # The strip's rows name what differs; the heatmaps' titles name the layer.
        self.map_image.setImage(kinds_rgb(data.kinds), autoLevels=False, levels=(0, 255))
        self.map_image.setRect(QtCore.QRectF(-0.5, -0.5, T, L))
        self.map_axis.set_labels([str(l) for l in range(L)])
        first = data.first_differences()
        layers = np.flatnonzero(first >= 0)
        self.first_marks.set_cells(first[layers], layers)
        v = data.verdict
        cells = data.cause.cells or ((data.cause.event,) if min(data.cause.event) >= 0 else ())
        self._marker_cells[id(self.event_mark)] = ([p for p, _ in cells], [l for _, l in cells])
        root = v.root if v.root is not None and v.root.layer >= 0 else None
        self._marker_cells[id(self.root_mark)] = ([root.position], [root.layer]) if root else ([], [])
        self._place_markers()
        set_title(self.map, "what differs (layer × position)", color=self.style.foreground,
                  size=f"{self.style.font_size}pt")
        self.map.vb.setRange(yRange=(-0.5, L - 0.5), padding=0)
        self._set_curves(data)
        compared = data.compared
        for region in self.not_compared:
            region.setRegion((compared - 0.5, T - 0.5))
            region.setVisible(compared < T)
        for line in self.t_star_lines:
            line.setVisible(data.t_star >= 0)
            line.setPos(data.t_star)
        for marks in (self.heat_a.marks, self.map_marks):  # named above the panels, not on the cells
            marks.set_mark("t*", data.t_star if data.t_star >= 0 else None, "t*", T_STAR_COLOR)
        self.strip.vb.setRange(yRange=(-0.5, 2.5), padding=0)
        for plot in (self.strip, self.map):
            plot.vb.setLimits(yMin=-1.0, yMax=max(L, 3) + 0.0)
        if not keep_view:
            self.reset_zoom()
        self.set_selected(selected)
        if self.with_text:
            self._set_text(data, selected)
        if self.names is not None:
            # One line where the page holds it; a run's name never breaks at its hyphens.
            self.names.set_html(" &nbsp; ".join(
                f'<span style="color: {color}; white-space: nowrap;">{letter}: run '
                f"{html.escape(d.run)} row{NB}{d.row}</span>"
                for letter, color, d in (("A", A_COLOR, data.a), ("B", B_COLOR, data.b))))
        if self.key is not None:
            self._set_key()
        self.even_columns()

    def even_columns(self) -> None:
        """Side by side, make the two columns equally wide whatever their titles need (each at least
        the wider one's least width): their data areas then map positions to x alike, shifted by
        the column's place."""
        if self.stacked:
            return
        for which, setter in ((QtCore.Qt.SizeHint.MinimumSize, "setMinimumWidth"),
                              (QtCore.Qt.SizeHint.PreferredSize, "setPreferredWidth")):
            width = max(part.layout.effectiveSizeHint(which).width() for part in self.columns)
            for part in self.columns:
                getattr(part, setter)(width)

    def _set_key(self) -> None:
        """The key of what is drawn now, under the panels (none while `show_key(False)`)."""
        if self.key in self.layout.items:
            self.layout.removeItem(self.key)
        if self.key.scene() is not None:
            self.key.scene().removeItem(self.key)
        self.key = pair_key(self, self.style)
        if self._key_shown:
            self.layout.addItem(self.key, row=self._key_row, col=0, colspan=2)

    def show_key(self, shown: bool) -> bool:
        """Show or leave out the key (a short view leaves it out); True when that changed."""
        if self.key is None or shown == self._key_shown:
            return False
        self._key_shown = shown
        if self.data is not None:
            self._set_key()
        return True

    def _place_markers(self, *_args) -> None:
        """Draw ★ and ○ on their cells, moved inward where a cell at the map's edge would show
        only part of one (a ★ at position 0 or at the last layer stays whole)."""
        (x0, x1), (y0, y1) = self.map.vb.viewRange()
        step_x, step_y = self.map.vb.viewPixelSize()  # data units per pixel
        for item in (self.event_mark, self.root_mark):
            xs, ys = self._marker_cells.get(id(item), ([], []))
            half = item.opts["size"] / 2 + 1
            dx, dy = min(half * step_x, (x1 - x0) / 2), min(half * step_y, (y1 - y0) / 2)
            item.setData([min(max(x, x0 + dx), x1 - dx) for x in xs],
                         [min(max(y, y0 + dy), y1 - dy) for y in ys])

    def _set_curves(self, data: PairData) -> None:
        x = np.arange(data.length, dtype=np.float64)
        absent = self._absent(data)
        for curve, values in ((self.kl_curve, data.kl), (self.diff_curve, data.logit_diff),
                              (self.margin_curve, data.logit_margin)):
            values = np.where(absent, np.nan, values)  # not recorded: a gap, never a value
            y = np.where(np.isfinite(values) & (values <= LOG_FLOOR), LOG_FLOOR, values)
            curve.setData(x, y, connect="finite")
        self._set_not_recorded(data)
        edges = np.arange(data.length + 1, dtype=np.float64) - 0.5
        self.drops_a.setData(edges, np.nan_to_num(data.drops_a), stepMode="center")
        self.drops_b.setData(edges, np.nan_to_num(data.drops_b), stepMode="center")
        top = max(float(np.nanmax(data.drops_a, initial=0)), float(np.nanmax(data.drops_b, initial=0)), 1.0)
        # Three labelled counts however short the panel: 0, half and the top, a whole even number.
        tick = 2 * math.ceil(top / 2)
        self.drops.getAxis("left").setTicks([[(v, str(v)) for v in (0, tick // 2, tick)]])
        self.drops.setYRange(-0.04 * tick, tick * 1.08, padding=0)

    @staticmethod
    def _absent(data: PairData) -> np.ndarray:
        """[T] compared positions whose next-token values were not recorded (or are not finite)."""
        compared = np.arange(data.length) < data.compared
        return compared & (~data.logits_recorded | ~np.isfinite(data.logit_margin))

    def _set_not_recorded(self, data: PairData) -> None:
        """Hatch the compared positions whose next-token values were not recorded (an engine keeps no
        log-probabilities of prompt positions): blank there, never drawn as 0."""
        for band in self.not_recorded:
            band.getViewBox().removeItem(band)
        self.not_recorded = []
        for t0, t1 in spans(self._absent(data)):
            for plot in (self.kl, self.logits):
                band = self._band(plot, not_recorded_brush())
                band.setRegion((t0 - 0.5, t1 - 0.5))
                band.show()
                self.not_recorded.append(band)

    def _set_text(self, data: PairData, selected: int | None) -> None:
        self.text_a.set_html(completion_html(data.text_a, "A", A_COLOR, self.style, selected)[0])
        self.text_b.set_html(completion_html(data.text_b, "B", B_COLOR, self.style, selected)[0])

    def reset_zoom(self) -> None:
        """Every position and expert in view."""
        if self.data is None:
            return
        T = self.data.length
        self.heat_a.plot.vb.setRange(xRange=(-0.5, T - 0.5), padding=0)
        for fig in (self.heat_a, self.heat_b):
            fig.plot.vb.setRange(yRange=(-0.5, fig.data.n_experts - 0.5), padding=0)

    def set_selected(self, position: int | None) -> None:
        """Move the selected-position line of every panel (hidden for None)."""
        for line in self.selected_lines:
            line.setVisible(position is not None)
            if position is not None:
                line.setPos(position)

    # -- reading back -----------------------------------------------------------------------------

    def position_at(self, x: float) -> int | None:
        """Position of data x, or None outside the positions."""
        if self.data is None:
            return None
        t = int(np.floor(x + 0.5))
        return t if 0 <= t < self.data.length else None

    def hover_text(self, plot: pg.PlotItem, x: float, y: float) -> str | None:
        """What is under data point (x, y) of `plot`."""
        data = self.data
        t = self.position_at(x)
        if data is None or t is None:
            return None
        row = int(np.floor(y + 0.5))
        if plot is self.heat_a.plot or plot is self.heat_b.plot:
            d = data.a if plot is self.heat_a.plot else data.b
            text = describe_cell(d, t, row) if t < d.n_positions else None
            return None if text is None else f"{'A' if d is data.a else 'B'}: run {d.run}\n{text}"
        if plot is self.strip:
            if not 0 <= row < 3:
                return None
            code = int(data.strip()[row, t])
            state = {1: "yes", 0: "no", -1: "not compared"}[code]
            head = f"position {t}, layer {data.layer}: {STRIP_ROWS[row]}: {state}"
            return f"{head}\n{data.describe_cell(t, data.layer)}"
        if plot is self.map:
            return data.describe_cell(t, row)
        return data.describe_position(t)
