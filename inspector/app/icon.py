"""The app icon, drawn in code: a small routing heatmap with a kept frame and a dropped cross."""

from __future__ import annotations

from inspector.qt import QtCore, QtGui

# Cell colours of a 4 x 4 heatmap (viridis-like), row by row.
_CELLS = ("#440154", "#31688e", "#35b779", "#fde725",
          "#31688e", "#fde725", "#440154", "#21918c",
          "#35b779", "#21918c", "#3b528b", "#440154",
          "#fde725", "#440154", "#21918c", "#5ec962")


def icon_pixmap(size: int = 256) -> QtGui.QPixmap:
    """The icon at `size` x `size` pixels."""
    pixmap = QtGui.QPixmap(size, size)
    pixmap.fill(QtCore.Qt.GlobalColor.transparent)
    p = QtGui.QPainter(pixmap)
    p.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
    margin, cell = size * 0.06, size * 0.22
    p.setBrush(QtGui.QColor("#1e1e28"))
    p.setPen(QtCore.Qt.PenStyle.NoPen)
    p.drawRoundedRect(QtCore.QRectF(0, 0, size, size), size * 0.12, size * 0.12)
    for i, color in enumerate(_CELLS):
        r, c = divmod(i, 4)
        p.setBrush(QtGui.QColor(color))
        p.drawRect(QtCore.QRectF(margin + c * cell, margin + r * cell, cell * 0.94, cell * 0.94))
    frame = QtGui.QPen(QtGui.QColor("white"), size * 0.03)
    p.setPen(frame)
    p.setBrush(QtCore.Qt.BrushStyle.NoBrush)
    p.drawRect(QtCore.QRectF(margin + 1 * cell, margin + 1 * cell, cell * 0.94, cell * 0.94))
    cross = QtGui.QPen(QtGui.QColor("#e8101a"), size * 0.05)
    cross.setCapStyle(QtCore.Qt.PenCapStyle.RoundCap)
    p.setPen(cross)
    x0, y0 = margin + 3 * cell + cell * 0.15, margin + 0 * cell + cell * 0.15
    d = cell * 0.64
    p.drawLine(QtCore.QPointF(x0, y0), QtCore.QPointF(x0 + d, y0 + d))
    p.drawLine(QtCore.QPointF(x0, y0 + d), QtCore.QPointF(x0 + d, y0))
    p.end()
    return pixmap


def app_icon() -> QtGui.QIcon:
    icon = QtGui.QIcon()
    for size in (16, 32, 64, 128, 256):
        icon.addPixmap(icon_pixmap(size))
    return icon
