"""`moe-inspector view [FILE ...]`: open traces in the desktop app (the default command).

Without FILE it opens the example trace shipped in `traces/examples/`, or an empty window that
says why when the example is not installed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from inspector.commands.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="trace files to open, one window each (default: the example trace)")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="how much the log file records (default: WARNING)")


def _log_file() -> Path:
    from inspector.qt import QtCore

    folder = Path(QtCore.QStandardPaths.writableLocation(
        QtCore.QStandardPaths.StandardLocation.AppLocalDataLocation) or Path.home() / ".moe-inspector")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "inspector.log"


def _no_display() -> str | None:
    """Why no window can be shown here (Linux without X11 or Wayland, no Qt platform chosen), or None.
    Qt itself would abort the process on it."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return None
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    return ("no display (neither DISPLAY nor WAYLAND_DISPLAY is set): run it in a desktop session, or "
            "use `moe-inspector info` or `export`, which need none")


def run(args: argparse.Namespace) -> int:
    why = _no_display()
    if why is not None:
        raise UsageError(why)
    from inspector.qt import QtCore, QtWidgets

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    app.setOrganizationName("moe-inspector")
    app.setApplicationName("moe-inspector")
    app.setApplicationDisplayName("moe-inspector")
    try:
        log_path = _log_file()
        logging.basicConfig(filename=log_path, level=args.log_level,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    except OSError:
        logging.basicConfig(level=args.log_level)
    from inspector.app.launch import launch

    windows = launch([os.fspath(f) for f in args.files])
    if not windows:
        return 1
    # Ctrl+C in the terminal closes the windows (Python sees the signal only while it runs code,
    # so a timer lets it run now and then).
    previous = signal.signal(signal.SIGINT, lambda *_: QtWidgets.QApplication.closeAllWindows())
    timer = QtCore.QTimer()
    timer.timeout.connect(lambda: None)
    timer.start(250)
    try:
        return int(app.exec())
    finally:
        timer.stop()
        signal.signal(signal.SIGINT, previous)
