"""The app's export: File > Export… (Ctrl+Shift+E) and each view's Export… button open a dialog
(view, format, page preset, size, DPI, font size, path); Edit > Copy Figure (Ctrl+Shift+C) puts the
current view's figure on the clipboard as an image and as SVG. Both take what the view exports
(`View.export_state`) to `inspector.export.save`, like the `export` command, so the app and the
command write the same files for the same view."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from inspector.app.errors import show_error
from inspector.app.settings import Settings
from inspector.export import output as saving
from inspector.export.page import (
    DEFAULT_FONT_PT,
    MAX_DPI,
    MAX_SIZE,
    MIN_DPI,
    MIN_FONT_PT,
    MIN_SIZE,
    PRESETS,
    Page,
    RenderError,
)
from inspector.qt import Qt, QtCore, QtGui, QtWidgets
from inspector.specs.registry import Export
from inspector.views.base import View

log = logging.getLogger(__name__)

FORMAT_NAMES = {"png": "PNG image", "svg": "SVG (vector)", "pdf": "PDF (vector)", "csv": "CSV (the data)"}


def save_view(view: View, path: str, fmt: str | None = None, page: Page | None = None, *,
              visible_only: bool = False, fit_height: bool = True,
              font_pt: float | None = None, caption: bool = False) -> Page | None:
    """Export what `view` shows to `path` (the dialog's work without the dialog); `caption`: also the
    figure's caption file beside it."""
    export = view.export_state()
    if export is None:
        raise RenderError(f"the {view.title} view shows nothing to export")
    if visible_only:
        export = export.with_selection(range=view.shown_positions())
    style = saving.print_style(saving.font_pt(None, font_pt)) if font_pt is not None else None
    return saving.save(export, path, fmt, page, style, fit_height=fit_height, caption=caption)


class ExportDialog(QtWidgets.QDialog):
    """Choose the view, format, size, DPI and file; `accept` leaves the choices in the fields."""

    def __init__(self, views: Sequence[View], current: View, settings: Settings,
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export figure")
        self.settings = settings
        self.views = list(views)
        self.view_box = QtWidgets.QComboBox()
        for v in self.views:
            self.view_box.addItem(v.title)
        self.format_box = QtWidgets.QComboBox()
        for fmt in saving.FORMATS:
            self.format_box.addItem(FORMAT_NAMES[fmt], fmt)
        self.width_box = self._spin(MIN_SIZE, MAX_SIZE, " px")
        self.height_box = self._spin(MIN_SIZE, MAX_SIZE, " px")
        self.dpi_box = self._spin(MIN_DPI, MAX_DPI, " dpi")
        self.preset_box = QtWidgets.QComboBox()
        self.preset_box.addItem("The view's usual page", "")
        for preset in PRESETS.values():
            self.preset_box.addItem(f"{preset.name}: {preset.about}", preset.name)
        self.font_box = QtWidgets.QDoubleSpinBox()
        self.font_box.setRange(MIN_FONT_PT, 48.0)
        self.font_box.setSingleStep(0.5)
        self.font_box.setSuffix(" pt")
        self.font_box.setValue(DEFAULT_FONT_PT)
        self.font_box.setToolTip("Font size on the page; no text is smaller than 7 pt")
        self.physical = QtWidgets.QLabel()
        usual = QtWidgets.QPushButton("Usual size")
        usual.setToolTip("The page's size (the preset's, or the view's usual page) at this DPI")
        usual.clicked.connect(self._usual_size)
        self.visible_only = QtWidgets.QCheckBox("Only the positions shown now")
        self.fit_text = QtWidgets.QCheckBox("Height fits the text")
        self.caption = QtWidgets.QCheckBox("Caption file (.txt beside the figure)")
        self.caption.setToolTip("The figure in words, the cause of a divergence and what a small page "
                                "left out: the figure itself carries no such text")
        self.fit_text.setChecked(True)
        self.path_edit = QtWidgets.QLineEdit()
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        size_row = QtWidgets.QHBoxLayout()
        for w in (self.width_box, QtWidgets.QLabel("×"), self.height_box, self.dpi_box, usual):
            size_row.addWidget(w)
        path_row = QtWidgets.QHBoxLayout()
        path_row.addWidget(self.path_edit, 1)
        path_row.addWidget(browse)
        form = QtWidgets.QFormLayout()
        form.addRow("View:", self.view_box)
        form.addRow("Format:", self.format_box)
        form.addRow("Page:", self.preset_box)
        form.addRow("Size:", size_row)
        form.addRow("Font:", self.font_box)
        form.addRow("", self.physical)
        form.addRow("", self.visible_only)
        form.addRow("", self.fit_text)
        form.addRow("", self.caption)
        form.addRow("File:", path_row)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Save
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)
        fmt = settings.value("export/format", "png", str)
        self.format_box.setCurrentIndex(max(self.format_box.findData(fmt), 0))
        self.dpi_box.setValue(settings.value("export/dpi", int(saving.DEFAULT_DPI), int))
        self.view_box.setCurrentIndex(self.views.index(current) if current in self.views else 0)
        self.view_box.currentIndexChanged.connect(self._view_changed)
        self.preset_box.currentIndexChanged.connect(self._preset_changed)
        self.format_box.currentIndexChanged.connect(self._format_changed)
        self.dpi_box.valueChanged.connect(self._update_physical)
        self.width_box.valueChanged.connect(self._update_physical)
        self.height_box.valueChanged.connect(self._update_physical)
        self._view_changed()

    @staticmethod
    def _spin(low: int, high: int, suffix: str) -> QtWidgets.QSpinBox:
        box = QtWidgets.QSpinBox()
        box.setRange(low, high)
        box.setSuffix(suffix)
        box.setKeyboardTracking(False)
        return box

    # -- choices ----------------------------------------------------------------------------------

    @property
    def view(self) -> View:
        return self.views[self.view_box.currentIndex()]

    @property
    def fmt(self) -> str:
        return self.format_box.currentData()

    def page(self) -> Page:
        return Page(self.width_box.value(), self.height_box.value(), float(self.dpi_box.value()))

    def export(self) -> Export | None:
        return self.view.export_state()

    @property
    def preset(self) -> str | None:
        return self.preset_box.currentData() or None

    def _usual_size(self) -> None:
        page = saving.default_page(self.view.name, self.dpi_box.value(), size=self.preset)
        self.width_box.setValue(page.width)
        self.height_box.setValue(page.height)

    def _preset_changed(self) -> None:
        self.font_box.setValue(saving.font_pt(self.preset))
        self._usual_size()

    def _view_changed(self) -> None:
        self._usual_size()
        shown = self.view.shown_positions()
        self.visible_only.setEnabled(shown is not None)
        self.visible_only.setText("Only the positions shown now"
                                  + (f" ({shown[0]}–{shown[1] - 1})" if shown else ""))
        self.visible_only.setChecked(shown is not None)
        self.fit_text.setVisible(self.view.spec.fit_height)
        self._suggest_path()

    def _format_changed(self) -> None:
        path = self.path_edit.text()
        if path:
            self.path_edit.setText(os.path.splitext(path)[0] + "." + self.fmt)
        sized = self.fmt != "csv"
        for w in (self.width_box, self.height_box, self.dpi_box, self.preset_box, self.font_box,
                  self.caption):
            w.setEnabled(sized)
        self._update_physical()

    def _suggest_path(self) -> None:
        export = self.export()
        folder = self.settings.value("export/dir", os.getcwd(), str)
        stem = export.stem() if export is not None else "figure"
        self.path_edit.setText(os.path.join(folder, f"{stem}.{self.fmt}"))

    def _update_physical(self) -> None:
        try:
            self.physical.setText(self.page().describe() if self.fmt != "csv" else "the figure's data table")
        except RenderError as exc:
            self.physical.setText(str(exc))

    def _browse(self) -> None:
        filters = ";;".join(f"{FORMAT_NAMES[f]} (*.{f})" for f in saving.FORMATS)
        path, chosen = QtWidgets.QFileDialog.getSaveFileName(
            self, "Export figure", self.path_edit.text(), filters,
            f"{FORMAT_NAMES[self.fmt]} (*.{self.fmt})")
        if path:
            fmt = saving.format_of(path)
            if fmt is not None:
                self.format_box.setCurrentIndex(self.format_box.findData(fmt))
            self.path_edit.setText(path)

    def _accept(self) -> None:
        path = self.path_edit.text().strip()
        if not path:
            show_error(self, "Export", "Choose a file to write.")
            return
        if saving.format_of(path) is None:
            path = f"{path}.{self.fmt}"
            self.path_edit.setText(path)
        self.settings.set("export/dir", os.path.dirname(os.path.abspath(path)))
        self.settings.set("export/format", self.fmt)
        self.settings.set("export/dpi", self.dpi_box.value())
        self.accept()

    def save(self) -> Page | None:
        """Write the chosen export (after `accept`)."""
        page = self.page() if self.fmt != "csv" else None
        return save_view(self.view, self.path_edit.text(), self.fmt, page,
                         visible_only=self.visible_only.isEnabled() and self.visible_only.isChecked(),
                         fit_height=self.fit_text.isChecked(), font_pt=self.font_box.value(),
                         caption=self.caption.isEnabled() and self.caption.isChecked())


def current_view(window) -> View | None:
    """The view holding the keyboard focus in `window`, else its current tab."""
    widget = QtWidgets.QApplication.focusWidget()
    while widget is not None:
        if isinstance(widget, View) and widget in window.views:
            return widget
        widget = widget.parentWidget()
    current = window.tabs.currentWidget()
    return current if isinstance(current, View) else None


def export_dialog(window, view: View | None) -> str | None:
    """Open the export dialog on `view` of `window` (a MainWindow) and write the file; the path
    written, or None when cancelled or failed (the failure is shown)."""
    views = [v for v in window.views if v.export_state() is not None]
    if not views:
        show_error(window, "Export", "Open a trace and select a run first: there is no figure to export.")
        return None
    dialog = ExportDialog(views, view if view in views else views[0], window.settings, window)
    if dialog.exec() != QtWidgets.QDialog.DialogCode.Accepted:
        return None
    path = dialog.path_edit.text()
    QtWidgets.QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
    try:
        page = dialog.save()
    except (RenderError, OSError) as exc:
        log.warning("export failed: %s", exc)
        show_error(window, "Export failed", str(exc))
        return None
    finally:
        QtWidgets.QApplication.restoreOverrideCursor()
    what = page.describe() if page is not None else "data"
    window.statusBar().showMessage(f"Exported {os.path.basename(path)} ({what})", 8000)
    return path


def figure_mime(view: View) -> QtCore.QMimeData | None:
    """The view's figure as an image and as SVG, for the clipboard; None when it shows nothing."""
    export = view.export_state()
    if export is None:
        return None
    page = saving.default_page(export.view, dpi=150)
    mime = QtCore.QMimeData()
    mime.setImageData(saving.image(export, page))
    mime.setData("image/svg+xml", saving.svg(export, page))
    return mime


def copy_figure(window, view: View | None) -> bool:
    """Put `view`'s figure on the clipboard; False (with a message) when there is none."""
    mime = figure_mime(view) if view is not None else None
    if mime is None:
        window.statusBar().showMessage("No figure to copy: this view shows nothing yet.", 5000)
        return False
    QtGui.QGuiApplication.clipboard().setMimeData(mime)
    window.statusBar().showMessage(f"Copied the {view.title} figure", 5000)
    return True
