"""The side-by-side figure of two runs of one request: A's and B's routing heatmaps at the chosen
layer, the difference strip at that layer (left column); the layer x position map of what differs,
the KL, logit-difference/top-2-margin and drop curves (right column). Every panel shares one x
axis (positions), t* and the selected position are vertical lines in all of them.

With `with_text`, both completions sit above and the cause panel below, so an export holds the
whole comparison in one picture; `cause="sentence"` keeps only the cause's headline and sentence
below, `cause="short"` both cut short (`inspector.figures.cause_short`), `cause="headline"` its
headline, `with_key=False` leaves the key of colours out (for a page too small for all of it).
"""

from __future__ import annotations

import html
import math

import numpy as np

from inspector.figure_data.pair import (
    CELL_KINDS,
    EXPERTS,
    KEPT_SET,
    NOT_COMPARED,
    ROUTER_LOGITS,
    STRIP_ROWS,
    WEIGHTS,
    PairData,
)
from inspector.figure_data.routing import describe_cell
from inspector.figures.axes import (
    VERTICAL_OVERHANG_PX,
    CategoryAxis,
    CountAxis,
    ReadableAxis,
    TokenAxis,
    XZoomViewBox,
)
from inspector.figures.cause_short import short_cause_html
from inspector.figures.divergence_text import A_COLOR, B_COLOR, HtmlBlock, cause_html, completion_html
from inspector.figures.marks import CellMarks, MarkAxis
from inspector.figures.routing import RoutingFigure
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtGui, pg

#: RGB of each difference kind in the layer x position map (index = code of CELL_KINDS).
KIND_COLORS = np.array([(246, 246, 246), (253, 212, 158), (252, 141, 89), (215, 48, 31), (106, 81, 163),
                        (200, 200, 200)], dtype=np.uint8)
#: RGB of the strip: nothing, the row's event, not compared.
STRIP_COLORS = {"none": (250, 250, 250), "not compared": (200, 200, 200)}
STRIP_EVENT_COLORS = ((106, 81, 163), tuple(int(A_COLOR[i:i + 2], 16) for i in (1, 3, 5)),
                      tuple(int(B_COLOR[i:i + 2], 16) for i in (1, 3, 5)))
#: Short tick labels of the strip rows (`STRIP_ROWS` are the full names).
STRIP_TICKS = ("experts ≠", "✗ A only", "✗ B only")
#: Zero KL or logit difference is drawn at this value on the log axes.
LOG_FLOOR = 1e-12
T_STAR_COLOR = "#000000"
SELECTED_COLOR = "#00b8d4"
DIFF_COLOR = "#c0392b"
MARGIN_COLOR = "#606060"
LEFT_AXIS_PX = 80
RIGHT_AXIS_PX = 70


def kinds_rgb(kinds: np.ndarray) -> np.ndarray:
    """[L, T, 3] uint8 image of a [L, T] map of difference-kind codes."""
    return KIND_COLORS[np.asarray(kinds, dtype=np.int64)]


def strip_rgb(strip: np.ndarray) -> np.ndarray:
    """[3, T, 3] uint8 image of the [3, T] strip (1 event, 0 none, -1 not compared)."""
    out = np.empty((*strip.shape, 3), dtype=np.uint8)
    out[...] = STRIP_COLORS["none"]
    for i, rgb in enumerate(STRIP_EVENT_COLORS):
        out[i][strip[i] == 1] = rgb
    out[strip == -1] = STRIP_COLORS["not compared"]
    return out


def _square(rgb) -> str:
    return f'<span style="color: #{rgb[0]:02x}{rgb[1]:02x}{rgb[2]:02x};">■</span>'


def legend_html(style: FigureStyle, compact: bool = False) -> str:
    """The key of the difference map, the strip and the curves, as one wrapped paragraph (`compact`:
    in fewer words, for a journal column)."""
    square = _square
    kinds = " ".join(f"{square(KIND_COLORS[c])} {CELL_KINDS[c]}"
                     for c in (ROUTER_LOGITS, WEIGHTS, KEPT_SET, EXPERTS, NOT_COMPARED))
    if compact:
        return (f'<span style="color: {style.foreground};">Map: {kinds}; ★ proven cause, ○ first bitwise '
                f'difference, □ first differing decision. Strip: {square(STRIP_EVENT_COLORS[0])} experts ≠ '
                f'{square(STRIP_EVENT_COLORS[1])} dropped in A only '
                f'{square(STRIP_EVENT_COLORS[2])} in B only. '
                f'Curves (log) before t* (dashed): KL(A‖B); max |logit difference| '
                f'<span style="color: {DIFF_COLOR};">(red)</span>, A\'s top-2 margin (grey); drops of '
                f'<span style="color: {A_COLOR};">A</span> and '
                f'<span style="color: {B_COLOR};">B</span>.</span>')
    return (f'<span style="color: {style.foreground};">Map: {kinds} · ★ proven cause (no proof yet: the '
            f'first difference) · ○ first bitwise difference · □ first differing decision per layer. '
            f'Strip: {square(STRIP_EVENT_COLORS[0])} experts changed '
            f'{square(STRIP_EVENT_COLORS[1])} dropped in A only '
            f'{square(STRIP_EVENT_COLORS[2])} dropped in B only. '
            f'Curves (before t*, log, 0 at {LOG_FLOOR:g}): KL(A‖B); max |logit difference| '
            f'<span style="color: {DIFF_COLOR};">(red)</span> against A\'s top-2 margin (grey); drops of '
            f'<span style="color: {A_COLOR};">A</span> and <span style="color: {B_COLOR};">B</span> over all '
            f'layers. Dashed = t*, cyan = selected position.</span>')


#: Mantissas a log axis is labelled at, from the sparsest: powers of ten, then more of each decade.
MANTISSAS = ((1,), (1, 2, 5), (1, 2, 3, 5, 7), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9))
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class DecadeAxis(ReadableAxis):
    """A log-scale axis labelled at powers of ten, every one or every few (at most about four
    labels in a short panel); where fewer than three powers of ten are in view, at 2x and 5x them,
    then at more values of each decade, so that the axis always labels three ticks."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        if not self.logMode:
            return super().tickValues(minVal, maxVal, size)
        lo, hi = sorted((minVal, maxVal))
        if size <= 0 or hi <= lo:
            return []
        metrics = QtGui.QFontMetricsF(self.style.get("tickFont") or QtGui.QFont())
        label = metrics.height() * 0.8 + 1  # a label's ink, as pyqtgraph measures it, and a gap
        per = size / (hi - lo)  # pixels per decade
        margin = max(label / 2 - VERTICAL_OVERHANG_PX, 0.0) / per
        best: list[float] = []
        for mantissas in MANTISSAS:
            values = sorted(d + math.log10(m) for d in range(math.floor(lo) - 1, math.ceil(hi) + 1)
                            for m in mantissas)
            values = [v for v in values if lo + margin <= v <= hi - margin]
            if mantissas == (1,):  # every few powers of ten: at most about four labels
                step = max(1, math.ceil(len(values) / 4))
                values = [v for v in values if round(v) % step == 0]
            chosen: list[float] = []
            for v in values:
                if not chosen or (v - chosen[-1]) * per >= label:
                    chosen.append(v)
            if len(chosen) > len(best):
                best = chosen
            if len(best) >= 3:
                break
        return [(1.0, best)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        if not self.logMode:
            return super().tickStrings(values, scale, spacing)
        out = []
        for v in values:
            text = f"{10 ** v:.2g}"
            if "e" in text:
                mantissa, power = text.split("e")
                power = str(int(power)).translate(_SUPERSCRIPT)
                text = ("" if mantissa == "1" else f"{mantissa}·") + f"10{power}"
            out.append(text)
        return out


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
                 cause: str | None = None, markers_inside: bool = False) -> None:
        self.style = style or FigureStyle()
        self.data: PairData | None = None
        self.with_text = with_text
        self.stacked = stacked
        self.named_below = stacked and cause == "short"
        # "full", "sentence", "short", "headline" or None
        self.cause = cause or ("full" if with_text else None)
        self.text_a = self.text_b = self.cause_block = self.legend = None
        if with_text:
            texts = layout.addLayout(row=row, col=0, colspan=2)
            self.text_a, self.text_b = HtmlBlock(self.style), HtmlBlock(self.style)
            texts.addItem(self.text_a, row=0, col=0)
            texts.addItem(self.text_b, row=0, col=1)
            row += 1
        if with_key:
            self.legend = HtmlBlock(self.style, scale=0.9)
            self.legend.set_html(legend_html(self.style, compact=stacked))
            layout.addItem(self.legend, row=row, col=0, colspan=2)
            row += 1
        # Side by side, or (`stacked`, for a narrow page) the right column under the left one.
        left = layout.addLayout(row=row, col=0, colspan=2 if stacked else 1)
        if stacked:
            row += 1
        right = layout.addLayout(row=row, col=0 if stacked else 1, colspan=2 if stacked else 1)
        for part in (left, right):
            part.setContentsMargins(0, 0, 0, 0)
        layout.layout.setColumnStretchFactor(0, 1)
        layout.layout.setColumnStretchFactor(1, 1)
        # Left: the two heatmaps (the routing view's own figure) and the strip at the chosen layer.
        self.heat_a = RoutingFigure(left, self.style, row=0)
        self.heat_b = RoutingFigure(left, self.style, row=1)
        # Its three rows are short: their names may sit closer than other ticks, never left out.
        self.strip = _plot(left, 2, self.style, CategoryAxis("left", STRIP_TICKS, min_gap_px=12))
        self.strip.invertY(True)
        self.strip_image = pg.ImageItem(axisOrder="row-major")
        self.strip.addItem(self.strip_image)
        for i, s in enumerate((3, 3, 1.4)):
            left.layout.setRowStretchFactor(i, s)
        # Right: the map of what differs, and the curves.
        self.map_axis = CategoryAxis("left")
        self.map_marks = MarkAxis()
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
        for item in (self.event_mark, self.root_mark):
            item.setZValue(15)
            self.map.addItem(item)
        # Where each marker belongs (position, layer); with `markers_inside` (a page, which cannot
        # be panned) drawn moved inward where a cell at the map's edge would show half of one.
        self._marker_cells: dict[int, tuple[list[float], list[float]]] = {}
        self.markers_inside = markers_inside
        if markers_inside:
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
        if self.cause:  # a brief one in a smaller font: it is there for a page too small for more
            self.cause_block = HtmlBlock(self.style, scale=1.0 if self.cause == "full" else 0.9)
            layout.addItem(self.cause_block, row=row + 1, col=0, colspan=2)

        self.heatmaps = [self.heat_a.plot, self.heat_b.plot]
        self.plots = [*self.heatmaps, self.strip, self.map, self.kl, self.logits, self.drops]
        for plot in self.plots[1:]:
            plot.setXLink(self.heat_a.plot)
        for plot in (self.heat_a.plot, self.heat_b.plot, self.strip):
            plot.getAxis("left").setWidth(LEFT_AXIS_PX)
        for plot in (self.map, self.kl, self.logits, self.drops):
            plot.getAxis("left").setWidth(RIGHT_AXIS_PX)
        for plot in (self.heat_a.plot, self.heat_b.plot, self.map, self.kl, self.logits):
            # x-linked with the panel below, whose axis shows the positions.
            plot.hideAxis("bottom")
        self.heat_b.colorbar.axis.setLabel("")
        # A's bar names the scale both share; B's values would run into A's at their ends.
        self.heat_b.colorbar.axis.setStyle(showValues=False)
        self.heat_b.plot.hideAxis("top")  # x-linked with A, whose marks name the boundary and t*
        self.drops.setLabel("bottom", "position (token)")
        if stacked:  # one column: the positions are named once, under the curves, and one colour
            self.strip.hideAxis("bottom")  # bar spans both heatmaps (its label is taller than either)
            for bar in (self.heat_a.colorbar, self.heat_b.colorbar):
                left.removeItem(bar)
            self.heat_b.colorbar.hide()
            left.addItem(self.heat_a.colorbar, row=0, col=1, rowspan=2)
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
        self.not_compared = []
        for plot in (self.kl, self.logits):
            region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 18), pen=pg.mkPen(None))
            region.setZValue(-10)
            plot.addItem(region)
            self.not_compared.append(region)
        self.t_star_lines = self._lines(T_STAR_COLOR, QtCore.Qt.PenStyle.DashLine, 1.5)
        self.selected_lines = self._lines(SELECTED_COLOR, QtCore.Qt.PenStyle.SolidLine, 1.5)
        self.set_selected(None)

    def _lines(self, color: str, dash, width: float) -> list[pg.InfiniteLine]:
        lines = []
        for i, plot in enumerate(self.plots):
            pen = pg.mkPen(color, width=width, style=dash)
            line = pg.InfiniteLine(angle=90, movable=False, pen=pen)
            line.setZValue(40 + i)
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
            dropped = int((~d.kept).sum())
            note = "" if d.probabilities else " · probabilities not recorded"
            # In one column with the short cause, the cause names the runs: a run's name is about
            # as wide as a heatmap, and broken at its hyphens it reads as two names.
            who = "" if self.named_below else f" · {d.run}"
            fig.plot.setTitle(f"{name}{who} row {d.row} · {dropped} dropped{note}",
                              color=color, size=f"{self.style.font_size + 1}pt")
            fig.plot.vb.setLimits(xMin=-0.5 - 0.05 * T, xMax=T - 0.5 + 0.05 * T)
        self.strip_image.setImage(strip_rgb(data.strip()), autoLevels=False, levels=(0, 255))
        self.strip_image.setRect(QtCore.QRectF(-0.5, -0.5, T, 3))
        where = f"layer {data.layer}" if self.stacked else f"layer {data.layer} (heatmaps above)"
        self.strip.setTitle(f"{where}: what differs",
                            color=self.style.foreground, size=f"{self.style.font_size}pt")
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
        if not self.stacked:  # in one column the key names the map
            self.map.setTitle("what differs (layer × position)", color=self.style.foreground,
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
        if self.cause_block is not None:
            if self.cause == "short":
                names = "" if not self.named_below else (
                    f'<span style="color: {A_COLOR};">A: run {html.escape(data.a.run)} row {data.a.row}'
                    f'</span><br><span style="color: {B_COLOR};">B: run {html.escape(data.b.run)} '
                    f'row {data.b.row}</span>')
                self.cause_block.set_html(short_cause_html(data.cause, self.style, data.a.run, data.b.run,
                                                           names))
            else:
                brief = "" if self.cause == "full" else self.cause
                self.cause_block.set_html(cause_html(data.cause, self.style, brief=brief))

    def _place_markers(self, *_args) -> None:
        """Draw ★ and ○ on their cells, moved inward where a cell at the map's edge would show
        only half of one."""
        (x0, x1), (y0, y1) = self.map.vb.viewRange()
        step_x, step_y = self.map.vb.viewPixelSize()  # data units per pixel
        for item in (self.event_mark, self.root_mark):
            xs, ys = self._marker_cells.get(id(item), ([], []))
            if not self.markers_inside:
                item.setData(xs, ys)
                continue
            half = item.opts["size"] / 2 + 1
            dx, dy = min(half * step_x, (x1 - x0) / 2), min(half * step_y, (y1 - y0) / 2)
            item.setData([min(max(x, x0 + dx), x1 - dx) for x in xs],
                         [min(max(y, y0 + dy), y1 - dy) for y in ys])

    def _set_curves(self, data: PairData) -> None:
        x = np.arange(data.length, dtype=np.float64)
        for curve, values in ((self.kl_curve, data.kl), (self.diff_curve, data.logit_diff),
                              (self.margin_curve, data.logit_margin)):
            y = np.where(np.isfinite(values) & (values <= LOG_FLOOR), LOG_FLOOR, values)
            curve.setData(x, y, connect="finite")
        edges = np.arange(data.length + 1, dtype=np.float64) - 0.5
        self.drops_a.setData(edges, np.nan_to_num(data.drops_a), stepMode="center")
        self.drops_b.setData(edges, np.nan_to_num(data.drops_b), stepMode="center")
        top = max(float(np.nanmax(data.drops_a, initial=0)), float(np.nanmax(data.drops_b, initial=0)), 1.0)
        # Three labelled counts however short the panel: 0, half and the top, a whole even number.
        tick = 2 * math.ceil(top / 2)
        self.drops.getAxis("left").setTicks([[(v, str(v)) for v in (0, tick // 2, tick)]])
        self.drops.setYRange(-0.04 * tick, tick * 1.08, padding=0)


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
