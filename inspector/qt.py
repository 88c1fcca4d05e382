"""The one Qt shim: PySide6 first, then pyqtgraph, so pyqtgraph never looks for another binding.

Every Qt-using module of the inspector imports Qt names from here (silx style).
"""

from __future__ import annotations

import os

# pyqtgraph picks the first binding it finds unless told; PySide6 is the one we ship with.
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # noqa: E402
from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402
from PySide6.QtCore import Qt, Signal, Slot  # noqa: E402

__all__ = ["QtCore", "QtGui", "QtWidgets", "Qt", "Signal", "Slot", "pg"]


def plain_tip(text: str | None) -> str | None:
    """`text` as a tooltip shows it, never as rich text: Qt renders a tooltip that looks like HTML
    (a run named `<img src=...>` would load that image), so such text is escaped into a paragraph."""
    if not text or not QtGui.Qt.mightBeRichText(text):
        return text
    import html

    return f"<p style='white-space:pre-wrap'>{html.escape(text)}</p>"
