"""Keys of figures: each entry's swatch is drawn by the code that draws the mark in the figure, at
the size it has there, so a key shows a mark exactly as the reader finds it (a frame or its edges,
a cross or a tick, a star of the star's size, a dashed line of the line's pen, a hatched bar).

A key lists only what its figure draws: its builder adds an entry for each mark present.
"""

from __future__ import annotations

from collections.abc import Callable

from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtGui, QtWidgets, pg

#: A swatch's box, in layout units (1/96 in on the page).
SWATCH_W, SWATCH_H = 20.0, 16.0
#: The gap between a swatch and its text and between two columns of a key, and its margins.
KEY_GAP_PX, KEY_MARGIN_PX = 6.0, 2.0

Draw = Callable[[QtGui.QPainter, QtCore.QRectF], None]


class Swatch(pg.ItemSample):
    """A key's sample painted by `draw(painter, box)`; not a switch (a click hides nothing)."""

    def __init__(self, draw: Draw, width: float = SWATCH_W, height: float = SWATCH_H) -> None:
        super().__init__(pg.GraphicsObject())
        self._draw = draw
        self._size = QtCore.QRectF(0, 0, width, height)
        self.setFixedWidth(width)
        self.setFixedHeight(height)

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt's name)
        return QtCore.QRectF(self._size)

    def mouseClickEvent(self, event) -> None:  # noqa: N802 (pyqtgraph's name)
        event.ignore()

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        self._draw(painter, QtCore.QRectF(self._size))
        painter.restore()


def square(fill, pen=None) -> Swatch:
    """A filled square (a colour of a map, a bar), with an edge in `pen` when given."""
    def draw(p: QtGui.QPainter, box: QtCore.QRectF) -> None:
        side = min(box.width(), box.height()) - 4
        rect = QtCore.QRectF(box.center().x() - side / 2, box.center().y() - side / 2, side, side)
        p.setPen(pg.mkPen(pen) if pen is not None else QtCore.Qt.PenStyle.NoPen)
        p.setBrush(pg.mkBrush(fill) if not isinstance(fill, QtGui.QBrush) else fill)
        p.drawRect(rect)
    return Swatch(draw)


def line(pen: QtGui.QPen) -> Swatch:
    """A stretch of a curve or a dashed line, in its own pen."""
    def draw(p: QtGui.QPainter, box: QtCore.QRectF) -> None:
        p.setPen(pen)
        y = box.center().y()
        p.drawLine(QtCore.QPointF(box.left() + 1, y), QtCore.QPointF(box.right() - 1, y))
    return Swatch(draw)


def vertical_line(pen: QtGui.QPen) -> Swatch:
    """A vertical line across the box (t*, the prompt | generation boundary), in its own pen."""
    def draw(p: QtGui.QPainter, box: QtCore.QRectF) -> None:
        p.setPen(pen)
        x = box.center().x()
        p.drawLine(QtCore.QPointF(x, box.top() + 1), QtCore.QPointF(x, box.bottom() - 1))
    return Swatch(draw)


def symbol(item: pg.ScatterPlotItem) -> Swatch:
    """The scatter's symbol at its size, pen and brush (a ★ or a ○ of the map)."""
    opts = item.opts
    size = float(opts["size"])

    def draw(p: QtGui.QPainter, box: QtCore.QRectF) -> None:
        p.translate(box.center())
        pg.graphicsItems.ScatterPlotItem.drawSymbol(p, opts["symbol"], size, pg.mkPen(opts["pen"]),
                                                    pg.mkBrush(opts["brush"]))
    side = max(SWATCH_H, size + 2)
    return Swatch(draw, max(SWATCH_W, side), side)


def region(brush: QtGui.QBrush, pen=None) -> Swatch:
    """A shaded band (positions not compared, or not recorded), as tall as the box."""
    def draw(p: QtGui.QPainter, box: QtCore.QRectF) -> None:
        p.setPen(pg.mkPen(pen) if pen is not None else QtCore.Qt.PenStyle.NoPen)
        p.setBrush(brush)
        p.drawRect(box.adjusted(2, 1, -2, -1))
    return Swatch(draw)


class Key(pg.LegendItem):
    """A figure's key: entries (swatch, text) in the figure's font and colour, on as many columns
    (up to `max_columns`) as the width it is given holds, so that beside or below a plot it never
    asks for more width than the plot has."""

    def __init__(self, style: FigureStyle, max_columns: int = 9, frame: bool = False,
                 scale: float = 1.0) -> None:
        size = style.font(scale).pointSizeF()  # a smaller key stops at the least legible size
        super().__init__(labelTextColor=style.foreground, labelTextSize=f"{size:g}pt",
                         pen=pg.mkPen("#bbbbbb") if frame else None,
                         brush=pg.mkBrush(style.background) if frame else None, horSpacing=KEY_GAP_PX)
        self.layout.setContentsMargins(*(KEY_MARGIN_PX,) * 4)
        self.layout.setVerticalSpacing(-KEY_MARGIN_PX)  # a label's box has room above and below its text
        self.max_columns = max_columns
        self._fitting = False
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Fixed)

    def add(self, swatch: pg.ItemSample, text: str) -> None:
        """An entry: `swatch` (a `Swatch`, `MarkSample`...) and its text."""
        self.addItem(swatch, text)
        self.updateGeometry()

    def texts(self) -> list[str]:
        """The entries' texts, in order."""
        return [label.text for _sample, label in self.items]

    def natural_width(self, columns: int) -> float:
        """Width of the entries laid out on `columns` columns (row by row): each column as wide as
        its widest swatch and text, a gap between every two cells, and the margins."""
        samples = [sample.width() for sample, _ in self.items]
        labels = [label.itemRect().width() + 1 for _, label in self.items]
        columns = max(1, min(columns, len(samples) or 1))
        cells = sum(max(samples[j::columns], default=0.0) + max(labels[j::columns], default=0.0)
                    for j in range(columns))
        return cells + KEY_GAP_PX * (2 * columns - 1) + 2 * KEY_MARGIN_PX

    def _rows_height(self) -> float:
        heights = [max(sample.height(), label.itemRect().height()) for sample, label in self.items]
        columns = max(self.columnCount, 1)
        rows = [max(heights[i:i + columns]) for i in range(0, len(heights), columns)]
        return sum(rows) + self.layout.verticalSpacing() * max(len(rows) - 1, 0) + 2 * KEY_MARGIN_PX

    def fit_width(self, width: float) -> None:
        """Take the most columns whose entries fit `width`."""
        columns = 1
        for c in range(min(self.max_columns, len(self.items)), 0, -1):
            if self.natural_width(c) <= width:
                columns = c
                break
        if columns != self.columnCount:
            self.setColumnCount(columns)
        self.updateGeometry()

    def sizeHint(self, which, constraint=None):  # noqa: N802 (Qt's name)
        """At least as wide as the widest entry, as tall as its rows at the present columns."""
        height = self._rows_height() if self.items else 0.0
        if which == QtCore.Qt.SizeHint.MinimumSize:
            return QtCore.QSizeF(self.natural_width(1), height)
        if which == QtCore.Qt.SizeHint.PreferredSize:
            return QtCore.QSizeF(self.natural_width(self.max_columns), height)
        return super().sizeHint(which, constraint if constraint is not None else QtCore.QSizeF())

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if self._fitting or not self.items:
            return
        self._fitting = True
        try:
            self.fit_width(self.geometry().width())
        finally:
            self._fitting = False

    def updateSize(self) -> None:  # noqa: N802 (pyqtgraph's name)
        """Inside a layout the layout sizes the key (pyqtgraph would move it to 0, 0)."""
        if self.parentLayoutItem() is None:
            super().updateSize()
        else:
            self.updateGeometry()
