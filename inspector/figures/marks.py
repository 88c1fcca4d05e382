"""Marks on heatmap cells (frames, crosses, ticks) drawn in one batch, only where they are visible.

A scatter of tens of thousands of data-sized symbols paints each one separately; this item keeps
the cell centres sorted by x, draws only those inside the exposed view with a single
`drawRects`/`drawLines` call, and adapts to the cells' size on the page:

- frames (`kind="outline"`) are thin bands inside the cell's edges, drawn as filled rectangles, so
  that they have one width on screen, in PNG, SVG and PDF; in cells too narrow for a frame only
  its top and bottom edges are drawn (`mode` "edges"), and in cells too small for those, none;
- drops (`kind="cross"`) are crosses where a cross can be drawn and thin vertical ticks below
  (`mode` "tick"): never a filled cell, which would hide its colour.

Sizes are in layout units (1/96 inch on the page): the item paints in a coordinate system of those
units, so every export scales them with the page as it scales text.
"""

from __future__ import annotations

import numpy as np

from inspector.qt import QtCore, QtGui, pg

#: From this many layout units per cell (both ways) on, frames are drawn whole.
MIN_OUTLINE_PX = 5.0
#: From this many layout units of cell height on, narrow cells keep their frame's top and bottom.
MIN_EDGES_PX = 4.0
#: From this many layout units per cell on, dropped marks are crosses; below, thin ticks.
MIN_CROSS_PX = 6.0
#: Crosses are never drawn wider than this many layout units.
MAX_CROSS_PX = 18.0
#: Width of a tick (a drop in a narrow cell), in layout units; at most half the cell.
TICK_PX = 1.5


class CellMarks(pg.GraphicsObject):
    """Frames (`kind="outline"`) or drop marks (`kind="cross"`) centred on integer cells (x, y).

    `width` is a frame's band or a cross's stroke, `shadow` the colour of a thinner band outside
    the frame (or a halo around the cross) that sets it off light and dark cells alike; `edges`
    False draws no frame in cells too narrow for a whole one."""

    def __init__(self, kind: str, color: str, width: float = 1.0, shadow: str | None = None,
                 inset: float = 0.06, edges: bool = True) -> None:
        super().__init__()
        self.edges = edges  # a frame keeps its top and bottom in narrow cells
        if kind not in ("outline", "cross"):
            raise ValueError(f"kind must be 'outline' or 'cross', got {kind!r}")
        self.kind = kind
        self.color = QtGui.QColor(color)
        self.width = float(width)
        self.shadow = QtGui.QColor(shadow) if shadow is not None else None
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

    def cell_size(self) -> tuple[float, float] | None:
        """Layout units per cell along x and y (None before the item is in a view)."""
        px = self.pixelVectors(QtCore.QPointF(1, 0))[0]  # one layout unit along x, in data units
        py = self.pixelVectors(QtCore.QPointF(0, 1))[0]
        if px is None or py is None:
            return None
        return 1.0 / max(px.length(), 1e-9), 1.0 / max(py.length(), 1e-9)

    def mode(self) -> str:
        """How the marks are drawn at the cells' present size: "cross" or "tick" (drops), "frame",
        "edges" or "none" (frames)."""
        size = self.cell_size()
        ux, uy = size if size is not None else (MAX_CROSS_PX, MAX_CROSS_PX)
        if self.kind == "cross":
            return "cross" if min(ux, uy) >= MIN_CROSS_PX else "tick"
        if min(ux, uy) >= MIN_OUTLINE_PX:
            return "frame"
        return "edges" if self.edges and uy >= MIN_EDGES_PX else "none"

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        size = self.cell_size()
        if not self.x.size or size is None:
            return
        ux, uy = size
        x, y = self._visible()
        mode = self.mode()
        painter.save()
        painter.scale(1.0 / ux, 1.0 / uy)  # from here on, layout units: square and page-sized
        xs, ys = (x * ux).tolist(), (y * uy).tolist()
        if mode == "cross":
            self._paint_crosses(painter, xs, ys, ux, uy)
        elif mode == "tick":
            self._paint_ticks(painter, xs, ys, ux, uy)
        elif mode in ("frame", "edges"):
            self._paint_frames(painter, xs, ys, ux, uy, sides=mode == "frame")
        painter.restore()

    def paint_one(self, painter: QtGui.QPainter, ux: float, uy: float) -> None:
        """One mark, as `paint` draws it now, centred on the painter's origin in a cell of `ux` x `uy`
        layout units (a key's sample of the marks)."""
        mode = self.mode()
        if mode == "cross":
            self._paint_crosses(painter, [0.0], [0.0], ux, uy)
        elif mode == "tick":
            self._paint_ticks(painter, [0.0], [0.0], ux, uy)
        elif mode in ("frame", "edges"):
            self._paint_frames(painter, [0.0], [0.0], ux, uy, sides=mode == "frame")

    def _band(self, painter: QtGui.QPainter, color: QtGui.QColor, xs, ys, hx: float, hy: float,
              t: float, sides: bool) -> None:
        """Fill a band `t` thick inside the rectangle +-hx, +-hy around each centre."""
        rects = []
        for a, b in zip(xs, ys, strict=True):
            rects.append(QtCore.QRectF(a - hx, b - hy, 2 * hx, t))
            rects.append(QtCore.QRectF(a - hx, b + hy - t, 2 * hx, t))
            if sides:
                rects.append(QtCore.QRectF(a - hx, b - hy + t, t, 2 * hy - 2 * t))
                rects.append(QtCore.QRectF(a + hx - t, b - hy + t, t, 2 * hy - 2 * t))
        painter.setBrush(color)
        painter.drawRects(rects)

    def _paint_frames(self, painter: QtGui.QPainter, xs, ys, ux: float, uy: float, sides: bool) -> None:
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        hx, hy = ux * (0.5 - self._inset), uy * (0.5 - self._inset)
        shade = 0.0
        if self.shadow is not None:
            shade = max(self.width / 2, 0.5)
            self._band(painter, self.shadow, xs, ys, hx, hy, shade, sides)
        if not sides:
            # A cell too narrow for a frame: caps across its whole width at its top and bottom, tall
            # enough to read at a journal column (an inset cap would shrink to a dot there).
            t = min(max(self.width, 0.12 * uy), 0.25 * uy)
            self._band(painter, self.color, xs, ys, hx, hy - shade, t, sides)
            return
        # At most a quarter of the cell each side, so that its colour shows inside.
        t = min(self.width, 0.25 * min(ux, uy))
        self._band(painter, self.color, xs, ys, hx - shade, hy - shade, t, sides)

    def _paint_crosses(self, painter: QtGui.QPainter, xs, ys, ux: float, uy: float) -> None:
        half = min(min(ux, uy) * (0.5 - 2 * self._inset), MAX_CROSS_PX / 2)
        lines = []
        for a, b in zip(xs, ys, strict=True):
            lines.append(QtCore.QLineF(a - half, b - half, a + half, b + half))
            lines.append(QtCore.QLineF(a - half, b + half, a + half, b - half))
        if self.shadow is not None:
            painter.setPen(QtGui.QPen(self.shadow, self.width + 1.5))
            painter.drawLines(lines)
        painter.setPen(QtGui.QPen(self.color, self.width))
        painter.drawLines(lines)

    def _paint_ticks(self, painter: QtGui.QPainter, xs, ys, ux: float, uy: float) -> None:
        """A thin vertical tick in the middle of each cell: the cell's colour stays on both sides."""
        w = min(TICK_PX, ux / 2)
        hy = uy * (0.5 - self._inset)
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(self.color)
        painter.drawRects([QtCore.QRectF(a - w / 2, b - hy, w, 2 * hy) for a, b in zip(xs, ys, strict=True)])


class MarkSample(pg.ItemSample):
    """A key's sample of one or more `CellMarks` drawn over each other on one cell (a dropped
    candidate's red frame and its cross or tick), as the figure draws them now: a cell of the
    figure's own size, in the middle of a patch of `fill` (the cells around it)."""

    def __init__(self, marks, fill: QtGui.QColor | str | None = None) -> None:
        self.marks = list(marks) if isinstance(marks, (list, tuple)) else [marks]
        super().__init__(self.marks[0])
        self.fill = QtGui.QColor(fill) if fill is not None else None
        self.setFixedWidth(20)
        self.setFixedHeight(16)

    def mouseClickEvent(self, event) -> None:  # noqa: N802 (pyqtgraph's name)
        event.ignore()  # a key, not a switch that hides the marks

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt's name)
        return QtCore.QRectF(0, 0, 20, 16)

    def cell(self) -> tuple[float, float]:
        """The cell's size in the sample: the figure's (layout units), within the sample's box."""
        size = self.marks[0].cell_size()
        ux, uy = size if size is not None else (14.0, 14.0)
        return min(ux, 18.0), min(uy, 14.0)

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        box = self.boundingRect().adjusted(1, 1, -1, -1)
        if self.fill is not None:
            painter.fillRect(box, self.fill)
        ux, uy = self.cell()
        painter.save()
        painter.translate(box.center())
        for marks in self.marks:
            marks.paint_one(painter, ux, uy)
        painter.restore()


class MarkAxis(pg.AxisItem):
    """A top axis naming marks of the x axis (the prompt | generation boundary, t*, the splits of
    the runs) above the data area, where they hide no cell.

    Each label is centred on its x in its own colour, kept inside the axis, and put on the first
    of `rows` text rows where it overlaps no other label, else (with `push`) just right of the
    labels of the first row; one that fits nowhere is left out (the hover readout still names it).
    No tick marks, no axis line."""

    def __init__(self, rows: int = 1, push: bool = True, **kwargs) -> None:
        super().__init__("top", **kwargs)
        self.rows = rows
        self.push = push  # a label with no free row may go right of the first row's labels
        self._marks: dict[str, tuple[float, str, str]] = {}
        self.placed: list[tuple[str, QtCore.QRectF]] = []   # the labels drawn last, in axis coordinates
        self.setPen(pg.mkPen(None))
        self.setStyle(tickLength=0, showValues=False)
        self.setHeight(self._row_height() * rows + 4)

    def set_rows(self, rows: int, push: bool) -> None:
        """Use `rows` text rows; `push` False leaves out a label no row holds at its x (never moved
        off its mark)."""
        self.rows, self.push = rows, push
        self.setHeight(self._row_height() * rows + 4)
        self.picture = None
        self.update()

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
            # Centred on its x; a name of a boundary ("prompt | generation", "A | B") has its bar there.
            bar = text.find("|")
            anchor = (metrics.horizontalAdvance(text[:bar]) + metrics.horizontalAdvance("|") / 2 + 3
                      if bar >= 0 else w / 2)
            left = min(max(px - anchor, 0.0), max(width - w, 0.0))
            free = [r for r, taken in enumerate(rows)
                    if all(left + w + 3 <= a or left >= b + 3 for a, b in taken)]
            if not free and rows[0] and self.push:  # next to the nearest label, when the axis has room
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


class LevelAxis(pg.AxisItem):
    """A right axis naming levels of y (the capacity line) beside the plot, in the line's colour,
    where the name hides no bar. No axis line, no tick marks."""

    def __init__(self, **kwargs) -> None:
        super().__init__("right", **kwargs)
        self.setPen(pg.mkPen(None))
        self.setStyle(tickLength=0)
        self._levels: list[tuple[float, str]] = []

    def set_level(self, y: float | None, text: str = "", color: str = "#000000") -> None:
        """Name level `y` with `text` (None: no level)."""
        self._levels = [] if y is None else [(float(y), text)]
        self.setTextPen(pg.mkPen(color))
        self.setTicks([self._levels])
