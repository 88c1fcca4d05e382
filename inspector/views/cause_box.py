"""The cause box of the side-by-side view: the whole explanation, at least its headline and sentence
in view without scrolling; the numbers, reruns and who took the slots scroll below them."""

from __future__ import annotations

import math

from inspector.figure_data.divergence_cause import CauseText
from inspector.figures.divergence_text import cause_html
from inspector.figures.style import FigureStyle
from inspector.qt import QtGui, QtWidgets
from inspector.views.glossary import explain


class CauseBox(QtWidgets.QTextBrowser):
    """Read-only rich text of a `CauseText`; `needed_height()` is the height that shows its headline
    and sentence whole at the box's width."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setMinimumHeight(40)
        self._brief = QtGui.QTextDocument(self)   # the headline and sentence alone, to measure
        self._headline = QtGui.QTextDocument(self)  # the headline alone, to measure
        self._headline_only = False
        self._full = self._only = ""

    def show_headline_only(self, only: bool) -> None:
        """Hold the headline alone (a short view: no half line of the sentence under it), or all."""
        if only != self._headline_only:
            self._headline_only = only
            self.setHtml(self._only if only else self._full)
            self.verticalScrollBar().setValue(0)

    def set_cause(self, cause: CauseText, style: FigureStyle) -> None:
        self._full = cause_html(cause, style)
        self.setToolTip(explain(f"{cause.headline} {cause.sentence}"))  # the glossary's words it uses
        self._only = cause_html(cause, style, brief="headline")
        self.setHtml(self._only if self._headline_only else self._full)
        self._brief.setDefaultFont(self.document().defaultFont())
        self._brief.setDocumentMargin(self.document().documentMargin())
        self._brief.setHtml(cause_html(cause, style, brief="sentence"))
        self._headline.setDefaultFont(self.document().defaultFont())
        self._headline.setDocumentMargin(self.document().documentMargin())
        self._headline.setHtml(cause_html(cause, style, brief="headline"))
        self.verticalScrollBar().setValue(0)

    def clear_cause(self) -> None:
        self._full = self._only = ""
        self.clear()
        self._brief.clear()
        self._headline.clear()

    def needed_height(self, width: int | None = None, headline_only: bool = False) -> int:
        """Outer height that shows the headline and sentence (`headline_only`: the headline) without
        scrolling at outer width `width` (now: the box's), leaving room for the scroll bar the rest
        of the text needs."""
        width = self.width() if width is None else width
        frame = 2 * self.frameWidth()
        bar = self.style().pixelMetric(QtWidgets.QStyle.PixelMetric.PM_ScrollBarExtent)
        doc = self._headline if headline_only else self._brief
        doc.setTextWidth(max(width - frame - bar, 80))
        return math.ceil(doc.size().height()) + frame + 2

    def brief_text(self) -> str:
        """The headline and sentence as plain text (what `needed_height` measures)."""
        return self._brief.toPlainText()
