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


def _steps(start: int) -> list[int]:
    """Integer steps from `start` down to 1: the {1, 2, 5} x 10^n ones and, between them, 3, 4, 6,
    8, 15, 25, 30, 40... (used only when the nice ones leave fewer than three labels)."""
    out = set()
    for k in range(0, 8):
        for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8):
            v = m * 10 ** k
            if v == int(v) and v <= start:
                out.add(int(v))
    return sorted(out, reverse=True)


def digits_height(metrics: QtGui.QFontMetricsF) -> float:
    """The least distance between two labels of digits one above the other: their ink (no
    descenders) and a gap."""
    return metrics.capHeight() + 3


#: An axis of this many categories or fewer (experts, layers, runs) labels every one where each has
#: room for its label; above it, a regular subset.
LABEL_EVERY_UP_TO = 16
#: The fewest labelled ticks an axis shows when its range holds that many values.
MIN_TICKS = 3
#: How far (pixels) an end label of a vertical axis may stick out of the axis.
VERTICAL_OVERHANG_PX = 6.0


def integer_ticks(lo: float, hi: float, px_per_unit: float, gap_px: float, label_px: float,
                  valid=None, overhang_px: float = 0.0) -> tuple[int, list[float]]:
    """(step, values) of an axis of integers over [lo, hi] shown `px_per_unit` pixels per unit:
    the smallest {1, 2, 5} x 10^n step at least `gap_px` apart; when that leaves fewer than
    MIN_TICKS values, the largest step (nice or not) giving MIN_TICKS values at least `label_px`
    apart. Values whose label (`label_px` long along the axis) would stick out of the axis's ends
    by more than `overhang_px` are not counted (pyqtgraph leaves those of a horizontal axis out;
    a vertical one's would run into the panel above or below). `valid(v)`: whether integer v has
    a label."""
    if px_per_unit <= 0 or hi <= lo:
        return 1, []
    margin = max(label_px / 2 - overhang_px, 0.0) / px_per_unit

    def values(step: int) -> list[float]:
        first = math.ceil((lo + margin) / step) * step
        return [float(v) for v in range(int(first), int(math.floor(hi - margin)) + 1, step)
                if valid is None or valid(v)]

    nice = nice_step(gap_px / px_per_unit)
    found = values(nice)
    if len(found) >= MIN_TICKS or nice == 1:
        return nice, found
    best = (nice, found)
    for step in _steps(nice):
        if step * px_per_unit < label_px:
            break
        got = values(step)
        if len(got) > len(best[1]):
            best = (step, got)
        if len(got) >= MIN_TICKS:
            return step, got
    return best


class ReadableAxis(pg.AxisItem):
    """An axis whose end labels may stick out of a vertical axis by VERTICAL_OVERHANG_PX also when
    the plot shows grid lines (pyqtgraph then leaves out every label not wholly inside the axis)."""

    def overhang(self) -> tuple[float, float]:
        """How far labels may stick out of a vertical axis at its top and at its bottom."""
        return (VERTICAL_OVERHANG_PX, VERTICAL_OVERHANG_PX) if self.grid is not False else (0.0, 0.0)

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt's name)
        rect = super().boundingRect()
        if self.orientation in ("left", "right"):
            top, bottom = self.overhang()
            rect = rect.adjusted(0, -top, 0, bottom)
        return rect


class CategoryAxis(ReadableAxis):
    """An axis whose integer ticks carry labels (`labels[i]` at i), thinned to stay readable.

    With `labels` empty, integers are written as numbers.
    """

    def __init__(self, orientation: str, labels: Sequence[str] = (), min_gap_px: float | None = None,
                 every_up_to: int = LABEL_EVERY_UP_TO, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self._labels = [_cut(s) for s in labels]
        self._min_gap_px = min_gap_px
        self.every_up_to = every_up_to  # this many categories or fewer: each labelled where it fits
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
            return self._min_gap_px or self._label_px() + 2
        if show_labels and self._labels:
            return max(self._widest_label(font), metrics.horizontalAdvance("000")) + 8
        return self._min_gap_px or metrics.horizontalAdvance("00000") + 10

    def label_spacing(self, min_val: float, max_val: float, size: float) -> int:
        """Integer spacing between labelled ticks for a view of [min_val, max_val] over `size` px."""
        if size <= 0 or max_val <= min_val:
            return 1
        px_per_unit = size / (max_val - min_val)
        return nice_step(self._gap_px(True) / px_per_unit)

    def _label_px(self) -> float:
        """Length of a tick label along the axis, in pixels."""
        metrics = QtGui.QFontMetricsF(self.style.get("tickFont") or QtGui.QFont())
        if self.orientation in ("left", "right"):
            return digits_height(metrics) if all(s.isdigit() for s in self._labels) else metrics.height()
        return max(self._widest_label(self.style.get("tickFont") or QtGui.QFont()),
                   metrics.horizontalAdvance("000")) + 2

    def _category_px(self) -> float:
        """The least room along the axis a category needs for its own label: the label and a gap."""
        if self.orientation in ("left", "right"):
            return self._label_px() + 1
        return self._widest_label(self.style.get("tickFont") or QtGui.QFont()) + 6

    def labels_every(self, px_per_unit: float) -> bool:
        """Whether every category is labelled at `px_per_unit` pixels per category: up to
        `every_up_to` categories, where each has room for its label."""
        return bool(self._labels) and len(self._labels) <= self.every_up_to and \
            px_per_unit >= self._category_px()

    def needed_px(self) -> float:
        """The length along the axis at which every category is labelled (0: not asked for)."""
        if not self._labels or len(self._labels) > self.every_up_to:
            return 0.0
        return len(self._labels) * self._category_px()

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        minVal, maxVal = sorted((minVal, maxVal))  # an inverted axis passes them reversed
        if size <= 0 or maxVal <= minVal:
            return []
        px_per_unit = size / (maxVal - minVal)
        if self.labels_every(px_per_unit):
            first, last = max(math.ceil(minVal), 0), min(math.floor(maxVal), len(self._labels) - 1)
            return [(1.0, [float(v) for v in range(first, last + 1)])]
        valid = (lambda v: 0 <= v < len(self._labels)) if self._labels else None
        overhang = VERTICAL_OVERHANG_PX if self.orientation in ("left", "right") else 0.0
        step, values = integer_ticks(minVal, maxVal, px_per_unit, self._gap_px(True), self._label_px(), valid,
                                     overhang)
        return [(float(step), values)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        out = []
        for v in values:
            i = int(round(v))
            out.append(self._labels[i] if 0 <= i < len(self._labels) else str(i))
        return out


class TokenAxis(CategoryAxis):
    """Positions on x: token text when each position is at least one character wide (longer tokens
    elided to fit), with position numbers on a second row under it at a readable spacing; else
    position numbers alone."""

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
        if spacing > 1 or not self._labels or not self.shows_text():
            return [str(int(round(v))) for v in values]
        metrics = self._metrics()
        room = max(self._px_per_unit - 4, 1.0)
        out = []
        for v in values:
            i = int(round(v))
            text = self._labels[i] if 0 <= i < len(self._labels) else ""
            out.append(metrics.elidedText(text, QtCore.Qt.TextElideMode.ElideRight, room))
        return out

    def _numbers(self, lo: float, hi: float) -> list[float]:
        """Positions numbered along the axis: at least three, none sticking out of its ends."""
        metrics = self._metrics()
        label_px = metrics.horizontalAdvance(str(max(int(hi), 0))) + 4
        gap = max(self._min_gap_px or 0.0, label_px + metrics.horizontalAdvance("00"))
        n = len(self._labels)
        valid = (lambda v: 0 <= v < n) if n else (lambda v: v >= 0)
        return integer_ticks(lo, hi, self._px_per_unit, gap, label_px, valid)[1]

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        minVal, maxVal = sorted((minVal, maxVal))  # an inverted axis passes them reversed
        if size <= 0 or maxVal <= minVal:
            return []
        step = self.label_spacing(minVal, maxVal, size)
        n = len(self._labels)
        if step == 1 and self.shows_text():
            first = max(math.ceil(minVal), 0)
            last = min(math.floor(maxVal), n - 1)
            return [(1.0, [float(v) for v in range(int(first), int(last) + 1)])]
        values = self._numbers(minVal, maxVal)
        return [(float(values[1] - values[0]) if len(values) > 1 else 1.0, values)]

    def generateDrawSpecs(self, p):  # noqa: N802 (pyqtgraph's name)
        """pyqtgraph's labels, and under token text a second row numbering the positions: a cell
        named in the text (the cause's "position 28") is found without counting."""
        specs = super().generateDrawSpecs(p)
        if specs is None or not self.shows_text() or self.orientation != "bottom" or \
                not self.style["showValues"]:
            return specs
        axis_spec, tick_specs, text_specs = specs
        if not text_specs:
            return specs
        top = min(rect.top() for rect, _flags, _text in text_specs)
        row = max(rect.height() for rect, _flags, _text in text_specs)
        lo, hi = sorted(self.range)
        metrics = self._metrics()
        bounds = self.mapRectFromParent(self.geometry())
        scale = bounds.width() / (hi - lo)
        flags = QtCore.Qt.AlignmentFlag.AlignHCenter | QtCore.Qt.AlignmentFlag.AlignTop | \
            QtCore.Qt.TextFlag.TextDontClip
        numbers = []
        for v in self._numbers(lo, hi):
            text = str(int(v))
            width = metrics.horizontalAdvance(text) + 2
            rect = QtCore.QRectF((v - lo) * scale - width / 2, top + row, width, row)
            if bounds.contains(rect):
                numbers.append((rect, flags, text))
        return axis_spec, tick_specs, [*text_specs, *numbers]

    def _updateMaxTextSize(self, x) -> None:  # noqa: N802 (pyqtgraph's name)
        """Room for the numbers' row under the token text."""
        two_rows = self.orientation == "bottom" and self.shows_text() and self.style["showValues"]
        super()._updateMaxTextSize(2 * x if two_rows else x)


class CountAxis(ReadableAxis):
    """An axis of counts: ticks at whole numbers only ({1, 2, 5} x 10^n apart), never at 0.5, and
    0 always labelled where the axis starts at it (its label may stick out below a vertical axis
    by half its height, into the corner under it)."""

    def __init__(self, orientation: str = "left", **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def _label_height(self) -> float:
        return digits_height(QtGui.QFontMetricsF(self.style.get("tickFont") or QtGui.QFont()))

    def overhang(self) -> tuple[float, float]:
        top, bottom = super().overhang()
        return top, max(bottom, self._label_height() / 2 + 1)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        minVal, maxVal = sorted((minVal, maxVal))
        if size <= 0 or maxVal <= minVal:
            return []
        metrics = QtGui.QFontMetricsF(self.style.get("tickFont") or QtGui.QFont())
        vertical = self.orientation in ("left", "right")
        label = self._label_height() if vertical else metrics.horizontalAdvance(str(int(maxVal))) + 4
        gap = metrics.height() * 1.6 if vertical else max(40.0, label + 8)
        per = size / (maxVal - minVal)
        step, values = integer_ticks(minVal, maxVal, per, gap, label,
                                     overhang_px=VERTICAL_OVERHANG_PX if vertical else 0.0)
        positive = [v for v in values if v > 0]
        room = not positive or positive[0] * per >= label
        if vertical and minVal <= 0 <= maxVal and 0.0 not in values and room:
            values = [0.0, *positive]
        return [(float(step), values)]

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
