"""Drawing an exported figure: the view's own figure builder, given the selection's range and
colours, plus what a figure on paper needs that the view says around it (a legend of its marks).
`inspector.specs.registry` names one of these builders for each view.

Each builder takes a layout level `fit`: 0 is the fullest; a higher one stacks panels (or moves a
key under its plot), then leaves a secondary panel out (listed in the figure's `left_out`, which an
export's caption file names: no text about the app is drawn on a figure), for a page too small for
the fuller one."""

from __future__ import annotations

from inspector.figures import key as swatches
from inspector.figures.key import Key
from inspector.figures.layers import LayersFigure
from inspector.figures.load import LoadFigure
from inspector.figures.marks import MarkSample
from inspector.figures.pair import PairFigure
from inspector.figures.routing import RoutingFigure
from inspector.figures.runs import RunsFigure
from inspector.figures.style import FigureStyle, colormap
from inspector.figures.text import TextFigure
from inspector.qt import QtCore, QtGui, pg
from inspector.specs.selection import Selection


def show_positions(plot: pg.PlotItem, n_positions: int, n_rows: int, sel: Selection) -> None:
    """Show positions [T0, T1) of the selection (all by default) and every row of the image."""
    t0, t1 = sel.positions(n_positions)
    plot.vb.setRange(xRange=(t0 - 0.5, t1 - 0.5), yRange=(-0.5, n_rows - 0.5), padding=0)


def marks_key(style: FigureStyle, dropped_marks, kept_marks=None, *, dropped: str = "dropped: over capacity",
              boundary_color: str | None = None, fill: str | None = None) -> Key:
    """A key of the heatmap marks, each drawn as the figure draws its marks at their present size (a
    frame or its edges; a red frame with a cross, or a tick), and the prompt | generation line. An
    entry only for marks the figure holds."""
    key = Key(style)
    cell = fill or colormap(style.colormap).map(0.45, mode="qcolor")
    if kept_marks is not None and kept_marks.x.size:
        key.add(MarkSample(kept_marks, cell), "kept")
    marks = dropped_marks if isinstance(dropped_marks, (list, tuple)) else [dropped_marks]
    if marks[-1].x.size:
        key.add(MarkSample(list(marks), cell), dropped)
    pen = pg.mkPen(boundary_color or style.boundary, width=2, style=QtCore.Qt.PenStyle.DashLine)
    key.add(swatches.vertical_line(pen), "prompt | generation")
    return key


def _leave_out(layout: pg.GraphicsLayout, figure, what: str, *items) -> None:
    for item in items:
        layout.removeItem(item)
    figure.left_out = [*getattr(figure, "left_out", []), what]


def title_above(layout: pg.GraphicsLayout, plot: pg.PlotItem, style: FigureStyle, columns: int = 1) -> None:
    """Move `plot`'s title into row 0 of `layout`, over `columns` columns: as wide as the figure,
    it wraps less and never has to split a run's name to fit beside a colour bar or legend."""
    label = plot.titleLabel
    text, opts = label.text, dict(label.opts)
    plot.setTitle(None)
    label.setText("")  # a hidden title still holds the plot as wide as its text
    label.setMinimumWidth(0)
    title = pg.LabelItem(text, color=opts.get("color", style.foreground),
                         size=opts.get("size", f"{style.font_size + 1}pt"))
    layout.addItem(title, row=0, col=0, colspan=columns)


def draw_routing(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
                 fit: int = 0) -> RoutingFigure:
    """The heatmap with its colour bar, the key of its marks under it (left out of a page too short)."""
    figure = RoutingFigure(layout, style, row=1)
    figure.set_colormap(sel.colormap)
    figure.set_data(data)
    figure.set_levels(*sel.levels)
    title_above(layout, figure.plot, style)
    show_positions(figure.plot, data.n_positions, data.n_experts, sel)
    if fit == 0:
        layout.addItem(marks_key(style, [figure.dropped_outline, figure.dropped], figure.kept), row=2, col=0)
    else:
        figure.left_out = ["the key of the marks (white frame = kept, red frame with a ✕ or tick = dropped, "
                           "dashed line = prompt | generation)"]
    return figure


def draw_layers(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
                fit: int = 0) -> LayersFigure:
    """The layer map with the keys of its experts' colours and of its marks under it (the map keeps
    the page's width); on a page too short, the marks' key is left out."""
    figure = LayersFigure(layout, style, row=1, key_below=True)
    figure.set_data(data)
    title_above(layout, figure.plot, style)
    show_positions(figure.plot, data.n_positions, data.n_layers, sel)
    if fit == 0:
        key = marks_key(style, figure.drops, dropped="a candidate dropped", boundary_color=style.foreground,
                        fill="#88ccee")
        layout.addItem(key, row=layout.layout.rowCount(), col=0)
    else:
        figure.left_out = ["the key of the marks (red ✕ or tick = a candidate dropped, dashed line = "
                           "prompt | generation)"]
    return figure


def draw_load(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> LoadFigure:
    figure = LoadFigure(layout, style)
    figure.set_data(data)
    if fit > 0:
        _leave_out(layout, figure, "the panel of who filled the buffers (the load CSV holds it)",
                   figure.shares, figure.shares_legend)
        # The key under the plot, its entries side by side: the plot gets the page's width.
        layout.removeItem(figure.totals_legend)
        figure.totals_legend.max_columns = 3
        layout.addItem(figure.totals_legend, row=1, col=0)
    return figure


def draw_text(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> TextFigure:
    figure = TextFigure(layout, style)
    figure.set_data(data, sel.shade, sel.layer)
    return figure


#: The pair figure's layouts, fullest first: (completions, key, panels stacked in one column).
PAIR_LAYOUTS = (
    (True, True, False), (True, True, True), (False, True, False), (False, True, True),
    (False, False, False), (False, False, True),
)


def _pair_left_out(text: bool, key: bool) -> list[str]:
    return ([] if text else ["the completions"]) + ([] if key else ["the key"])


def draw_pair(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> PairFigure:
    """Both runs in one picture: their completions, heatmaps, differences, curves and the key of what
    is drawn; layout `fit` is one of `PAIR_LAYOUTS` (the completions go first, then the key). The
    cause is the figure's caption (`inspector.export.caption`), not text on it."""
    text, key, stacked = PAIR_LAYOUTS[min(fit, len(PAIR_LAYOUTS) - 1)]
    figure = PairFigure(layout, style, with_text=text, stacked=stacked, with_key=key, names_below=not text)
    figure.set_data(data)
    figure.left_out = _pair_left_out(text, key)
    if sel.range is not None:
        t0, t1 = sel.positions(data.length)
        figure.heat_a.plot.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)  # every panel follows
    return figure


def draw_runs(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> RunsFigure:
    figure = RunsFigure(layout, style, brief=fit > 0, short_names=True)
    figure.set_data(data)
    # A row of the map per run, at least half a label high: 30 runs never crowd into a sliver.
    label = QtGui.QFontMetricsF(style.font()).height()
    figure.map.vb.setMinimumHeight(min(data.n_runs * label / 2, 2.0 * 96))
    if data.n_divergent == 0:  # an empty chart says nothing a note cannot
        _leave_out(layout, figure, "the chart of causes: no run diverges from the reference", figure.causes)
    elif fit > 1:
        _leave_out(layout, figure, "the chart of causes (the runs CSV holds them)", figure.causes)
    if sel.range is not None:
        t0, t1 = sel.positions(data.prompt_len + data.n_new)
        figure.map.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)
    return figure

