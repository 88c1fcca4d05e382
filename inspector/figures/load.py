"""The expert-load figure: requested against kept per expert with the capacity line (top), and the
share of each batch row in every expert's buffer (bottom, stacked; the probe highlighted). The
line's value is named beside the plot, at its height, where it hides no bar."""

from __future__ import annotations

import html

import numpy as np

from inspector.figure_data.load import LoadData
from inspector.figures import key
from inspector.figures.axes import CategoryAxis, CountAxis
from inspector.figures.key import Key, square
from inspector.figures.marks import LevelAxis
from inspector.figures.style import FigureStyle, place_legend, row_colors
from inspector.qt import QtCore, QtGui, pg
from traces.analysis.displacement import capacity_text

#: The edge of a requested bar (lighter than the kept bar inside it).
REQUESTED_EDGE = "#4a7fa5"
NB = "\u00a0"  # a number stays on the line of its word when a title wraps


def stacked_segments(counts: np.ndarray, base: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Segments of bars stacked by row: (x = expert, y0, height, row) for every non-zero count.

    `counts` is [B, E]; rows stack in row order from `base` [E] (zeros when None).
    """
    B, E = counts.shape
    y0 = np.cumsum(counts, axis=0) - counts + (0 if base is None else base[None, :])  # [B, E]
    b, e = np.nonzero(counts > 0)
    return e.astype(np.float64), y0[b, e].astype(np.float64), counts[b, e].astype(np.float64), b


class LoadFigure:
    """Draws `LoadData` into a `pg.GraphicsLayout`: totals at (row, 0), rows' shares at (row + 1, 0)."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0) -> None:
        self.style = style or FigureStyle()
        self.data: LoadData | None = None
        self.level_axes = [LevelAxis(), LevelAxis()]
        self.totals: pg.PlotItem = layout.addPlot(
            row=row, col=0, axisItems={"bottom": CategoryAxis("bottom"),
                                       "left": CountAxis(), "right": self.level_axes[0]})
        self.shares: pg.PlotItem = layout.addPlot(
            row=row + 1, col=0, axisItems={"bottom": CategoryAxis("bottom"),
                                           "left": CountAxis(), "right": self.level_axes[1]})
        self.shares.setXLink(self.totals)
        for plot, ylabel in ((self.totals, "candidates"), (self.shares, "candidates by row")):
            plot.setLabel("bottom", "expert")
            plot.setLabel("left", ylabel)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.showGrid(y=True, alpha=0.25)
            self.style.style_plot(plot)
            plot.showAxis("right")
            plot.getAxis("right").setPen(pg.mkPen(None))  # names the line's level; no axis line
        # Keys sit in their own column, so they never hide a bar; each names only what is drawn.
        self.totals_legend = Key(self.style, max_columns=1)
        self.shares_legend = Key(self.style, max_columns=1)
        place_legend(layout, self.totals_legend, row, 1)
        place_legend(layout, self.shares_legend, row + 1, 1)
        self.requested_bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush=self.style.requested,
                                              pen=pg.mkPen(REQUESTED_EDGE), name="requested")
        self.kept_bars = pg.BarGraphItem(x=[], height=[], width=0.5, brush=self.style.kept, pen=None,
                                         name="kept")
        self.totals.addItem(self.requested_bars)
        self.totals.addItem(self.kept_bars)
        self.share_bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.dropped_bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.shares.addItem(self.share_bars)
        self.shares.addItem(self.dropped_bars)
        self.capacity_lines = []
        for plot in (self.totals, self.shares):
            pen = pg.mkPen(self.style.capacity, width=2, style=QtCore.Qt.PenStyle.DashLine)
            line = pg.InfiniteLine(angle=0, movable=False, pen=pen)
            line.setZValue(20)
            plot.addItem(line)
            self.capacity_lines.append(line)

    def set_data(self, data: LoadData) -> None:
        self.data = data
        E = data.n_experts
        x = np.arange(E, dtype=np.float64)
        self.requested_bars.setOpts(x=x, height=data.requested.astype(float), width=0.8)
        self.kept_bars.setOpts(x=x, height=data.kept.astype(float), width=0.5)
        self._set_shares(data)
        for plot in (self.totals, self.shares):
            plot.getAxis("bottom").set_labels([str(e) for e in range(E)])
        cap = data.capacity
        self._set_totals_key(cap >= 0)
        for line, axis in zip(self.capacity_lines, self.level_axes, strict=True):
            line.setVisible(cap >= 0)
            if cap >= 0:
                line.setPos(cap)
            axis.set_level(cap if cap >= 0 else None, f"C = {cap}", self.style.capacity)
        top = max(float(data.requested.max(initial=0)), float(max(cap, 0)), 2.0) * 1.15  # 0, 1, 2 at least
        for plot in (self.totals, self.shares):
            plot.setXRange(-0.6, E - 0.4, padding=0)
            plot.setYRange(0, top, padding=0)
        step = "prefill" if data.step == 0 else f"decode step {data.step}"
        self.totals.setTitle(
            f"run {html.escape(data.run)} · {step} · layer {data.layer} · group {data.group}<br>"
            f"{capacity_text(cap)} · requested {int(data.requested.sum())}, kept {int(data.kept.sum())}, "
            f"dropped {int(data.dropped.sum())}",
            color=self.style.foreground, size=f"{self.style.font_size + 1}pt")
        probe = f"probe = row{NB}{data.probe_row}" if data.probe_row >= 0 else "no probe row"
        hatched = " and dropped (hatched)" if data.row_dropped.any() else ""
        self.shares.setTitle(f"who filled the buffers: kept (solid){hatched}<br>candidates of each row · "
                             f"{probe}", color=self.style.foreground, size=f"{self.style.font_size}pt")

    def _set_totals_key(self, capacity: bool) -> None:
        """requested, kept, and the capacity line where the group has one (not when dropless)."""
        self.totals_legend.clear()
        self.totals_legend.add(square(self.style.requested, REQUESTED_EDGE), "requested")
        self.totals_legend.add(square(self.style.kept), "kept")
        if capacity:
            self.totals_legend.add(key.line(self.capacity_lines[0].pen), "capacity C")

    def _set_shares(self, data: LoadData) -> None:
        B = data.row_kept.shape[0]
        colors = row_colors(B, data.probe_row, self.style.probe)
        x, y0, h, b = stacked_segments(data.row_kept)
        pens = [pg.mkPen("#000000", width=2) if r == data.probe_row else pg.mkPen("#ffffff", width=0.5)
                for r in b]
        _set_bars(self.share_bars, x, y0, h, [colors[r] for r in b], pens)
        x, y0, h, b = stacked_segments(data.row_dropped, base=data.row_kept.sum(axis=0))
        brushes = [QtGui.QBrush(colors[r], QtCore.Qt.BrushStyle.BDiagPattern) for r in b]
        pens = [pg.mkPen(colors[r], width=2 if r == data.probe_row else 1) for r in b]
        _set_bars(self.dropped_bars, x, y0, h, brushes, pens)
        self.shares_legend.clear()
        if data.probe_row >= 0:
            self.shares_legend.add(square(colors[data.probe_row], pg.mkPen("#000000", width=2)),
                                   f"probe: row{NB}{data.probe_row}<br>"
                                   f"(request{NB}{int(data.request_ids[data.probe_row])})")
        partner = next((r for r in range(B) if r != data.probe_row), None)
        if partner is not None:
            self.shares_legend.add(square(colors[partner]), "partner rows")
        if data.row_dropped.any():  # none in a dropless group: nothing hatched to name
            hatch = QtGui.QBrush(QtGui.QColor("#666666"), QtCore.Qt.BrushStyle.BDiagPattern)
            self.shares_legend.add(square(hatch, "#666666"), "dropped (hatched in<br>the row's colour)")

    def expert_at(self, x: float) -> int | None:
        if self.data is None:
            return None
        e = int(np.floor(x + 0.5))
        return e if 0 <= e < self.data.n_experts and abs(x - e) <= 0.4 else None

    def hover_text(self, x: float, y: float) -> str | None:
        e = self.expert_at(x)
        if e is None or self.data is None:
            return None
        d = self.data
        lines = [f"expert {e}: requested {int(d.requested[e])}, kept {int(d.kept[e])}, "
                 f"dropped {int(d.dropped[e])}, {capacity_text(d.capacity)}"]
        for b in np.nonzero((d.row_kept[:, e] + d.row_dropped[:, e]) > 0)[0]:
            who = "probe " if b == d.probe_row else ""
            lines.append(f"{who}row {b} (request {int(d.request_ids[b])}): kept {int(d.row_kept[b, e])}, "
                         f"dropped {int(d.row_dropped[b, e])}")
        return "\n".join(lines)


def _set_bars(bars: pg.BarGraphItem, x, y0, height, brushes: list, pens: list) -> None:
    """Set stacked bar segments; an empty segment list (no drops, e.g. dropless) draws nothing.

    pyqtgraph's BarGraphItem fails on empty per-bar brush and pen lists, so those are left out.
    """
    if len(x) == 0:
        bars.setOpts(x=[], y0=[], height=[], width=0.8, brushes=None, pens=None, brush=None, pen=None)
        return
    bars.setOpts(x=x, y0=y0, height=height, width=0.8, brushes=brushes, pens=pens)
