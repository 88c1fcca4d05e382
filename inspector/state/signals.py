"""The Qt side of the shared `Document`: one signal per kind of change, for the views to redraw.

Views subscribe to the signals; they never talk to each other (napari style). Everything else (the
open trace, the selection, the memoised figure data, the shared divergence source) is the
document's; this object names each member it passes on (`state.run` is `state.document.run`), so
what a view may read or change is written here.
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

    # -- the selection, read-only here (changed through the setters below) ---------------------

    trace = property(lambda self: self.document.trace, doc="The open trace (None before one opens).")
    run = property(lambda self: self.document.run, doc="The run shown (a `traces.Run`, or None).")
    row = property(lambda self: self.document.row, doc="The row shown.")
    layer = property(lambda self: self.document.layer, doc="The MoE layer shown.")
    position = property(lambda self: self.document.position, doc="The focused position, or None.")
    reference = property(lambda self: self.document.reference, doc="The chosen reference run, or None.")
    n_layers = property(lambda self: self.document.n_layers, doc="MoE layers of the open trace.")
    names = property(lambda self: self.document.names, doc="The run names, in write order.")
    unusable = property(lambda self: self.document.unusable, doc="Runs left out (damaged or incomplete).")

    # -- the document's methods ----------------------------------------------------------------

    def set_trace(self, trace, infos=None, unusable=None) -> None:
        self.document.set_trace(trace, infos, unusable)

    def info(self, name: str):
        return self.document.info(name)

    def add_info(self, info) -> None:
        self.document.add_info(info)

    def mark_unusable(self, name: str) -> None:
        self.document.mark_unusable(name)

    def set_run(self, name: str, row: int | None = None, layer: int | None = None) -> None:
        self.document.set_run(name, row, layer)

    def set_row(self, row: int) -> None:
        self.document.set_row(row)

    def set_layer(self, layer: int) -> None:
        self.document.set_layer(layer)

    def prefer_layer(self, layer: int) -> None:
        self.document.prefer_layer(layer)

    def step_layer(self, delta: int) -> None:
        self.document.step_layer(delta)

    def step_row(self, delta: int) -> None:
        self.document.step_row(delta)

    def step_run(self, delta: int) -> None:
        self.document.step_run(delta)

    def select_probe_row(self) -> None:
        self.document.select_probe_row()

    def set_position(self, position: int | None) -> None:
        self.document.set_position(position)

    def set_reference(self, name: str | None) -> None:
        self.document.set_reference(name)

    def routing_data(self):
        return self.document.routing_data()

    def layers_data(self):
        return self.document.layers_data()

    def text_data(self):
        return self.document.text_data()

    def layer_routing(self, layer: int | None = None):
        return self.document.layer_routing(layer)

    def divergence(self):
        return self.document.divergence()
