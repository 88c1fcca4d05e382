"""The run browser's tree fits its panel: condition headings wrap onto as many lines as they need,
and the columns after "run" and "vs ref" show only while they fit (widen the panel to see more), so
nothing is cut and the tree never scrolls sideways."""

from __future__ import annotations

from collections.abc import Sequence

from inspector.qt import Qt, QtCore, QtGui, QtWidgets

#: Room an item leaves on each side of its text, and the narrowest the run column gets.
TEXT_MARGIN_PX = 4
RUN_MIN_PX = 120


class HeadingDelegate(QtWidgets.QStyledItemDelegate):
    """Draws rows whose `role` data is not None (the headings) wrapped over the row's whole width."""

    def __init__(self, view: QtWidgets.QTreeView, role: int) -> None:
        super().__init__(view)
        self.view, self.role = view, role
        self._row: int | None = None

    def _heading(self, index: QtCore.QModelIndex) -> bool:
        return index.column() == 0 and index.data(self.role) is not None

    def initStyleOption(self, option, index) -> None:  # noqa: N802 (Qt's name)
        super().initStyleOption(option, index)
        if self._heading(index):
            option.features |= QtWidgets.QStyleOptionViewItem.ViewItemFeature.WrapText

    def sizeHint(self, option, index) -> QtCore.QSize:  # noqa: N802 (Qt's name)
        # A run's row is one line: its height is measured once (the view asks for every row it lays out).
        if not self._heading(index):
            if self._row is None:
                self._row = super().sizeHint(option, index).height()
            return QtCore.QSize(0, self._row)
        hint = super().sizeHint(option, index)
        font = index.data(Qt.ItemDataRole.FontRole) or self.view.font()
        span = min(self.view.viewport().width(), self.view.header().length())  # the shown columns
        width = max(span - self.view.indentation() - 2 * TEXT_MARGIN_PX, 40)
        text = str(index.data() or "")
        box = QtGui.QFontMetrics(font).boundingRect(QtCore.QRect(0, 0, width, 10_000),
                                                     int(Qt.TextFlag.TextWordWrap), text)
        return QtCore.QSize(hint.width(), max(hint.height(), box.height() + 4))


class TreeFit(QtCore.QObject):
    """Keeps `view`'s headings wrapped at its width and its columns within it. `widths` gives each
    column's width when shown (the first two always are; the run column gives way first)."""

    def __init__(self, view: QtWidgets.QTreeView, role: int) -> None:
        super().__init__(view)
        self.view = view
        self.role = role
        self.widths: list[int] = []
        self.delegate = HeadingDelegate(view, role)
        view.setItemDelegate(self.delegate)
        view.setUniformRowHeights(False)   # headings take two lines where they need them
        view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._width = -1
        view.viewport().installEventFilter(self)

    def set_widths(self, widths: Sequence[int]) -> None:
        self.widths = list(widths)
        self.fit()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QtCore.QEvent.Type.Resize and self.view.viewport().width() != self._width:
            self._width = self.view.viewport().width()
            QtCore.QTimer.singleShot(0, self.fit)
        return super().eventFilter(watched, event)

    def fit(self) -> None:
        view, room = self.view, self.view.viewport().width()
        if not self.widths or room <= 0:
            return
        run = max(min(self.widths[0], room - self.widths[1]), RUN_MIN_PX)
        used, fits = run + self.widths[1], True
        for c, width in enumerate(self.widths[2:], start=2):
            fits = fits and used + width <= room
            if view.isColumnHidden(c) == fits:
                view.setColumnHidden(c, not fits)
            if fits:
                view.setColumnWidth(c, width)
                used += width
        view.setColumnWidth(0, run + max(room - used, 0))  # the run column takes what is left
        view.setColumnWidth(1, self.widths[1])
        model = view.model()
        for g in range(model.rowCount()):   # the headings wrap at the new width
            self.delegate.sizeHintChanged.emit(model.index(g, 0))
