"""Expert-load view: for one forward step and layer, requested against kept per expert and the
share of each batch row, i.e. who filled the buffers."""

from __future__ import annotations

from inspector.figure_data.load import load_data, step_positions
from inspector.figures.load import LoadFigure
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtWidgets, pg
from inspector.specs.selection import Selection
from inspector.views.base import MIN_PLOT_PX, View
from inspector.views.hover import HoverLine, connect_hover
from traces.schema import ABSENT_GROUP


class LoadView(View):
    """Step and group pickers over the load figure; follows the focused token's step and group."""

    name = "load"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.step = QtWidgets.QSpinBox()
        self.step.setToolTip("Forward step: 0 is the prefill (the whole prompt), then one step per new token")
        self.step.setKeyboardTracking(False)
        self.step_info = QtWidgets.QLabel()
        self.step_info.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # may show a trace's text
        self.group = QtWidgets.QComboBox()
        self.group.setToolTip("Group: the tokens whose candidates compete for the same buffers")
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(QtWidgets.QLabel("Step:"))
        bar.addWidget(self.step)
        bar.addWidget(self.step_info)
        bar.addSpacing(16)
        bar.addWidget(QtWidgets.QLabel("Group:"))
        bar.addWidget(self.group)
        bar.addStretch(1)
        bar.addWidget(self.export_button())
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(FigureStyle().background)
        self.figure = LoadFigure(self.graphics.ci)
        self.hover = HoverLine("Hover over an expert: requested, kept, dropped and each row's share.")
        connect_hover(self.graphics, self.figure.totals, self.figure.hover_text, self.hover)
        connect_hover(self.graphics, self.figure.shares, self.figure.hover_text, self.hover)
        for plot in (self.figure.totals, self.figure.shares):
            plot.vb.setMinimumHeight(MIN_PLOT_PX)
        self.keep_graphics_at_least(self.graphics, 600, 2 * MIN_PLOT_PX + 170)
        layout = self.scrolled_layout()
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.graphics, 1)
        self.pin_below(self.hover)
        self._updating = False
        self._group_choice: int | None = None   # None: follow the probe's (or focused token's) group
        self.step.valueChanged.connect(self._step_changed)
        self.group.activated.connect(self._group_chosen)
        for signal in (state.trace_changed, state.run_changed, state.row_changed, state.layer_changed):
            signal.connect(self.invalidate)
        state.run_changed.connect(self._reset_step)
        state.trace_changed.connect(self._reset_step)
        state.position_changed.connect(self._follow_position)

    def selection(self, d) -> Selection:
        return Selection(run=d.run, layer=d.layer, step=d.step, group=d.group)

    def _reset_step(self) -> None:
        self._group_choice = None
        self._set_step(0)

    def _set_step(self, step: int) -> None:
        self._updating = True
        try:
            self.step.setValue(step)
        finally:
            self._updating = False

    def _step_changed(self, value: int) -> None:
        if not self._updating:
            self._group_choice = None
            self.invalidate()

    def _group_chosen(self, index: int) -> None:
        self._group_choice = self.group.itemData(index)
        self.invalidate()

    def _follow_position(self) -> None:
        """Show the step and group of the focused token of the selected row."""
        t = self.state.position
        if t is None or self.state.run is None:
            return
        layer = self.state.layer_routing()
        if 0 <= t < layer.step.shape[1] and layer.step[self.state.row, t] >= 0:
            self._set_step(int(layer.step[self.state.row, t]))
            self._group_choice = int(layer.group[self.state.row, t])
            self.invalidate()

    def redraw(self) -> None:
        layer = self.state.layer_routing()
        S = layer.capacity.shape[0]
        self._updating = True
        try:
            self.step.setRange(0, max(S - 1, 0))
        finally:
            self._updating = False
        step = self.step.value()
        group = self._group_choice
        if group is not None and not (0 <= group < layer.capacity.shape[1]
                                      and layer.capacity[step, group] != ABSENT_GROUP):
            group = None  # that group does not exist at this step: show the probe's
        data = load_data(layer, step, group)
        self.figure.set_data(data)
        self._fill_groups(data.groups, data.group)
        row = self.state.row
        pos = step_positions(layer, row, step)
        if step == 0:
            where = f"prefill: positions 0-{pos[-1]} of row {row}" if pos.size else "prefill"
        else:
            where = (f"decode: position {pos[0]} of row {row}" if pos.size
                     else f"decode: row {row} has no token at this step")
        self.step_info.setText(f"of {S - 1} · {where} · {len(data.groups)} group(s) in this step")

    def _fill_groups(self, groups: list[int], current: int) -> None:
        self.group.blockSignals(True)
        self.group.clear()
        for g in groups:
            self.group.addItem(f"group {g}", g)
        i = self.group.findData(current)
        self.group.setCurrentIndex(max(i, 0))
        self.group.blockSignals(False)


