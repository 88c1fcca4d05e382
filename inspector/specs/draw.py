"""Drawing an exported figure: the view's own figure builder, given the selection's range and
colours, plus what a figure on paper needs that the view says around it (a legend of its marks).
`inspector.specs.registry` names one of these builders for each view.

Each builder takes a layout level `fit`: 0 is the fullest; a higher one stacks panels (or a
legend's entries), then leaves a secondary panel out (listed in the figure's `left_out`, which
the export notes on the page), for a page too small for the fuller one."""

from __future__ import annotations

from inspector.figures.layers import LayersFigure
from inspector.figures.load import LoadFigure
from inspector.figures.marks import MarkSample
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


def marks_legend(style: FigureStyle, dropped_marks, kept_marks=None, *,
                 dropped: str = "dropped: over capacity", boundary_color: str | None = None,
                 columns: int = 3, fill: str | None = None) -> pg.LegendItem:
    """A legend of the heatmap marks, each sample drawn as the figure draws its marks at their
    present size (a frame or its edges, a cross or a tick), and the prompt line."""
    legend = pg.LegendItem(labelTextColor=style.foreground, labelTextSize=f"{style.font_size}pt",
                           pen=pg.mkPen("#bbbbbb"), brush=pg.mkBrush(style.background), horSpacing=18)
    cell = fill or colormap(style.colormap).map(0.45, mode="qcolor")
    if kept_marks is not None:
        legend.addItem(MarkSample(kept_marks, cell), "kept")
    legend.addItem(MarkSample(dropped_marks, cell), dropped)
    line = pg.PlotDataItem(pen=pg.mkPen(boundary_color or style.boundary, width=2,
                                        style=QtCore.Qt.PenStyle.DashLine))
    legend.addItem(line, "prompt | generation")
    legend.setColumnCount(columns)
    return legend


def _leave_out(layout: pg.GraphicsLayout, figure, what: str, *items) -> None:
    for item in items:
        layout.removeItem(item)
    figure.left_out = [*getattr(figure, "left_out", []), what]


def title_above(layout: pg.GraphicsLayout, plot: pg.PlotItem, style: FigureStyle, columns: int = 2) -> None:
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
    figure = RoutingFigure(layout, style, row=1)
    figure.set_colormap(sel.colormap)
    figure.set_data(data)
    figure.set_levels(*sel.levels)
    title_above(layout, figure.plot, style)
    show_positions(figure.plot, data.n_positions, data.n_experts, sel)
    if fit < 3:  # its entries side by side, then on two columns, then one under another
        layout.addItem(marks_legend(style, figure.dropped, figure.kept, columns=3 - fit),
                       row=2, col=0, colspan=2)
    else:
        figure.left_out = ["the legend (white frame = kept, red ✕ or tick = dropped, dashed = prompt | "
                           "generation)"]
    return figure


def draw_layers(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
                fit: int = 0) -> LayersFigure:
    figure = LayersFigure(layout, style, row=1)
    figure.set_data(data)
    title_above(layout, figure.plot, style)
    show_positions(figure.plot, data.n_positions, data.n_layers, sel)
    if fit < 2:  # its entries side by side, else one a row
        legend = marks_legend(style, figure.drops, dropped="a candidate dropped",
                              boundary_color=style.foreground, columns=2 if fit == 0 else 1, fill="#88ccee")
        layout.addItem(legend, row=2, col=0, colspan=2)
    else:
        figure.left_out = ["the legend of the marks (red ✕ or tick = a candidate dropped)"]
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
        figure.totals_legend.setColumnCount(3)
        layout.addItem(figure.totals_legend, row=1, col=0)
    return figure


def draw_text(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> TextFigure:
    figure = TextFigure(layout, style)
    figure.set_data(data, sel.shade, sel.layer)
    return figure


#: The pair figure's layouts, fullest first: (completions, key of colours, cause, curves stacked
#: under the heatmaps). The cause: "full", its headline and "sentence", both "short", its "headline".
PAIR_LAYOUTS = (
    (True, True, "full", False), (True, True, "full", True),
    (False, True, "sentence", False), (False, True, "sentence", True),
    (False, True, "short", False), (False, True, "short", True),
    (False, False, "short", False), (False, False, "short", True),
    (False, False, "headline", False), (False, False, "headline", True),
    (False, False, None, False), (False, False, None, True),
)


def _pair_left_out(text: bool, key: bool, cause: str | None) -> list[str]:
    parts = [] if text else ["the completions"]
    parts += [] if key else ["the key of colours"]
    parts += {"full": [], "sentence": ["the cause's numbers"], "short": ["the cause's full text"],
              "headline": ["the cause's sentence and numbers"], None: ["the cause"]}[cause]
    if not parts:
        return []
    where = "the app's Side by side tab" + ("; `moe-inspector explain`" if cause != "full" else "")
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return [f"{listed} ({where})"]


def draw_pair(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> PairFigure:
    """Both runs in one picture: their texts, heatmaps, differences, curves and the cause; layout
    `fit` is one of `PAIR_LAYOUTS` (the completions go first, then the cause's numbers and its
    wording, then the key)."""
    text, key, cause, stacked = PAIR_LAYOUTS[min(fit, len(PAIR_LAYOUTS) - 1)]
    figure = PairFigure(layout, style, with_text=text, stacked=stacked, with_key=key, cause=cause,
                        markers_inside=True)
    figure.set_data(data)
    figure.left_out = _pair_left_out(text, key, cause)
    if sel.range is not None:
        t0, t1 = sel.positions(data.length)
        figure.heat_a.plot.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)  # every panel follows
    return figure


def draw_runs(layout: pg.GraphicsLayout, style: FigureStyle, data, sel: Selection,
              fit: int = 0) -> RunsFigure:
    figure = RunsFigure(layout, style, brief=fit > 0, short_names=fit > 0)
    figure.set_data(data)
    if data.n_divergent == 0:  # an empty chart says nothing a note cannot
        _leave_out(layout, figure, "the chart of causes: no run diverges from the reference", figure.causes)
    elif fit > 1:
        _leave_out(layout, figure, "the chart of causes (the runs CSV holds them)", figure.causes)
    if sel.range is not None:
        t0, t1 = sel.positions(data.prompt_len + data.n_new)
        figure.map.vb.setXRange(t0 - 0.5, t1 - 0.5, padding=0)
    return figure

