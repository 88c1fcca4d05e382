"""The causal map figure: layer x position of one pair, each cell where runs A and B differ coloured by
how much the other run's decision there moves the split (diverging colours centred on 0: red toward
the other run's token, blue away), cells beating their position-matched null outlined, t* marked,
and the chain from the batch to the decisive cell drawn as arrows. One panel per direction (B
patched toward A, then A toward B), each with the colour bar of the effect beside it; the compact
layout keeps B's alone. An export adds the key of what is drawn (`causal_map_key`): grey cells,
outlines, the chain's arrows and t*, so that the figure reads alone."""

from __future__ import annotations

import html
import math

import numpy as np

from inspector.figure_data.causal_map import SIDES, CausalMapData, chain_side, describe_cell, outcome_words
from inspector.figures import key
from inspector.figures.axes import CategoryAxis, TokenAxis
from inspector.figures.marks import MarkAxis
from inspector.figures.panels import attach_colour_bar
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtGui, pg

NB = "\u00a0"
#: Colour of cells where A and B agree (no effect measured).
AGREE = (200, 200, 200)
#: Diverging colours: away from the other token (negative), 0, toward it (positive).
NEGATIVE, ZERO, POSITIVE = np.array((33, 102, 172)), np.array((247, 247, 247)), np.array((178, 24, 43))
#: The chain's colour (arrows and the batch event's dot).
CHAIN = "#1b7837"
#: The colour bar's label: the effect, in logits (red: toward the other run's token).
BAR_LABEL = "effect (logits)"


def diverging_colormap() -> pg.ColorMap:
    """The colour bar's map: -limit blue, 0 white, +limit red (as `diverging_rgb`)."""
    return pg.ColorMap([0.0, 0.5, 1.0], [QtGui.QColor(*map(int, c)) for c in (NEGATIVE, ZERO, POSITIVE)])


def diverging_rgb(effect: np.ndarray, limit: float) -> np.ndarray:
    """[L, T, 3] uint8: effect / limit mapped onto blue-white-red, agreeing cells (nan) light grey."""
    x = np.clip(np.nan_to_num(effect / limit), -1.0, 1.0)[..., None]
    rgb = np.where(x >= 0, ZERO + (POSITIVE - ZERO) * x, ZERO + (NEGATIVE - ZERO) * -x)
    rgb = np.where(np.isnan(effect)[..., None], np.array(AGREE), rgb)
    return rgb.round().astype(np.uint8)


class CausalMapFigure:
    """Draws `CausalMapData` into a `pg.GraphicsLayout`, one plot per direction from row `row` on."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0,
                 sides: tuple[str, ...] = SIDES) -> None:
        self.style = style or FigureStyle()
        self.data: CausalMapData | None = None
        self.sides = sides
        self.plots: list[pg.PlotItem] = []
        self.images: list[pg.ImageItem] = []
        self.outlines: list[pg.PlotCurveItem] = []
        self.splits: list[pg.InfiniteLine] = []
        self.arrows: list[pg.GraphicsObject] = []
        self.marks: list[MarkAxis] = []
        self.bars: list[pg.ColorBarItem] = []
        for i, _ in enumerate(sides):
            x_axis, y_axis, marks = TokenAxis("bottom"), CategoryAxis("left"), MarkAxis()
            axes = {"bottom": x_axis, "left": y_axis, "top": marks}
            plot = layout.addPlot(row=row + i, col=0, axisItems=axes)
            plot.showAxis("top")
            self.marks.append(marks)
            plot.setLabel("bottom", "position (token)")
            plot.setLabel("left", "MoE layer")
            plot.invertY(True)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            self.style.style_plot(plot)
            image = pg.ImageItem(axisOrder="row-major")
            plot.addItem(image)
            outline = pg.PlotCurveItem(pen=pg.mkPen(self.style.foreground, width=2.5), connect="finite")
            outline.setZValue(10)
            plot.addItem(outline)
            dashed = pg.mkPen(self.style.foreground, width=2, style=QtCore.Qt.PenStyle.DashLine)
            split = pg.InfiniteLine(angle=90, movable=False, pen=dashed)
            split.setZValue(20)
            plot.addItem(split)
            # The bar colours nothing (the image is drawn in RGB, agreeing cells grey): it shows the scale.
            bar = pg.ColorBarItem(values=(-1.0, 1.0), colorMap=diverging_colormap(), interactive=False,
                                  width=14)
            bar.axis.setTextPen(pg.mkPen(self.style.foreground))
            bar.axis.setLabel(BAR_LABEL, color=self.style.foreground)
            bar.axis.label.setFont(self.style.font())
            bar.axis.setTickFont(self.style.font())
            bar.axis.enableAutoSIPrefix(False)
            attach_colour_bar(plot, bar, [])
            self.bars.append(bar)
            self.plots.append(plot)
            self.images.append(image)
            self.outlines.append(outline)
            self.splits.append(split)
        self.plot = self.plots[0]

    def set_data(self, data: CausalMapData) -> None:
        self.data = data
        for item in self.arrows:
            item.scene() and item.scene().removeItem(item)
        self.arrows = []
        limit = data.limit()
        T, L = max(data.n_positions, 1), max(data.n_layers, 1)
        for i, side in enumerate(self.sides):
            plot = self.plots[i]
            k = SIDES.index(side)
            effect = data.effect[k] if data.effect.size else np.full((L, T), np.nan)
            self.images[i].setImage(diverging_rgb(effect, limit), autoLevels=False, levels=(0, 255))
            self.bars[i].setLevels((-limit, limit))
            self.bars[i].axis.setWidth(self._bar_axis_px(limit))
            self.bars[i].setVisible(not data.message)
            self.images[i].setRect(QtCore.QRectF(-0.5, -0.5, T, L))
            plot.getAxis("bottom").set_labels(data.labels)
            plot.getAxis("left").set_labels([str(layer) for layer in range(L)])
            beats = [c for c in data.cells.get(side, ()) if c.beats_null]
            self.outlines[i].setData(*_frames([(c.position, c.layer) for c in beats]))
            self.splits[i].setPos(T - 0.5)
            self.splits[i].setVisible(data.n_positions > 0)
            ink = self.style.foreground
            self.marks[i].set_mark("split", T - 0.5 if data.n_positions else None, "t*", ink)
            inside = 0 < data.prompt_len < T - 3    # t*'s mark first where both would crowd
            self.marks[i].set_mark("boundary", data.prompt_len - 0.5 if inside else None,
                                   "prompt | generation", ink)
            plot.setTitle(self._title(side, limit), color=self.style.foreground,
                          size=f"{self.style.font_size + 1}pt")
            for axis in ("bottom", "left", "top"):   # nothing to read off axes without a map
                plot.showAxis(axis, show=not data.message)
            # A blank margin right of t* (4% of the width, a quarter cell at least): t*'s name centres on it.
            pad = max(0.25, 0.04 * T)
            plot.vb.setLimits(xMin=-1.5, xMax=T + pad, yMin=-1.0, yMax=L)
            plot.vb.setRange(xRange=(-0.5, T - 0.5 + pad), yRange=(-0.5, L - 0.5), padding=0)
        self._draw_chain()

    def _bar_axis_px(self, limit: float) -> int:
        """Room for the colour bar's widest tick label (its sign and decimals) beside its label."""
        metrics = QtGui.QFontMetricsF(self.style.font())
        widest = "-0.005" if limit < 0.05 else "-0.05" if limit < 1 else "-10"
        return int(metrics.horizontalAdvance(widest) + metrics.height() + 16)

    def _title(self, side: str, limit: float) -> str:
        d = self.data
        if d.message:   # what is missing, in a few words (the caption and the app's notice say what to do)
            return html.escape(d.message.split(":")[0])
        patched, row = (d.run, d.row) if side == "B" else (d.ref_run, d.ref_row)
        other = "A" if side == "B" else "B"
        base = d.baseline[SIDES.index(side)]
        tie = f" · {outcome_words(d.outcome)}" if d.outcome is not None and d.outcome.kind else ""
        # Each panel names its own run once and the other by letter: two lines, as wide as the plot.
        return (f"{side}{NB}= {html.escape(patched)} row{NB}{row}, patched toward {other}{tie}<br>"
                f"logit difference at t*{NB}={NB}{d.t_star}: {base:+.3g} unpatched "
                f"({other}'s token minus {side}'s)")

    def _draw_chain(self) -> None:
        """Arrows from each link of the chain to the next, from the batch event to the decisive cell."""
        d = self.data
        if not d.chain or d.message:
            return
        side = chain_side(d)
        if side not in self.sides:
            return
        plot = self.plots[self.sides.index(side)]
        points = [(position, layer) for _, layer, position, _ in reversed(d.chain)]
        pen = pg.mkPen(CHAIN, width=2.5)
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            if (x0, y0) == (x1, y1):
                continue
            line = pg.PlotCurveItem([x0, x1], [y0, y1], pen=pen)
            line.setZValue(30)
            plot.addItem(line)
            # in data units, so that the head points along the line whatever the axes' scales
            angle = math.degrees(math.atan2(y1 - y0, x1 - x0)) + 180
            head = pg.ArrowItem(pos=(x1, y1), angle=angle, headLen=0.45, headWidth=0.3, pxMode=False,
                                brush=CHAIN, pen=pen)
            head.setZValue(31)
            plot.addItem(head)
            self.arrows += [line, head]
        if points:
            start = pg.ScatterPlotItem([points[0][0]], [points[0][1]], symbol="o", size=12,
                                       brush=CHAIN, pen=pg.mkPen("#ffffff"))
            start.setZValue(32)
            plot.addItem(start)
            self.arrows.append(start)

    def cell_at(self, plot_index: int, x: float, y: float) -> tuple[int, int] | None:
        if self.data is None:
            return None
        t, layer = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
        if 0 <= t < self.data.n_positions and 0 <= layer < self.data.n_layers:
            return t, layer
        return None

    def hover_text(self, plot_index: int, x: float, y: float) -> str | None:
        cell = self.cell_at(plot_index, x, y)
        if cell is None:
            return None
        return describe_cell(self.data, self.sides[plot_index], cell[1], cell[0])


def _frames(cells: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """x, y of a closed square around each (position, layer) cell, NaN between them."""
    h = 0.45
    x = [v for p, _ in cells for v in (p - h, p + h, p + h, p - h, p - h, np.nan)]
    y = [v for _, layer in cells for v in (layer - h, layer - h, layer + h, layer + h, layer - h, np.nan)]
    return np.array(x, dtype=float), np.array(y, dtype=float)


def causal_map_key(figure: CausalMapFigure, style: FigureStyle) -> key.Key:
    """The key of what `figure` draws now: grey cells (the runs agree), outlines, the chain, t*."""
    d = figure.data
    out = key.Key(style, scale=0.9)
    shown = [SIDES.index(s) for s in figure.sides]
    effect = d.effect[shown] if d.effect.size else np.zeros((0,))
    if effect.size and np.isnan(effect).any():
        out.add(key.square(QtGui.QColor(*AGREE)), "grey: the runs agree (nothing to patch)")
    if effect.size and np.isfinite(effect).any():
        out.add(key.square(QtGui.QColor(*map(int, POSITIVE))), "red: toward the other run's token")
        out.add(key.square(QtGui.QColor(*map(int, NEGATIVE))), "blue: away from it")
    if any(o.xData is not None and len(o.xData) for o in figure.outlines):
        out.add(key.square(QtGui.QColor(*map(int, ZERO)), pg.mkPen(style.foreground, width=2.5)),
                "outlined: beats its position-matched null")
    if figure.arrows:
        out.add(key.line(pg.mkPen(CHAIN, width=2.5)), "chain from the batch event (dot)")
    if d.n_positions:
        out.add(key.vertical_line(pg.mkPen(style.foreground, width=2, style=QtCore.Qt.PenStyle.DashLine)),
                "t* (the tokens split)")
    return out


def draw_causal_map(layout: pg.GraphicsLayout, style: FigureStyle, data: CausalMapData, sel,
                    fit: int = 0) -> CausalMapFigure:
    """Both directions (fit 0), or on a short page (fit 1) the one the chain runs through (the decisive
    cell's; B's where no cell beats its null); the key under them."""
    kept = chain_side(data)
    figure = CausalMapFigure(layout, style, sides=SIDES if fit == 0 else (kept,))
    figure.set_data(data)
    gone = [s for s in SIDES if s not in figure.sides]
    figure.left_out = [f"run {s} patched toward {'A' if s == 'B' else 'B'} (its panel)" for s in gone]
    if not data.message:
        layout.addItem(causal_map_key(figure, style), row=len(figure.sides), col=0)
    return figure
