"""Rendering a figure to PNG, SVG and PDF without a display.

A figure is laid out on a hidden `pg.GraphicsLayoutWidget` (a `Canvas`) at the page's size in
screen units, so a font of 10 points is 10/72 inch on paper whatever the DPI, then its scene is
drawn through `QPainter` onto the target: a `QImage` (PNG, with the DPI in its pHYs chunk),
`QSvgGenerator` (item by item, see `_paint_items`) or `QPdfWriter`. Vector targets keep axes,
ticks and text as vector and text as text. Heatmaps stay sharp: painters never smooth pixmaps,
and before a vector export each image is repeated cell by cell (nearest neighbour) up to the
output resolution, so a viewer that smooths embedded images cannot blur cell edges.
"""

from __future__ import annotations

import logging
import math
import os
import re

import numpy as np

from inspector.export.page import IMAGE_FORMATS, Page, RenderError
from inspector.export.svg import final_coordinates
from inspector.qt import QtCore, QtGui, QtWidgets, pg

log = logging.getLogger(__name__)

#: Largest pixel count an image of a heatmap is repeated up to for a vector export.
MAX_SHARP_PIXELS = 24_000_000

def screen_dpi() -> float:
    """Logical DPI that fonts are laid out at (96 on the offscreen platform)."""
    screen = QtGui.QGuiApplication.primaryScreen()
    return float(screen.logicalDotsPerInch()) if screen is not None else 96.0


class Canvas:
    """A hidden graphics view holding one figure's `GraphicsLayout`, sized for a `Page`."""

    def __init__(self, page: Page, background: str = "#ffffff") -> None:
        if QtWidgets.QApplication.instance() is None:
            raise RenderError("drawing a figure needs a QApplication (the export command makes one on the "
                              "offscreen platform)")
        self.page = page
        self.background = background
        self.widget = pg.GraphicsLayoutWidget()
        self.widget.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        self.widget.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.widget.setVerticalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.widget.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.widget.setBackground(background)
        self.layout: pg.GraphicsLayout = self.widget.ci
        self.layout.setContentsMargins(12, 10, 18, 10)
        self.dpi = screen_dpi()
        w, h = page.screen_size(self.dpi)
        self.size = QtCore.QSize(max(int(round(w)), 1), max(int(round(h)), 1))
        self.widget.resize(self.size)
        self.widget.show()

    @property
    def scale(self) -> float:
        """Output pixels per screen unit."""
        return self.page.width / self.size.width()

    def resize_height(self, height_px: int) -> None:
        """Change the page height (output pixels) keeping the width; used to fit text to its page."""
        self.page = Page(self.page.width, height_px, self.page.dpi)
        self.size = QtCore.QSize(self.size.width(), max(int(round(self.page.screen_size(self.dpi)[1])), 1))
        self.widget.resize(self.size)

    def settle(self) -> None:
        """Let layouts and axes reach their final geometry: axes size themselves to their tick
        labels only once drawn, so draw (to a scratch image) and re-layout until nothing moves."""
        app = QtWidgets.QApplication.instance()
        scratch = QtGui.QImage(self.size, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        last = None
        for _ in range(6):
            app.processEvents()
            # The layout grows to fit its items' minimum sizes and never shrinks back by itself.
            self.layout.setGeometry(self.source())
            self.layout.layout.activate()
            painter = QtGui.QPainter(scratch)
            self.widget.scene().render(painter, QtCore.QRectF(scratch.rect()), self.source())
            painter.end()
            app.processEvents()
            geometry = tuple((round(i.geometry().x(), 1), round(i.geometry().y(), 1),
                              round(i.geometry().width(), 1), round(i.geometry().height(), 1))
                             for i in self.layout.items)
            if geometry == last:
                break
            last = geometry

    def source(self) -> QtCore.QRectF:
        return QtCore.QRectF(0, 0, self.size.width(), self.size.height())

    def close(self) -> None:
        self.widget.hide()
        self.widget.close()
        self.widget.deleteLater()

    def __enter__(self) -> Canvas:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- sharp heatmaps ---------------------------------------------------------------------------------

def sharpen_images(canvas: Canvas) -> None:
    """Repeat every image's cells (nearest neighbour) so that each cell covers at least as many
    pixels as it does in the output; its place and colours stay the same."""
    for item in canvas.widget.scene().items():
        if not isinstance(item, pg.ImageItem) or item.image is None or not item.isVisible():
            continue
        image = item.image
        rows, cols = image.shape[:2]  # the figures use row-major images: [y, x]
        if item.axisOrder != "row-major" or rows == 0 or cols == 0:
            continue
        on_page = item.mapRectToScene(item.boundingRect())
        # Only the part inside the plot shows; count the cells visible in x.
        view = item.getViewBox()
        shown = on_page.intersected(view.sceneBoundingRect()) if view is not None else on_page
        if shown.isEmpty():
            continue
        frac_x = shown.width() / max(on_page.width(), 1e-9)
        frac_y = shown.height() / max(on_page.height(), 1e-9)
        fx = math.ceil(shown.width() * canvas.scale / max(cols * frac_x, 1e-9))
        fy = math.ceil(shown.height() * canvas.scale / max(rows * frac_y, 1e-9))
        fx, fy = max(fx, 1), max(fy, 1)
        while rows * cols * fx * fy > MAX_SHARP_PIXELS and (fx > 1 or fy > 1):
            fx, fy = max(fx // 2, 1), max(fy // 2, 1)
        if fx == 1 and fy == 1:
            continue
        rect = item.mapRectToParent(item.boundingRect())
        levels = item.getLevels()
        big = np.repeat(np.repeat(image, fy, axis=0), fx, axis=1)
        item.setImage(big, autoLevels=False, levels=levels)
        item.setRect(rect)


# -- targets ------------------------------------------------------------------------------------------

def _paint_items(canvas: Canvas, painter: QtGui.QPainter, target: QtCore.QRectF) -> None:
    """Draw the scene item by item in stacking order, each with its clip set anew.

    `QGraphicsScene.render` saves the painter, clips an item and restores; `QSvgGenerator` misses
    a clip restored to an outer one and keeps the inner clip for what follows (a legend's swatches
    clipped away by an axis label's clip). Here no clip is ever restored: each item sets its own."""
    source = canvas.source()
    base = QtGui.QTransform.fromTranslate(target.x(), target.y())
    base.scale(target.width() / source.width(), target.height() / source.height())
    base = QtGui.QTransform.fromTranslate(-source.x(), -source.y()) * base
    page = QtGui.QPainterPath()
    page.addRect(source)
    option = QtWidgets.QStyleOptionGraphicsItem()
    no_contents = QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemHasNoContents
    clips_children = QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape
    clips_self = QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemClipsToShape
    items = canvas.widget.scene().items(QtCore.Qt.SortOrder.AscendingOrder)
    for item in items:
        if not item.isVisible() or item.flags() & no_contents or item.effectiveOpacity() <= 0:
            continue
        clip = QtGui.QPainterPath(page)
        owner = item if item.flags() & clips_self else item.parentItem()
        while owner is not None:
            if owner is item or owner.flags() & clips_children:
                clip = clip.intersected(owner.mapToScene(owner.shape()))
            owner = owner.parentItem()
        if clip.isEmpty() or clip.boundingRect().isEmpty():  # nothing of it can show (a 0-high axis)
            continue
        painter.save()
        painter.setTransform(base)
        painter.setClipPath(clip)
        painter.setTransform(item.sceneTransform() * base)
        painter.setOpacity(item.effectiveOpacity())
        option.exposedRect = item.boundingRect()
        item.paint(painter, option, None)
        painter.restore()


def _paint(canvas: Canvas, painter: QtGui.QPainter, target: QtCore.QRectF, *, by_item: bool = False) -> None:
    """Draw the canvas's scene onto `painter` filling `target`, in export mode (`by_item`: item
    by item, for SVG)."""
    painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
    # Heatmap cells are data: never interpolate them, and never store them as JPEG (a PDF's default).
    painter.setRenderHint(QtGui.QPainter.RenderHint.SmoothPixmapTransform, False)
    painter.setRenderHint(QtGui.QPainter.RenderHint.LosslessImageRendering, True)
    painter.fillRect(target, QtGui.QColor(canvas.background))
    items = [i for i in canvas.widget.scene().items() if hasattr(i, "setExportMode")]
    opts = {"antialias": True, "background": QtGui.QColor(canvas.background), "painter": painter,
            "resolutionScale": target.width() / canvas.size.width()}
    try:
        for item in items:
            item.setExportMode(True, opts)
        if by_item:
            _paint_items(canvas, painter, target)
        else:
            canvas.widget.scene().render(painter, target, canvas.source(),
                                         QtCore.Qt.AspectRatioMode.IgnoreAspectRatio)
    finally:
        for item in items:
            item.setExportMode(False)


def render_image(canvas: Canvas) -> QtGui.QImage:
    """The figure as an RGB image of the page's size, carrying the page's DPI."""
    page = canvas.page
    image = QtGui.QImage(page.width, page.height, QtGui.QImage.Format.Format_RGB32)
    # Paint at the layout's DPI (fonts in points resolve against the device's DPI, and the painter
    # already scales the layout to the page), then stamp the page's DPI for the file.
    _set_dpi(image, canvas.dpi)
    painter = QtGui.QPainter(image)
    try:
        _paint(canvas, painter, QtCore.QRectF(0, 0, page.width, page.height))
    finally:
        painter.end()
    _set_dpi(image, page.dpi)
    return image


def _set_dpi(image: QtGui.QImage, dpi: float) -> None:
    dots_per_meter = int(round(dpi / 0.0254))
    image.setDotsPerMeterX(dots_per_meter)
    image.setDotsPerMeterY(dots_per_meter)


def write_png(canvas: Canvas, path: str) -> None:
    """The figure as PNG, encoded in memory and written by Python: a failed write is an OSError that
    says why (a full disk), never a message of the image library on standard error."""
    image = render_image(canvas)
    data = QtCore.QByteArray()
    buffer = QtCore.QBuffer(data)
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RenderError(f"{path}: cannot encode the PNG image")
    buffer.close()
    _write_bytes(path, data.data())


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def svg_bytes(canvas: Canvas, title: str = "") -> bytes:
    """The figure as SVG: vector shapes, text as <text>, heatmaps as embedded sharp images.

    The drawing is in layout units at the layout's DPI, so the file's width and height give the
    page's physical size and fonts their point sizes."""
    from PySide6.QtSvg import QSvgGenerator

    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator(QSvgGenerator.SvgVersion.Svg11)
    generator.setOutputDevice(buffer)
    generator.setSize(canvas.size)
    generator.setViewBox(QtCore.QRect(QtCore.QPoint(0, 0), canvas.size))
    generator.setResolution(int(round(canvas.dpi)))
    generator.setTitle(title)
    generator.setDescription("moe-inspector figure")
    painter = QtGui.QPainter(generator)
    try:
        _paint(canvas, painter, canvas.source(), by_item=True)
    finally:
        painter.end()
    buffer.close()
    return _pixelated(final_coordinates(bytes(buffer.data())))


def _pixelated(svg: bytes) -> bytes:
    """Ask viewers not to smooth embedded images: Qt writes SVG 1.1's `image-rendering=
    "optimizeSpeed"` when the painter does not smooth; browsers want CSS `pixelated` too."""
    return re.sub(rb"<image (?![^>]*style=)", b'<image style="image-rendering:pixelated" ', svg)


def write_svg(canvas: Canvas, path: str, title: str = "") -> None:
    data = svg_bytes(canvas, title)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise RenderError(f"{path}: cannot write the SVG file ({exc.strerror or exc})") from None


def write_pdf(canvas: Canvas, path: str, title: str = "") -> None:
    """The figure as a one-page PDF of the page's physical size; text stays text (extractable)."""
    page = canvas.page
    data = QtCore.QByteArray()
    buffer = QtCore.QBuffer(data)
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    writer = QtGui.QPdfWriter(buffer)  # in memory, then written by Python (see write_png)
    # Device units at the layout's DPI: fonts keep their point sizes, the page its physical size.
    writer.setResolution(int(round(canvas.dpi)))
    w_in, h_in = page.inches
    writer.setPageSize(QtGui.QPageSize(QtCore.QSizeF(w_in * 72.0, h_in * 72.0), QtGui.QPageSize.Unit.Point,
                                       "figure", QtGui.QPageSize.SizeMatchPolicy.ExactMatch))
    writer.setPageMargins(QtCore.QMarginsF(0, 0, 0, 0), QtGui.QPageLayout.Unit.Point)
    writer.setTitle(title)
    writer.setCreator("moe-inspector")
    painter = QtGui.QPainter()
    if not painter.begin(writer):
        raise RenderError(f"{path}: cannot write the PDF file")
    try:
        target = QtCore.QRectF(0, 0, writer.width(), writer.height())
        _paint(canvas, painter, target)
    finally:
        painter.end()
    del writer  # the PDF is complete in the buffer once its writer is gone
    buffer.close()
    _write_bytes(path, data.data())


def write_figure(canvas: Canvas, fmt: str, path: str | os.PathLike, title: str = "") -> None:
    """Write the canvas's figure as `fmt` (one of `IMAGE_FORMATS`) to `path`."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise RenderError(f"{path}: the folder {folder} does not exist")
    if fmt == "png":
        write_png(canvas, path)
    elif fmt == "svg":
        sharpen_images(canvas)
        write_svg(canvas, path, title)
    elif fmt == "pdf":
        sharpen_images(canvas)
        write_pdf(canvas, path, title)
    else:
        raise RenderError(f"unknown figure format {fmt!r}; expected one of {', '.join(IMAGE_FORMATS)}")
    log.info("wrote %s (%s, %s)", path, fmt, canvas.page.describe())
