"""Errors shown to the user: one dialog with a clear sentence, never a traceback.

`install_excepthook` routes any exception that escapes a Qt slot to the log and a dialog, so the
app keeps running; `show_error` is the single place dialogs for bad input come from.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable

from inspector.file_errors import open_error_sentence
from inspector.qt import QtWidgets

log = logging.getLogger(__name__)


def show_error(parent: QtWidgets.QWidget | None, title: str, text: str) -> None:
    """A modal error dialog (tests patch `QMessageBox.critical` to record it instead)."""
    QtWidgets.QMessageBox.critical(parent, title, text)


def open_error_text(path: str, message: str) -> str:
    """The reader's message on a file that cannot be opened, as a sentence about that file, and the
    file's full path below it."""
    return f"{open_error_sentence(path, message)}\n\nFile: {path}"


def user_message(exc: BaseException) -> str:
    """One or two sentences about an unexpected error, without a traceback."""
    what = str(exc).strip() or "no details"
    return (f"Something went wrong: {type(exc).__name__}: {what}\n\n"
            "The app is still running; the error was written to the log.")


class ExceptHook:
    """A `sys.excepthook` that logs the traceback and shows `user_message` in a dialog.

    A second error while the dialog is open is only logged, so a failing paint cannot stack
    dialogs. `uninstall()` restores the previous hook.
    """

    def __init__(self, parent: Callable[[], QtWidgets.QWidget | None] = lambda: None) -> None:
        self._parent = parent
        self._previous = None
        self._showing = False

    def install(self) -> ExceptHook:
        self._previous = sys.excepthook
        sys.excepthook = self
        return self

    def uninstall(self) -> None:
        if sys.excepthook is self and self._previous is not None:
            sys.excepthook = self._previous

    def __call__(self, exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            QtWidgets.QApplication.quit()
            return
        log.error("unexpected error:\n%s", "".join(traceback.format_exception(exc_type, exc, tb)))
        if self._showing or QtWidgets.QApplication.instance() is None:
            return
        self._showing = True
        try:
            show_error(self._parent(), "Unexpected error", user_message(exc))
        finally:
            self._showing = False


def install_excepthook(parent: Callable[[], QtWidgets.QWidget | None] = lambda: None) -> ExceptHook:
    """Install and return the app's exception hook."""
    return ExceptHook(parent).install()
