"""The details panel under the run browser: the file's metadata and the selected run's."""

from __future__ import annotations

import html
import os

from inspector.figure_data.browser import RunInfo
from inspector.qt import Qt, QtWidgets


def details_html(trace, run, info: RunInfo | None, reference: str | None) -> str:
    """Rich text naming the file (producer, model, tokenizer, kernels, device) and the run."""
    if trace is None:
        return ""
    meta = trace.meta
    name = html.escape(os.path.basename(trace.path))
    lines = [f"<b>{name}</b> — {html.escape(str(meta.get('producer', '')))}, {meta.get('created', '')}",
             html.escape(f"model: {meta.get('model_config', '')}"),
             f"tokenizer {meta.get('tokenizer', '')} · kernels {meta.get('kernel_mode', '')} · "
             f"{meta.get('device', '')} {meta.get('dtype', '')} · torch {meta.get('torch_version', '')} · "
             f"seed {meta.get('seed', '')}"]
    if run is not None:
        dims = " ".join(f"{k}={v}" for k, v in run.dims.items())
        lines.append(f"<br><b>run {html.escape(run.name)}</b> [{dims}]")
        if info is not None:
            lines.append(html.escape(f"{info.label} · condition {info.condition} · "
                                     f"experiment {info.experiment}"))
            lines.append(html.escape(f"routing: {info.routing}"))
        lines.append(f"reference: {html.escape(reference or run.name)}")
    return "<br>".join(lines)


class DetailsPanel(QtWidgets.QScrollArea):
    """A scrollable, selectable block of `details_html`."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QtWidgets.QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.label.setStyleSheet("padding: 4px;")
        self.setWidgetResizable(True)
        self.setWidget(self.label)
        self.setMinimumHeight(90)

    def show_details(self, trace, run, info: RunInfo | None, reference: str | None) -> None:
        self.label.setText(details_html(trace, run, info, reference))

    def text(self) -> str:
        return self.label.text()
