"""Does a drawn figure fit its page? Every plot keeps a readable area, nothing runs off the page,
no text is cut, no two texts overlap (an axis title on its tick labels, a header on the text under
it), no text lies over the data, no text wraps inside a word, panels that share positions show the
same ones, every axis labels at least three ticks and an axis of a few categories (experts, layers)
labels every one of them."""

from __future__ import annotations

import numpy as np

from inspector.export.finish import overflow
from inspector.export.render import Canvas
from inspector.figures.axes import CategoryAxis
from inspector.figures.marks import CellMarks, LevelAxis, MarkAxis
from inspector.qt import QtCore, QtGui, QtWidgets, pg

#: The smallest plot area, in inches: its height, and the width of a plot (not a colour bar).
MIN_PANEL_IN = 0.45
MIN_PLOT_WIDTH_IN = 1.2
#: Two texts overlap when their ink boxes share more than this, in layout units both ways.
OVERLAP_PX = 1.5


def _name(plot: pg.PlotItem) -> str:
    title = plot.titleLabel.text if plot.titleLabel.isVisible() else ""
    left = plot.getAxis("left").labelText if plot.getAxis("left").isVisible() else ""
    text = title or left or "a plot"
    return text if len(text) < 50 else text[:47] + "…"


def problems(canvas: Canvas) -> list[str]:
    """What keeps the figure from fitting its page, one phrase each (none when it fits)."""
    dpi, width, height = canvas.dpi, canvas.size.width(), canvas.size.height()
    out, titles = [], []
    for item in canvas.layout.items:
        rect = item.sceneBoundingRect()
        if rect.bottom() > height + 1 or rect.right() > width + 1:
            out.append(f"its panels need {max(rect.right(), width) / dpi:.2f} x "
                       f"{max(rect.bottom(), height) / dpi:.2f} in")
            break
    for item in canvas.widget.scene().items():
        if isinstance(item, pg.PlotItem) and item.isVisible():
            area = item.vb.sceneBoundingRect()
            narrow = isinstance(item, pg.ColorBarItem)  # a colour bar is narrow by design
            if area.height() < MIN_PANEL_IN * dpi or (not narrow and area.width() < MIN_PLOT_WIDTH_IN * dpi):
                out.append(f"the plot {_name(item)!r} gets {area.width() / dpi:.2f} x "
                           f"{area.height() / dpi:.2f} in")
            left = item.getAxis("left")
            if not narrow and left.isVisible() and left.label.isVisible() and left.labelText:
                titles.append((left.labelText, left.label.sceneBoundingRect()))
    for i, (text, rect) in enumerate(titles):
        clash = next((other for other, r in titles[i + 1:] if r.intersects(rect)), None)
        if clash is not None:
            out.append(f"the axis titles {text!r} and {clash!r} overlap")
    out.extend(f"text {t} is cut off" for t in overflow(canvas)[:1])
    out.extend(overlaps(canvas)[:1])
    out.extend(texts_over_data(canvas)[:1])
    out.extend(broken_words(canvas)[:1])
    out.extend(unshared_ranges(canvas)[:1])
    out.extend(sparse_axes(canvas)[:1])
    out.extend(unlabelled_categories(canvas)[:1])
    return out


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) < 40 else text[:37] + "…"


def _text_boxes(canvas: Canvas) -> list[tuple[str, QtCore.QRectF, QtWidgets.QGraphicsItem]]:
    """Each visible text's ink box on the scene: one box per line of a text item, the tick labels
    of every axis and the labels a marks axis placed."""
    boxes = []
    for item in canvas.widget.scene().items():
        if not item.isVisible():
            continue
        if isinstance(item, QtWidgets.QGraphicsTextItem) and item.toPlainText().strip():
            doc = item.document()
            block = doc.begin()
            while block.isValid():
                layout = block.layout()
                origin = doc.documentLayout().blockBoundingRect(block).topLeft()
                for i in range(layout.lineCount()):
                    line = layout.lineAt(i)
                    text = block.text()[line.textStart():line.textStart() + line.textLength()]
                    if not text.strip():
                        continue
                    rect = QtCore.QRectF(line.naturalTextRect()).translated(origin)
                    boxes.append((text, item.mapRectToScene(rect), item))
                block = block.next()
        elif isinstance(item, pg.AxisItem) and item.style["showValues"]:
            boxes += [(text, item.mapRectToScene(rect), item) for text, rect in _tick_labels(item)]
            for text, rect in getattr(item, "placed", []):  # the labels a marks axis drew
                boxes.append((text, item.mapRectToScene(rect.adjusted(3, 1, -3, -1)), item))
    return boxes


def overlaps(canvas: Canvas) -> list[str]:
    """Pairs of texts drawn over each other (a title on tick labels, a header on its body), one
    phrase each."""
    boxes = _text_boxes(canvas)
    out = []
    for i, (text, rect, item) in enumerate(boxes):
        for other, r, owner in boxes[i + 1:]:
            if owner is item and isinstance(item, QtWidgets.QGraphicsTextItem):
                continue  # lines of one text are laid out by Qt, never over each other
            common = rect.intersected(r)
            if common.width() > OVERLAP_PX and common.height() > OVERLAP_PX:
                out.append(f"the texts {_short(text)!r} and {_short(other)!r} overlap")
    return out


def _data_rects(item, view: pg.ViewBox) -> list[QtCore.QRectF]:
    """Scene rectangles covering what a plot item draws: bars, cells, an image, or the short
    segments and points of a curve or scatter."""
    if isinstance(item, pg.ImageItem):
        shown = item.sceneBoundingRect().intersected(view.sceneBoundingRect())
        return [shown] if item.image is not None else []
    if isinstance(item, pg.BarGraphItem):
        o = item.opts
        x = np.atleast_1d(np.asarray(o.get("x") if o.get("x") is not None else [], dtype=float))
        n = x.size
        if not n:
            return []
        width = np.broadcast_to(np.asarray(o.get("width") if o.get("width") is not None else 0.8, float), n)
        height = np.broadcast_to(np.asarray(o.get("height") if o.get("height") is not None else 0, float), n)
        y0 = np.broadcast_to(np.asarray(o.get("y0") if o.get("y0") is not None else 0, float), n)
        return [item.mapRectToScene(QtCore.QRectF(a - w / 2, b, w, h))
                for a, b, w, h in zip(x, y0, width, height, strict=True) if h != 0]
    if isinstance(item, CellMarks):
        x, y = item.cells()
        return [item.mapRectToScene(QtCore.QRectF(a - 0.5, b - 0.5, 1, 1)) for a, b in zip(x, y, strict=True)]
    if isinstance(item, (pg.PlotDataItem, pg.ScatterPlotItem)):
        x, y = item.getData() if isinstance(item, pg.PlotDataItem) else item.getData()
        if x is None or y is None or len(x) == 0:
            return []
        keep = np.isfinite(x) & np.isfinite(y)
        points = [item.mapToScene(QtCore.QPointF(a, b)) for a, b in zip(x[keep], y[keep], strict=True)]
        rects = [QtCore.QRectF(p.x() - 1, p.y() - 1, 2, 2) for p in points]
        if isinstance(item, pg.PlotDataItem):  # the segments between the points, as thin boxes
            rects += [QtCore.QRectF(p, q).normalized() for p, q in zip(points, points[1:], strict=False)
                      if abs(p.x() - q.x()) < 1 or abs(p.y() - q.y()) < 1]
        return rects
    return []


def texts_over_data(canvas: Canvas) -> list[str]:
    """Texts drawn over a plot's data (bars, cells, curves, marks), one phrase each."""
    views = [v for v in canvas.widget.scene().items() if isinstance(v, pg.ViewBox) and v.isVisible()]
    out = []
    for text, rect, _owner in _text_boxes(canvas):
        box = rect.adjusted(1, 1, -1, -1)
        for view in views:
            if not view.sceneBoundingRect().intersects(box):
                continue
            items = [i for i in view.addedItems if i.isVisible()]
            if any(r.intersects(box) for i in items for r in _data_rects(i, view)):
                out.append(f"the text {_short(text)!r} lies over the data of {_name(view.parentItem())!r}"
                           if isinstance(view.parentItem(), pg.PlotItem) else
                           f"the text {_short(text)!r} lies over data")
                break
    return out


def broken_words(canvas: Canvas) -> list[str]:
    """Texts that wrap inside a word (a column too narrow for it), one phrase each. A text that
    wraps inside a word only when the word is wider than its line (the text strip's runs of subword
    tokens) may."""
    out = []
    for item in canvas.widget.scene().items():
        if not isinstance(item, QtWidgets.QGraphicsTextItem) or not item.isVisible():
            continue
        if getattr(item.parentItem(), "breaks_inside_words", False):
            continue
        block = item.document().begin()
        while block.isValid():
            layout, text = block.layout(), block.text()
            for i in range(layout.lineCount() - 1):
                end = layout.lineAt(i).textStart() + layout.lineAt(i).textLength()
                if 0 < end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
                    out.append(f"the text {_short(text)!r} wraps inside a word ({text[max(end - 6, 0):end]}"
                               f" / {text[end:end + 6]})")
                    break
            block = block.next()
    return out


def _tick_labels(axis: pg.AxisItem) -> list[tuple[str, QtCore.QRectF]]:
    """The tick labels `axis` draws (after pyqtgraph leaves out those past its ends), in axis
    coordinates."""
    image = QtGui.QImage(8, 8, QtGui.QImage.Format.Format_ARGB32)
    painter = QtGui.QPainter(image)
    try:
        painter.setFont(axis.style["tickFont"] or axis.font())
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(text, QtCore.QRectF(rect)) for rect, _flags, text in (specs[2] if specs else []) if text.strip()]


def _values_in_view(axis: pg.AxisItem) -> int | None:
    """How many labelled values a categorical axis's view holds (None: a numeric axis)."""
    labels = getattr(axis, "labels", None)
    view = axis.linkedView()
    if not labels or view is None or getattr(axis, "shows_text", lambda: True)() is False:
        return None
    lo, hi = sorted(view.viewRange()[0 if axis.orientation in ("top", "bottom") else 1])
    return sum(1 for v in range(len(labels)) if lo <= v <= hi)


def sparse_axes(canvas: Canvas, least: int = 3) -> list[str]:
    """Axes that label fewer than `least` ticks (fewer than their categories when they have fewer),
    one phrase each."""
    out = []
    for item in canvas.widget.scene().items():
        if not isinstance(item, pg.AxisItem) or not item.isVisible() or not item.style["showValues"]:
            continue
        if isinstance(item, (MarkAxis, LevelAxis)) or item.linkedView() is None and not isinstance(
                item.parentItem(), pg.ColorBarItem):
            continue
        drawn = len(_tick_labels(item))
        categories = _values_in_view(item)
        need = least if categories is None else min(least, categories)
        if drawn < need:
            owner = item.parentItem()
            name = _name(owner) if isinstance(owner, pg.PlotItem) else "a colour bar"
            title = item.labelText or item.orientation
            out.append(f"the axis {title!r} of {name!r} labels {drawn} tick{'s' if drawn != 1 else ''}")
    return out


def unlabelled_categories(canvas: Canvas) -> list[str]:
    """Axes of a few categories (up to their `every_up_to`: experts, layers) that leave some in view
    unlabelled, one phrase each: a sentence naming "expert 3" finds its row."""
    out = []
    for item in canvas.widget.scene().items():
        if not isinstance(item, CategoryAxis) or not item.isVisible() or not item.style["showValues"]:
            continue
        n = len(item.labels)
        if not n or n > item.every_up_to:
            continue
        drawn, shown = len(_tick_labels(item)), _values_in_view(item)
        if shown is not None and drawn < shown:
            owner = item.parentItem()
            name = _name(owner) if isinstance(owner, pg.PlotItem) else "a plot"
            out.append(f"the axis {item.labelText or item.orientation!r} of {name!r} labels {drawn} of its "
                       f"{shown} categories")
    return out


def unshared_ranges(canvas: Canvas) -> list[str]:
    """Panels linked in x to another that show other positions than it does, one phrase each."""
    out = []
    for item in canvas.widget.scene().items():
        if not isinstance(item, pg.PlotItem) or not item.isVisible():
            continue
        master = item.vb.linkedView(pg.ViewBox.XAxis)
        if master is None:
            continue
        (a0, a1), (b0, b1) = item.vb.viewRange()[0], master.viewRange()[0]
        if abs(a0 - b0) + abs(a1 - b1) > 1e-3 * max(abs(b1 - b0), 1e-9):
            out.append(f"the plot {_name(item)!r} shows x {a0:.1f}..{a1:.1f}, the panels it shares "
                       f"positions with {b0:.1f}..{b1:.1f}")
    return out
