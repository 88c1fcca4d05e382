"""The Qt side of the shared `Document`: one signal per kind of change, for the views to redraw.

Views subscribe to the signals; they never talk to each other (napari style). Everything else (the
open trace, the selection, the memoised figure data, the shared divergence source) is the
document's, read through this object: `state.run` is `state.document.run`.
"""

from __future__ import annotations

from inspector.qt import QtCore, Signal
from inspector.state.document import CHANGES, Document


class InspectorState(QtCore.QObject):
    """A `Document` whose changes are Qt signals (`trace_changed`, `run_changed`, ...)."""

    trace_changed = Signal()
    run_changed = Signal()
    row_changed = Signal()
    layer_changed = Signal()
    position_changed = Signal()
    reference_changed = Signal()

    def __init__(self, parent: QtCore.QObject | None = None, document: Document | None = None) -> None:
        super().__init__(parent)
        self.document = document or Document()
        self._signals = {change: getattr(self, f"{change}_changed") for change in CHANGES}
        self.document.subscribe(lambda change: self._signals[change].emit())

    def __getattr__(self, name: str):
        # Only reached for what the adapter itself lacks: the document's selection, data and setters.
        if name.startswith("__") or name in ("document", "_signals"):
            raise AttributeError(name)
        return getattr(self.document, name)
