"""Hover text under the mouse, shown in a line below a figure and as a tooltip."""

from __future__ import annotations

from collections.abc import Callable

from inspector.qt import QtCore, QtGui, QtWidgets, pg


class HoverLine(QtWidgets.QLabel):
    """A one-to-several-line label holding the description of what is under the mouse."""

    def __init__(self, hint: str, parent: QtWidgets.QWidget | None = None, lines: int = 2) -> None:
        super().__init__(parent)
        self.hint = hint
        self.setTextFormat(QtCore.Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        font = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)
        self.setFont(font)
        self.setStyleSheet("color: #303030; background: #f4f4f4; padding: 3px;")
        self.setMinimumHeight(QtGui.QFontMetrics(font).height() * lines + 8)
        self.setAlignment(QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop)
        self.setWordWrap(True)  # a long description wraps instead of widening the window
        self.show_text(None)

    def show_text(self, text: str | None) -> None:
        self.setText(" · ".join(text.splitlines()) if text else self.hint)


def connect_hover(widget: pg.GraphicsLayoutWidget, plot: pg.PlotItem,
                  describe: Callable[[float, float], str | None], line: HoverLine,
                  on_click: Callable[[float, float], None] | None = None) -> None:
    """Show `describe(x, y)` (data coordinates of `plot`) for the mouse position; call `on_click`."""

    def moved(scene_pos) -> None:
        if not plot.vb.sceneBoundingRect().contains(scene_pos):
            line.show_text(None)
            QtWidgets.QToolTip.hideText()
            return
        p = plot.vb.mapSceneToView(scene_pos)
        text = describe(p.x(), p.y())
        line.show_text(text)
        if text:
            QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), text, widget)
        else:
            QtWidgets.QToolTip.hideText()

    def clicked(event) -> None:
        if on_click is None or event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        if plot.vb.sceneBoundingRect().contains(event.scenePos()):
            p = plot.vb.mapSceneToView(event.scenePos())
            on_click(p.x(), p.y())

    widget.scene().sigMouseMoved.connect(moved)
    widget.scene().sigMouseClicked.connect(clicked)
