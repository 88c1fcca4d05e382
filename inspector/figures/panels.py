"""Panels that share positions, lined up: in a column of panels every data area has the same left
edge and width, so one position has one x in each (t*, a heatmap's cell, a curve's point).

Three things decide where a panel's data area lies inside its column: the width of its left axis,
what sits on its right (a colour bar, or nothing) and the column itself. Panels lined up here get
one left-axis width, and each keeps on its right either its colour bar, inside its own plot next to
its data area (so the bar is exactly as tall as its heatmap), or a blank as wide as that bar.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtGui, QtWidgets, pg

#: The gap between a data area and its colour bar (pyqtgraph's own, column 4 of the plot's grid).
COLOUR_BAR_GAP_PX = 5
#: A plot's grid: the row of its data area, and the columns of the gap and the colour bar.
_DATA_ROW, _GAP_COL, _BAR_COL = 2, 4, 5


def attach_colour_bar(plot: pg.PlotItem, bar: pg.ColorBarItem, image: pg.ImageItem,
                      frame: str = "#969696") -> None:
    """Put `bar` right of `plot`'s data area, in the plot's own grid: the bar's height is the data
    area's. Its frame is a border of the bar itself (pyqtgraph frames it with three empty axes,
    whose tick marks would make it taller than the heatmap)."""
    bar.setImageItem(image, insert_in=plot)
    for side in ("top", "bottom", "left"):
        bar.hideAxis(side)
    bar.vb.setBorder(pg.mkPen(frame))


class Margin(pg.GraphicsWidget):
    """A blank as wide as `template` (a colour bar elsewhere in the column), following its width."""

    def __init__(self, template: QtWidgets.QGraphicsWidget) -> None:
        super().__init__()
        self.template = template
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Fixed, QtWidgets.QSizePolicy.Policy.Preferred)
        template.geometryChanged.connect(self._follow)
        self._follow()

    def _follow(self) -> None:
        width = self.template.geometry().width() if self.template.scene() is not None else 0.0
        width = max(width, self.template.effectiveSizeHint(QtCore.Qt.SizeHint.MinimumSize).width())
        if abs(self.minimumWidth() - width) > 0.25:
            self.setMinimumWidth(width)
            self.setMaximumWidth(width)
            self.updateGeometry()


def reserve_right(plot: pg.PlotItem, template: QtWidgets.QGraphicsWidget) -> Margin:
    """Keep `plot`'s data area as far from the column's right edge as a data area with colour bar
    `template` beside it."""
    margin = Margin(template)
    plot.layout.addItem(margin, _DATA_ROW, _BAR_COL)
    plot.layout.setColumnFixedWidth(_GAP_COL, COLOUR_BAR_GAP_PX)
    return margin


def left_axis_px(style: FigureStyle, texts: Sequence[str]) -> float:
    """Width of a left axis whose tick labels are `texts` at the style's font, with its title."""
    metrics = QtGui.QFontMetricsF(style.font())
    widest = max((metrics.horizontalAdvance(t) for t in texts), default=0.0)
    return widest + 5 + 5 + metrics.height() + 4  # text offset, tick length, the title's line, a gap


def share_left_width(plots: Sequence[pg.PlotItem], width: float) -> None:
    """One left-axis width for every panel of `plots` (export finishing widens them together)."""
    for plot in plots:
        plot.getAxis("left").setWidth(int(round(width)))


def data_x(plot: pg.PlotItem, x: float) -> float:
    """Scene x of data x in `plot` (where a position's vertical line is drawn)."""
    return plot.vb.mapViewToScene(QtCore.QPointF(x, 0.0)).x()


def set_title(plot: pg.PlotItem, text: str, **opts) -> None:
    """`plot.setTitle(text, **opts)` in a row as high as the text's line (pyqtgraph's is 30 px
    whatever the font): stacked panels lose no height to empty title rows."""
    plot.setTitle(text, **opts)
    height = plot.titleLabel.itemRect().height() + 2
    plot.titleLabel.setMaximumHeight(height)
    plot.layout.setRowFixedHeight(0, height)
