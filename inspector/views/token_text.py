"""A read-only text box of tokens: hover and click name the token under the mouse by its position.

The HTML comes from `inspector.figures.divergence_text.completion_html` with the document position
where each token starts; the box maps the character under the mouse back to the token.
"""

from __future__ import annotations

import numpy as np

from inspector.qt import Qt, QtCore, QtGui, QtWidgets, Signal


class TokenText(QtWidgets.QTextBrowser):
    """Shows one run's tokens; `token_clicked(position)` and `token_hovered(position or None)`."""

    token_clicked = Signal(int)
    token_hovered = Signal(object)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setMouseTracking(True)
        self.viewport().setMouseTracking(True)
        self.setMinimumHeight(40)
        self.offsets = np.zeros(1, dtype=np.int64)   # [n + 1] document position of each token
        self.positions = np.zeros(0, dtype=np.int64)  # [n] sequence position of each token
        self._press: QtCore.QPoint | None = None

    def set_tokens(self, html: str, offsets: np.ndarray, positions: np.ndarray,
                   scroll_to: int | None = None) -> None:
        """Show `html`; with `scroll_to`, open at the start, or (when the token at sequence position
        `scroll_to` is out of view from there) at the start of the line before its line; else keep
        the scroll."""
        bar = self.verticalScrollBar()
        kept = bar.value()
        self.setHtml(html)
        self.offsets, self.positions = np.asarray(offsets), np.asarray(positions)
        if scroll_to is not None and np.any(self.positions == scroll_to):
            self.show_token(scroll_to)
        else:
            bar.setValue(kept)

    def show_token(self, position: int) -> None:
        """Scroll by whole lines: to the top when the token at `position` is in view from there, else
        so that the line before the token's comes first."""
        bar = self.verticalScrollBar()
        bar.setValue(0)
        rect = self.token_rect(position)
        if rect.bottom() < self.viewport().height():
            return
        tops = self.line_tops()
        line = max(int(np.searchsorted(tops, rect.top() + 0.5, side="right")) - 1, 0)
        bar.setValue(int(tops[max(line - 1, 0)]))

    def line_tops(self) -> np.ndarray:
        """Document y of the top of every laid-out line, in order."""
        layout = self.document().documentLayout()
        tops = []
        block = self.document().begin()
        while block.isValid():
            top = layout.blockBoundingRect(block).top()
            lines = block.layout()
            tops += [top + lines.lineAt(i).y() for i in range(lines.lineCount())]
            block = block.next()
        return np.asarray(tops, dtype=np.float64)

    # -- where tokens are -------------------------------------------------------------------------

    def token_at_char(self, char: int) -> int | None:
        """Sequence position of the token holding document position `char`, or None."""
        if self.positions.size == 0 or char < self.offsets[0] or char >= self.offsets[-1]:
            return None
        i = int(np.searchsorted(self.offsets, char, side="right") - 1)
        return int(self.positions[i]) if 0 <= i < self.positions.size else None

    def token_at(self, point: QtCore.QPoint) -> int | None:
        """Sequence position of the token under viewport point `point`, or None."""
        doc = QtCore.QPointF(point.x() + self.horizontalScrollBar().value(),
                             point.y() + self.verticalScrollBar().value())
        char = self.document().documentLayout().hitTest(doc, Qt.HitTestAccuracy.ExactHit)
        return self.token_at_char(char) if char >= 0 else None

    def token_rect(self, position: int) -> QtCore.QRect:
        """Viewport rectangle of the start of the token at sequence `position` (for tests and scrolling)."""
        i = int(np.flatnonzero(self.positions == position)[0])
        cursor = QtGui.QTextCursor(self.document())
        cursor.setPosition(int(self.offsets[i]))
        return self.cursorRect(cursor)

    def positions_with_background(self, color: str) -> list[int]:
        """Sequence positions of the tokens drawn on background `color`, in text order."""
        target = QtGui.QColor(color)
        found: list[int] = []
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                brush = fragment.charFormat().background()
                if brush.style() != Qt.BrushStyle.NoBrush and brush.color() == target:
                    for char in range(fragment.position(), fragment.position() + fragment.length()):
                        t = self.token_at_char(char)
                        if t is not None and t not in found:
                            found.append(t)
                it += 1
            block = block.next()
        return found

    # -- mouse ----------------------------------------------------------------------------------

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().mouseMoveEvent(event)
        self.token_hovered.emit(self.token_at(event.position().toPoint()))

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().mousePressEvent(event)
        self._press = event.position().toPoint()

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().mouseReleaseEvent(event)
        point = event.position().toPoint()
        dragged = self._press is not None and (point - self._press).manhattanLength() > 4
        self._press = None
        if event.button() == Qt.MouseButton.LeftButton and not dragged:
            t = self.token_at(point)
            if t is not None:
                self.token_clicked.emit(t)

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().leaveEvent(event)
        self.token_hovered.emit(None)
