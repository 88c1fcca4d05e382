"""The run browser: the runs grouped by condition (each group names its reference), one row per
run with its composition, drops, completion and whether the completion differs from its
reference run; selecting a row selects the run."""

from __future__ import annotations

from inspector.app.browser_fit import TreeFit
from inspector.figure_data.browser import Mark, RunInfo, RunStats
from inspector.qt import Qt, QtCore, QtGui, QtWidgets, Signal, plain_tip
from inspector.state.catalog import DAMAGED, CatalogListener, RunCatalog
from inspector.state.run_columns import COL, COLUMNS, ORDER, RUN, Column
from inspector.terminal import printable_line

#: Widest the run column grows to fit its names; longer ones are elided in the middle.
RUN_WIDTH_MAX = 300
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
NAME_ROLE = Qt.ItemDataRole.UserRole + 2
GROUP_ROLE = Qt.ItemDataRole.UserRole + 3   # the condition of a group heading (None on a run)

_N_COLUMNS = len(COLUMNS)
_LAST_COLUMN = _N_COLUMNS - 1
_NO_FLAGS = Qt.ItemFlag.NoItemFlags
_GROUP_FLAGS = Qt.ItemFlag.ItemIsEnabled
#: A run row never has children: the view then never asks.
_RUN_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren
_ALIGN = {"left": None, "right": int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)}
_ALERT, _HEADING, _GREYED = QtGui.QColor("#c0392b"), QtGui.QColor("#505050"), QtGui.QColor("#999999")
_RUN_ROLES = frozenset({Qt.ItemDataRole.DisplayRole, SORT_ROLE, Qt.ItemDataRole.ToolTipRole,
                        Qt.ItemDataRole.FontRole, Qt.ItemDataRole.ForegroundRole,
                        Qt.ItemDataRole.TextAlignmentRole})


def _bold() -> QtGui.QFont:
    font = QtGui.QFont()
    font.setBold(True)
    return font


class RunTableModel(QtCore.QAbstractItemModel):
    """The Qt face of a `RunCatalog` (inspector/state/catalog.py): its groups as headings with their
    runs as children, its columns (inspector/state/run_columns.py) as cells, and its changes as Qt's
    signals.

    Indexes: a group heading has internal id 0, a run of group g has g + 1."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._events = _QtEvents(self)
        self.catalog = RunCatalog(self._events)

    # What the window reads of the catalog.
    names = property(lambda self: self.catalog.names)
    infos = property(lambda self: self.catalog.infos)
    stats = property(lambda self: self.catalog.stats)
    unusable = property(lambda self: self.catalog.unusable)
    groups = property(lambda self: self.catalog.groups)
    refs = property(lambda self: self.catalog.refs)
    chosen_reference = property(lambda self: self.catalog.chosen_reference)

    def set_runs(self, names: list[str], infos: dict[str, RunInfo], unusable: dict[str, str],
                 stats: dict[str, RunStats] | None = None, conditions: dict[str, str] | None = None,
                 marks: dict | None = None) -> None:
        """Rows for `names` (`RunCatalog.reset`)."""
        self.catalog.reset(names, infos, unusable, stats, conditions, marks)

    def add_runs(self, batch: list[tuple[RunInfo, RunStats | None]]) -> None:
        self.catalog.add(batch)

    def mark_unusable(self, name: str, why: str) -> None:
        self.catalog.mark_unusable(name, why)

    def set_reference(self, name: str | None) -> None:
        self.catalog.set_reference(name)

    def mark(self, name: str) -> Mark:
        return self.catalog.mark(name)

    def regroup(self) -> None:
        self.catalog.regroup()

    def index_of(self, name: str, column: int = 0) -> QtCore.QModelIndex:
        """The index of run `name` (invalid when it is not listed)."""
        where = self.catalog.where(name)
        if where is None:
            return QtCore.QModelIndex()
        g, r = where
        return self.createIndex(r, column, g + 1)

    # -- Qt model API -----------------------------------------------------------------------------

    def index(self, row, column, parent=None):
        # Called a few times per row whenever the view lays out its rows: kept short.
        groups = self.catalog.groups
        if 0 <= column < _N_COLUMNS and row >= 0:
            if parent is None or not parent.isValid():
                if row < len(groups):
                    return self.createIndex(row, column, 0)
            elif parent.internalId() == 0:
                g = parent.row()
                if g < len(groups) and row < len(groups[g].names):
                    return self.createIndex(row, column, g + 1)
        return QtCore.QModelIndex()

    def parent(self, index=None):
        if index is None or not index.isValid() or index.internalId() == 0:
            return QtCore.QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent=None) -> int:  # noqa: N802
        groups = self.catalog.groups
        if parent is None or not parent.isValid():
            return len(groups)
        if parent.internalId() == 0 and parent.column() == 0 and 0 <= parent.row() < len(groups):
            return len(groups[parent.row()].names)
        return 0

    def columnCount(self, parent=None) -> int:  # noqa: N802
        return _N_COLUMNS

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and 0 <= section < _N_COLUMNS:
            if role == Qt.ItemDataRole.DisplayRole:
                return COLUMNS[section].title
            if role == Qt.ItemDataRole.ToolTipRole:
                return COLUMNS[section].tip
        return None

    def _name(self, index) -> str | None:
        if not index.isValid() or index.internalId() == 0:
            return None
        return self.catalog.groups[index.internalId() - 1].names[index.row()]

    def flags(self, index):
        # Called for every row each time the view lays out its rows: constants, no enum arithmetic.
        if not index.isValid():
            return _NO_FLAGS
        g = index.internalId()
        if g == 0:
            return _GROUP_FLAGS
        name = self.catalog.groups[g - 1].names[index.row()]
        return _NO_FLAGS if name in self.catalog.unusable else _RUN_FLAGS

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        value = self._data(index, role)
        if isinstance(value, str) and role == Qt.ItemDataRole.DisplayRole:  # controls and bidi escaped
            return printable_line(value)
        return value

    def _data(self, index, role):
        if not index.isValid():
            return None
        name = self._name(index)
        if name is None:
            return self._group_data(index.row(), index.column(), role)
        if role == NAME_ROLE:
            return name
        if role not in _RUN_ROLES:  # a view asks for many more roles than a run's cells answer
            return None
        column = COLUMNS[index.column()]
        if name in self.catalog.unusable:
            return self._unusable_data(name, column, role)
        if name not in self.catalog.infos:
            return self._pending_data(name, column, role)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _ALIGN[column.align]
        if role == Qt.ItemDataRole.FontRole:
            return _bold() if self.catalog.is_reference(name) else None
        if role == Qt.ItemDataRole.ForegroundRole and column.alert is None:
            return None
        row = self.catalog.row(name)
        if role == Qt.ItemDataRole.DisplayRole:
            return "…" if column.summarised and row.stats is None else column.value(row)
        if role == SORT_ROLE:
            return -1 if column.summarised and row.stats is None else column.sort_value(row)
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tip(column.tooltip(row))
        return _ALERT if column.alert(row) else None   # ForegroundRole

    def _group_data(self, g: int, c: int, role):
        group = self.catalog.groups[g]
        if role == GROUP_ROLE:
            return group.key
        if role == Qt.ItemDataRole.DisplayRole and c == 0:
            return self.catalog.group_title(group)
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tip(self.catalog.group_tip(group))
        if role == SORT_ROLE:
            return g  # groups keep their order under every sort
        if role == Qt.ItemDataRole.FontRole:
            return _bold()
        if role == Qt.ItemDataRole.ForegroundRole:
            return _HEADING
        return None

    def _pending_sort(self, name: str, column: Column, other):
        """How a run not shown in full sorts: by name, by write order as listed, else `other`."""
        if column is RUN:
            return name
        return self.catalog.order.get(name, -1) if column is ORDER else other

    def _pending_data(self, name: str, column: Column, role):
        """A run whose attributes are still being read."""
        if role == Qt.ItemDataRole.DisplayRole:
            return name if column is RUN else "…"
        if role == Qt.ItemDataRole.ToolTipRole and column is RUN:
            return plain_tip(name)
        if role == SORT_ROLE:
            return self._pending_sort(name, column, -1)
        return None

    def _unusable_data(self, name: str, column: Column, role):
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole) and column is RUN:
            text = f"{name}: {self.catalog.unusable[name]}"  # spans the row: the reason stays in view
            return text if role == Qt.ItemDataRole.DisplayRole else plain_tip(text)
        if role == SORT_ROLE:
            return self._pending_sort(name, column, "")
        if role == Qt.ItemDataRole.ForegroundRole:
            return _GREYED
        return None


class _QtEvents(CatalogListener):
    """A catalog's changes as the signals of its Qt model."""

    def __init__(self, model: RunTableModel) -> None:
        self.model = model
        self._kept: list = []   # during a regrouping: the persistent indexes and what they pointed at

    def _parent(self, g: int | None) -> QtCore.QModelIndex:
        return QtCore.QModelIndex() if g is None else self.model.index(g, 0)

    def resetting(self) -> None:
        self.model.beginResetModel()

    def reset(self) -> None:
        self.model.endResetModel()

    def removing(self, parent, first, last) -> None:
        self.model.beginRemoveRows(self._parent(parent), first, last)

    def removed(self) -> None:
        self.model.endRemoveRows()

    def inserting(self, parent, first, last) -> None:
        self.model.beginInsertRows(self._parent(parent), first, last)

    def inserted(self) -> None:
        self.model.endInsertRows()

    def regrouping(self) -> None:
        """Keep the view's selection and expansion: note what each persistent index points at."""
        model = self.model
        model.layoutAboutToBeChanged.emit()
        old = model.persistentIndexList()
        self._kept = [(i, model.data(i, NAME_ROLE), model.data(i, GROUP_ROLE), i.column()) for i in old]

    def regrouped(self) -> None:
        model = self.model
        position = {g.key: i for i, g in enumerate(model.catalog.groups)}
        old, new = [], []
        for index, name, key, column in self._kept:
            old.append(index)
            if name is not None and model.catalog.where(name) is not None:
                new.append(model.index_of(name, column))
            elif key is not None and key in position:
                new.append(model.index(position[key], column))
            else:
                new.append(QtCore.QModelIndex())
        self._kept = []
        model.changePersistentIndexList(old, new)
        model.layoutChanged.emit()

    def changed(self, spans, headings: bool) -> None:
        model = self.model
        for g in range(len(model.catalog.groups) if headings else 0):  # they count runs, name references
            model.dataChanged.emit(model.index(g, 0), model.index(g, _LAST_COLUMN))
        for g, lo, hi in spans:
            parent = model.index(g, 0)
            model.dataChanged.emit(model.index(lo, 0, parent), model.index(hi, _LAST_COLUMN, parent))


class RunBrowser(QtWidgets.QWidget):
    """Filter box and sortable tree of runs grouped by condition; emits `run_selected(name)` and
    `reference_chosen(name)`."""

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
        self.proxy.setRecursiveFilteringEnabled(True)   # a matching run keeps its group
        self.proxy.setAutoAcceptChildRows(True)         # a matching condition keeps its runs
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("Filter runs (name, condition, routing, completion, …)")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QtWidgets.QTreeView()
        self.table.setModel(self.proxy)
        # The header sorts through `_sort` (what `setSortingEnabled` would wire to the proxy).
        header = self.table.header()
        header.setSectionsClickable(True)
        header.setSortIndicatorShown(True)
        header.setSortIndicator(COL["#"], Qt.SortOrder.AscendingOrder)
        header.sortIndicatorChanged.connect(self._sort)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setIndentation(12)
        self.fit = TreeFit(self.table, GROUP_ROLE)   # headings wrap; columns show while they fit
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # run names differ at both ends
        self.table.header().setStretchLastSection(False)
        self.table.setWordWrap(False)
        self.table.setMinimumHeight(160)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.collapsed: set[str] = set()   # conditions the user folded
        self.table.collapsed.connect(lambda i: self._folded(i, True))
        self.table.expanded.connect(lambda i: self._folded(i, False))
        self.count = QtWidgets.QLabel()
        self.count.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # may show a trace's text
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.filter)
        layout.addWidget(self.table)
        layout.addWidget(self.count)
        for signal in (self.proxy.rowsInserted, self.proxy.rowsRemoved, self.proxy.modelReset,
                       self.proxy.layoutChanged):
            signal.connect(self._structure_changed)
        self.filter.textChanged.connect(self._structure_changed)
        self._applying = False

    def set_runs(self, names: list[str], infos: dict[str, RunInfo], unusable: dict[str, str],
                 stats: dict[str, RunStats] | None = None, conditions: dict[str, str] | None = None,
                 marks: dict | None = None) -> None:
        """Show the runs `names` (attributes, stats and marks known so far in `infos`, `stats`, `marks`;
        the listed `conditions` group the others) and, greyed, those that cannot be shown (name -> why)."""
        self.model.set_runs(names, infos, unusable, stats, conditions, marks)
        # The run column fits the longest name (indented under its group), up to RUN_WIDTH_MAX.
        bold = QtGui.QFont(self.table.font())
        bold.setBold(True)  # each reference run is in bold
        longest = max((QtGui.QFontMetrics(bold).horizontalAdvance(n) for n in names), default=0)
        fit = longest + 2 * self.table.indentation() + 12  # a run sits two levels in: its group's and its own
        self.fit.set_widths([min(max(c.width, fit), RUN_WIDTH_MAX) if c is RUN else c.width for c in COLUMNS])
        self._structure_changed()

    def _sort(self, column: int, order) -> None:
        """Sort by `column`. By write order, ascending, the model's own order is shown as it is: the
        proxy sorting thousands of rows calls the model back twice per comparison (seconds at
        10,000 runs), and keeping them sorted as summaries arrive calls it back again."""
        if column == COL["#"] and order == Qt.SortOrder.AscendingOrder:
            self.proxy.sort(-1)
        else:
            self.proxy.sort(column, order)

    def _folded(self, index, folded: bool) -> None:
        key = index.data(GROUP_ROLE)
        if key is not None and not self._applying:
            (self.collapsed.add if folded else self.collapsed.discard)(key)

    def _structure_changed(self, *args) -> None:
        """Headings and unusable runs span the row; groups stay folded as the user left them."""
        self._applying = True
        root = QtCore.QModelIndex()
        for g in range(self.proxy.rowCount()):  # each call lays out every row: only what changed
            group = self.proxy.index(g, 0)
            if not self.table.isFirstColumnSpanned(g, root):
                self.table.setFirstColumnSpanned(g, root, True)
            expanded = group.data(GROUP_ROLE) not in self.collapsed
            if self.table.isExpanded(group) != expanded:
                self.table.setExpanded(group, expanded)
            if group.data(GROUP_ROLE) == DAMAGED:
                for r in range(self.proxy.rowCount(group)):
                    if not self.table.isFirstColumnSpanned(r, group):
                        self.table.setFirstColumnSpanned(r, group, True)
        self._applying = False
        self._update_count()

    def shown_names(self) -> list[str]:
        """The runs listed now (filter applied), in display order."""
        out = []
        for g in range(self.proxy.rowCount()):
            group = self.proxy.index(g, 0)
            out += [self.proxy.index(r, 0, group).data(NAME_ROLE) for r in range(self.proxy.rowCount(group))]
        return out

    def proxy_index(self, name: str, column: int = 0) -> QtCore.QModelIndex:
        """The displayed index of run `name` (invalid when filtered out)."""
        return self.proxy.mapFromSource(self.model.index_of(name, column))

    def _update_count(self, *args) -> None:
        shown = sum(self.proxy.rowCount(self.proxy.index(g, 0)) for g in range(self.proxy.rowCount()))
        total = len(self.model.names)
        n_bad = len(self.model.unusable)
        bad = f" ({n_bad} incomplete or damaged)" if n_bad else ""
        groups = self.model.catalog.conditions_shown
        where = f" in {groups} conditions" if groups > 1 else ""
        self.count.setText(f"{shown} of {total} runs shown{bad}" if shown != total
                           else f"{total} runs{where}{bad}")

    def select(self, name: str) -> None:
        """Make `name` the current row (without emitting when it already is)."""
        index = self.proxy_index(name)
        if not index.isValid():
            return
        if index.parent().isValid() and not self.table.isExpanded(index.parent()):
            self.table.expand(index.parent())
        if self.table.currentIndex().siblingAtColumn(0) != index:
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
