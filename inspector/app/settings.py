"""Persistent choices (QSettings): recent files, window layout, colour map, last layer, ...

The app reads and writes only through this class, so a test passes a settings object backed by
an INI file in a temporary folder and never touches the user's settings.
"""

from __future__ import annotations

import os

from inspector.qt import QtCore

#: How many recent files File > Open Recent keeps.
MAX_RECENT = 10
ORGANIZATION = "moe-inspector"
APPLICATION = "moe-inspector"


def default_settings() -> QtCore.QSettings:
    """The user's settings (INI format, in the platform's config folder)."""
    return QtCore.QSettings(QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope,
                            ORGANIZATION, APPLICATION)


class Settings:
    """Typed access to the app's QSettings."""

    def __init__(self, qsettings: QtCore.QSettings | None = None) -> None:
        self.q = qsettings if qsettings is not None else default_settings()

    # -- plain values ---------------------------------------------------------------------------

    def value(self, key: str, default=None, type_=None):
        if type_ is None:
            return self.q.value(key, default)
        value = self.q.value(key, default)
        try:
            return type_(value) if value is not None else default
        except (TypeError, ValueError):
            return default

    def set(self, key: str, value) -> None:
        self.q.setValue(key, value)

    def bytes(self, key: str) -> QtCore.QByteArray | None:
        value = self.q.value(key)
        return value if isinstance(value, QtCore.QByteArray) else None

    def sync(self) -> None:
        self.q.sync()

    # -- recent files ---------------------------------------------------------------------------

    def recent_files(self) -> list[str]:
        value = self.q.value("recent/files", [])
        if isinstance(value, str):  # QSettings gives a lone string for a one-item list
            value = [value]
        return [str(v) for v in (value or []) if v]

    def add_recent(self, path: str) -> None:
        path = os.path.abspath(path)
        files = [path] + [p for p in self.recent_files() if p != path]
        self.q.setValue("recent/files", files[:MAX_RECENT])

    def remove_recent(self, path: str) -> None:
        self.q.setValue("recent/files", [p for p in self.recent_files() if p != os.path.abspath(path)])

    def clear_recent(self) -> None:
        self.q.setValue("recent/files", [])
