"""Creating the app's windows: one per file, the example (or an empty window) when none is given."""

from __future__ import annotations

from collections.abc import Sequence

from inspector.app.errors import install_excepthook
from inspector.app.example import example_note, example_path
from inspector.app.icon import app_icon
from inspector.app.main_window import MainWindow
from inspector.app.settings import Settings
from inspector.qt import QtWidgets


def launch(files: Sequence[str], settings: Settings | None = None) -> list[MainWindow]:
    """Show one window per file (the example trace when `files` is empty) and install the
    exception hook. The returned list keeps every window (also those opened later) alive."""
    settings = settings or Settings()
    windows: list[MainWindow] = []
    app = QtWidgets.QApplication.instance()
    if app is not None:
        app.setWindowIcon(app_icon())

    def new_window(path: str | None, note: str | None = None) -> MainWindow:
        window = MainWindow(settings, open_new_window=new_window, empty_note=note)
        if windows:  # cascade, so a second window does not hide the first
            window.move(windows[-1].pos().x() + 40, windows[-1].pos().y() + 40)
        windows.append(window)
        window.show()
        if path is not None:
            window.open_path(path)
        return window

    hook = install_excepthook(lambda: QtWidgets.QApplication.activeWindow())
    if files:
        for path in files:
            new_window(path)
    else:
        example = example_path()
        note = example_note(example)
        new_window(str(example) if note is None else None, note)
    if app is not None:
        app.aboutToQuit.connect(hook.uninstall)
    return windows
