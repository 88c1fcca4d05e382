"""The compare figure: runs A and B of one request over the same axes, as two images are compared.

Top, the difference A − B of the router probabilities at one MoE layer on a diverging scale centred
on 0 (A's colour where A gives the expert more, B's where B does, white where they agree), with a
frame on each cell that only one run chose. Below it, one routing heatmap showing A left of the
split and B from it on (`show` "A" or "B" shows one run whole: the app flickers between them), with
the chosen experts framed and the dropped ones crossed. Both panels share positions and experts;
one crosshair runs through both. A cell with no value (past a row's end, or a run that did not
record its router logits) is left empty over a hatching, never drawn as a value.
"""

from __future__ import annotations

import html

import numpy as np

from inspector.figure_data.compare import CompareData
from inspector.figures import key as swatches
from inspector.figures.axes import CategoryAxis, TokenAxis, XZoomViewBox
from inspector.figures.divergence_text import A_COLOR, B_COLOR
from inspector.figures.key import Key
from inspector.figures.marks import CellMarks, MarkAxis, MarkSample
from inspector.figures.pair_key import not_recorded_brush
from inspector.figures.panels import attach_colour_bar, left_axis_px, set_title, share_left_width
from inspector.figures.style import FigureStyle, colormap
from inspector.qt import QtCore, QtGui, QtWidgets, pg

NB = "\u00a0"
T_STAR_COLOR = "#000000"
SPLIT_COLOR = "#d6006e"
CROSSHAIR_COLOR = "#00b8d4"
#: Width of both colour bars' axes: one width, so that both data areas line up.
BAR_AXIS_PX = 58
#: Where the key of the absent cells is named.
ABSENT = "no value (not recorded, or past the end)"


def difference_colormap() -> pg.ColorMap:
    """B's colour (B higher) through white (equal) to A's colour (A higher)."""
    white = QtGui.QColor("#ffffff")
    return pg.ColorMap([0.0, 0.5, 1.0], [QtGui.QColor(B_COLOR), white, QtGui.QColor(A_COLOR)])


class ComparePanel:
    """One heatmap of the compare figure: positions x experts, a colour bar, a hatching where cells
    are empty, the prompt | generation line, t*, and a crosshair."""

    def __init__(self, layout: pg.GraphicsLayout, row: int, style: FigureStyle, cmap: pg.ColorMap,
                 bar_label: str) -> None:
        self.style = style
        self.y_axis = CategoryAxis("left")
        self.marks = MarkAxis(rows=2, push=False)
        self.plot = layout.addPlot(row=row, col=0, viewBox=XZoomViewBox(),
                                   axisItems={"bottom": TokenAxis("bottom"), "left": self.y_axis,
                                              "top": self.marks})
        self.plot.showAxis("top")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setLabel("left", "expert")
        style.style_plot(self.plot)
        self.absent = QtWidgets.QGraphicsRectItem()
        self.absent.setBrush(not_recorded_brush())
        self.absent.setPen(pg.mkPen(None))
        self.absent.setZValue(-20)
        self.plot.addItem(self.absent)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=cmap, interactive=False, width=16)
        self.bar.axis.setTextPen(pg.mkPen(style.foreground))
        self.bar.axis.setLabel(bar_label, color=style.foreground)
        self.bar.axis.label.setFont(style.font())
        self.bar.axis.setTickFont(style.font())
        self.bar.axis.setWidth(BAR_AXIS_PX)
        self.bar.axis.enableAutoSIPrefix(False)
        attach_colour_bar(self.plot, self.bar, self.image)
        self.boundary = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(
            style.boundary, width=2, style=QtCore.Qt.PenStyle.DashLine))
        self.t_star = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(
            T_STAR_COLOR, width=1.5, style=QtCore.Qt.PenStyle.DashLine))
        pen = pg.mkPen(CROSSHAIR_COLOR, width=1.2)
        self.cross_x = pg.InfiniteLine(angle=90, movable=False, pen=pen)
        self.cross_y = pg.InfiniteLine(angle=0, movable=False, pen=pen)
        for z, item in enumerate((self.boundary, self.t_star, self.cross_x, self.cross_y)):
            item.setZValue(30 + z)
            self.plot.addItem(item, ignoreBounds=True)
        self.cross_x.hide()
        self.cross_y.hide()

    def show(self, values: np.ndarray, levels: tuple[float, float], data: CompareData) -> None:
        """Draw [E, T] `values` (NaN: an empty cell) at colour `levels`, with the lines of `data`."""
        E, T = values.shape
        self.image.setImage(values, autoLevels=False, levels=levels)
        self.bar.setLevels(levels)
        self.image.setRect(QtCore.QRectF(-0.5, -0.5, T, E))
        self.absent.setRect(QtCore.QRectF(-0.5, -0.5, T, E))
        self.absent.setVisible(bool(np.isnan(values).any()))
        self.y_axis.set_labels([str(e) for e in range(E)])
        need = self.y_axis.needed_px()
        if need > self.plot.vb.minimumHeight():
            self.plot.vb.setMinimumHeight(need)
        inside = 0 < data.prompt_len < T
        self.boundary.setVisible(inside)
        self.boundary.setPos(data.prompt_len - 0.5)
        self.marks.set_mark("boundary", data.prompt_len - 0.5 if inside else None, "prompt | generation",
                            self.style.boundary)
        self.t_star.setVisible(data.t_star >= 0)
        self.t_star.setPos(data.t_star)
        self.marks.set_mark("t*", data.t_star if data.t_star >= 0 else None, "t*", T_STAR_COLOR)
        self.plot.vb.setLimits(xMin=-0.5 - 0.05 * T, xMax=T - 0.5 + 0.05 * T, minXRange=min(4, T))

    def set_crosshair(self, t: int | None, e: int | None) -> None:
        for line, value in ((self.cross_x, t), (self.cross_y, e)):
            line.setVisible(value is not None)
            if value is not None:
                line.setPos(value)


class CompareFigure:
    """Draws `CompareData` into a `pg.GraphicsLayout`: the difference, the split view, the runs' names
    (`names`) and the key of what is drawn (`with_key`)."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, *,
                 with_key: bool = True, names: bool = False) -> None:
        self.style = style = style or FigureStyle()
        self.layout = layout
        self.data: CompareData | None = None
        self.shown = "split"  # "split", "A" or "B": what the lower panel shows
        self.diff = ComparePanel(layout, 0, style, difference_colormap(), "A − B")
        self.split = ComparePanel(layout, 1, style, colormap(style.colormap), "router probability")
        self.panels = (self.diff, self.split)
        self.plots = [p.plot for p in self.panels]
        self.split.plot.setXLink(self.diff.plot)
        self.diff.plot.hideAxis("bottom")
        self.split.plot.setLabel("bottom", "position (token)")
        share_left_width(self.plots, left_axis_px(style, ("88",)))
        self.one_only = CellMarks("outline", "#000000", width=1.5, inset=0.04)
        self.kept = CellMarks("outline", style.kept_pen, width=1.0, shadow=style.kept_shadow)
        self.dropped_outline = CellMarks("outline", style.dropped, width=1.0, edges=False)
        self.dropped = CellMarks("cross", style.dropped, width=2.0, shadow="#ffffff")
        self.diff.plot.addItem(self.one_only)
        for item in (self.kept, self.dropped_outline, self.dropped):
            self.split.plot.addItem(item)
        for item in (self.one_only, self.kept, self.dropped_outline, self.dropped):
            item.setZValue(10)
        self.split_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(SPLIT_COLOR, width=2.5))
        self.split_line.setZValue(45)
        self.split.plot.addItem(self.split_line, ignoreBounds=True)
        row = 2
        self.names = None
        if names:
            self.names = pg.LabelItem("", size=f"{style.font_size}pt")
            layout.addItem(self.names, row=row, col=0)
            row += 1
        self._key_row = row
        self.key: Key | None = None
        self.with_key = with_key
        layout.layout.setRowStretchFactor(0, 1)
        layout.layout.setRowStretchFactor(1, 1)

    # -- drawing --------------------------------------------------------------------------------

    def set_data(self, data: CompareData, *, keep_view: bool = False) -> None:
        """Show `data` (its split); `keep_view` keeps the zoom."""
        self.data = data
        T, E = data.length, data.n_experts
        largest = max(data.largest(), 1e-3)
        diff = data.difference
        self.diff.show(diff, (-largest, largest), data)
        # Each end names the run that gives the expert more.
        ticks = [(largest, f"+{largest:.2g} A"), (0.0, "0"), (-largest, f"−{largest:.2g} B")]
        self.diff.bar.axis.setTicks([ticks])
        differ = data.chosen_a ^ data.chosen_b
        e, t = np.nonzero(differ & np.isfinite(diff))
        self.one_only.set_cells(t, e)
        what = (f"A − B router probability · layer{NB}{data.layer}"
                if data.recorded else f"A − B: no router probabilities recorded · layer{NB}{data.layer}")
        set_title(self.diff.plot, what, color=self.style.foreground, size=f"{self.style.font_size + 1}pt")
        self._show_lower()
        if self.names is not None:
            self.names.setText(" &nbsp; ".join(  # a page too narrow wraps between the two runs
                f'<span style="color: {color};">{letter}: run{NB}{html.escape(d.run)} row{NB}{d.row}</span>'
                for letter, color, d in (("A", A_COLOR, data.pair.a), ("B", B_COLOR, data.pair.b))))
        if self.with_key:
            self._set_key()
        if not keep_view:
            self.diff.plot.vb.setRange(xRange=(-0.5, T - 0.5), padding=0)
        for panel in self.panels:
            panel.plot.vb.setRange(yRange=(-0.5, E - 0.5), padding=0)

    def show_run(self, which: str) -> None:
        """The lower panel: "split" (A left of the split, B from it on), or "A" or "B" whole."""
        self.shown = which
        if self.data is not None:
            self._show_lower()

    def set_split(self, split: int) -> None:
        if self.data is not None:
            self.data = self.data.with_split(split)
            self._show_lower()

    def _lower(self) -> CompareData:
        data = self.data
        if self.shown == "A":
            return data.with_split(data.length)
        if self.shown == "B":
            return data.with_split(0)
        return data

    def _show_lower(self) -> None:
        lower = self._lower()
        values = lower.split_view()
        self.split.show(values, (0.0, 1.0), lower)
        chosen, kept = lower.split_choices()
        e, t = np.nonzero(chosen & kept)
        self.kept.set_cells(t, e)
        e, t = np.nonzero(chosen & ~kept)
        self.dropped_outline.set_cells(t, e)
        self.dropped.set_cells(t, e)
        split, T = lower.split, lower.length
        inside = 0 < split < T
        self.split_line.setVisible(inside)
        self.split_line.setPos(split - 0.5)
        self.split.marks.set_mark("split", split - 0.5 if inside else None, "A | B", SPLIT_COLOR)
        if split >= T:
            title = f"A: router probability · layer{NB}{lower.layer}"
        elif split <= 0:
            title = f"B: router probability · layer{NB}{lower.layer}"
        else:
            title = f"A before position{NB}{split}, B from it on"
        color = A_COLOR if split >= T else B_COLOR if split <= 0 else self.style.foreground
        set_title(self.split.plot, title, color=color, size=f"{self.style.font_size + 1}pt")
        if self.with_key and self.key is not None:
            self._set_key()

    def _set_key(self) -> None:
        """The key of what is drawn now, under the panels: only marks the figure holds."""
        if self.key is not None:
            self.layout.removeItem(self.key)
            if self.key.scene() is not None:
                self.key.scene().removeItem(self.key)
        self.key = key = Key(self.style)
        cell = "#ffffff"
        if self.one_only.x.size:
            key.add(MarkSample(self.one_only, cell), "one run chose it")
        fill = colormap(self.style.colormap).map(0.45, mode="qcolor")
        if self.kept.x.size:
            key.add(MarkSample(self.kept, fill), "kept")
        if self.dropped.x.size:
            key.add(MarkSample([self.dropped_outline, self.dropped], fill), "dropped")
        if any(p.boundary.isVisible() for p in self.panels):
            key.add(swatches.vertical_line(self.diff.boundary.pen), "prompt | generation")
        if self.diff.t_star.isVisible():
            key.add(swatches.vertical_line(self.diff.t_star.pen), "t*: first different token")
        if self.split_line.isVisible():
            key.add(swatches.vertical_line(self.split_line.pen), "split: A | B")
        if any(p.absent.isVisible() for p in self.panels):
            key.add(swatches.region(not_recorded_brush()), ABSENT)
        self.layout.addItem(key, row=self._key_row, col=0)

    # -- the crosshair and reading back ------------------------------------------------------------

    def set_crosshair(self, t: int | None, e: int | None) -> None:
        """One crosshair through every panel at position `t`, expert `e` (None hides it)."""
        for panel in self.panels:
            panel.set_crosshair(t, e)

    def cell_at(self, plot: pg.PlotItem, x: float, y: float) -> tuple[int, int] | None:
        if self.data is None or plot not in self.plots:
            return None
        t, e = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
        return (t, e) if 0 <= t < self.data.length and 0 <= e < self.data.n_experts else None

    def reset_zoom(self) -> None:
        if self.data is not None:
            self.diff.plot.vb.setRange(xRange=(-0.5, self.data.length - 0.5), padding=0)


def draw_compare(layout: pg.GraphicsLayout, style: FigureStyle, data: CompareData, sel,
                 fit: int = 0) -> CompareFigure:
    """The exported compare figure: both panels and the runs' names; the key unless the page is too
    small for it (layout `fit` 1, named in the caption's list of what was left out)."""
    figure = CompareFigure(layout, style, with_key=fit == 0, names=True)
    figure.set_data(data)
    figure.left_out = [] if fit == 0 else [
        "the key of the marks (black frame = chosen by one run only, white frame = kept, red cross = "
        "dropped, hatching = no value)"]
    if sel.range is not None:
        t0, t1 = sel.positions(data.length)
        figure.diff.plot.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)
    return figure
