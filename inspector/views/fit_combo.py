"""A combo box that a layout never squeezes below its current text: its open list shows every item
whole, and the closed box shows the chosen one whole."""

from __future__ import annotations

from inspector.qt import QtCore, QtWidgets


class FitComboBox(QtWidgets.QComboBox):
    """`QComboBox` whose least width holds its current text (and its minimum contents length)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.currentIndexChanged.connect(lambda *_: self.updateGeometry())

    def _text_size(self) -> QtCore.QSize:
        option = QtWidgets.QStyleOptionComboBox()
        self.initStyleOption(option)
        text = QtCore.QSize(self.fontMetrics().horizontalAdvance(self.currentText()) + 2,
                            self.fontMetrics().height())
        return self.style().sizeFromContents(QtWidgets.QStyle.ContentsType.CT_ComboBox, option, text, self)

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 (Qt's name)
        least = super().minimumSizeHint()
        return QtCore.QSize(max(least.width(), self._text_size().width()), least.height())

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 (Qt's name)
        hint = super().sizeHint()
        return QtCore.QSize(max(hint.width(), self._text_size().width()), hint.height())
