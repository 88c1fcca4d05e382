"""What every view has: its declaration, a lazy redraw when shown, what it exports, and saved settings.

A view's name, title, key and place come from its declaration in `inspector.specs.registry.SPECS`
(`name` picks it). A view subscribes to the shared `InspectorState`, asks it for figure data and
hands the data to a figure builder; it does no maths and no file I/O itself. A hidden view only
notes that it is out of date and redraws when it becomes visible, so a layer switch costs only what
is on screen. `export_state` says what an export needs, so exports never read the widgets.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Protocol

from inspector.qt import QtCore, QtWidgets, Signal, pg
from inspector.specs.registry import Export, ViewSpec
from inspector.specs.selection import Selection
from inspector.views.hover import HoverLine
from traces import TraceError

if TYPE_CHECKING:
    from inspector.state.signals import InspectorState

log = logging.getLogger(__name__)


class ViewSettings(Protocol):
    """The saved settings as a view reads and writes them. The app owns them
    (`inspector.app.settings.Settings`) and hands them to its views, which sit below it and never
    import it."""

    def value(self, key: str, default: Any = None, type_: type | None = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

#: The least height, in pixels, of a heatmap's or a bar chart's data area; below it a view scrolls.
MIN_PLOT_PX = 120
#: The least height of a table: a header and three rows.
MIN_TABLE_PX = 90


def keep_axis_names_whole(plot: pg.PlotItem) -> None:
    """Never let `plot`'s data area get shorter than the name of its left or right axis (a rotated
    name longer than its axis is cut at both ends)."""
    names = [plot.getAxis(side).label for side in ("left", "right")
             if plot.getAxis(side).isVisible() and plot.getAxis(side).label.isVisible()]
    need = max((math.ceil(label.boundingRect().width()) + 2 for label in names if label.toPlainText()),
               default=0)
    if need > plot.vb.minimumHeight():
        plot.vb.setMinimumHeight(need)


class _FillLayout(QtWidgets.QVBoxLayout):
    """A column whose scroll area fills the viewport down to the content's minimum height: with
    height-for-width (wrapped labels) a `QScrollArea` would size it to its preferred height instead."""

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt's name)
        return False


class View(QtWidgets.QWidget):
    """Base class of the views of `inspector.views.VIEWS`, one per declaration of `SPECS`."""

    name = ""             # the declaration in `SPECS`; `bind` sets `spec`, `title`, `shortcut`, `area`
    spec: ViewSpec
    title = "View"
    area = "tab"          # "tab": a tab of the main area; "bottom": below the tabs, always visible
    shortcut = ""         # key sequence that shows this view (tabs only)
    defer_ms = 0          # wait this long before redrawing, so that more important views paint first
    figure: Any = None    # the view's figure (`inspector.figures`); what it shows is `figure.data`
    drawn = Signal()      # after each redraw, for tests and benchmarks
    export_requested = Signal(object)  # the view's Export… button: the window opens the dialog on it

    @classmethod
    def bind(cls, spec: ViewSpec) -> type[View]:
        """Take title, shortcut and place from the view's declaration (`inspector.views.widget_class`)."""
        cls.spec = spec
        cls.title, cls.shortcut, cls.area = spec.title, spec.key, spec.area
        return cls

    def __init__(self, state: InspectorState, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self._dirty = True
        self._scheduled = False
        self.message = QtWidgets.QLabel()
        self.message.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # may show a trace's text
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #b03a2e; padding: 4px;")
        self.message.hide()
        # A readout describes one cell of one run, layer and file: any change of those blanks it.
        for signal in (state.trace_changed, state.run_changed, state.row_changed, state.layer_changed):
            signal.connect(self.clear_hover)

    # -- redraw scheduling ----------------------------------------------------------------------

    def invalidate(self, *args) -> None:
        """Mark out of date; redraw soon if visible (several changes in a row redraw once)."""
        self._dirty = True
        if self.isVisible() and not self._scheduled:
            self._scheduled = True
            QtCore.QTimer.singleShot(self.defer_ms, self._refresh_if_dirty)

    def _refresh_if_dirty(self) -> None:
        self._scheduled = False
        if self._dirty and self.isVisible():
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self._dirty:
            self.invalidate()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if hasattr(self, "_fit_timer"):  # wrapped text (a headline) needs other heights at other widths
            self._fit_timer.start()

    def refresh(self) -> None:
        """Redraw now from the state (catching unreadable data into a message)."""
        self._dirty = False
        if self.state.run is None:
            self.clear()
            self.drawn.emit()
            return
        try:
            self.redraw()
        except TraceError as exc:
            log.warning("view %s: %s", self.title, exc)
            self.show_message(f"This part of the trace cannot be read: {exc}")
        else:
            self.show_message(None)
        if hasattr(self, "_fit_timer"):
            self._fit_timer.start()  # once the plots have laid out their new titles
        self.drawn.emit()

    def scrolled_layout(self) -> QtWidgets.QVBoxLayout:
        """The layout of the view's content, inside a scroll area: below the content's minimum size
        (`keep_graphics_at_least`) the view scrolls instead of squeezing its plots."""
        outer = self._outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        self.scroller = QtWidgets.QScrollArea()
        self.scroller.setWidgetResizable(True)
        self.scroller.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        body = QtWidgets.QWidget()
        self.scroller.setWidget(body)
        outer.addWidget(self.scroller)
        layout = _FillLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        return layout

    def pin_below(self, widget: QtWidgets.QWidget) -> None:
        """Put `widget` (the hover readout) under the scroll area, always in view."""
        self._outer.addWidget(widget)

    def keep_graphics_at_least(self, graphics: QtWidgets.QWidget, width: int, height: int) -> None:
        """Never squeeze `graphics` (a `pg.GraphicsLayoutWidget`) below `width` x `height` nor below
        what its plots, titles and legends need: the scroll area scrolls instead of clipping them."""
        self._graphics_floor = (graphics, width, height)
        graphics.setMinimumSize(width, height)
        self._fit_timer = QtCore.QTimer(self)
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(0)
        self._fit_timer.timeout.connect(self.fit_graphics)

    def fit_graphics(self) -> None:
        """Raise the graphics' minimum size to what its layout needs now (titles change with the data)."""
        floor = getattr(self, "_graphics_floor", None)
        if floor is None:
            return
        graphics, width, height = floor
        for plot in [i for i in graphics.scene().items() if isinstance(i, pg.PlotItem)]:
            keep_axis_names_whole(plot)
        for _ in range(4):  # nested layouts post their size changes one level per round
            QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.LayoutRequest)
        # pyqtgraph's nested layouts do not always tell the outer one that they need more room now
        # (a longer title): without this the outer grid squeezes a column below its minimum.
        for item in [*graphics.ci.items, graphics.ci]:
            if isinstance(item, pg.GraphicsLayout):
                item.layout.invalidate()
                item.layout.activate()
        need = graphics.ci.layout.effectiveSizeHint(QtCore.Qt.SizeHint.MinimumSize)
        pad = 2 * graphics.frameWidth() + 4
        graphics.setMinimumSize(max(width, math.ceil(need.width()) + pad),
                                max(height, math.ceil(need.height()) + pad))
        # A layout grown while the view was hidden keeps that size until the view is resized: give it
        # the view's size again (else its bottom lies past the view, out of reach).
        if graphics.ci.geometry().size() != graphics.range.size():
            graphics.ci.setGeometry(graphics.range)
        splitter = graphics.parentWidget()
        if isinstance(splitter, QtWidgets.QSplitter):  # a splitter keeps its sizes: give the graphics
            sizes = splitter.sizes()                     # their new minimum from the other panes
            i = splitter.indexOf(graphics)
            vertical = splitter.orientation() == QtCore.Qt.Orientation.Vertical
            short = (graphics.minimumHeight() if vertical else graphics.minimumWidth()) - sizes[i]
            if short > 0 and len(sizes) > 1:
                other = max((j for j in range(len(sizes)) if j != i), key=lambda j: sizes[j])
                sizes[i] += short
                sizes[other] = max(sizes[other] - short, 0)
                splitter.setSizes(sizes)

    def clear_hover(self, *args) -> None:
        """Blank the hover readouts: what they describe is no longer on screen."""
        for line in self.findChildren(HoverLine):
            line.show_text(None)

    def show_message(self, text: str | None) -> None:
        self.message.setVisible(bool(text))
        self.message.setText(text or "")

    def export_button(self) -> QtWidgets.QToolButton:
        """An "Export…" button for the view's bar: opens the export dialog on this view."""
        button = QtWidgets.QToolButton()
        button.setText("Export…")
        button.setToolTip("Export this figure as PNG, SVG or PDF, or the data behind it as CSV "
                          "(Ctrl+Shift+E exports the current view)")
        button.clicked.connect(lambda: self.export_requested.emit(self))
        return button

    # -- what an export needs ---------------------------------------------------------------------

    @property
    def data(self) -> Any:
        """What the view shows: its figure's data (None before the first drawing, or without a figure)."""
        return self.figure.data if self.figure is not None else None

    def export_state(self) -> Export | None:
        """What the view shows now, as the `Export` the `export` command would read: its figure data
        and the choices made in it (`selection`). None when it shows nothing."""
        d = self.data
        if d is None or not self.exportable():
            return None
        return Export(self.name, self.exported(d), self.selection(d))

    def exportable(self) -> bool:
        """Whether what the view shows can be exported now (a view hiding its panels says why)."""
        return True

    def exported(self, data: Any) -> Any:
        """The figure data an export draws (the data shown, unless a view shows a part of it)."""
        return data

    def selection(self, data: Any) -> Selection:
        """The choices made in the view that an export repeats: the run and row by default."""
        return Selection(run=data.run, row=data.row)

    def shown_positions(self) -> tuple[int, int] | None:
        """Positions [T0, T1) the view's plot shows now; None when it shows them all (or has no x
        axis of positions)."""
        export = self.export_state()
        plot = getattr(self.figure, "plot", None)
        if export is None or plot is None or "range" not in self.spec.options:
            return None
        n = int(getattr(export.data, "n_positions", getattr(export.data, "length", 0)))
        (x0, x1), _ = plot.vb.viewRange()
        # A cell t spans [t - 0.5, t + 0.5]; keep the cells at least half shown.
        t0 = max(0, math.ceil(x0))
        t1 = min(n, math.floor(x1) + 1)
        if t1 <= t0 or (t0 == 0 and t1 == n):
            return None
        return t0, t1

    # -- for subclasses -------------------------------------------------------------------------

    def redraw(self) -> None:
        """Draw the state's current selection (subclasses)."""
        raise NotImplementedError

    def clear(self) -> None:
        """Show nothing (no run selected)."""

    def save_settings(self, settings: ViewSettings) -> None:
        """Persist this view's choices."""

    def restore_settings(self, settings: ViewSettings) -> None:
        """Restore this view's choices."""
