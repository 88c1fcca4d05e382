"""The page shown while no trace is open: how to open one, the recent files, why it is empty."""

from __future__ import annotations

import html
import os

from inspector.qt import Qt, QtCore, QtWidgets, Signal


class WelcomePage(QtWidgets.QWidget):
    """Friendly empty state; emits `open_requested(path)` for a clicked recent file, `browse` for Open."""

    open_requested = Signal(str)
    browse = Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QtWidgets.QLabel()
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setOpenExternalLinks(False)
        self.label.linkActivated.connect(self._link)
        self.label.setFixedWidth(640)  # a fixed width lets the layout give the wrapped text its full height
        button = QtWidgets.QPushButton("Open a trace…")
        button.clicked.connect(self.browse)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addStretch(1)
        layout.addWidget(self.label, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(button, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)
        self.set_content(None, [])

    def set_content(self, note: str | None, recent: list[str]) -> None:
        """Show `note` (why nothing is open, may be None) and links to the `recent` files."""
        parts = ["<h2>moe-inspector</h2>",
                 "<p>See which experts each token was routed to, which candidates were dropped for lack "
                 "of capacity, and why one prompt gives different completions in different batches.</p>"]
        if note:
            parts.append(f"<p style='color:#8a5a00'>{html.escape(note)}</p>")
        parts.append("<p>Open a trace with <b>File &gt; Open</b> (Ctrl+O) or drop an <tt>.h5</tt> file on "
                     "this window.</p>")
        existing = [p for p in recent if os.path.exists(p)]
        if existing:
            links = "<br>".join(f"<a href='{QtCore.QUrl.fromLocalFile(p).toString()}'>{html.escape(p)}</a>"
                                for p in existing[:6])
            parts.append(f"<p><b>Recent</b><br>{links}</p>")
        self.label.setText("".join(parts))
        self.note = note

    def _link(self, url: str) -> None:
        self.open_requested.emit(QtCore.QUrl(url).toLocalFile())
