"""The runs figure (N runs tab) of one request: the U(N) headline, runs x positions coloured by
completion cluster (where each run leaves a larger group, its colour changes; t* against the
reference framed; the splits counted on top), and the causes of the divergent runs as bars."""

from __future__ import annotations

import html

import numpy as np

from inspector.figure_data.runs import RunsData
from inspector.figure_data.words import as_words
from inspector.figures.axes import CategoryAxis, CountAxis, TokenAxis, XZoomViewBox
from inspector.figures.divergence_text import HtmlBlock
from inspector.figures.marks import CellMarks, MarkAxis
from inspector.figures.run_names import short_names
from inspector.figures.style import FigureStyle, categorical_colors
from inspector.qt import QtCore, QtGui, pg

#: Completions named in the colour key; the rest are counted in one entry.
LEGEND_COMPLETIONS = 10
#: Splits labelled with their counts on top of the map, on at most SPLIT_ROWS rows.
LABELLED_SPLITS = 8
SPLIT_ROWS = 2
#: How much darker a cause's confirmed runs are drawn than its colour (QColor.darker, percent).
CONFIRMED_SHADE = 150


def confirmed_text(confirmed: int, count: int) -> str:
    """How many of a cause's runs a counterfactual confirmed, in words."""
    if count and confirmed >= count:
        return "all confirmed" if count > 1 else "confirmed"
    return f"{confirmed} of {count} confirmed" if confirmed else "none confirmed"


def cluster_rgb(clusters: np.ndarray, n_unique: int) -> np.ndarray:
    """[N, n_new, 3] uint8 image: the palette colour of each cell's completion cluster."""
    return categorical_colors(max(n_unique, 1))[np.asarray(clusters, dtype=np.int64)]


def headline_html(data: RunsData, style: FigureStyle, brief: bool = False,
                  names_key: tuple[str, str] | None = None) -> str:
    """U(N) with the mode share and new tokens, how the runs first split, the colour key (`brief`:
    in fewer words, for a narrow page; `names_key`: (short, full) name of a run whose name was
    shortened, as all were)."""
    colors = categorical_colors(max(data.n_unique, 1))
    counts = np.bincount(data.labels, minlength=data.n_unique)
    key = " ".join(f'<span style="color: #{c[0]:02x}{c[1]:02x}{c[2]:02x};">■</span>&nbsp;#{u}:&nbsp;{int(n)}'
                   for u, (c, n) in enumerate(zip(colors[:LEGEND_COMPLETIONS], counts, strict=False)))
    if data.n_unique > LEGEND_COMPLETIONS:
        key += f" … {data.n_unique - LEGEND_COMPLETIONS} more"
    condition = f", condition {html.escape(data.condition)}" if data.condition else ", all conditions"
    # A run's name never breaks at its hyphens (a word joiner after each): it would read as two names.
    names = (f" Run names shortened to what differs ({html.escape(names_key[0])} = "
             f"{html.escape(names_key[1]).replace('-', '-&#8288;')})." if names_key else "")
    compared = (f"Completions compared over their first {data.n_new} new tokens (the shortest completion's "
                f"length)." if data.cropped else "")
    if brief:
        return (f'<div style="color: {style.foreground};"><span style="font-size: {style.font_size + 1}pt;">'
                f"<b>{html.escape(data.headline)}</b></span><br>{html.escape(data.first_split)}.<br>"
                f"Completions (runs): {key}<br>"
                f'<span style="color: #505050;">{compared} Colour = the largest group still sharing the '
                f"run's prefix; framed = t* against the boxed reference row; numbers above = how the runs "
                f"split.{names}</span></div>")
    return (f'<div style="color: {style.foreground};"><span style="font-size: {style.font_size + 3}pt;">'
            f"<b>{html.escape(data.headline)}</b></span><br>{html.escape(data.first_split)}.<br>"
            f"Completions (runs): {key}<br>"
            f'<span style="color: #505050;">Request {data.request}{condition}. Colour = the completion of '
            f"the largest group still sharing the run's prefix; framed cell = t* against reference run "
            f"{html.escape(data.reference_run)} (boxed row); numbers above the map = how the runs split. "
            f"{compared}{names} {html.escape(data.causes_line)}</span></div>")


class RunsFigure:
    """Draws `RunsData` into a `pg.GraphicsLayout`: headline with the colour key at (row, 0),
    the map at (row + 1, 0), cause bars at (row + 2, 0)."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0,
                 brief: bool = False, short_names: bool = True) -> None:
        self.style = style or FigureStyle()
        self.data: RunsData | None = None
        self.brief = brief  # the headline in fewer words
        self.short_names = short_names  # runs named by the part of their names that differs
        self.headline = HtmlBlock(self.style)
        layout.addItem(self.headline, row=row, col=0)
        self.y_axis = CategoryAxis("left")
        # How the runs split, each count right above its position (a count with no room is left out).
        self.split_axis = MarkAxis(rows=SPLIT_ROWS, push=False)
        self.map: pg.PlotItem = layout.addPlot(row=row + 1, col=0, viewBox=XZoomViewBox(),
                                               axisItems={"bottom": TokenAxis("bottom"), "left": self.y_axis,
                                                          "top": self.split_axis})
        self.map.showAxis("top")
        self.map.setLabel("bottom", "position (token)")
        self.map.setLabel("left", "run")
        self.map.invertY(True)
        self.map.setMenuEnabled(False)
        self.map.hideButtons()
        self.style.style_plot(self.map)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.map.addItem(self.image)
        self.t_star = CellMarks("outline", "#000000", width=1.5, inset=0.0)
        self.t_star.setZValue(10)
        self.map.addItem(self.t_star)
        self.reference_band = pg.LinearRegionItem(orientation="horizontal", movable=False,
                                                  brush=pg.mkBrush(0, 0, 0, 0),
                                                  pen=pg.mkPen("#000000", width=2))
        self.reference_band.setZValue(20)
        self.map.addItem(self.reference_band)
        self.selected_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#00b8d4", width=1.5))
        self.selected_line.setZValue(30)
        self.selected_line.hide()
        self.map.addItem(self.selected_line, ignoreBounds=True)
        self.cause_axis = CategoryAxis("bottom")
        self.causes: pg.PlotItem = layout.addPlot(row=row + 2, col=0,
                                                  axisItems={"bottom": self.cause_axis, "left": CountAxis()})
        self.causes.setLabel("left", "runs")
        self.causes.setMenuEnabled(False)
        self.causes.hideButtons()
        self.causes.showGrid(y=True, alpha=0.25)
        self.style.style_plot(self.causes)
        # One bar per cause: its confirmed runs (dark) at the bottom, the unconfirmed (light) on top.
        self.cause_bars = pg.BarGraphItem(x=[], height=[], width=0.7, pen=pg.mkPen("#a0522d"))
        self.confirmed_bars = pg.BarGraphItem(x=[], height=[], width=0.7, pen=pg.mkPen("#a0522d"))
        self.causes.addItem(self.cause_bars)
        self.causes.addItem(self.confirmed_bars)
        self.causes.vb.sigResized.connect(self._cause_headroom)
        self.cause_labels: list[pg.TextItem] = []
        layout.layout.setRowStretchFactor(row + 1, 3)
        layout.layout.setRowStretchFactor(row + 2, 1)

    def set_data(self, data: RunsData, *, keep_view: bool = False) -> None:
        self.data = data
        N, n = data.clusters.shape
        P = data.prompt_len
        runs = [data.choices[int(r)].run for r in data.order]
        names, self.names_key = short_names(runs) if self.short_names else (runs, None)
        self.set_headline()
        self.image.setImage(cluster_rgb(data.clusters, data.n_unique), autoLevels=False, levels=(0, 255))
        self.image.setRect(QtCore.QRectF(P - 0.5, -0.5, max(n, 1), N))
        y_of = np.empty(N, dtype=np.int64)
        y_of[data.order] = np.arange(N)
        names = list(names)
        names[y_of[data.reference]] = f"ref {names[y_of[data.reference]]}"  # the boxed row says what it is
        self.y_axis.set_labels(names)
        self.map.getAxis("bottom").set_labels([])
        diverged = np.flatnonzero(data.t_star >= 0)
        self.t_star.set_cells(data.t_star[diverged], y_of[diverged])
        y_ref = y_of[data.reference]
        self.reference_band.setRegion((y_ref - 0.5, y_ref + 0.5))
        self._set_split_labels(data)
        self.map.setTitle("runs x positions by completion cluster", color=self.style.foreground,
                          size=f"{self.style.font_size}pt")
        self.map.vb.setLimits(xMin=P - 0.5 - 0.05 * n, xMax=P + n - 0.5 + 0.05 * n, yMin=-1.5, yMax=N + 0.5)
        if not keep_view:
            self.map.vb.setRange(xRange=(P - 0.5, P + max(n, 1) - 0.5), yRange=(-0.5, N - 0.5), padding=0)
        self._set_causes(data)

    def set_headline(self, first_line: bool = False) -> None:
        """The headline (brief or not, as built), or only its first line: U(N) and the mode share."""
        data, style = self.data, self.style
        if first_line:
            size = style.font_size + 3
            self.headline.set_html(f'<div style="color: {style.foreground}; font-size: {size}pt;">'
                                   f"<b>{html.escape(data.headline)}</b></div>")
        else:
            self.headline.set_html(headline_html(data, style, self.brief, self.names_key))

    def _set_split_labels(self, data: RunsData) -> None:
        """The run counts of each split above the map, on as many rows as they need to stay apart
        (the hover readout names every split)."""
        self.split_axis.clear_marks()
        for i, (position, counts) in enumerate(data.split_points[:LABELLED_SPLITS]):
            self.split_axis.set_mark(f"split {i}", position, "/".join(str(c) for c in counts),
                                     self.style.foreground)

    def _set_causes(self, data: RunsData) -> None:
        names = [c.cause for c in data.causes]
        x = np.arange(len(names), dtype=np.float64)
        confirmed = np.array([c.confirmed for c in data.causes], dtype=float)
        count = np.array([c.count for c in data.causes], dtype=float)
        # Each cause in its colour of the table of causes; its confirmed runs in a darker shade.
        brushes = [pg.mkBrush(c.colour) for c in data.causes]
        darker = [pg.mkBrush(QtGui.QColor(c.colour).darker(CONFIRMED_SHADE)) for c in data.causes]
        self.confirmed_bars.setOpts(x=x, height=confirmed, width=0.7, brushes=darker)
        self.cause_bars.setOpts(x=x, y0=confirmed, height=count - confirmed, width=0.7, brushes=brushes)
        self.cause_axis.set_labels([as_words(c.cause) for c in data.causes])
        for item in self.cause_labels:
            self.causes.removeItem(item)
        self.cause_labels = []
        for i, c in enumerate(data.causes):
            label = pg.TextItem(f"{c.count} ({c.share:.0%}) · {confirmed_text(c.confirmed, c.count)}",
                                color=self.style.foreground, anchor=(0.5, 1.0))
            label.setFont(self.style.font())  # the figure's size, not Qt's default
            label.setPos(i, c.count)
            self.causes.addItem(label)
            self.cause_labels.append(label)
        title = (f"causes of the {data.n_divergent} divergent runs<br>dark = confirmed by counterfactual, "
                 f"light = not confirmed")
        self.causes.setTitle(title, color=self.style.foreground,
                             size=f"{self.style.font_size}pt")
        self.causes.vb.setRange(xRange=(-0.6, max(len(names), 1) - 0.4), padding=0)
        self._cause_headroom()

    def _cause_headroom(self) -> None:
        """Room above the tallest bar for its label, whatever the plot's height in pixels."""
        if self.data is None:
            return
        top = max((c.count for c in self.data.causes), default=1)
        height = self.causes.vb.height()
        label = max((item.textItem.boundingRect().height() for item in self.cause_labels), default=0.0)
        share = min(label / height, 0.6) if height > 0 else 0.3  # of the plot's height the label takes
        self.causes.vb.setYRange(0, (top + 0.3) / (1.0 - share - 0.04), padding=0)

    def set_selected(self, position: int | None) -> None:
        self.selected_line.setVisible(position is not None)
        if position is not None:
            self.selected_line.setPos(position)

    # -- reading back -----------------------------------------------------------------------------

    def cell_at(self, x: float, y: float) -> tuple[int, int] | None:
        """(absolute position, displayed run) of the map cell holding (x, y), or None outside."""
        if self.data is None:
            return None
        t, r = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
        i = t - self.data.prompt_len
        if 0 <= i < self.data.n_new and 0 <= r < self.data.n_runs:
            return t, r
        return None

    def hover_text(self, x: float, y: float) -> str | None:
        cell = self.cell_at(x, y)
        return None if cell is None or self.data is None else self.data.describe_cell(*cell)
