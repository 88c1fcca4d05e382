"""The main window's menus: File (open, recent, examples, reload, close, export, quit), Edit (copy figure),
View, Navigate and Help.

Every action is also added to the window itself, so its shortcut works whatever has focus.
"""

from __future__ import annotations

from dataclasses import dataclass

from inspector.app.example import EXAMPLES
from inspector.qt import QtGui, QtWidgets


@dataclass
class Menus:
    """The actions and menus the window updates later."""

    recent: QtWidgets.QMenu
    reload: QtGui.QAction
    close: QtGui.QAction


def add_action(window: QtWidgets.QMainWindow, menu: QtWidgets.QMenu, text: str, slot, shortcut=None,
               tip: str = "") -> QtGui.QAction:
    action = QtGui.QAction(text, window)
    if shortcut is not None:
        action.setShortcut(QtGui.QKeySequence(shortcut))
    action.setStatusTip(tip)
    action.triggered.connect(slot)
    menu.addAction(action)
    window.addAction(action)  # the shortcut works whatever has focus in this window
    return action


def build_menus(window) -> Menus:
    """Create the menu bar of `window` (a `MainWindow`)."""
    bar = window.menuBar()
    state = window.state
    file = bar.addMenu("&File")
    add_action(window, file, "&Open…", window.open_dialog, QtGui.QKeySequence.StandardKey.Open,
               "Open a trace file")
    recent = file.addMenu("Open &Recent")
    recent.aboutToShow.connect(window.fill_recent)
    fill_examples(file.addMenu("Open E&xample"), window.open_path)
    reload = add_action(window, file, "&Reload", window.reload, "F5", "Read the file again")
    close = add_action(window, file, "&Close", window.close_trace, "Ctrl+W", "Close the trace")
    file.addSeparator()
    add_action(window, file, "&Export…", lambda: _export("export_dialog", window), "Ctrl+Shift+E",
               "Export the current view's figure (PNG, SVG, PDF) or the data behind it (CSV)")
    file.addSeparator()
    add_action(window, file, "&Quit", QtWidgets.QApplication.closeAllWindows, "Ctrl+Q")
    edit = bar.addMenu("&Edit")
    add_action(window, edit, "&Copy Figure", lambda: _export("copy_figure", window), "Ctrl+Shift+C",
               "Copy the current view's figure to the clipboard (image and SVG)")
    view = bar.addMenu("&View")
    for v in window.views:
        if v.area == "tab":
            add_action(window, view, v.title, lambda checked=False, w=v: window.tabs.setCurrentWidget(w),
                       v.shortcut or None)
    nav = bar.addMenu("&Navigate")
    add_action(window, nav, "Find run", window.find_run, QtGui.QKeySequence.StandardKey.Find,
               "Filter the runs by name, condition, routing or completion")
    nav.addSeparator()
    add_action(window, nav, "Previous layer", lambda: state.step_layer(-1), "Left")
    add_action(window, nav, "Next layer", lambda: state.step_layer(1), "Right")
    add_action(window, nav, "Previous row", lambda: state.step_row(-1), "PgUp")
    add_action(window, nav, "Next row", lambda: state.step_row(1), "PgDown")
    add_action(window, nav, "Probe row", state.select_probe_row, "Home")
    nav.addSeparator()
    add_action(window, nav, "Previous run", lambda: state.step_run(-1), "Alt+Up")
    add_action(window, nav, "Next run", lambda: state.step_run(1), "Alt+Down")
    nav.addSeparator()
    add_action(window, nav, "Go to the first divergence", window.go_to_divergence, "Ctrl+D",
               "Side by side on the first token where a run's completion leaves its reference's")
    add_action(window, nav, "Go to the cause", window.go_to_cause, "Ctrl+Shift+D",
               "Side by side on the layer and position of the proven cause of the divergence (without a "
               "proof yet, of the first difference)")
    help_menu = bar.addMenu("&Help")
    add_action(window, help_menu, "Keyboard shortcuts", lambda: show_shortcuts(window), "F1")
    add_action(window, help_menu, "About moe-inspector", lambda: show_about(window))
    return Menus(recent=recent, reload=reload, close=close)


def _export(name: str, window) -> None:
    """Run `inspector.app.export_dialog.<name>(window, current view)` (imported on first use)."""
    from inspector.app import export_dialog as dialog

    getattr(dialog, name)(window, dialog.current_view(window))


def fill_examples(menu: QtWidgets.QMenu, open_path) -> None:
    """One entry per shipped example trace; a missing one is shown disabled."""
    for example in EXAMPLES:
        action = menu.addAction(example.title)
        action.setToolTip(example.about)
        action.setStatusTip(example.about)
        action.setEnabled(example.path.exists())
        action.triggered.connect(lambda checked=False, p=str(example.path): open_path(p))
    menu.setToolTipsVisible(True)


def fill_recent(menu: QtWidgets.QMenu, files: list[str], open_path, clear) -> None:
    """Entries of Open Recent: one per file, then Clear."""
    menu.clear()
    for path in files:
        action = menu.addAction(path)
        action.triggered.connect(lambda checked=False, p=path: open_path(p))
    if not files:
        menu.addAction("(none)").setEnabled(False)
    menu.addSeparator()
    action = menu.addAction("Clear recent files")
    action.setEnabled(bool(files))
    action.triggered.connect(clear)


def show_shortcuts(window: QtWidgets.QWidget) -> None:
    rows = "".join(f"<tr><td><b>{a.shortcut().toString()}</b>&nbsp;&nbsp;</td>"
                   f"<td>{a.text().replace('&', '')}</td></tr>"
                   for a in window.actions() if not a.shortcut().isEmpty())
    QtWidgets.QMessageBox.information(window, "Keyboard shortcuts", f"<table>{rows}</table>")


def show_about(window: QtWidgets.QWidget) -> None:
    QtWidgets.QMessageBox.about(
        window, "About moe-inspector",
        "<b>moe-inspector</b><br>Inspect routing in Mixture-of-Experts language models: which expert "
        "each token went to, which candidates were dropped for lack of capacity, and why a prompt's "
        "completion depends on its batch.")
