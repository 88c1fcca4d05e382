"""The causal map view: for the selected run's row and its reference, how much each differing routing
cell moves the split, against position-matched nulls, with the chain back to the batch."""

from __future__ import annotations

from inspector.figures.causal_map import CausalMapFigure
from inspector.figures.style import FigureStyle
from inspector.qt import QtGui, QtWidgets, pg
from inspector.specs.causal_map import read_causal_map
from inspector.specs.registry import Export
from inspector.specs.selection import Selection, SelectionError
from inspector.views.base import MIN_PLOT_PX, View
from inspector.views.hover import HoverLine


class CausalMapView(View):
    """Layer x position of the selected row's split; hover a cell for its effect and null."""

    name = "causal_map"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        legend = QtWidgets.QLabel("colour = change of the logit difference at the split when the cell takes "
                                  "the other run's decision (red toward the other run's token, blue away, "
                                  "grey: the runs agree) · outlined = beats its position-matched null · "
                                  "dashed line = t* · green arrows = the chain from the batch event (dot) to "
                                  "the decisive cell · the titles name the outcome: decisive, a near-tie "
                                  "or no decisive cell")
        legend.setWordWrap(True)
        legend.setStyleSheet("color: #505050;")
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(FigureStyle().background)
        self.figure = CausalMapFigure(self.graphics.ci)
        self.hover = HoverLine("Hover over a cell: its effect, exact or estimated, its null's percentile and "
                               "the decisions changed.")
        for plot in self.figure.plots:
            plot.vb.setMinimumHeight(MIN_PLOT_PX // 2)
        self.graphics.scene().sigMouseMoved.connect(self._moved)
        self.keep_graphics_at_least(self.graphics, 400, MIN_PLOT_PX + 90)
        layout = self.scrolled_layout()
        top = QtWidgets.QHBoxLayout()
        top.addWidget(legend, 1)
        top.addWidget(self.export_button())
        layout.addLayout(top)
        layout.addWidget(self.message)
        layout.addWidget(self.graphics, 1)
        self.pin_below(self.hover)
        for signal in (state.trace_changed, state.run_changed, state.row_changed):
            signal.connect(self.invalidate)

    @property
    def data(self):
        return self.figure.data

    def export_state(self) -> Export | None:
        d = self.data
        return None if d is None else Export(self.name, d, Selection(run=d.run, row=d.row))

    def redraw(self) -> None:
        trace, run = self.state.trace, self.state.run
        try:
            data = read_causal_map(trace, Selection(run=run.name if run is not None else None,
                                                    row=self.state.row))
        except SelectionError as exc:
            self.message.setText(str(exc))
            return
        self.figure.set_data(data)

    def clear(self) -> None:
        pass

    def _moved(self, scene_pos) -> None:
        """The hover line and tooltip of the cell under the mouse, in whichever panel it is."""
        text = None
        for i, plot in enumerate(self.figure.plots):
            if plot.vb.sceneBoundingRect().contains(scene_pos):
                p = plot.vb.mapSceneToView(scene_pos)
                text = self.figure.hover_text(i, p.x(), p.y())
        self.hover.show_text(text)
        if text:
            QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), text, self.graphics)
        else:
            QtWidgets.QToolTip.hideText()
