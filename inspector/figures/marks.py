"""Marks on heatmap cells (outlines, crosses) drawn in one batch, only where they are visible.

A scatter of tens of thousands of data-sized symbols paints each one separately; this item keeps
the cell centres sorted by x, draws only those inside the exposed view with a single
`drawRects`/`drawLines` call, and adapts to zoom: outlines vanish when a cell is too small to
frame, crosses shrink to solid ticks that stay visible at any zoom.
"""

from __future__ import annotations

import numpy as np

from inspector.qt import QtCore, QtGui, pg

#: Below this many screen pixels per cell, outlines are not drawn (they would hide the colours).
MIN_OUTLINE_PX = 5.0
#: From this many screen pixels per cell on, dropped marks are crosses; below, solid ticks.
MIN_CROSS_PX = 6.0
#: Crosses are never drawn wider than this many pixels.
MAX_CROSS_PX = 18.0
#: Dropped marks are never drawn smaller than this many pixels wide.
MIN_MARK_PX = 3.0


class CellMarks(pg.GraphicsObject):
    """Outlines (`kind="outline"`) or crosses (`kind="cross"`) centred on integer cells (x, y)."""

    def __init__(self, kind: str, color: str, width: float = 2.0, shadow: str | None = None,
                 inset: float = 0.06) -> None:
        super().__init__()
        if kind not in ("outline", "cross"):
            raise ValueError(f"kind must be 'outline' or 'cross', got {kind!r}")
        self.kind = kind
        self._pen = pg.mkPen(color, width=width)
        self._pen.setCosmetic(True)
        self._shadow = None
        if shadow is not None:
            self._shadow = pg.mkPen(shadow, width=width + 2)
            self._shadow.setCosmetic(True)
        self._brush = pg.mkBrush(color)
        self._inset = inset
        self.x = np.zeros(0)
        self.y = np.zeros(0)
        self._bounds = QtCore.QRectF()

    def set_cells(self, x: np.ndarray, y: np.ndarray) -> None:
        """Cells to mark (integer centres); replaces the previous ones."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        order = np.argsort(x, kind="stable")
        self.prepareGeometryChange()
        self.x, self.y = x[order], y[order]
        if self.x.size:
            self._bounds = QtCore.QRectF(self.x.min() - 0.5, self.y.min() - 0.5,
                                         self.x.max() - self.x.min() + 1, self.y.max() - self.y.min() + 1)
        else:
            self._bounds = QtCore.QRectF()
        self.update()

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """The marked cells (x, y), sorted by x."""
        return self.x.copy(), self.y.copy()

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt's name)
        return QtCore.QRectF(self._bounds)

    def _visible(self) -> tuple[np.ndarray, np.ndarray]:
        view = self.viewRect()
        if view is None or not self.x.size:
            return self.x, self.y
        lo = np.searchsorted(self.x, view.left() - 1.0, side="left")
        hi = np.searchsorted(self.x, view.right() + 1.0, side="right")
        x, y = self.x[lo:hi], self.y[lo:hi]
        inside = (y >= view.top() - 1.0) & (y <= view.bottom() + 1.0)
        return x[inside], y[inside]

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        if not self.x.size:
            return
        px = self.pixelVectors(QtCore.QPointF(1, 0))[0]  # one data unit along x, in pixels
        py = self.pixelVectors(QtCore.QPointF(0, 1))[0]
        if px is None or py is None:
            return
        unit_x = 1.0 / max(px.length(), 1e-9)   # pixels per data unit along x
        unit_y = 1.0 / max(py.length(), 1e-9)
        x, y = self._visible()
        if self.kind == "outline":
            self._paint_outlines(painter, x, y, unit_x, unit_y)
        else:
            self._paint_crosses(painter, x, y, unit_x, unit_y)

    def _paint_outlines(self, painter: QtGui.QPainter, x: np.ndarray, y: np.ndarray,
                        unit_x: float, unit_y: float) -> None:
        if min(unit_x, unit_y) < MIN_OUTLINE_PX:
            return
        # A frame `width` pixels thick (shadowed by one pixel on each side) drawn as one-pixel
        # strokes, one ring at a time: Qt's raster engine strokes 1-px pens about 5x faster than
        # wider ones, which keeps panning over thousands of frames smooth.
        n = max(1, round(self._pen.widthF()))
        rings = [(self._shadow, -1)] if self._shadow is not None else []
        rings += [(self._pen, i) for i in range(n)]
        rings += [(self._shadow, n)] if self._shadow is not None else []
        xs, ys = x.tolist(), y.tolist()
        hx, hy = 0.5 - self._inset, 0.5 - self._inset
        painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
        for pen, inward_px in rings:
            thin = QtGui.QPen(pen)
            thin.setWidthF(1.0)
            thin.setCosmetic(True)
            dx, dy = hx - inward_px / unit_x, hy - inward_px / unit_y
            painter.setPen(thin)
            painter.drawRects([QtCore.QRectF(a - dx, b - dy, 2 * dx, 2 * dy)
                               for a, b in zip(xs, ys, strict=True)])

    def _paint_crosses(self, painter: QtGui.QPainter, x: np.ndarray, y: np.ndarray,
                       unit_x: float, unit_y: float) -> None:
        if min(unit_x, unit_y) >= MIN_CROSS_PX:
            # A square cross (in pixels) however stretched the cell is, at most MAX_CROSS_PX wide.
            half_px = min(min(unit_x, unit_y) * (0.5 - 2 * self._inset), MAX_CROSS_PX / 2)
            hx, hy = half_px / unit_x, half_px / unit_y
            lines = []
            for a, b in zip(x.tolist(), y.tolist(), strict=True):
                lines.append(QtCore.QLineF(a - hx, b - hy, a + hx, b + hy))
                lines.append(QtCore.QLineF(a - hx, b + hy, a + hx, b - hy))
            if self._shadow is not None:
                painter.setPen(self._shadow)
                painter.drawLines(lines)
            painter.setPen(self._pen)
            painter.drawLines(lines)
            return
        # Too small for a cross: a solid tick at least MIN_MARK_PX wide, so a drop is never lost.
        hx = max(0.5, MIN_MARK_PX / unit_x / 2)
        hy = max(0.45, MIN_MARK_PX / unit_y / 2)
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(self._brush)
        painter.drawRects([QtCore.QRectF(a - hx, b - hy, 2 * hx, 2 * hy)
                           for a, b in zip(x.tolist(), y.tolist(), strict=True)])


class MarkAxis(pg.AxisItem):
    """A top axis naming marks of the x axis (the prompt | generation boundary, t*, the splits of
    the runs) above the data area, where they hide no cell.

    Each label is centred on its x in its own colour, kept inside the axis, and put on the first
    of `rows` text rows where it overlaps no other label, else just right of the labels of the
    first row; one that fits nowhere is left out (the hover readout still names it). No tick
    marks, no axis line."""

    def __init__(self, rows: int = 1, **kwargs) -> None:
        super().__init__("top", **kwargs)
        self.rows = rows
        self._marks: dict[str, tuple[float, str, str]] = {}
        self.placed: list[tuple[str, QtCore.QRectF]] = []   # the labels drawn last, in axis coordinates
        self.setPen(pg.mkPen(None))
        self.setStyle(tickLength=0, showValues=False)
        self.setHeight(self._row_height() * rows + 4)

    def _row_height(self) -> int:
        return QtGui.QFontMetrics(self.style.get("tickFont") or QtGui.QFont()).height() + 2

    def set_mark(self, key: str, x: float | None, text: str = "", color: str = "#000000") -> None:
        """Name position `x` with `text` (None removes the mark `key`)."""
        if x is None:
            self._marks.pop(key, None)
        else:
            self._marks[key] = (float(x), text, color)
        self.picture = None
        self.update()

    def clear_marks(self) -> None:
        self._marks.clear()
        self.picture = None
        self.update()

    def marks(self) -> dict[str, tuple[float, str, str]]:
        return dict(self._marks)

    def setTickFont(self, font) -> None:  # noqa: N802 (pyqtgraph's name)
        super().setTickFont(font)
        self.setHeight(self._row_height() * self.rows + 4)

    def _layout(self, metrics: QtGui.QFontMetricsF) -> list[tuple[str, str, QtCore.QRectF]]:
        view = self.linkedView()
        if view is None or not self._marks:
            return []
        (x0, x1), _ = view.viewRange()
        width, row_h = self.width(), self._row_height()
        rows: list[list[tuple[float, float]]] = [[] for _ in range(self.rows)]
        out = []
        for x, text, color in sorted(self._marks.values(), key=lambda m: m[0]):
            if not x0 <= x <= x1:
                continue
            px = self.mapFromItem(view, view.mapFromView(QtCore.QPointF(x, 0))).x()
            w = metrics.horizontalAdvance(text) + 6
            left = min(max(px - w / 2, 0.0), max(width - w, 0.0))
            free = [r for r, taken in enumerate(rows)
                    if all(left + w + 3 <= a or left >= b + 3 for a, b in taken)]
            if not free and rows[0]:  # next to the nearest label instead, when the axis has room
                pushed = max(b for _, b in rows[0]) + 4
                if pushed + w <= width:
                    left, free = pushed, [0]
            if free:
                rows[free[0]].append((left, left + w))
                top = self.height() - (free[0] + 1) * row_h - 1
                out.append((text, color, QtCore.QRectF(left, top, w, row_h)))
        return out

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        return []

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):  # noqa: N802 (pyqtgraph's name)
        font = self.style.get("tickFont") or QtGui.QFont()
        p.setFont(font)
        self.placed = []
        for text, color, rect in self._layout(QtGui.QFontMetricsF(font)):
            p.setPen(pg.mkPen(color))
            p.drawText(rect, int(QtCore.Qt.AlignmentFlag.AlignCenter), text)
            self.placed.append((text, rect))

    def resizeEvent(self, ev=None) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(ev)
        self.picture = None

    def linkedViewChanged(self, view, newRange=None) -> None:  # noqa: N802 (pyqtgraph's name)
        super().linkedViewChanged(view, newRange)
        self.picture = None
        self.update()
