"""The main window: menus, run browser, navigation bar, the registered views and the status bar.

Opening happens on the thread pool (`loader.OpenJob`); a trace that fails to open leaves the
previous one on screen and shows one dialog with the reader's message.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

from inspector.app.browser import RunBrowser
from inspector.app.details import DetailsPanel
from inspector.app.errors import open_error_text, show_error
from inspector.app.live import LiveFollower
from inspector.app.loader import Opened, OpenJob, SummaryJob
from inspector.app.menus import build_menus, fill_recent
from inspector.app.navigator import NavigationBar
from inspector.app.settings import Settings
from inspector.app.welcome import WelcomePage
from inspector.figure_data.browser import first_divergent_run
from inspector.qt import Qt, QtCore, QtGui, QtWidgets, Signal
from inspector.state.restore import ShownPlace
from inspector.state.signals import InspectorState
from inspector.views import View, view_classes
from traces import TraceError

log = logging.getLogger(__name__)

TRACE_FILTER = "Traces (*.h5 *.hdf5 *.trace);;All files (*)"
#: Seconds the background summary waits after each navigation, so repaints do not share the CPU.
NAVIGATION_PAUSE_S = 0.4
#: Milliseconds a reload waits for the background summary to close its handle on the file.
RELOAD_WAIT_MS = 10000
#: Milliseconds between two batches of run summaries added to the browser.
BATCH_MS = 100
#: Width of the run browser and details column at first launch (its run names and marks whole); in a
#: narrower window it gives back what it has beyond LEFT_SHARE of the width (never below LEFT_MIN_PX),
#: so the views keep theirs, and takes it again (up to its width as last dragged) when the window grows.
LEFT_PX = 360
LEFT_MIN_PX = 200
LEFT_SHARE = 0.29
#: Below this window height (a laptop's 1280 x 720 or 1366 x 768 window) the text strip folds away (its
#: handle, at the bottom, drags it back), so every view keeps its plots in view; it comes back when
#: the window grows.
SHORT_PX = 800


class MainWindow(QtWidgets.QMainWindow):
    """One window showing one trace at a time."""

    open_finished = Signal(bool)     # after each open attempt: True when the trace is now shown

    def __init__(self, settings: Settings | None = None, views: Sequence[type[View]] | None = None,
                 open_new_window: Callable[[str], None] | None = None,
                 empty_note: str | None = None) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.state = InspectorState(self)
        self.open_new_window = open_new_window
        self.pool = QtCore.QThreadPool.globalInstance()
        self.path: str | None = None
        self._open_job: OpenJob | None = None
        self._summary_job: SummaryJob | None = None
        self._pending: str | None = None
        self._shown_before: ShownPlace | None = None
        # Summaries reach the browser in batches (one model update per BATCH_MS, not one per run).
        self._summary_rows: list = []
        self._summary_done_count = 0
        self._batch_timer = QtCore.QTimer(self)
        self._batch_timer.setSingleShot(True)
        self._batch_timer.setInterval(BATCH_MS)
        self._batch_timer.timeout.connect(self._add_summaries)
        self.setWindowTitle("moe-inspector")
        self.setAcceptDrops(True)
        self.resize(1500, 950)

        self._build_panes(views)
        self._build_status_bar()
        self.menus = build_menus(self)
        self.reload_action, self.close_action, self.recent_menu = (self.menus.reload, self.menus.close,
                                                                  self.menus.recent)
        self.fill_recent()
        self._update_actions()
        self._connect()
        self._restore_settings()
        self.welcome.set_content(empty_note, self.settings.recent_files())

    def _build_panes(self, views: Sequence[type[View]] | None) -> None:
        """The run browser and details on the left, the views' tabs and strip on the right, and the
        welcome page the window shows while no trace is open."""
        self.browser = RunBrowser()
        # The filter takes the keyboard on a click or Ctrl+F, never by itself: at open the plot has it,
        # so Left/Right, Page Up/Down and Home move through layers and rows at once.
        self.browser.filter.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.details = DetailsPanel()
        self.left = QtWidgets.QSplitter(Qt.Orientation.Vertical)
        self.left.setObjectName("left")
        self.left.addWidget(self.browser)
        self.left.addWidget(self.details)
        self.left.setStretchFactor(0, 3)
        self.left.setStretchFactor(1, 1)
        self.left.setSizes([640, 220])

        self.views: list[View] = [cls(self.state) for cls in (views or view_classes())]
        for view in self.views:
            view.export_requested.connect(self._export_view)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setDocumentMode(True)
        self.right = QtWidgets.QSplitter(Qt.Orientation.Vertical)
        self.right.setObjectName("right")
        self.right.addWidget(self.tabs)
        for view in self.views:
            if view.area == "bottom":
                self.right.addWidget(view)
            else:
                self.tabs.addTab(view, view.title)
        self.right.setStretchFactor(0, 4)
        self.right.setStretchFactor(1, 0)   # the text strip keeps its height; the tabs take the rest
        self.main = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        self.main.setObjectName("main")
        self.main.addWidget(self.left)
        self.main.addWidget(self.right)
        self.main.setStretchFactor(0, 0)   # the views take a change of the window's width
        self.main.setStretchFactor(1, 1)
        self.browser.setMinimumWidth(LEFT_MIN_PX)
        self.main.setSizes([LEFT_PX, 1500 - LEFT_PX])
        self.right.setSizes([760, 155])
        self._left_px = LEFT_PX          # the left column's width as set or dragged last
        self._strip_px: int | None = None   # the text strip's height while a short window folds it
        self.main.splitterMoved.connect(lambda *_: setattr(self, "_left_px", self.main.sizes()[0]))
        self.right.splitterMoved.connect(lambda *_: setattr(self, "_strip_px", None))

        self.welcome = WelcomePage()
        self.stack = QtWidgets.QStackedWidget()
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.main)
        self.setCentralWidget(self.stack)
        self.navigation = NavigationBar(self.state)
        self.addToolBar(self.navigation)


    def _build_status_bar(self) -> None:
        """The status line, the progress of a summary and the live-recording mark."""
        self.status_text = QtWidgets.QLabel()
        self.status_text.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # may show a trace's text
        self.progress = QtWidgets.QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.statusBar().addWidget(self.status_text, 1)
        self.statusBar().addPermanentWidget(self.progress)
        self.live_label = QtWidgets.QLabel("● live")
        self.live_label.setToolTip("A recording is adding runs to this trace; they appear as they complete")
        self.live_label.hide()
        self.statusBar().addPermanentWidget(self.live_label)
        self.follower = LiveFollower(self)
        self.follower.live.connect(self.live_label.setVisible)
        self.follower.changed.connect(self.reload)
        self._reloading = False


    def _connect(self) -> None:
        """The browser's, the state's and the welcome page's signals to what they change."""
        self.browser.run_selected.connect(self._run_selected)
        self.browser.reference_chosen.connect(self._reference_chosen)
        self.state.run_changed.connect(self._show_details)
        self.state.run_changed.connect(self._select_in_browser)
        for signal in (self.state.run_changed, self.state.row_changed, self.state.layer_changed,
                       self.state.position_changed):
            signal.connect(self._pause_summary)
        self.welcome.open_requested.connect(self.open_path)
        self.welcome.browse.connect(self.open_dialog)

    # -- menus ----------------------------------------------------------------------------------

    def fill_recent(self) -> None:
        fill_recent(self.menus.recent, self.settings.recent_files(), self.open_path, self._clear_recent)

    def _clear_recent(self) -> None:
        self.settings.clear_recent()
        self.fill_recent()
        self.welcome.set_content(self.welcome.note, [])

    def _update_actions(self) -> None:
        self.reload_action.setEnabled(self.path is not None)
        self.close_action.setEnabled(self.path is not None)

    # -- opening and closing --------------------------------------------------------------------

    def open_dialog(self) -> None:
        start = self.settings.value("open/dir", os.getcwd(), str)
        paths, _ = QtWidgets.QFileDialog.getOpenFileNames(self, "Open trace", start, TRACE_FILTER)
        if paths:
            self.settings.set("open/dir", os.path.dirname(paths[0]))
            self.open_paths(paths)

    def open_paths(self, paths: Sequence[str]) -> None:
        """Open the first path here and each other one in a new window (when windows can be made)."""
        if not paths:
            return
        self.open_path(paths[0])
        for path in paths[1:]:
            if self.open_new_window is not None:
                self.open_new_window(path)

    def open_path(self, path: str) -> None:
        """Start opening `path` in the background; `open_finished` tells the outcome."""
        path = os.path.abspath(os.fspath(path))
        self._pending = path
        model = self.browser.model
        reloading = self._shown_before is not None and self._shown_before.of(path) is not None
        # On a reload the runs read already need no summary again (unless the file was replaced).
        job = OpenJob(path, frozenset([*model.stats, *model.unusable]) if reloading else frozenset())
        job.signals.opened.connect(self._opened)
        job.signals.failed.connect(self._failed)
        self._open_job = job
        self._busy(f"Opening {os.path.basename(path)}…")
        self.pool.start(job)

    def _opened(self, opened: Opened) -> None:
        trace, first, unusable = opened.trace, opened.first, opened.unusable
        if trace.path != self._pending:  # a newer open request superseded this one
            trace.close()
            if opened.workers is not None:
                opened.workers.close()
            return
        self._pending = None
        self._stop_summary()
        self._reloading = False
        self.main.setEnabled(True)
        shown = None if self._shown_before is None else self._shown_before.of(trace.path)
        self._shown_before = None
        old = self.state.trace
        self.path = trace.path
        infos = {first.name: first} if first is not None else {}
        stats = {}
        table = opened.summaries   # the run summary table's: no summary job reads these runs
        infos.update({name: run.info for name, run in table.items()})
        stats.update({name: run.stats for name, run in table.items()})
        marks = {(name, run.reference): run.mark for name, run in table.items()}
        if shown is not None and old is not None and old.version[0] == trace.version[0]:
            # The same file reloaded (a recording committed runs): a committed run never changes, so
            # what was read of the runs still listed stands and only the new runs are read.
            listed = set(trace.run_names)
            infos.update({n: i for n, i in self.browser.model.infos.items() if n in listed})
            stats.update({n: s for n, s in self.browser.model.stats.items() if n in listed})
            unusable.update({n: why for n, why in self.browser.model.unusable.items()
                             if n in listed and n not in unusable})
        self.state.set_trace(trace, infos, set(unusable))
        if old is not None:
            old.close()
        self.browser.set_runs(list(trace.run_names), infos, unusable, stats, opened.conditions, marks)
        self.settings.add_recent(trace.path)
        # The platform adds the application's name ("example.h5 — moe-inspector").
        self.setWindowTitle(os.path.basename(trace.path))
        self.setWindowFilePath(trace.path)
        self.stack.setCurrentWidget(self.main)
        self._fit_panes()
        self._update_actions()
        self.follower.follow(trace.path, trace.version)
        if first is not None:
            name, row = (shown.run, shown.row) if shown else (None, None)
            if name not in self.state.names:
                name, row = first.name, None
            self.state.set_run(name, row, shown.layer if shown else None)
            if shown is not None:
                self.tabs.setCurrentIndex(shown.tab)
            self.focus_plot()
            todo = [n for n in trace.run_names if n not in unusable and n not in stats]
            if todo:
                self._start_summary(trace.path, todo, opened.workers)
            else:  # every run summarised already (the run summary table, or a reload)
                if opened.workers is not None:
                    opened.workers.close()
                self._idle(self._trace_summary())
        else:
            if opened.workers is not None:
                opened.workers.close()
            self._idle(f"{os.path.basename(trace.path)}: no usable runs"
                       + (f" ({len(unusable)} incomplete or damaged)" if unusable else ""))
        self._show_details()
        self.open_finished.emit(True)

    def _failed(self, path: str, message: str) -> None:
        if path != self._pending:
            return
        self._pending = None
        self._shown_before = None
        if self._reloading:  # the old handle is closed already: nothing is left to show
            self._reloading = False
            self.main.setEnabled(True)
            self.close_trace()
        if not os.path.exists(path):
            self.settings.remove_recent(path)
        self._idle(f"Could not open {os.path.basename(path)}")
        show_error(self, "Cannot open trace", open_error_text(path, message))
        if self.state.trace is not None:  # the trace still shown is what the status bar describes
            self._idle(self._trace_summary())
        self.open_finished.emit(False)

    def reload(self) -> None:
        """Open the current file again, keeping the run, row, layer and tab."""
        if self.path is None or self._pending is not None:
            return
        run = self.state.run.name if self.state.run is not None else None
        self._shown_before = ShownPlace(self.path, run, self.state.row if run else None, self.state.layer,
                                        self.tabs.currentIndex())
        # HDF5 serves every handle of this process on the file from the first one's cached view, so
        # the new handle sees what the file holds now only once the old ones (the summary's too) are
        # closed; the views wait, disabled, until the new trace arrives.
        self._stop_summary()
        self.pool.waitForDone(RELOAD_WAIT_MS)
        if self.state.trace is not None:
            self._reloading = True
            self.main.setEnabled(False)
            self.state.trace.close()
        self.open_path(self.path)

    def close_trace(self) -> None:
        """Close the trace; the window stays open on the welcome page."""
        self._release_trace()
        self.browser.set_runs([], {}, {})
        self.path = None
        self.setWindowTitle("moe-inspector")
        self.setWindowFilePath("")
        self.welcome.set_content(None, self.settings.recent_files())
        self.stack.setCurrentWidget(self.welcome)
        self.details.show_details(None, None, None, None)
        self._update_actions()
        self._idle("")

    def _release_trace(self) -> None:
        """Stop following and summarising the trace, and close it (what closing it and closing the
        window share)."""
        self.follower.stop()
        self._stop_summary()
        self._pending = None
        trace = self.state.trace
        self.state.set_trace(None)
        if trace is not None:
            trace.close()

    # -- background summaries ---------------------------------------------------------------------

    def _start_summary(self, path: str, names: list[str], workers=None) -> None:
        job = SummaryJob(path, names, workers)
        job.signals.summarised.connect(lambda batch, j=job: self._summarised(j, batch))
        job.signals.failed.connect(lambda name, message, j=job: self._run_unusable(j, name, message))
        job.signals.progress.connect(self._summary_progress)
        job.signals.finished.connect(lambda j=job: self._summary_done(j))
        job.pause(NAVIGATION_PAUSE_S)  # the first heatmap paints first
        self._summary_job = job
        self.progress.setRange(0, len(names))
        self.progress.setValue(0)
        self._summary_done_count = 0
        self.progress.setFormat("runs %v/%m")
        self.progress.show()
        self.status_text.setText(
            f"{os.path.basename(path)}: {len(names)} runs · reading drops and completions…")
        self.pool.start(job)

    def _summarised(self, job: SummaryJob, batch: list) -> None:
        if job is not self._summary_job:  # from a job of a file closed since
            return
        for info, _ in batch:
            self.state.add_info(info)
        self._summary_rows += batch
        if not self._batch_timer.isActive():
            self._batch_timer.start()

    def _add_summaries(self) -> None:
        self._batch_timer.stop()
        batch, self._summary_rows = self._summary_rows, []
        self.browser.model.add_runs(batch)
        self.progress.setValue(self._summary_done_count)
        if self.state.run is not None and any(info.name == self.state.run.name for info, _ in batch):
            self._show_details()

    def _run_unusable(self, job: SummaryJob, name: str, message: str) -> None:
        if job is not self._summary_job or not name:
            return
        self.state.mark_unusable(name)
        self.browser.model.mark_unusable(name, message)

    def _summary_progress(self, done: int, total: int) -> None:
        self._summary_done_count = done  # shown with the next batch (a repaint per run is slow)

    def _summary_done(self, job: SummaryJob) -> None:
        if job is self._summary_job:
            self._summary_job = None
            self._add_summaries()
            self.browser.model.regroup()
            if not job.cancelled and self.state.trace is not None:
                self._idle(self._trace_summary())

    def _pause_summary(self) -> None:
        if self._summary_job is not None:
            self._summary_job.pause(NAVIGATION_PAUSE_S)

    def _stop_summary(self) -> None:
        self._batch_timer.stop()
        self._summary_rows = []
        if self._summary_job is not None:
            self._summary_job.cancel()
            self._summary_job = None

    def wait_for_jobs(self, msecs: int = 30000) -> bool:
        """Block until background jobs finish (used when closing)."""
        return self.pool.waitForDone(msecs)

    # -- status ---------------------------------------------------------------------------------

    def _busy(self, text: str) -> None:
        self.status_text.setText(text)
        self.progress.setRange(0, 0)
        self.progress.setFormat("")
        self.progress.show()

    def _idle(self, text: str) -> None:
        self.progress.hide()
        self.status_text.setText(text)

    def _trace_summary(self) -> str:
        trace = self.state.trace
        meta = trace.record
        n = len(trace.run_names)
        unusable = len(self.browser.model.unusable)
        extra = f", {unusable} incomplete or damaged" if unusable else ""
        return (f"{os.path.basename(trace.path)} · {n} runs{extra} · {len(trace.moe_layers)} MoE layers · "
                f"vocabulary {len(trace.vocab)} · kernels {meta.kernel_mode} · {meta.device} {meta.dtype}")

    def _show_details(self) -> None:
        run = self.state.run
        info = self.state.info(run.name) if run is not None else None
        reference = self.browser.model.refs.get(run.name) if run is not None else None
        self.details.show_details(self.state.trace, run, info, reference)

    # -- selection --------------------------------------------------------------------------------

    def _select_in_browser(self) -> None:
        if self.state.run is not None:
            self.browser.select(self.state.run.name)

    def _run_selected(self, name: str) -> None:
        if self.state.trace is None or (self.state.run is not None and self.state.run.name == name):
            return
        try:
            self.state.set_run(name)
        except TraceError as exc:
            self.state.mark_unusable(name)
            self.browser.model.mark_unusable(name, str(exc))
            show_error(self, "Cannot show run", str(exc))

    def _pair_view(self) -> View | None:
        """The view that compares a pair of runs (its declaration reads the `pair` option)."""
        return next((v for v in self.views if v.spec.compares and "pair" in v.spec.options), None)

    def _first_divergent(self) -> str | None:
        """The first run (write order) whose probe completion leaves its reference's: from the
        browser's marks once read, else from the file."""
        model = self.browser.model
        marked = [n for n in self.state.names if model.mark(n).differs]
        if marked:
            return marked[0]
        try:
            return first_divergent_run(self.state.trace)
        except TraceError as exc:
            log.warning("first divergent run: %s", exc)
            return None

    def go_to_divergence(self) -> None:
        """Side by side on the first differing token of the first divergent run (this one when it
        diverges)."""
        pair = self._pair_view()
        if self.state.trace is None or pair is None:
            return
        run = self.state.run
        if run is None or not self.browser.model.mark(run.name).differs:
            name = self._first_divergent()
            if name is None:
                self._idle("No run's completion leaves its reference's: there is no divergence to go to")
                return
            self.state.set_run(name)
        self.tabs.setCurrentWidget(pair)
        pair.refresh()
        if not pair.go_to_divergence():
            self._idle("The two runs compared agree: there is no divergence to go to")

    def go_to_cause(self) -> None:
        """Side by side on the layer and position of the proven cause of the pair shown (without a proof,
        of the first difference, and the status bar says so)."""
        pair = self._pair_view()
        if self.state.trace is None or pair is None:
            return
        self.tabs.setCurrentWidget(pair)
        pair.refresh()
        if pair.data is None:
            self._idle("No pair of runs to explain in this trace")
        else:
            pair.go_to_cause()
            cause = pair.data.cause
            if pair.data.verdict.diverged and not cause.proven:  # the headline says the same
                self._idle("Confirmed by counterfactual reruns, with no single event to point at: on the "
                           "first difference" if cause.confirmed else
                           "No proof yet: on the first difference (moe-inspector explain proves the cause)")

    def focus_plot(self) -> None:
        """Give the keyboard to the current view's plot (the navigation keys act on it at once)."""
        view = self.tabs.currentWidget()
        target = getattr(view, "graphics", view)
        if target is not None:
            target.setFocus(Qt.FocusReason.OtherFocusReason)

    def find_run(self) -> None:
        """The run filter takes the keyboard (Ctrl+F), its text selected."""
        self.browser.filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.browser.filter.selectAll()

    def _reference_chosen(self, name) -> None:
        self.state.set_reference(name)
        self.browser.model.set_reference(name)
        self._show_details()

    def _export_view(self, view: View) -> None:
        from inspector.app.export_dialog import export_dialog  # on first use, like the menus

        export_dialog(self, view)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit_panes()

    def _fit_panes(self) -> None:
        """The left column within LEFT_SHARE of the window's width; the text strip folded in a short
        window."""
        if not self.main.isVisible():  # a hidden splitter's sizes are not its sizes on screen yet
            return
        sizes = self.main.sizes()
        left = min(self._left_px, max(LEFT_MIN_PX, int(self.width() * LEFT_SHARE)))
        if len(sizes) == 2 and sum(sizes) > left and sizes[0] != left:
            self.main.setSizes([left, sum(sizes) - left])
        sizes = self.right.sizes()
        if len(sizes) == 2 and self.height() < SHORT_PX and sizes[1] > 0:
            self.right.setSizes([sum(sizes), 0])
            self._strip_px = sizes[1]
        elif len(sizes) == 2 and self.height() >= SHORT_PX and self._strip_px is not None:
            self.right.setSizes([sum(sizes) - self._strip_px, self._strip_px])
            self._strip_px = None

    # -- drag and drop --------------------------------------------------------------------------

    @staticmethod
    def _dropped_paths(mime: QtCore.QMimeData) -> list[str]:
        return [u.toLocalFile() for u in mime.urls() if u.isLocalFile()] if mime.hasUrls() else []

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self._dropped_paths(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        paths = self._dropped_paths(event.mimeData())
        if paths:
            event.acceptProposedAction()
            self.open_paths(paths)

    # -- settings -------------------------------------------------------------------------------

    def _restore_settings(self) -> None:
        s = self.settings
        geometry = s.bytes("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        elif (screen := QtGui.QGuiApplication.primaryScreen()) is not None:
            # First launch: most of the screen, at most 1500 x 950.
            free = screen.availableGeometry()
            self.resize(min(1500, int(free.width() * 0.92)), min(950, int(free.height() * 0.92)))
            left = min(max(int(self.width() * 0.24), LEFT_PX), 440)
            self.main.setSizes([left, self.width() - left])
            self._left_px = left
        state = s.bytes("window/state")
        if state is not None:
            self.restoreState(state)
        for splitter in (self.main, self.left, self.right):
            value = s.bytes(f"window/splitter_{splitter.objectName()}")
            if value is not None:
                splitter.restoreState(value)
        self._left_px = s.value("window/left_px", self._left_px, int)  # a hidden splitter does not hold it
        self.state.prefer_layer(s.value("view/layer", 0, int))
        self.tabs.setCurrentIndex(min(max(s.value("view/tab", 0, int), 0), self.tabs.count() - 1))
        for view in self.views:
            view.restore_settings(s)

    def save_settings(self) -> None:
        s = self.settings
        s.set("window/geometry", self.saveGeometry())
        s.set("window/state", self.saveState())
        folded = self.right.sizes()
        if self._strip_px is not None:  # saved unfolded: a short window folded the text strip for now
            self.right.setSizes([sum(folded) - self._strip_px, self._strip_px])
        for splitter in (self.main, self.left, self.right):
            s.set(f"window/splitter_{splitter.objectName()}", splitter.saveState())
        if self._strip_px is not None:
            self.right.setSizes(folded)
        s.set("window/left_px", self._left_px)
        s.set("view/layer", self.state.layer)
        s.set("view/tab", self.tabs.currentIndex())
        for view in self.views:
            view.save_settings(s)
        s.sync()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        self.save_settings()
        self._release_trace()
        super().closeEvent(event)
