"""Axes with integer categories: token text on positions when zoomed in, names on experts/layers."""

from __future__ import annotations

import math
from collections.abc import Sequence

from inspector.qt import QtCore, QtGui, pg

_NICE = (1, 2, 5)
_MAX_LABEL = 12  # characters of a tick label; longer tokens are cut with an ellipsis


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


def nice_step(min_step: float) -> int:
    """Smallest integer of the form {1, 2, 5} x 10^n that is at least `min_step`."""
    if min_step <= 1:
        return 1
    exp = 10 ** math.floor(math.log10(min_step))
    for m in _NICE:
        if m * exp >= min_step:
            return int(m * exp)
    return int(10 * exp)


class CategoryAxis(pg.AxisItem):
    """An axis whose integer ticks carry labels (`labels[i]` at i), thinned to stay readable.

    With `labels` empty, integers are written as numbers.
    """

    def __init__(self, orientation: str, labels: Sequence[str] = (), min_gap_px: float | None = None,
                 **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self._labels = [_cut(s) for s in labels]
        self._min_gap_px = min_gap_px
        self._widest: dict[str, float] = {}  # font key -> widest label in px
        self.enableAutoSIPrefix(False)

    def set_labels(self, labels: Sequence[str]) -> None:
        self._labels = [_cut(s) for s in labels]
        self._widest = {}
        self.picture = None
        self.update()

    @property
    def labels(self) -> list[str]:
        return list(self._labels)

    def _widest_label(self, font: QtGui.QFont) -> float:
        key = font.key()
        if key not in self._widest:
            metrics = QtGui.QFontMetricsF(font)
            self._widest[key] = max((metrics.horizontalAdvance(s) for s in self._labels), default=0.0)
        return self._widest[key]

    def _gap_px(self, show_labels: bool) -> float:
        font = self.style.get("tickFont") or QtGui.QFont()
        metrics = QtGui.QFontMetricsF(font)
        if self.orientation in ("left", "right"):
            return self._min_gap_px or metrics.height() + 2
        if show_labels and self._labels:
            return max(self._widest_label(font), metrics.horizontalAdvance("000")) + 8
        return self._min_gap_px or metrics.horizontalAdvance("00000") + 10

    def label_spacing(self, min_val: float, max_val: float, size: float) -> int:
        """Integer spacing between labelled ticks for a view of [min_val, max_val] over `size` px."""
        if size <= 0 or max_val <= min_val:
            return 1
        px_per_unit = size / (max_val - min_val)
        return nice_step(self._gap_px(True) / px_per_unit)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        minVal, maxVal = sorted((minVal, maxVal))  # an inverted axis passes them reversed
        if size <= 0 or maxVal <= minVal:
            return []
        step = self.label_spacing(minVal, maxVal, size)
        first = math.ceil(minVal / step) * step
        last = math.floor(maxVal)
        values = [float(v) for v in range(int(first), int(last) + 1, step)
                  if not self._labels or 0 <= v < len(self._labels)]
        return [(float(step), values)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        out = []
        for v in values:
            i = int(round(v))
            out.append(self._labels[i] if 0 <= i < len(self._labels) else str(i))
        return out


class TokenAxis(CategoryAxis):
    """Positions on x: token text when each position is at least one character wide (longer tokens
    elided to fit), else position numbers at a readable spacing."""

    def __init__(self, orientation: str = "bottom", labels: Sequence[str] = (), **kwargs) -> None:
        super().__init__(orientation, labels, **kwargs)
        self._px_per_unit = 0.0

    def _metrics(self) -> QtGui.QFontMetricsF:
        return QtGui.QFontMetricsF(self.style.get("tickFont") or QtGui.QFont())

    def shows_text(self) -> bool:
        """Whether the last layout gave each position room for token text."""
        return bool(self._labels) and self._px_per_unit >= self._metrics().horizontalAdvance("0") + 5

    def label_spacing(self, min_val: float, max_val: float, size: float) -> int:
        if size <= 0 or max_val <= min_val:
            return 1
        self._px_per_unit = size / (max_val - min_val)
        if self.shows_text():
            return 1
        return max(nice_step(self._gap_px(False) / self._px_per_unit), 2 if self._labels else 1)

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        if spacing > 1 or not self._labels:
            return [str(int(round(v))) for v in values]
        metrics = self._metrics()
        room = max(self._px_per_unit - 4, 1.0)
        out = []
        for v in values:
            i = int(round(v))
            text = self._labels[i] if 0 <= i < len(self._labels) else ""
            out.append(metrics.elidedText(text, QtCore.Qt.TextElideMode.ElideRight, room))
        return out

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        minVal, maxVal = sorted((minVal, maxVal))  # an inverted axis passes them reversed
        if size <= 0 or maxVal <= minVal:
            return []
        step = self.label_spacing(minVal, maxVal, size)
        first = max(math.ceil(minVal / step) * step, 0)
        last = math.floor(maxVal)
        if self._labels:
            last = min(last, len(self._labels) - 1)
        return [(float(step), [float(v) for v in range(int(first), int(last) + 1, step)])]


class CountAxis(pg.AxisItem):
    """An axis of counts: ticks at whole numbers only ({1, 2, 5} x 10^n apart), never at 0.5."""

    def __init__(self, orientation: str = "left", **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        minVal, maxVal = sorted((minVal, maxVal))
        if size <= 0 or maxVal <= minVal:
            return []
        font = self.style.get("tickFont") or QtGui.QFont()
        gap = QtGui.QFontMetricsF(font).height() * 1.6 if self.orientation in ("left", "right") else 40.0
        step = nice_step(gap / (size / (maxVal - minVal)))
        first = math.ceil(minVal / step) * step
        return [(float(step), [float(v) for v in range(int(first), int(math.floor(maxVal)) + 1, step)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        return [str(int(round(v))) for v in values]


class XZoomViewBox(pg.ViewBox):
    """A view box whose mouse wheel zooms the x axis alone (positions, or experts of a bar chart);
    with Shift held it zooms both axes, as a plain view box does."""

    def wheelEvent(self, ev, axis=None):  # noqa: N802 (pyqtgraph's name)
        shift = bool(ev.modifiers() & QtCore.Qt.KeyboardModifier.ShiftModifier)
        super().wheelEvent(ev, axis=axis if shift or axis is not None else 0)

    def linkedViewChanged(self, view, axis):  # noqa: N802 (pyqtgraph's name)
        """A panel x-linked to another shows the same positions, whatever its width or place
        (pyqtgraph lines overlapping views up pixel by pixel instead: a panel wider or narrower
        than the one it follows would show more or fewer positions)."""
        if axis != pg.ViewBox.XAxis or self.linksBlocked or view is None:
            return super().linkedViewChanged(view, axis)
        view.blockLink(True)
        try:
            self.enableAutoRange(pg.ViewBox.XAxis, False)
            self.setXRange(*view.viewRange()[0], padding=0)
        finally:
            view.blockLink(False)
