"""A log-scale axis labelled at powers of ten (and 2x, 5x of them where few are in view), in one
notation per axis: decimals where every label reads short as one (0.01, 1, 10), else powers of
ten throughout (10⁻⁶, 10⁻⁴, 0.01 never side by side)."""

from __future__ import annotations

import math

from inspector.figures.axes import VERTICAL_OVERHANG_PX, ReadableAxis
from inspector.qt import QtGui

#: Mantissas a log axis is labelled at, from the sparsest: powers of ten, then more of each decade.
MANTISSAS = ((1,), (1, 2, 5), (1, 2, 3, 5, 7), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9))
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class DecadeAxis(ReadableAxis):
    """A log-scale axis labelled at powers of ten, every one or every few (at most about four
    labels in a short panel); where fewer than three powers of ten are in view, at 2x and 5x them,
    then at more values of each decade, so that the axis always labels three ticks."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        if not self.logMode:
            return super().tickValues(minVal, maxVal, size)
        lo, hi = sorted((minVal, maxVal))
        if size <= 0 or hi <= lo:
            return []
        metrics = QtGui.QFontMetricsF(self.style.get("tickFont") or QtGui.QFont())
        label = metrics.height() * 0.8 + 1  # a label's ink, as pyqtgraph measures it, and a gap
        per = size / (hi - lo)  # pixels per decade
        margin = max(label / 2 - VERTICAL_OVERHANG_PX, 0.0) / per
        best: list[float] = []
        for mantissas in MANTISSAS:
            values = sorted(d + math.log10(m) for d in range(math.floor(lo) - 1, math.ceil(hi) + 1)
                            for m in mantissas)
            values = [v for v in values if lo + margin <= v <= hi - margin]
            if mantissas == (1,):  # every few powers of ten: at most about four labels
                step = max(1, math.ceil(len(values) / 4))
                values = [v for v in values if round(v) % step == 0]
            chosen: list[float] = []
            for v in values:
                if not chosen or (v - chosen[-1]) * per >= label:
                    chosen.append(v)
            if len(chosen) > len(best):
                best = chosen
            if len(best) >= 3:
                break
        return [(1.0, best)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        if not self.logMode:
            return super().tickStrings(values, scale, spacing)
        return decade_labels(values)


def decade_labels(values) -> list[str]:
    """Labels of log10 values in one notation: decimals when each is short as one ("0.001" and up to
    "1000"), else mantissa·10ⁿ for all."""
    decimals = [f"{10 ** v:.2g}" for v in values]
    if all("e" not in d and len(d) <= 5 for d in decimals):
        return decimals
    out = []
    for v in values:
        mantissa, power = f"{10 ** v:.1e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        power = str(int(power)).translate(_SUPERSCRIPT)
        out.append(("" if mantissa == "1" else f"{mantissa}·") + f"10{power}")
    return out
