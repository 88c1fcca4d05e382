"""What the side-by-side figure's differences look like (the colours of the map and the strip) and its
key: an entry for each mark the figure draws for the pair shown, in the order a reader meets them
(the map's colours, its markers, the strip's, the lines and bands of the curves), each swatch drawn
as the mark is.

Nothing is keyed that is not drawn: a kind of difference absent from the map, a ○ with no first
bitwise difference, the selected position on a page (none is selected there). The ★ says what it
marks: the proven cause, or without a proof the first difference.
"""

from __future__ import annotations

import numpy as np

from inspector.figure_data.pair import CELL_KINDS, EXPERTS, KEPT_SET, NOT_COMPARED, ROUTER_LOGITS, WEIGHTS
from inspector.figures import key
from inspector.figures.divergence_text import A_COLOR, B_COLOR
from inspector.figures.marks import MarkSample
from inspector.figures.style import colormap
from inspector.qt import QtCore, QtGui, pg

#: RGB of each difference kind in the layer x position map (index = code of CELL_KINDS); the strip
#: draws "experts differ" and "not compared" in the same colours.
KIND_COLORS = np.array([(246, 246, 246), (253, 212, 158), (252, 141, 89), (215, 48, 31), (106, 81, 163),
                        (200, 200, 200)], dtype=np.uint8)
#: RGB of the strip: nothing, the row's event, not compared.
STRIP_COLORS = {"none": (250, 250, 250), "not compared": tuple(int(c) for c in KIND_COLORS[-1])}
STRIP_EVENT_COLORS = (tuple(int(c) for c in KIND_COLORS[EXPERTS]),
                      tuple(int(A_COLOR[i:i + 2], 16) for i in (1, 3, 5)),
                      tuple(int(B_COLOR[i:i + 2], 16) for i in (1, 3, 5)))


def kinds_rgb(kinds: np.ndarray) -> np.ndarray:
    """[L, T, 3] uint8 image of a [L, T] map of difference-kind codes."""
    return KIND_COLORS[np.asarray(kinds, dtype=np.int64)]


def strip_rgb(strip: np.ndarray) -> np.ndarray:
    """[3, T, 3] uint8 image of the [3, T] strip (1 event, 0 none, -1 not compared)."""
    out = np.empty((*strip.shape, 3), dtype=np.uint8)
    out[...] = STRIP_COLORS["none"]
    for i, rgb in enumerate(STRIP_EVENT_COLORS):
        out[i][strip[i] == 1] = rgb
    out[strip == -1] = STRIP_COLORS["not compared"]
    return out


#: The band of positions whose values were not recorded (a serving engine's prompt): hatched.
NOT_RECORDED_BRUSH = (QtGui.QColor(120, 120, 120), QtCore.Qt.BrushStyle.BDiagPattern)


def not_recorded_brush() -> QtGui.QBrush:
    """The hatching of positions whose values were not recorded."""
    colour, pattern = NOT_RECORDED_BRUSH
    return QtGui.QBrush(colour, pattern)


def _rgb(c) -> QtGui.QColor:
    return QtGui.QColor(int(c[0]), int(c[1]), int(c[2]))


def _pen(item) -> QtGui.QPen:
    """The pen an item draws with (a curve's, or a vertical line's)."""
    return QtGui.QPen(item.pen) if isinstance(item, pg.InfiniteLine) else pg.mkPen(item.opts["pen"])


def pair_key(figure, style) -> key.Key:
    """The key of `figure` (a `PairFigure` showing its data): what its panels draw now."""
    data = figure.data
    out = key.Key(style, scale=0.9)
    present = set(np.unique(data.kinds).tolist())
    heatmaps = (figure.heat_a, figure.heat_b)
    cell = colormap(style.colormap).map(0.45, mode="qcolor")
    if any(h.kept.x.size for h in heatmaps):
        out.add(MarkSample(figure.heat_a.kept, cell), "kept")
    dropped = next((h for h in heatmaps if h.dropped.x.size), None)
    if dropped is not None:
        out.add(MarkSample([dropped.dropped_outline, dropped.dropped], cell), "dropped")
    if any(h.boundary.isVisible() for h in heatmaps):
        out.add(key.vertical_line(_pen(figure.heat_a.boundary)), "prompt | generation")
    strip = data.strip()
    for code, text in ((ROUTER_LOGITS, "router logits differ"), (WEIGHTS, "weights differ"),
                       (KEPT_SET, "kept set differs"), (EXPERTS, "experts differ")):
        if code in present or (code == EXPERTS and (strip[0] == 1).any()):
            out.add(key.square(_rgb(KIND_COLORS[code])), text)
    for row, (colour, text) in enumerate(((A_COLOR, "dropped in A only"), (B_COLOR, "dropped in B only")), 1):
        if (strip[row] == 1).any():
            out.add(key.square(colour), text)
    if NOT_COMPARED in present:
        out.add(key.square(_rgb(KIND_COLORS[NOT_COMPARED])), CELL_KINDS[NOT_COMPARED])
    if len(figure.event_mark.data):
        what = "proven cause" if data.cause.proven else "first difference (no proof)"
        out.add(key.symbol(figure.event_mark), what)
    if len(figure.root_mark.data):
        out.add(key.symbol(figure.root_mark), "first bitwise difference")
    if figure.first_marks.x.size:
        x, y = figure.first_marks.cells()  # the swatch's cell in the colour the first one is drawn
        fill = _rgb(KIND_COLORS[int(data.kinds[int(y[0]), int(x[0])])])
        out.add(MarkSample(figure.first_marks, fill), "first differing decision")
    if data.t_star >= 0:
        out.add(key.vertical_line(_pen(figure.t_star_lines[0])), "t* (the tokens split)")
    if figure.selected_lines[0].isVisible():
        out.add(key.vertical_line(_pen(figure.selected_lines[0])), "selected position")
    for curve, text in ((figure.kl_curve, "KL(A‖B)"), (figure.diff_curve, "max |logit difference|"),
                        (figure.margin_curve, "A's top-2 logit margin"),
                        (figure.drops_a, "A's drops"),
                        (figure.drops_b, "B's drops")):
        if curve.xData is not None and np.isfinite(curve.yData).any():
            out.add(key.line(_pen(curve)), text)
    if any(r.isVisible() for r in figure.not_recorded):
        out.add(key.region(not_recorded_brush()), "not recorded")
    return out
