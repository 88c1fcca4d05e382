"""Making a built figure print-ready on its canvas: dark labels, no interactive handles, titles
and captions wrapped to the page instead of cut off, and a check that every text fits."""

from __future__ import annotations

from inspector.export.render import Canvas
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtWidgets, pg


def _labels(canvas: Canvas) -> list[pg.LabelItem]:
    return [i for i in canvas.widget.scene().items() if isinstance(i, pg.LabelItem) and i.isVisible()]


def ink(canvas: Canvas, style: FigureStyle) -> None:
    """Axis and colour-bar labels in the style's foreground; colour-bar handles hidden; legends
    scaled with the page like everything else."""
    for item in canvas.widget.scene().items():
        if isinstance(item, pg.LegendItem):
            # pyqtgraph keeps legends at screen size whatever the zoom; on a page they must grow
            # with it, or they shrink as the DPI rises.
            item.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, False)
        if isinstance(item, pg.ColorBarItem) and getattr(item, "region", None) is not None:
            item.region.hide()  # drag handles are for the screen
        if isinstance(item, pg.AxisItem):
            item.labelStyle = {**item.labelStyle, "color": style.foreground}
            if item.label.isVisible():
                item._updateLabel()


def wrap_labels(canvas: Canvas) -> bool:
    """Wrap the labels (titles, captions) that make the layout wider than the page: each label
    that fills its cell gives up the excess width, its text wrapping onto more lines. True if any."""
    excess = canvas.layout.geometry().width() - canvas.size.width()
    if excess <= 0.5:
        return False
    wrapped = False
    for label in _labels(canvas):
        natural = label.itemRect().width()
        if natural < label.geometry().width() - 1 or natural - excess < 40:
            continue
        text = label.item
        text.setTextWidth(natural - excess - 2)
        option = text.document().defaultTextOption()
        option.setAlignment({"left": QtCore.Qt.AlignmentFlag.AlignLeft,
                             "right": QtCore.Qt.AlignmentFlag.AlignRight}.get(
                                 label.opts.get("justify", "center"), QtCore.Qt.AlignmentFlag.AlignHCenter))
        text.document().setDefaultTextOption(option)
        label.resizeEvent(None)  # takes the wrapped text's size as its minimum
        plot = label.parentItem()
        if isinstance(plot, pg.PlotItem) and plot.titleLabel is label:
            # A plot keeps its title row one line high; give it the wrapped lines.
            height = label.itemRect().height() + 4
            label.setMaximumHeight(height)
            plot.layout.setRowFixedHeight(0, height)
        wrapped = True
    return wrapped


def overflow(canvas: Canvas) -> list[str]:
    """Texts that do not lie wholly on the page (what would be cut off), as 'text' descriptions."""
    page = QtCore.QRectF(-0.5, -0.5, canvas.size.width() + 1, canvas.size.height() + 1)
    out = []
    for item in canvas.widget.scene().items():
        if not isinstance(item, QtWidgets.QGraphicsTextItem) or not item.isVisible():
            continue
        if not item.toPlainText().strip():
            continue
        rect = item.sceneBoundingRect()
        if not page.contains(rect):
            out.append(f"{item.toPlainText()[:60]!r} at {rect.x():.0f},{rect.y():.0f} "
                       f"size {rect.width():.0f}x{rect.height():.0f}")
    return out


def finish(canvas: Canvas, style: FigureStyle) -> None:
    """Make the canvas's figure print-ready and let it settle."""
    ink(canvas, style)
    canvas.settle()
    for _ in range(3):
        if not wrap_labels(canvas):
            break
        canvas.settle()
