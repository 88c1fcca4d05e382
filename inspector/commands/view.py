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
    """Why no window can be shown here, or None. On Linux Qt aborts the process (SIGABRT, a screen of
    messages) when its platform finds no display, so the display is probed first: the X server that
    DISPLAY names must accept a connection (xcb), or the Wayland socket must exist."""
    if not sys.platform.startswith("linux"):
        return None
    platform = os.environ.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    x11, wayland = os.environ.get("DISPLAY", ""), os.environ.get("WAYLAND_DISPLAY", "")
    if platform and platform != "xcb" and not platform.startswith("wayland"):
        return None  # offscreen, minimal, vnc, eglfs, ...: no display server needed
    if platform.startswith("wayland") or (not platform and wayland and _wayland_reachable(wayland)):
        if _wayland_reachable(wayland):
            return None
        why = "WAYLAND_DISPLAY is not set" if not wayland else f"{wayland!r} has no socket"
        return _sentence(f"no Wayland display ({why})")
    if not x11 and wayland:
        return _sentence(f"no display: DISPLAY is not set and WAYLAND_DISPLAY={wayland} has no socket")
    if not x11:
        return _sentence("no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
    if not _x11_reachable(x11):
        return _sentence(f"no display: no X server answers at DISPLAY={x11}")
    return None


def _sentence(why: str) -> str:
    return (f"{why}: run it in a desktop session, or use `moe-inspector info` or `export`, which need "
            f"none")


def _x11_reachable(display: str, timeout_s: float = 2.0) -> bool:
    """Whether an X server answers at `display` ("[host]:N[.S]"): it accepts a connection and replies
    to the X protocol's opening request within `timeout_s` (something else listening there, which Qt
    would take for a server and abort on, does not)."""
    import socket

    host, _, rest = display.rpartition(":")
    number = rest.split(".")[0]
    if not number.isdigit():
        return False
    host = host.removeprefix("unix/")
    if host not in ("", "unix"):
        try:
            with socket.create_connection((host, 6000 + int(number)), timeout=timeout_s) as sock:
                return _speaks_x11(sock)
        except OSError:
            return False
    for address in (f"/tmp/.X11-unix/X{number}", f"\0/tmp/.X11-unix/X{number}"):  # the file, the abstract
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            try:
                sock.connect(address)
                return _speaks_x11(sock)
            except OSError:
                continue
    return False


#: The X protocol's connection setup request: little-endian, protocol 11.0, no authorisation.
_X11_SETUP = bytes([0x6C, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0])


def _speaks_x11(sock) -> bool:
    """Whether the peer of the connected `sock` replies as an X server to the setup request (refused,
    accepted or asking for authentication: any of them is a server; Qt then sends its credentials)."""
    import struct

    try:
        sock.sendall(_X11_SETUP)
        reply = b""
        while len(reply) < 8:
            part = sock.recv(8 - len(reply))
            if not part:
                return False
            reply += part
    except OSError:  # the timeout included: nothing that answers
        return False
    status, major = reply[0], struct.unpack("<H", reply[2:4])[0]
    return status == 2 or (status in (0, 1) and major == 11)


def _wayland_reachable(name: str) -> bool:
    if not name:
        return False
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR", "/nonexistent"))
    path = Path(name) if name.startswith("/") else runtime / name
    return path.is_socket()


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
