"""Pixels of rendered figures for the export tests: PNG bytes read by Qt, with white under the
transparent parts (as a page shows them), as numpy arrays."""

import numpy as np


def _on_white(png: bytes):
    """The QImage of `png` drawn over white, in RGB32."""
    from inspector.qt import QtGui

    image = QtGui.QImage.fromData(png)
    assert not image.isNull()
    flat = QtGui.QImage(image.size(), QtGui.QImage.Format.Format_RGB32)
    flat.fill(QtGui.QColor("#ffffff"))
    painter = QtGui.QPainter(flat)
    painter.drawImage(0, 0, image)
    painter.end()
    return flat


def rgb(image) -> np.ndarray:
    """[H, W, 3] uint8 of a QImage."""
    from inspector.qt import QtGui

    image = image.convertToFormat(QtGui.QImage.Format.Format_RGB888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, :image.width() * 3].reshape(image.height(), image.width(), 3).copy()


def png_rgb(png: bytes) -> np.ndarray:
    """[H, W, 3] uint8 of PNG bytes over white."""
    return rgb(_on_white(png))


def png_gray(png: bytes) -> np.ndarray:
    """[H, W] float grayscale of PNG bytes over white."""
    from inspector.qt import QtGui

    gray8 = _on_white(png).convertToFormat(QtGui.QImage.Format.Format_Grayscale8)
    rows = np.frombuffer(gray8.constBits(), np.uint8).reshape(gray8.height(), gray8.bytesPerLine())
    return rows[:, :gray8.width()].astype(np.float64)
