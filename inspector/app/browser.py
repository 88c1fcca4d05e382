"""The run browser: the runs grouped by condition (each group names its reference), one row per
run with its composition, drops, completion and whether the completion differs from its
reference run; selecting a row selects the run."""

from __future__ import annotations

from dataclasses import dataclass

from inspector.app.browser_fit import TreeFit
from inspector.figure_data.browser import Mark, RunInfo, RunStats, divergence_mark, references
from inspector.qt import Qt, QtCore, QtGui, QtWidgets, Signal


@dataclass(frozen=True)
class Column:
    title: str
    tip: str


# The columns a user compares runs by come first; the composition details follow. The condition
# is each group's heading.
COLUMNS = (
    Column("run", "run name (hover for the whole name and its label)"),
    Column("vs ref", "completion against the reference run of its request and condition: "
                     "ref = that reference, = same, ≠ @p first differs at position p"),
    Column("probe drops", "dropped candidates of the probe row (row 0 without a probe)"),
    Column("drops", "dropped candidates of the whole batch (share of all candidates)"),
    Column("completion", "generated text of the probe row"),
    Column("label", "human label of the batch composition"),
    Column("#", "write order of the run in the file"),
    Column("B", "batch size"),
    Column("requests", "request id in each row"),
    Column("probe", "row of the probe request (-: none)"),
    Column("routing", "resolved routing knobs (hover for all)"),
    Column("kernels", "kernel mode"),
)
COL = {c.title: i for i, c in enumerate(COLUMNS)}
_N_COLUMNS = len(COLUMNS)
WIDTHS = {"run": 190, "vs ref": 50, "probe drops": 84, "drops": 104, "completion": 240, "label": 150,
          "#": 36, "B": 32, "requests": 110, "probe": 44, "routing": 260, "kernels": 90}
#: Widest the run column grows to fit its names; longer ones are elided in the middle.
RUN_WIDTH_MAX = 300
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
NAME_ROLE = Qt.ItemDataRole.UserRole + 2
GROUP_ROLE = Qt.ItemDataRole.UserRole + 3   # the condition of a group heading (None on a run)
#: Groups of runs whose condition is not known yet, or that cannot be shown.
PENDING, DAMAGED = "\x00reading", "\x00damaged"


_NO_FLAGS = Qt.ItemFlag.NoItemFlags
_GROUP_FLAGS = Qt.ItemFlag.ItemIsEnabled
#: A run row never has children: the view then never asks.
_RUN_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


@dataclass
class Group:
    key: str            # the condition, or PENDING / DAMAGED
    names: list[str]


class RunTableModel(QtCore.QAbstractItemModel):
    """Runs grouped by condition (groups in write order of their first run; runs still being read,
    then unusable runs, last). A run's attributes and stats arrive from the background (`add_run`)
    and fill its row; unusable runs are greyed with the reason.

    Indexes: a group heading has internal id 0, a run of group g has g + 1."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.names: list[str] = []
        self.infos: dict[str, RunInfo] = {}
        self.stats: dict[str, RunStats] = {}
        self.unusable: dict[str, str] = {}   # run name -> why it cannot be shown
        #: Each run's condition as listed with the trace, before its attributes are checked: its rows
        #: start in their groups, so summaries only fill cells and never move rows.
        self.conditions: dict[str, str] = {}
        self.chosen_reference: str | None = None
        self.groups: list[Group] = []
        self._where: dict[str, tuple[int, int]] = {}   # run -> (group, row in group)
        self._refs: dict[str, str] | None = None
        self._order: dict[str, int] = {}   # run -> position in `names` (write order)
        self._firsts: dict = {}       # the first run of each request and condition among `infos`
        self._last_index = -1         # the highest write order among `infos`
        self._heading_refs: dict[str, tuple] = {}   # group -> ((refs version, runs), its references)
        self._refs_version = 0                      # counts the changes of `_refs`
        self._marks: dict[tuple[str, str], str] = {}  # (run, reference) -> mark, once both are summarised

    def set_runs(self, names: list[str], infos: dict[str, RunInfo], unusable: dict[str, str],
                 stats: dict[str, RunStats] | None = None, conditions: dict[str, str] | None = None) -> None:
        """Rows for `names` (then any unusable run not among them); `infos` and `stats` known so far;
        `conditions` the listed condition of runs whose attributes are still to be read."""
        self.beginResetModel()
        self.names = list(names) + [n for n in unusable if n not in names]
        self.conditions = dict(conditions or {})
        self._order = {n: i for i, n in enumerate(self.names)}
        self.infos = dict(infos)
        self._last_index = max((i.index for i in self.infos.values()), default=-1)
        self.unusable = dict(unusable)
        self.stats = dict(stats or {})
        self._marks = {}
        self.chosen_reference = None
        self._refs = None
        self.groups = self._grouped()
        self._index_groups()
        self.endResetModel()

    def add_run(self, info: RunInfo, stats: RunStats | None = None) -> None:
        self.add_runs([(info, stats)])

    def add_runs(self, batch: list[tuple[RunInfo, RunStats | None]]) -> None:
        """Fill the rows of a batch of runs: the rows that change are the batch's, those whose
        reference changed and those of the batch's runs as references (with their headings), so
        adding n runs in batches costs O(n) per batch, not per run."""
        if not batch:
            return
        old_refs = self.refs
        # Runs arriving after every run known (write order, as the summary reads them) change no
        # earlier run's reference: theirs are found without recomputing every run's.
        later = (all(info.name not in self.infos for info, _ in batch)
                 and min(info.index for info, _ in batch) > self._last_index)
        moved = []
        for info, stats in batch:
            if self.group_key(info.name) != info.condition:
                moved.append(info.name)
            self.infos[info.name] = info
            self._last_index = max(self._last_index, info.index)
            if stats is not None:
                self.stats[info.name] = stats
        if moved:
            self._move_rows(moved)
        added = {info.name for info, _ in batch}
        if later:
            self._refs = {**old_refs, **references([info for info, _ in batch], self.chosen_reference,
                                                   self._firsts, self.infos)}
            self._refs_version += 1
            changed = added
            # A heading changes when its runs move or it gains a reference.
            headings = bool(moved) or any(self._refs[n] == n for n in added)
        else:
            self._refs = None
            new_refs = self.refs
            changed = added | {n for n, ref in new_refs.items() if ref in added or old_refs.get(n) != ref}
            headings = True
        self._changed_rows(changed, headings)

    def mark_unusable(self, name: str, why: str) -> None:
        self.unusable[name] = why
        if name not in self.names:
            self._order[name] = len(self.names)
            self.names.append(name)
        self.regroup()

    @property
    def refs(self) -> dict[str, str]:
        """Reference run of each run whose attributes are known."""
        if self._refs is None:
            self._refs_version += 1
            self._firsts = {}
            self._refs = references(list(self.infos.values()), self.chosen_reference, self._firsts)
        return self._refs

    def set_reference(self, name: str | None) -> None:
        self.chosen_reference = name
        self._refs = None
        self._changed_all()

    def _changed_rows(self, names: set[str], headings: bool = True) -> None:
        """dataChanged for the rows of `names`, one span per group, and (`headings`) for the groups'
        headings (a changed heading repaints the view)."""
        last = len(COLUMNS) - 1
        spans: dict[int, tuple[int, int]] = {}
        for name in names:
            if name in self._where:
                g, r = self._where[name]
                lo, hi = spans.get(g, (r, r))
                spans[g] = (min(lo, r), max(hi, r))
        for g in range(len(self.groups) if headings else 0):  # they count runs, name references
            self.dataChanged.emit(self.index(g, 0), self.index(g, last))
        for g, (lo, hi) in sorted(spans.items()):
            parent = self.index(g, 0)
            self.dataChanged.emit(self.index(lo, 0, parent), self.index(hi, last, parent))

    def _changed_all(self) -> None:
        last = len(COLUMNS) - 1
        for g, group in enumerate(self.groups):
            self.dataChanged.emit(self.index(g, 0), self.index(g, last))
            if group.names:
                parent = self.index(g, 0)
                end = self.index(len(group.names) - 1, last, parent)
                self.dataChanged.emit(self.index(0, 0, parent), end)

    def mark(self, name: str) -> Mark:
        ref = self.refs.get(name, name)
        key = (name, ref)
        if key not in self._marks:
            mark = divergence_mark(name, ref, self.stats)
            if name not in self.stats or ref not in self.stats:
                return mark  # not final yet
            self._marks[key] = mark
        return self._marks[key]

    # -- grouping -------------------------------------------------------------------------------

    def group_key(self, name: str) -> str:
        if name in self.unusable:
            return DAMAGED
        info = self.infos.get(name)
        return self.conditions.get(name, PENDING) if info is None else info.condition

    def _grouped(self) -> list[Group]:
        groups: dict[str, Group] = {}
        for name in self.names:
            key = self.group_key(name)
            groups.setdefault(key, Group(key, [])).names.append(name)
        last = [groups.pop(k) for k in (PENDING, DAMAGED) if k in groups]
        return [*groups.values(), *last]

    def _index_groups(self) -> None:
        self._where = {n: (g, r) for g, group in enumerate(self.groups) for r, n in enumerate(group.names)}

    def regroup(self) -> None:
        """Move runs to the groups of their conditions, keeping the view's selection and expansion."""
        groups = self._grouped()
        if [(g.key, g.names) for g in groups] == [(g.key, g.names) for g in self.groups]:
            return
        self.layoutAboutToBeChanged.emit()
        old = self.persistentIndexList()
        keys = [(self.data(i, NAME_ROLE), self.data(i, GROUP_ROLE), i.column()) for i in old]
        self.groups = groups
        self._index_groups()
        position = {g.key: i for i, g in enumerate(groups)}
        new = []
        for name, key, column in keys:
            if name is not None and name in self._where:
                new.append(self.index_of(name, column))
            elif key is not None and key in position:
                new.append(self.index(position[key], column))
            else:
                new.append(QtCore.QModelIndex())
        self.changePersistentIndexList(old, new)
        self.layoutChanged.emit()

    def _move_rows(self, names: list[str]) -> None:
        """Move the rows of `names` to the groups of their keys as blocks of removed and inserted
        rows (a layout change would make the view and its proxy sort and lay out every row)."""
        leaving = set(names)
        for g in reversed(range(len(self.groups))):
            group = self.groups[g]
            rows = [r for r, n in enumerate(group.names) if n in leaving]
            for lo, hi in reversed(_blocks(rows)):
                self.beginRemoveRows(self.index(g, 0), lo, hi)
                del group.names[lo:hi + 1]
                self.endRemoveRows()
            if not group.names and group.key in (PENDING, DAMAGED):
                self.beginRemoveRows(QtCore.QModelIndex(), g, g)
                del self.groups[g]
                self.endRemoveRows()
        order = {n: i for i, n in enumerate(self.names)}
        joining: dict[str, list[str]] = {}
        for name in sorted(names, key=order.__getitem__):
            joining.setdefault(self.group_key(name), []).append(name)
        for key, new in joining.items():
            g = next((i for i, grp in enumerate(self.groups) if grp.key == key), None)
            if g is None:  # a new condition goes after the others, before PENDING and DAMAGED
                g = sum(1 for grp in self.groups if grp.key not in (PENDING, DAMAGED))
                if key == DAMAGED:
                    g = len(self.groups)
                self.beginInsertRows(QtCore.QModelIndex(), g, g)
                self.groups.insert(g, Group(key, []))
                self.endInsertRows()
            self._insert_in_order(g, new, order)
        self._index_groups()

    def _insert_in_order(self, g: int, new: list[str], order: dict[str, int]) -> None:
        """Insert `new` (in write order) into group g, keeping the group in write order."""
        names, parent = self.groups[g].names, self.index(g, 0)
        at, i = 0, 0
        while i < len(new):
            while at < len(names) and order[names[at]] < order[new[i]]:
                at += 1
            j = i + 1
            while j < len(new) and (at == len(names) or order[new[j]] < order[names[at]]):
                j += 1
            self.beginInsertRows(parent, at, at + j - i - 1)
            names[at:at] = new[i:j]
            self.endInsertRows()
            at, i = at + j - i, j

    def index_of(self, name: str, column: int = 0) -> QtCore.QModelIndex:
        """The index of run `name` (invalid when it is not listed)."""
        if name not in self._where:
            return QtCore.QModelIndex()
        g, r = self._where[name]
        return self.createIndex(r, column, g + 1)

    def group_title(self, group: Group) -> str:
        n = len(group.names)
        runs = f"{n} run{'s' if n != 1 else ''}"
        if group.key == PENDING:
            return f"reading run attributes… ({runs})"
        if group.key == DAMAGED:
            return f"incomplete or damaged ({runs}): cannot be shown"
        refs = self._group_refs(group)
        ref = (f" · ref {refs[0]}" if len(refs) == 1 else
               f" · {len(refs)} refs (one per request)" if refs else "")
        return f"{group.key or '(no condition)'} · {runs}{ref}"

    def _group_refs(self, group: Group) -> list[str]:
        """The references of a group's runs, in write order (kept until the references or the
        groups change: a heading is drawn often, and a group may hold thousands of runs)."""
        refs = self.refs
        key = (self._refs_version, len(group.names))
        if self._heading_refs.get(group.key, (None,))[0] != key:
            found = list(dict.fromkeys(refs.get(name, name) for name in group.names if name in self.infos))
            self._heading_refs[group.key] = (key, found)
        return self._heading_refs[group.key][1]

    def group_tip(self, group: Group) -> str:
        if group.key in (PENDING, DAMAGED):
            return self.group_title(group)
        refs = self._group_refs(group)
        return (f"condition {group.key or '(none)'}: {len(group.names)} runs. Each run is compared with the "
                f"reference of its request in this condition (marked ref): {', '.join(refs) or '…'}")

    # -- Qt model API -----------------------------------------------------------------------------

    def index(self, row, column, parent=None):
        # Called a few times per row whenever the view lays out its rows: kept short.
        if 0 <= column < _N_COLUMNS and row >= 0:
            if parent is None or not parent.isValid():
                if row < len(self.groups):
                    return self.createIndex(row, column, 0)
            elif parent.internalId() == 0:
                g = parent.row()
                if g < len(self.groups) and row < len(self.groups[g].names):
                    return self.createIndex(row, column, g + 1)
        return QtCore.QModelIndex()

    def parent(self, index=None):
        if index is None or not index.isValid() or index.internalId() == 0:
            return QtCore.QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent=None) -> int:  # noqa: N802
        if parent is None or not parent.isValid():
            return len(self.groups)
        if parent.internalId() == 0 and parent.column() == 0 and 0 <= parent.row() < len(self.groups):
            return len(self.groups[parent.row()].names)
        return 0

    def columnCount(self, parent=None) -> int:  # noqa: N802
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            if role == Qt.ItemDataRole.DisplayRole:
                return COLUMNS[section].title
            if role == Qt.ItemDataRole.ToolTipRole:
                return COLUMNS[section].tip
        return None

    def _name(self, index) -> str | None:
        if not index.isValid() or index.internalId() == 0:
            return None
        return self.groups[index.internalId() - 1].names[index.row()]

    def flags(self, index):
        # Called for every row each time the view lays out its rows: constants, no enum arithmetic.
        if not index.isValid():
            return _NO_FLAGS
        g = index.internalId()
        if g == 0:
            return _GROUP_FLAGS
        return _NO_FLAGS if self.groups[g - 1].names[index.row()] in self.unusable else _RUN_FLAGS

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        c = index.column()
        name = self._name(index)
        if name is None:
            return self._group_data(self.groups[index.row()], index.row(), c, role)
        if role == NAME_ROLE:
            return name
        if name in self.unusable:
            return self._unusable_data(name, c, role)
        info = self.infos.get(name)
        if info is None:
            return self._pending_data(name, c, role)
        if role in (Qt.ItemDataRole.DisplayRole, SORT_ROLE):
            return self._value(info, c, sort=role == SORT_ROLE)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(info, c)
        if role == Qt.ItemDataRole.FontRole and info.name == self.refs.get(info.name):
            font = QtGui.QFont()
            font.setBold(True)
            return font
        differs = c == COL["vs ref"] and self.mark(info.name).differs
        if role == Qt.ItemDataRole.ForegroundRole and differs:
            return QtGui.QColor("#c0392b")
        if role == Qt.ItemDataRole.TextAlignmentRole and c in (COL["#"], COL["B"], COL["probe"], COL["drops"],
                                                              COL["probe drops"]):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _group_data(self, group: Group, g: int, c: int, role):
        if role == GROUP_ROLE:
            return group.key
        if role == Qt.ItemDataRole.DisplayRole and c == 0:
            return self.group_title(group)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.group_tip(group)
        if role == SORT_ROLE:
            return g  # groups keep their order under every sort
        if role == Qt.ItemDataRole.FontRole:
            font = QtGui.QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ForegroundRole:
            return QtGui.QColor("#505050")
        return None

    def _value(self, info: RunInfo, c: int, sort: bool):
        stats = self.stats.get(info.name)
        if c == COL["#"]:
            # Sorted by the listing's write order, known before the run is read: a summary arriving
            # then never moves a row (a moved row makes the view lay out every row again).
            return self._order.get(info.name, info.index) if sort else info.index
        if c == COL["run"]:
            return info.name
        if c == COL["label"]:
            return info.label
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
            return mark.sort_key() if sort else mark.text()
        if c == COL["completion"]:
            return stats.preview
        return None

    def _tooltip(self, info: RunInfo, c: int) -> str | None:
        if c == COL["run"]:
            return f"{info.name}\n{info.label}\ncondition: {info.condition or '(none)'}"
        if c == COL["routing"]:
            return info.routing_json or None
        if c == COL["requests"]:
            return ", ".join(str(r) for r in info.request_ids)
        if c == COL["vs ref"]:
            reference = self.refs.get(info.name, info.name)
            if reference == info.name:
                return (f"the reference of request {info.focus_request} in condition "
                        f"{info.condition or '(none)'}: its other runs are compared with this one")
            return f"reference: {reference} (the first run of request {info.focus_request} in this condition)"
        if c == COL["completion"] and info.name in self.stats:
            return self.stats[info.name].preview
        if c == COL["label"]:
            return info.label or None
        return None

    def _pending_data(self, name: str, c: int, role):
        """A run whose attributes are still being read."""
        if role == Qt.ItemDataRole.DisplayRole:
            return name if c == COL["run"] else "…"
        if role == Qt.ItemDataRole.ToolTipRole and c == COL["run"]:
            return name
        if role == SORT_ROLE:
            return name if c == COL["run"] else self._order.get(name, -1) if c == COL["#"] else -1
        return None

    def _unusable_data(self, name: str, c: int, role):
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole) and c == COL["run"]:
            return f"{name}: {self.unusable[name]}"  # spans the row: the reason stays in view
        if role == SORT_ROLE:
            return name if c == COL["run"] else self._order.get(name, -1) if c == COL["#"] else ""
        if role == Qt.ItemDataRole.ForegroundRole:
            return QtGui.QColor("#999999")
        return None


def _blocks(rows: list[int]) -> list[tuple[int, int]]:
    """Sorted row numbers as (first, last) runs of consecutive rows."""
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


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
                 stats: dict[str, RunStats] | None = None, conditions: dict[str, str] | None = None) -> None:
        """Show the runs `names` (attributes and stats known so far in `infos`, `stats`; the listed
        `conditions` group the others) and, greyed, those that cannot be shown (name -> why)."""
        self.model.set_runs(names, infos, unusable, stats, conditions)
        # The run column fits the longest name (indented under its group), up to RUN_WIDTH_MAX.
        bold = QtGui.QFont(self.table.font())
        bold.setBold(True)  # each reference run is in bold
        longest = max((QtGui.QFontMetrics(bold).horizontalAdvance(n) for n in names), default=0)
        fit = longest + 2 * self.table.indentation() + 12  # a run sits two levels in: its group's and its own
        widths = {**WIDTHS, "run": min(max(WIDTHS["run"], fit), RUN_WIDTH_MAX)}
        self.fit.set_widths([widths[c.title] for c in COLUMNS])
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
        groups = sum(1 for g in self.model.groups if g.key not in (PENDING, DAMAGED))
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
