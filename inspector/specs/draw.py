"""Drawing an exported figure: the view's own figure builder, given the selection's range and
colours, plus what a figure on paper needs that the view says around it (a legend of its marks).
`inspector.specs.registry` names one of these builders for each view.

Each builder takes a layout level `fit`: 0 is the fullest; a higher one stacks panels (or a
legend's entries), then leaves a secondary panel out (listed in the figure's `left_out`, which
the export notes on the page), for a page too small for the fuller one."""

from __future__ import annotations

from inspector.figures.layers import LayersFigure
from inspector.figures.load import LoadFigure
from inspector.figures.pair import PairFigure
from inspector.figures.routing import RoutingFigure
from inspector.figures.runs import RunsFigure
from inspector.figures.style import FigureStyle, colormap
from inspector.figures.text import TextFigure
from inspector.qt import QtCore, pg
from inspector.specs.selection import Selection


def show_positions(plot: pg.PlotItem, n_positions: int, n_rows: int, sel: Selection) -> None:
    """Show positions [T0, T1) of the selection (all by default) and every row of the image."""
    t0, t1 = sel.positions(n_positions)
    plot.vb.setRange(xRange=(t0 - 0.5, t1 - 0.5), yRange=(-0.5, n_rows - 0.5), padding=0)


def marks_legend(style: FigureStyle, *, kept: bool = True, dropped: str = "dropped: over capacity",
                 boundary_color: str | None = None, columns: int = 3) -> pg.LegendItem:
    """A legend of the heatmap marks: kept candidates framed, dropped ones crossed, the prompt line."""
    legend = pg.LegendItem(labelTextColor=style.foreground, labelTextSize=f"{style.font_size}pt",
                           pen=pg.mkPen("#bbbbbb"), brush=pg.mkBrush(style.background), horSpacing=18)
    if kept:
        mid = colormap(style.colormap).map(0.45, mode="qcolor")
        frame = pg.ScatterPlotItem(symbol="s", size=15, brush=pg.mkBrush(mid),
                                   pen=pg.mkPen(style.kept_pen, width=2))
        legend.addItem(frame, "kept (framed)")
    cross = pg.ScatterPlotItem(symbol="x", size=15, brush=pg.mkBrush(style.dropped),
                               pen=pg.mkPen(style.background, width=0.5))
    legend.addItem(cross, f"{dropped} (✕)")
    line = pg.PlotDataItem(pen=pg.mkPen(boundary_color or style.boundary, width=2,
                                        style=QtCore.Qt.PenStyle.DashLine))
    legend.addItem(line, "prompt | generation")
    legend.setColumnCount(columns)
    return legend


def _leave_out(layout: pg.GraphicsLayout, figure, what: str, *items) -> None:
    for item in items:
        layout.removeItem(item)
    figure.left_out = [*getattr(figure, "left_out", []), what]


def draw_routing(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
                 fit: int = 0) -> RoutingFigure:
    figure = RoutingFigure(layout, style)
    figure.set_colormap(sel.colormap)
    figure.set_data(data)
    figure.set_levels(*sel.levels)
    show_positions(figure.plot, data.n_positions, data.n_experts, sel)
    if fit < 2:  # its entries side by side, then on two columns
        layout.addItem(marks_legend(style, columns=3 if fit == 0 else 2), row=1, col=0, colspan=2)
    else:
        figure.left_out = ["the legend (white frame = kept, red ✕ = dropped, dashed = prompt | generation)"]
    return figure


def draw_layers(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
                fit: int = 0) -> LayersFigure:
    figure = LayersFigure(layout, style)
    figure.set_data(data)
    show_positions(figure.plot, data.n_positions, data.n_layers, sel)
    if fit < 2:  # its entries side by side, else one a row
        legend = marks_legend(style, kept=False, dropped="a candidate dropped",
                              boundary_color=style.foreground, columns=2 if fit == 0 else 1)
        layout.addItem(legend, row=1, col=0, colspan=2)
    else:
        figure.left_out = ["the legend of the marks (red ✕ = a candidate dropped)"]
    return figure


def draw_load(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> LoadFigure:
    figure = LoadFigure(layout, style)
    figure.set_data(data)
    if fit > 0:
        _leave_out(layout, figure, "the panel of who filled the buffers (the load CSV holds it)",
                   figure.shares, figure.shares_legend)
    return figure


def draw_text(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> TextFigure:
    figure = TextFigure(layout, style)
    figure.set_data(data, sel.shade, sel.layer)
    return figure


def draw_pair(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> PairFigure:
    """Both runs in one picture: their texts, heatmaps, differences, curves and the cause. At odd
    `fit` the curves stack under the heatmaps; from 2 the completions, the key and the cause's
    numbers are left out (its headline and sentence stay), from 4 its sentence, from 6 all of it."""
    level = fit // 2
    figure = PairFigure(layout, style, with_text=level == 0, stacked=fit % 2 == 1, with_key=level == 0,
                        cause=("full", "sentence", "headline", None)[min(level, 3)])
    figure.set_data(data)
    if level == 1:
        figure.left_out = ["the completions and the key of colours (the app's Side by side tab shows them)"]
    elif level > 1:
        what = "the cause's sentence and numbers" if level == 2 else "the cause"
        figure.left_out = [f"the completions, the key of colours and {what} (the app's Side by side tab "
                           "shows them, `moe-inspector explain` prints the cause)"]
    if sel.range is not None:
        t0, t1 = sel.positions(data.length)
        figure.heat_a.plot.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)  # every panel follows
    return figure


def draw_runs(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> RunsFigure:
    figure = RunsFigure(layout, style)
    figure.set_data(data)
    if data.n_divergent == 0:  # an empty chart says nothing a note cannot
        _leave_out(layout, figure, "the chart of causes: no run diverges from the reference", figure.causes)
    elif fit > 0:
        _leave_out(layout, figure, "the chart of causes (the runs CSV holds them)", figure.causes)
    if sel.range is not None:
        t0, t1 = sel.positions(data.prompt_len + data.n_new)
        figure.map.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)
    return figure

