"""The run browser: one table row per run with its composition, drops, completion and whether the
completion differs from its reference run; selecting a row selects the run."""

from __future__ import annotations

from dataclasses import dataclass

from inspector.figure_data.browser import RunInfo, RunStats, divergence_mark, references
from inspector.qt import Qt, QtCore, QtGui, QtWidgets, Signal


@dataclass(frozen=True)
class Column:
    title: str
    tip: str


# The columns a user compares runs by come first; the composition details follow.
COLUMNS = (
    Column("#", "write order of the run in the file"),
    Column("run", "run name"),
    Column("vs ref", "completion against the reference run: = same, ≠ @p first differs at position p"),
    Column("probe drops", "dropped candidates of the probe row (row 0 without a probe)"),
    Column("drops", "dropped candidates of the whole batch (share of all candidates)"),
    Column("completion", "generated text of the probe row"),
    Column("label", "human label of the batch composition"),
    Column("condition", "experiment condition"),
    Column("B", "batch size"),
    Column("requests", "request id in each row"),
    Column("probe", "row of the probe request (-: none)"),
    Column("routing", "resolved routing knobs (hover for all)"),
    Column("kernels", "kernel mode"),
)
COL = {c.title: i for i, c in enumerate(COLUMNS)}
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
NAME_ROLE = Qt.ItemDataRole.UserRole + 2


class RunTableModel(QtCore.QAbstractTableModel):
    """One row per run, in write order, incomplete runs last. A run's attributes and stats arrive
    from the background (`add_run`) and fill its row; unusable runs are greyed with the reason."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.names: list[str] = []
        self.infos: dict[str, RunInfo] = {}
        self.stats: dict[str, RunStats] = {}
        self.unusable: dict[str, str] = {}   # run name -> why it cannot be shown
        self.chosen_reference: str | None = None
        self._refs: dict[str, str] | None = None

    def set_runs(self, names: list[str], infos: dict[str, RunInfo], unusable: dict[str, str]) -> None:
        """Rows for `names` (then any unusable run not among them); `infos` known so far."""
        self.beginResetModel()
        self.names = list(names) + [n for n in unusable if n not in names]
        self.infos = dict(infos)
        self.unusable = dict(unusable)
        self.stats = {}
        self.chosen_reference = None
        self._refs = None
        self.endResetModel()

    def add_run(self, info: RunInfo, stats: RunStats | None = None) -> None:
        self.infos[info.name] = info
        if stats is not None:
            self.stats[info.name] = stats
        self._refs = None
        r = self.row_of(info.name)
        if r >= 0:
            self.dataChanged.emit(self.index(r, 0), self.index(r, len(COLUMNS) - 1))
        self._changed_all(COL["vs ref"], COL["vs ref"])  # a new run may be another's reference

    def mark_unusable(self, name: str, why: str) -> None:
        self.unusable[name] = why
        if name not in self.names:
            self.beginInsertRows(QtCore.QModelIndex(), len(self.names), len(self.names))
            self.names.append(name)
            self.endInsertRows()
        self._changed_all(0, len(COLUMNS) - 1)

    @property
    def refs(self) -> dict[str, str]:
        """Reference run of each run whose attributes are known."""
        if self._refs is None:
            self._refs = references(list(self.infos.values()), self.chosen_reference)
        return self._refs

    def set_reference(self, name: str | None) -> None:
        self.chosen_reference = name
        self._refs = None
        self._changed_all(0, len(COLUMNS) - 1)

    def _changed_all(self, first: int, last: int) -> None:
        if self.rowCount():
            self.dataChanged.emit(self.index(0, first), self.index(self.rowCount() - 1, last))

    def mark(self, name: str) -> str:
        return divergence_mark(name, self.refs.get(name, name), self.stats)

    def usable(self, name: str) -> bool:
        return name in self.names and name not in self.unusable

    # -- Qt model API -----------------------------------------------------------------------------

    def rowCount(self, parent=None) -> int:  # noqa: N802
        return 0 if parent is not None and parent.isValid() else len(self.names)

    def columnCount(self, parent=None) -> int:  # noqa: N802
        return 0 if parent is not None and parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            if role == Qt.ItemDataRole.DisplayRole:
                return COLUMNS[section].title
            if role == Qt.ItemDataRole.ToolTipRole:
                return COLUMNS[section].tip
        return None

    def flags(self, index):
        if self.names[index.row()] in self.unusable:
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        name = self.names[r]
        if role == NAME_ROLE:
            return name
        if name in self.unusable:
            return self._unusable_data(name, c, role)
        info = self.infos.get(name)
        if info is None:
            return self._pending_data(name, r, c, role)
        if role in (Qt.ItemDataRole.DisplayRole, SORT_ROLE):
            return self._value(info, c, sort=role == SORT_ROLE)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(info, c)
        if role == Qt.ItemDataRole.FontRole and info.name == self.refs.get(info.name):
            font = QtGui.QFont()
            font.setBold(True)
            return font
        differs = c == COL["vs ref"] and self.mark(info.name).startswith("≠")
        if role == Qt.ItemDataRole.ForegroundRole and differs:
            return QtGui.QColor("#c0392b")
        if role == Qt.ItemDataRole.TextAlignmentRole and c in (COL["#"], COL["B"], COL["probe"], COL["drops"],
                                                              COL["probe drops"]):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _value(self, info: RunInfo, c: int, sort: bool):
        stats = self.stats.get(info.name)
        if c == COL["#"]:
            return info.index
        if c == COL["run"]:
            return info.name
        if c == COL["label"]:
            return info.label
        if c == COL["condition"]:
            return info.condition
        if c == COL["B"]:
            return info.batch_size
        if c == COL["requests"]:
            return info.requests_text
        if c == COL["probe"]:
            return info.probe_row if sort or info.probe_row >= 0 else "-"
        if c == COL["routing"]:
            return info.routing
        if c == COL["kernels"]:
            return info.kernel_mode
        if stats is None:
            return -1 if sort else "…"
        if c == COL["drops"]:
            return stats.batch_dropped if sort else f"{stats.batch_dropped} ({stats.drop_rate:.1%})"
        if c == COL["probe drops"]:
            return stats.focus_dropped
        if c == COL["vs ref"]:
            mark = self.mark(info.name)
            if sort:  # the reference first, then equal runs, then by first differing position
                return (-2 if mark == "ref" else -1 if mark == "=" else int(mark[3:]) if mark.startswith("≠")
                        else 1 << 30)
            return mark
        if c == COL["completion"]:
            return stats.preview
        return None

    def _tooltip(self, info: RunInfo, c: int) -> str | None:
        if c == COL["routing"]:
            return info.routing_json or None
        if c == COL["requests"]:
            return ", ".join(str(r) for r in info.request_ids)
        if c == COL["vs ref"]:
            return f"reference: {self.refs.get(info.name, info.name)}"
        if c == COL["completion"] and info.name in self.stats:
            return self.stats[info.name].preview
        return None

    def _pending_data(self, name: str, r: int, c: int, role):
        """A run whose attributes are still being read."""
        if role == Qt.ItemDataRole.DisplayRole:
            return {COL["#"]: r, COL["run"]: name}.get(c, "…")
        if role == SORT_ROLE:
            return {COL["#"]: r, COL["run"]: name}.get(c, -1)
        return None

    def _unusable_data(self, name: str, c: int, role):
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return {COL["run"]: name, COL["label"]: self.unusable[name]}.get(c)
        if role == SORT_ROLE:
            return 1 << 30 if c == COL["#"] else ""
        if role == Qt.ItemDataRole.ForegroundRole:
            return QtGui.QColor("#999999")
        return None

    def row_of(self, name: str) -> int:
        return self.names.index(name) if name in self.names else -1


class RunBrowser(QtWidgets.QWidget):
    """Filter box and sortable table of runs; emits `run_selected(name)` and `reference_chosen(name)`."""

    run_selected = Signal(str)
    reference_chosen = Signal(object)  # run name or None for the default references

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = RunTableModel(self)
        self.proxy = QtCore.QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("Filter runs (name, condition, routing, completion, …)")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QtWidgets.QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(COL["#"], Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.horizontalHeader().setStretchLastSection(False)
        self.table.setWordWrap(False)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.count = QtWidgets.QLabel()
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.filter)
        layout.addWidget(self.table)
        layout.addWidget(self.count)
        self.proxy.rowsInserted.connect(self._update_count)
        self.proxy.modelReset.connect(self._update_count)
        self.model.dataChanged.connect(self._update_count)
        self.proxy.layoutChanged.connect(self._update_count)
        self.filter.textChanged.connect(self._update_count)

    def set_runs(self, names: list[str], infos: dict[str, RunInfo], unusable: dict[str, str]) -> None:
        """Show the runs `names` (attributes known so far in `infos`) and, greyed, those that cannot
        be shown (name -> why)."""
        self.model.set_runs(names, infos, unusable)
        for c, width in ((COL["#"], 32), (COL["run"], 64), (COL["vs ref"], 56), (COL["probe drops"], 90),
                         (COL["drops"], 104), (COL["completion"], 260), (COL["label"], 150),
                         (COL["condition"], 150), (COL["B"], 36), (COL["requests"], 110), (COL["probe"], 44),
                         (COL["routing"], 260), (COL["kernels"], 90)):
            self.table.setColumnWidth(c, width)
        self._update_count()

    def _update_count(self, *args) -> None:
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        n_bad = len(self.model.unusable)
        bad = f" ({n_bad} incomplete or damaged)" if n_bad else ""
        self.count.setText(f"{shown} of {total} runs shown{bad}" if shown != total else f"{total} runs{bad}")

    def select(self, name: str) -> None:
        """Make `name` the current row (without emitting when it already is)."""
        source_row = self.model.row_of(name)
        if source_row < 0:
            return
        index = self.proxy.mapFromSource(self.model.index(source_row, COL["run"]))
        if index.isValid() and self.table.currentIndex().row() != index.row():
            self.table.setCurrentIndex(index)
            self.table.scrollTo(index)

    def current_name(self) -> str | None:
        index = self.table.currentIndex()
        return self.proxy.data(index, NAME_ROLE) if index.isValid() else None

    def _current_changed(self, current, previous) -> None:
        name = self.proxy.data(current, NAME_ROLE) if current.isValid() else None
        if name:
            self.run_selected.emit(name)

    def _context_menu(self, pos) -> None:
        index = self.table.indexAt(pos)
        name = self.proxy.data(index, NAME_ROLE) if index.isValid() else None
        menu = QtWidgets.QMenu(self)
        if name:
            menu.addAction(f"Use {name} as reference for its request",
                           lambda: self.reference_chosen.emit(name))
            menu.addAction("Copy run name", lambda: QtWidgets.QApplication.clipboard().setText(name))
        if self.model.chosen_reference is not None:
            menu.addAction("Default references (first run of each request and condition)",
                           lambda: self.reference_chosen.emit(None))
        if not menu.isEmpty():
            menu.exec(self.table.viewport().mapToGlobal(pos))
