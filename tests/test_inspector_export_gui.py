"""Export from the desktop app: the File and Edit menu entries, each view's button, the dialog, the
clipboard, and the same files as the `export` command for the same view."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from test_inspector_export import png_info, png_pixels, svg_texts

from inspector.app import export_dialog
from inspector.cli import main
from inspector.export import SPECS, Page
from inspector.qt import QtCore, QtGui, QtWidgets
from inspector.views import VIEWS
from inspector.views.layers import LayersView
from inspector.views.load import LoadView
from inspector.views.routing import RoutingView
from inspector.views.text import TextView

pytestmark = pytest.mark.usefixtures("isolated_settings")


@pytest.fixture
def errors(monkeypatch):
    """Error dialogs shown, recorded instead of blocking."""
    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", lambda parent, title, text: shown.append(text))
    return shown


@pytest.fixture
def r001_window(window):
    """The shared window on run r001, row 2, layer 1."""
    window.state.set_run("r001", 2)
    window.state.set_layer(1)
    return window


def view(w, cls):
    return next(v for v in w.views if isinstance(v, cls))


def shown(qtbot, w, cls):
    """The view of class `cls`, brought to front and drawn."""
    v = view(w, cls)
    if v.area == "tab":
        w.tabs.setCurrentWidget(v)
    qtbot.waitUntil(lambda: not v._dirty and v.export_state() is not None, timeout=10000)
    return v


def command_options(v) -> list[str]:
    """The `export` command's options naming what view `v` shows."""
    ex = v.export_state()
    s = ex.selection
    if ex.view == "routing":
        return ["--run", s.run, "--row", str(s.row), "--layer", str(s.layer)]
    if ex.view in ("layers", "text"):
        return ["--run", s.run, "--row", str(s.row)]
    if ex.view == "load":
        return ["--run", s.run, "--layer", str(s.layer), "--step", str(s.step), "--group", str(s.group)]
    if ex.view in ("pair", "compare"):
        return ["--request", str(s.request), "--pair", ",".join(s.pair), "--layer", str(s.layer)]
    if ex.view == "causal_map":
        return ["--run", s.run] + ([] if s.row is None else ["--row", str(s.row)])
    return ["--request", str(s.request), "--run", s.run, "--condition", s.condition]


@pytest.mark.parametrize("cls", VIEWS, ids=[cls.name for cls in VIEWS])
def test_app_and_command_write_the_same_files(qtbot, r001_window, tmp_path, cls):
    v = shown(qtbot, r001_window, cls)
    name = v.export_state().view
    export_dialog.save_view(v, str(tmp_path / "app.csv"))
    page = Page(1000, 600, 100)
    export_dialog.save_view(v, str(tmp_path / "app.png"), page=page)
    trace = r001_window.path
    assert main(["export", trace, "--view", name, *command_options(v), "-o", str(tmp_path / "cli.csv")]) == 0
    size = ["--width", "1000", "--dpi", "100"] + ([] if name == "text" else ["--height", "600"])
    out = str(tmp_path / "cli.png")
    assert main(["export", trace, "--view", name, *command_options(v), *size, "-o", out]) == 0
    assert (tmp_path / "app.csv").read_bytes() == (tmp_path / "cli.csv").read_bytes()
    app_png, cli_png = png_info(tmp_path / "app.png"), png_info(tmp_path / "cli.png")
    assert app_png == cli_png and app_png[:2][0] == 1000
    a, b = png_pixels(tmp_path / "app.png"), png_pixels(tmp_path / "cli.png")
    differ = np.abs(a.astype(int) - b.astype(int)).max(axis=-1) > 16
    assert differ.mean() < 0.002


def test_menus_shortcuts_and_buttons(r001_window):
    actions = {a.text(): a for a in r001_window.actions()}
    assert actions["&Export…"].shortcut().toString() == "Ctrl+Shift+E"
    assert actions["&Copy Figure"].shortcut().toString() == "Ctrl+Shift+C"
    menus = {m.title(): m for m in r001_window.menuBar().findChildren(QtWidgets.QMenu)}
    assert actions["&Export…"] in menus["&File"].actions()
    assert actions["&Copy Figure"] in menus["&Edit"].actions()
    for v in r001_window.views:
        assert v.spec is SPECS[v.name] and v.title == v.spec.title
        buttons = [b for b in v.findChildren(QtWidgets.QToolButton) if b.text() == "Export…"]
        assert len(buttons) == 1, v.title


def test_shortcut_opens_the_dialog_on_the_current_view_and_writes(qtbot, r001_window, tmp_path, monkeypatch):
    shown(qtbot, r001_window, LayersView)
    seen = {}

    def run_dialog(self):
        seen["view"] = self.view
        self.format_box.setCurrentIndex(self.format_box.findData("svg"))
        self.width_box.setValue(900)
        self.height_box.setValue(450)
        self.dpi_box.setValue(90)
        self.path_edit.setText(str(tmp_path / "from-dialog"))
        self._accept()
        return QtWidgets.QDialog.DialogCode.Accepted

    monkeypatch.setattr(export_dialog.ExportDialog, "exec", run_dialog)
    r001_window.tabs.setFocus()
    qtbot.keyClick(r001_window, QtCore.Qt.Key.Key_E,
                   QtCore.Qt.KeyboardModifier.ControlModifier | QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert isinstance(seen["view"], LayersView)
    out = tmp_path / "from-dialog.svg"  # the format's extension is added
    root = ET.parse(out).getroot()
    assert root.get("viewBox") == "0 0 960 480"  # 10 x 5 inches
    assert "position (token)" in svg_texts(out)
    assert "from-dialog.svg" in r001_window.statusBar().currentMessage()
    assert r001_window.settings.value("export/format", "", str) == "svg"


def test_view_button_exports_that_view(qtbot, r001_window, tmp_path, monkeypatch):
    v = shown(qtbot, r001_window, LoadView)
    seen = {}

    def run_dialog(self):
        seen["view"] = self.view
        self.format_box.setCurrentIndex(self.format_box.findData("png"))
        self.path_edit.setText(str(tmp_path / "load.png"))
        self._accept()
        return QtWidgets.QDialog.DialogCode.Accepted

    monkeypatch.setattr(export_dialog.ExportDialog, "exec", run_dialog)
    button = next(b for b in v.findChildren(QtWidgets.QToolButton) if b.text() == "Export…")
    button.click()
    assert seen["view"] is v
    w, h, dpi, _ = png_info(tmp_path / "load.png")
    assert (w, h, round(dpi)) == (2000, 1400, 200)  # the load view's usual page


def test_dialog_fields_follow_the_view_and_format(qtbot, r001_window, tmp_path):
    v = shown(qtbot, r001_window, RoutingView)
    d = export_dialog.ExportDialog(r001_window.views, v, r001_window.settings, r001_window)
    qtbot.addWidget(d)
    d.format_box.setCurrentIndex(d.format_box.findData("pdf"))
    assert d.path_edit.text().endswith("routing-r001-row2-layer1.pdf")
    d.dpi_box.setValue(300)
    d._usual_size()
    assert (d.width_box.value(), d.height_box.value()) == (3000, 1500)
    assert "10.00 x 5.00 in" in d.physical.text()
    d.format_box.setCurrentIndex(d.format_box.findData("csv"))
    assert not d.width_box.isEnabled() and d.path_edit.text().endswith(".csv")
    d.view_box.setCurrentIndex(d.views.index(view(r001_window, TextView)))
    assert d.fit_text.isVisibleTo(d) and d.path_edit.text().endswith("text-r001-row2.csv")


def test_dialog_page_preset_sets_the_size_and_font(qtbot, r001_window, tmp_path):
    v = shown(qtbot, r001_window, RoutingView)
    d = export_dialog.ExportDialog(r001_window.views, v, r001_window.settings, r001_window)
    qtbot.addWidget(d)
    d.format_box.setCurrentIndex(d.format_box.findData("pdf"))
    d.dpi_box.setValue(100)
    d.preset_box.setCurrentIndex(d.preset_box.findData("column"))
    assert d.width_box.value() == 350 and d.font_box.value() == 8.0
    assert "3.50 x" in d.physical.text()
    d.path_edit.setText(str(tmp_path / "column.pdf"))
    page = d.save()
    assert page.inches[0] == 3.5 and (tmp_path / "column.pdf").exists()


def test_visible_positions_only(qtbot, r001_window, tmp_path):
    v = shown(qtbot, r001_window, RoutingView)
    v.figure.plot.vb.setRange(xRange=(4.5, 14.5), padding=0)
    out = tmp_path / "zoomed.csv"
    export_dialog.save_view(v, str(out), visible_only=True)
    from test_inspector_export import column

    assert sorted(set(int(p) for p in column(out, "position"))) == list(range(5, 15))


def test_copy_figure_puts_image_and_svg_on_the_clipboard(qtbot, r001_window):
    shown(qtbot, r001_window, RoutingView)
    QtGui.QGuiApplication.clipboard().clear()
    action = next(a for a in r001_window.actions() if a.text() == "&Copy Figure")
    try:
        action.trigger()
        mime = QtGui.QGuiApplication.clipboard().mimeData()
        image = QtGui.QImage(mime.imageData())
        assert (image.width(), image.height()) == (1500, 750)  # 10 x 5 inches at 150 dpi
        svg = bytes(mime.data("image/svg+xml"))
        root = ET.fromstring(svg)
        assert any("".join(e.itertext()).strip() == "router probability" for e in root.iter())
        assert "Copied" in r001_window.statusBar().currentMessage()
    finally:
        # Leave nothing on the clipboard: Qt's offscreen clipboard crashes at exit when it still owns data.
        QtGui.QGuiApplication.clipboard().clear()


def test_nothing_to_export_without_a_trace(make_window, errors):
    w = make_window()
    assert export_dialog.copy_figure(w, export_dialog.current_view(w)) is False
    assert export_dialog.export_dialog(w, export_dialog.current_view(w)) is None
    assert errors and "no figure to export" in errors[0]
    w.close()


def test_failed_export_says_why(qtbot, r001_window, tmp_path, monkeypatch, errors):
    shown(qtbot, r001_window, RoutingView)

    def run_dialog(self):
        self.path_edit.setText(str(tmp_path / "missing-folder" / "x.png"))
        self._accept()
        return QtWidgets.QDialog.DialogCode.Accepted

    monkeypatch.setattr(export_dialog.ExportDialog, "exec", run_dialog)
    assert export_dialog.export_dialog(r001_window, view(r001_window, RoutingView)) is None
    assert errors and "does not exist" in errors[-1]
