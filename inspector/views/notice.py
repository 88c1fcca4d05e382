"""A view's notice: one wrapped grey sentence above its panels, saying why they are hidden or what
was left out."""

from __future__ import annotations

from inspector.qt import QtWidgets


class Notice(QtWidgets.QLabel):
    """Hidden until `say` gives it a sentence."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setStyleSheet("color: #505050; padding: 4px;")
        self.hide()

    def say(self, text: str | None, panels: QtWidgets.QWidget, blank: bool = True) -> None:
        """Show `text` (None hides the notice); `blank` also hides `panels`, which would show
        something else than the text says."""
        self.setVisible(bool(text))
        self.setText(text or "")
        panels.setVisible(not (text and blank))
