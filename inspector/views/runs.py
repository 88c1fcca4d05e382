"""The runs view (N runs tab): U(N) of one request, the prefix tree of its completions with counts, runs x
positions by completion cluster, and the table of causes (how many of each are proven)."""

from __future__ import annotations

from inspector.figure_data.divergence_source import DivergenceSource, RunChoice, table_reference
from inspector.figure_data.runs import RunsData, runs_figure_data
from inspector.figure_data.words import as_words
from inspector.figures.runs import RunsFigure
from inspector.figures.style import FigureStyle
from inspector.qt import Qt, QtCore, QtWidgets, pg, plain_tip
from inspector.specs.selection import Selection
from inspector.views.base import MIN_PLOT_PX, MIN_TABLE_PX, View
from inspector.views.fit_combo import FitComboBox
from inspector.views.hover import HoverLine, connect_hover
from inspector.views.notice import Notice
from traces.analysis.proof import NO_PROOF
from traces.analysis.reference import reference_index

ALL_CONDITIONS = "all conditions"
RUNS_ROLE = Qt.ItemDataRole.UserRole + 1
#: Narrower than this, the prefix tree and the causes go below the figure instead of beside it.
STACK_BELOW_PX = 900
#: In a view shorter than this (a laptop's 1280 x 720 window) the figure's headline keeps its first line
#: (U(N) and the mode share) and the chart of causes is left out (the table beside it counts them),
#: so that the map stays in view; they come back when it grows.
SHORT_VIEW_PX = 600
#: Least width of the tree and causes beside the figure (more when the tree's columns need it).
SIDE_PX = 300


class RunsView(View):
    """Every run of one request at once; double-click a branch to select its first run everywhere."""

    name = "runs"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.source: DivergenceSource | None = None
        self.request = FitComboBox()
        self.request.setToolTip("Request (prompt) held by several runs")
        self.request.setMinimumContentsLength(18)
        self.condition = FitComboBox()
        self.condition.setToolTip("Compare the runs of one condition (U(N) mixes no conditions unless asked)")
        self.condition.setMinimumContentsLength(16)
        self.reference = FitComboBox()
        self.reference.setToolTip("Run the first divergences and causes are stated against")
        self.reference.setMinimumContentsLength(12)
        # The request and the export on one line, the runs and the reference on the next: a condition's
        # name and a run's do not fit beside a request in a 1280-pixel window.
        top, choice = QtWidgets.QHBoxLayout(), QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("Request:"))
        top.addWidget(self.request, 1)
        top.addWidget(self.export_button())
        for label, box in (("Runs:", self.condition), ("Reference:", self.reference)):
            choice.addWidget(QtWidgets.QLabel(label))
            choice.addWidget(box, 1)
        bar = QtWidgets.QVBoxLayout()
        bar.setSpacing(0)
        bar.addLayout(top)
        bar.addLayout(choice)
        self.notice = Notice()
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(FigureStyle().background)
        self.figure = RunsFigure(self.graphics.ci)
        self.tree = QtWidgets.QTreeWidget()
        # The branch, its runs and new tokens; the text the runs share is in each row's tooltip, so the
        # tree fits its column without scrolling sideways.
        # Positions as the map's axis numbers them (not new-token indices): one axis everywhere.
        self.tree.setHeaderLabels(["split at → completion", "runs", "positions"])
        self.tree.setIndentation(12)
        self.tree.setToolTip("Prefix tree of the completions: runs agree inside a node and split at its end; "
                             "double-click a node to select its first run in every view")
        self.tree.setUniformRowHeights(True)
        self.causes = QtWidgets.QTableWidget(0, 4)
        self.causes.setHorizontalHeaderLabels(["cause", "runs", "share", "proven (event or minimal set)"])
        self.causes.verticalHeader().hide()
        self.causes.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.causes.horizontalHeader().setStretchLastSection(True)
        self.causes_note = QtWidgets.QLabel()
        self.causes_note.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # may show a trace's text
        self.causes_note.setWordWrap(True)
        side = QtWidgets.QSplitter(Qt.Orientation.Vertical)
        side.addWidget(self.tree)
        table = QtWidgets.QWidget()
        table_layout = QtWidgets.QVBoxLayout(table)
        table_layout.setContentsMargins(0, 0, 0, 0)
        table_layout.addWidget(self.causes_note)
        table_layout.addWidget(self.causes, 1)
        side.addWidget(table)
        self.splitter = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.graphics)
        self.splitter.addWidget(side)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([620, 400])
        self.hover = HoverLine("Hover over a cell: the run, its completion cluster, its t* and cause. Click "
                               "to select the position in every view.")
        connect_hover(self.graphics, self.figure.map, self.figure.hover_text, self.hover, self._clicked)
        self.figure.map.vb.setMinimumHeight(MIN_PLOT_PX)
        self.tree.setMinimumHeight(MIN_TABLE_PX)
        self.causes.setMinimumHeight(MIN_TABLE_PX)
        self.figure.causes.vb.setMinimumHeight(MIN_PLOT_PX // 2)
        self.keep_graphics_at_least(self.graphics, 420, 2 * MIN_PLOT_PX + 230)
        self.side = side
        self._side_px = SIDE_PX   # the side's least width beside the figure: its tree's columns whole
        side.setMinimumWidth(SIDE_PX)
        layout = self.scrolled_layout()
        layout.setSpacing(3)  # the two lines of choices and the figure fit a 920-pixel window
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.notice)
        layout.addWidget(self.splitter, 1)
        self.pin_below(self.hover)
        self._key: tuple | None = None
        self._short_headline: bool | None = None   # the headline shown is the short one (None: none yet)
        self.request.activated.connect(self._request_picked)
        self.condition.activated.connect(self._condition_picked)
        self.reference.activated.connect(self.invalidate)
        self.tree.itemDoubleClicked.connect(self._branch_activated)
        state.trace_changed.connect(self._trace_changed)
        state.run_changed.connect(self._follow_run)
        state.row_changed.connect(self._follow_run)
        state.reference_changed.connect(self._follow_reference)
        state.position_changed.connect(lambda: self.figure.set_selected(self.state.position))

    def _fit_headline(self) -> None:
        """The whole headline, or in a short view its first line alone."""
        data = self.figure.data
        short = self.scroller.viewport().height() < SHORT_VIEW_PX
        if data is None or short == self._short_headline:
            return
        self._short_headline = short
        self.figure.set_headline(first_line=short)
        self.figure.causes.setVisible(not short)
        self.figure.causes.setMaximumHeight(0 if short else 1e6)  # a hidden plot keeps its row
        self.figure.causes.vb.setMinimumHeight(0 if short else MIN_PLOT_PX // 2)
        self._fit_timer.start()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit_headline()
        below = self.width() < STACK_BELOW_PX
        orientation = Qt.Orientation.Vertical if below else Qt.Orientation.Horizontal
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            self.side.setMinimumWidth(0 if below else self._side_px)
            self.side.setMinimumHeight(2 * MIN_TABLE_PX + 40 if below else 0)
            self._fit_timer.start()

    def exportable(self) -> bool:
        return not self.splitter.isHidden()

    def selection(self, d: RunsData) -> Selection:
        return Selection(run=d.reference_run, request=d.request, condition=d.condition)

    # -- choices --------------------------------------------------------------------------------

    def _trace_changed(self) -> None:
        self.source = None
        self._key = None
        for box in (self.request, self.condition, self.reference):
            box.clear()
        self.invalidate()

    def _ensure_source(self) -> DivergenceSource | None:
        if self.source is None and self.state.trace is not None:
            self.source = self.state.divergence()  # shared with the pair view
            self.request.clear()
            for r in self.source.requests():
                self.request.addItem(f"{r}: {self.source.request_text(r)}", r)
            self._follow_run(invalidate=False)
        return self.source

    def _follow_run(self, *args, invalidate: bool = True) -> None:
        """Show the request of the selected (run, row) and that run's condition."""
        source, run = self.source, self.state.run
        if source is not None and run is not None:
            request = source.default_request(run.name, self.state.row)
            i = self.request.findData(request)
            if i >= 0 and i != self.request.currentIndex():
                self.request.setCurrentIndex(i)
                self._fill_choices()
            elif self.condition.count() == 0:
                self._fill_choices()
            info = source.choices(request) if request is not None else []
            condition = next((c.condition for c in info if c.run == run.name), None)
            if condition is not None and len(source.conditions(request)) > 1:
                self._select_condition(condition)
        if invalidate:
            self.invalidate()

    def _follow_reference(self) -> None:
        i = self.reference.findData(self.state.reference)
        if i >= 0:
            self.reference.setCurrentIndex(i)
            self.invalidate()

    def _request_picked(self, index: int) -> None:
        self._fill_choices()
        self.invalidate()

    def _condition_picked(self, index: int) -> None:
        self._fill_references()
        self.invalidate()

    def _fill_choices(self) -> None:
        request = self.request.currentData()
        self.condition.clear()
        if request is None or self.source is None:
            return
        conditions = self.source.conditions(int(request))
        self.condition.addItem(ALL_CONDITIONS, "")
        for c in conditions:
            self.condition.addItem(c or "(no condition)", c)
        # One condition: the same as all. Several: start with the first, comparing like with like.
        self.condition.setCurrentIndex(1 if len(conditions) > 1 else 0)
        self._fill_references()

    def _select_condition(self, condition: str) -> None:
        i = self.condition.findData(condition)
        if i >= 0 and i != self.condition.currentIndex():
            self.condition.setCurrentIndex(i)
            self._fill_references()

    def _fill_references(self) -> None:
        self.reference.clear()
        self.reference.addItem("automatic", None)
        for c in self.choices():
            self.reference.addItem(c.text(), c.run)
        i = self.reference.findData(self.state.reference)
        self.reference.setCurrentIndex(max(i, 0))

    def choices(self) -> list[RunChoice]:
        """The runs compared: those of the request, of the chosen condition."""
        request = self.request.currentData()
        if request is None or self.source is None:
            return []
        condition = self.condition.currentData()
        out = self.source.choices(int(request))
        return out if not condition else [c for c in out if c.condition == condition]

    # -- drawing --------------------------------------------------------------------------------

    def _say(self, text: str | None, blank: bool = True) -> None:
        """Show a notice (None hides it); `blank` hides the panels, which would show other runs."""
        self.notice.say(text, self.splitter, blank)

    def redraw(self) -> None:
        source = self._ensure_source()
        choices = self.choices()
        if source is None or len(choices) < 2:
            self._say("No request of this trace is held by more than one run (of this condition): there is "
                      "nothing to compare. Record several batch compositions of one prompt to see U(N) here.")
            return
        rows = source.rows(choices)
        records = source.records()
        reference, how = self._reference(choices, rows, records)
        key = (int(self.request.currentData()), self.condition.currentData(), reference)
        if key == self._key and self.figure.data is not None:
            return
        try:
            data = runs_figure_data(rows, choices, reference, vocab=source.vocab, records=records,
                                        condition=self.condition.currentData() or "")
        except ValueError as exc:
            self._say(f"These runs cannot be compared: {exc}")
            return
        self.figure.set_data(data, keep_view=key[:2] == (self._key or (None, None))[:2])
        self._short_headline = None
        self._fit_headline()
        self.figure.set_selected(self.state.position)
        self._key = key
        self._fill_tree(data)
        self._fill_causes(data, how)
        problems = "; ".join(source.table_problems)
        self._say(f"Explanation tables left out: {problems}" if problems else None, blank=False)

    def _reference(self, choices, rows, records) -> tuple[int, str]:
        """Index of the reference run among `choices`, and how it was chosen."""
        names = [c.run for c in choices]
        chosen = self.reference.currentData()
        if chosen in names:
            return names.index(chosen), "chosen here"
        if self.state.reference in names:
            return names.index(self.state.reference), "the reference chosen in the run browser"
        from_table = table_reference(records, choices)
        if from_table in names:
            return names.index(from_table), "the reference of the explanation table"
        return reference_index(names), "the first run of the request in this condition"

    def _fill_tree(self, data: RunsData) -> None:
        self.tree.clear()
        items: list[QtWidgets.QTreeWidgetItem] = []
        for node in data.tree:
            if node.parent < 0:
                branch, said = f"all {node.count} runs", f"all {node.count} runs"
            else:
                at = data.prompt_len + node.start - 1
                branch = f"{node.token!r} at {at}"
                said = f"{node.token!r} at position {at} (new token {node.start - 1})"
            if node.completion >= 0:
                branch += f" → #{node.completion}"
                said += f", then completion #{node.completion}"
            end = min(node.split, data.n_new)
            first = data.prompt_len + node.start
            span = f"{first}-{data.prompt_len + end - 1}" if end > node.start else "-"
            item = QtWidgets.QTreeWidgetItem([branch, str(node.count), span])
            item.setData(0, RUNS_ROLE, node.runs)
            tip = f"{said}; shared text: {node.text!r}; runs: {', '.join(node.runs)}"
            for column in range(3):
                item.setToolTip(column, plain_tip(tip))
            item.setTextAlignment(1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if node.parent < 0:
                self.tree.addTopLevelItem(item)
            else:
                items[node.parent].addChild(item)
            items.append(item)
        self.tree.expandAll()
        for column in range(3):
            self.tree.resizeColumnToContents(column)
        tree = self.tree
        need = (sum(tree.columnWidth(c) for c in range(3)) + 2 * tree.frameWidth()
                + tree.verticalScrollBar().sizeHint().width())
        self._side_px = max(SIDE_PX, need)  # the tree never scrolls sideways beside the figure
        if self.splitter.orientation() == Qt.Orientation.Horizontal:
            self.side.setMinimumWidth(self._side_px)

    def _fill_causes(self, data: RunsData, how: str) -> None:
        self.causes.setRowCount(len(data.causes))
        for i, row in enumerate(data.causes):
            if row.proven:
                confirmed = f"{row.proven} of {row.count}"
            elif row.confirmed:
                confirmed = f"none ({row.confirmed} of {row.count} confirmed by whole-batch reruns)"
            else:
                confirmed = NO_PROOF
            for j, text in enumerate((as_words(row.cause), str(row.count), f"{row.share:.0%}", confirmed)):
                item = QtWidgets.QTableWidgetItem(text)
                if j in (1, 2):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.causes.setItem(i, j, item)
        self.causes.resizeColumnsToContents()
        self.causes_note.setText(f"{data.causes_line} Against reference run {data.reference_run} ({how}).")

    # -- interaction ----------------------------------------------------------------------------

    def _clicked(self, x: float, y: float) -> None:
        cell = self.figure.cell_at(x, y)
        if cell is not None:
            self.state.set_position(cell[0])

    def _branch_activated(self, item: QtWidgets.QTreeWidgetItem, column: int) -> None:
        runs = item.data(0, RUNS_ROLE)
        if not runs:
            return
        choice = next((c for c in self.choices() if c.run == runs[0]), None)
        if choice is not None:
            self.state.set_run(choice.run, choice.row)
