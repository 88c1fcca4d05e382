"""Making a built figure print-ready on its canvas: dark labels, no interactive handles, titles
and captions wrapped to the page instead of cut off, and a check that every text fits."""

from __future__ import annotations

from inspector.export.render import Canvas
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtGui, QtWidgets, pg


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
    """Wrap the labels (titles, captions) that make the layout wider than the page: the widest of
    the labels that fill their cells give up the excess width, each wrapping (between words) to
    the width of the widest minus the excess, so one long title does not narrow a short one's
    column. True if any."""
    excess = canvas.layout.geometry().width() - canvas.size.width()
    if excess <= 0.5:
        return False
    filling = [label for label in _labels(canvas)  # a legend's entries are never wrapped: it stacks them
               if label.itemRect().width() >= label.geometry().width() - 1
               and not isinstance(label.parentItem(), pg.LegendItem)]
    if not filling:
        return False
    cap = max(label.itemRect().width() for label in filling) - excess
    if cap < 40:
        return False
    wrapped = False
    for label in filling:
        if label.itemRect().width() <= cap:
            continue
        text = label.item
        text.setTextWidth(cap - 2)
        option = text.document().defaultTextOption()
        option.setAlignment({"left": QtCore.Qt.AlignmentFlag.AlignLeft,
                             "right": QtCore.Qt.AlignmentFlag.AlignRight}.get(
                                 label.opts.get("justify", "center"), QtCore.Qt.AlignmentFlag.AlignHCenter))
        option.setWrapMode(QtGui.QTextOption.WrapMode.WordWrap)  # between words, never inside one
        text.document().setDefaultTextOption(option)
        text.setTextWidth(good_width(text.document(), cap - 2))
        label.resizeEvent(None)  # takes the wrapped text's size as its minimum
        plot = label.parentItem()
        if isinstance(plot, pg.PlotItem) and plot.titleLabel is label:
            # A plot keeps its title row one line high; give it the wrapped lines.
            height = label.itemRect().height() + 4
            label.setMaximumHeight(height)
            plot.layout.setRowFixedHeight(0, height)
        wrapped = True
    return wrapped


def bad_breaks(doc: QtGui.QTextDocument) -> list[str]:
    """The lines of a wrapped text that break badly, one phrase each: a name split at its hyphen
    ("batch-" / "native"), or a last line of one word."""
    out = []
    doc.size()  # lays the text out (a cloned document has no lines until asked)
    block = doc.begin()
    while block.isValid():
        layout, text = block.layout(), block.text()
        lines = [layout.lineAt(i) for i in range(layout.lineCount())]
        for line in lines[:-1]:
            end = line.textStart() + line.textLength()
            if 0 < end < len(text) and text[end - 1] == "-" and text[end].isalnum():
                out.append(f"{text[max(end - 8, 0):end]} / {text[end:end + 8]}")
        for i, line in enumerate(lines[1:], 1):  # the last line of the block or of a <br> paragraph
            words = text[line.textStart():line.textStart() + line.textLength()]
            ends = i == len(lines) - 1 or words.endswith("\u2028")
            starts = text[lines[i - 1].textStart():line.textStart()].endswith("\u2028")
            if ends and not starts and len(words.split()) == 1:
                out.append(f"a last line of one word ({words.strip()})")
        block = block.next()
    return out


def good_width(doc: QtGui.QTextDocument, width: float) -> float:
    """The widest text width up to `width` at which `doc` wraps without bad breaks (down to 60% of
    `width`), else `width`."""
    trial = doc.clone()
    for w in [width * (1 - 0.04 * i) for i in range(11)]:
        trial.setTextWidth(w)
        if not bad_breaks(trial):
            return w
    return width


def _needed_width(axis: pg.AxisItem) -> float:
    """The width a left or right axis needs for its tick labels and its title (pyqtgraph's own
    sum when the width is not fixed)."""
    width = axis.textWidth + axis.style["tickTextOffset"][0] + max(0, axis.style["tickLength"])
    if axis.label.isVisible():
        width += axis.label.boundingRect().height() * 0.8
    return width


def widen_axes(canvas: Canvas) -> bool:
    """Widen the fixed-width vertical axes whose tick labels and title need more room (a larger
    font than the figure was laid out for), so the title does not run over the labels. Axes that
    share a fixed width keep sharing one (their plots stay lined up). True if any changed."""
    groups: dict[float, list[pg.AxisItem]] = {}
    for item in canvas.widget.scene().items():
        if (isinstance(item, pg.AxisItem) and item.isVisible() and item.orientation in ("left", "right")
                and item.fixedWidth is not None):
            groups.setdefault(float(item.fixedWidth), []).append(item)
    changed = False
    for width, axes in groups.items():
        needed = max(_needed_width(a) for a in axes)
        if needed > width + 0.5:
            for axis in axes:
                axis.setWidth(needed)
            changed = True
    return changed


def grow_labels(canvas: Canvas) -> bool:
    """Give each label whose (wrapped) text is taller than its place the height of its text, so it
    does not run over what is under it. True if any."""
    grown = False
    for label in _labels(canvas):
        height = label.itemRect().height()
        if height > label.geometry().height() + 1 and not isinstance(label.parentItem(), pg.PlotItem):
            label.setMinimumHeight(height)
            label.setMaximumHeight(height)
            grown = True
    return grown


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
    if widen_axes(canvas):
        canvas.settle()
    for _ in range(3):
        if not wrap_labels(canvas):
            break
        canvas.settle()
    if grow_labels(canvas):
        canvas.settle()
