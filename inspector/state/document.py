"""The open trace and what the user is looking at, without Qt: run, row, MoE layer, focused
position and reference run, the figure data read for them (memoised), and the one
`DivergenceSource` that both divergence views read.

Everything belonging to a trace is dropped in one place (`set_trace`). Each change is told to the
listeners as one word (`CHANGES`); `inspector.state.signals.InspectorState` turns them into Qt signals,
as napari's components are apart from their `_qt` widgets. Tests drive a `Document` directly.
"""

from __future__ import annotations

from collections.abc import Callable

from inspector.figure_data.browser import RunInfo, run_info
from inspector.figure_data.divergence_source import DivergenceSource
from inspector.figure_data.layers import LayersData, read_layers
from inspector.figure_data.memo import Memo
from inspector.figure_data.routing import RoutingData, read_routing
from inspector.figure_data.text import TextData, read_text
from traces.analysis.rows import LayerArrays, RowTrace, layer_routing, row_trace

#: What can change, in the words the listeners hear.
CHANGES = ("trace", "run", "row", "layer", "position", "reference")
#: Figure data kept per trace (a few MB at most each).
DATA_MEMO = 48
#: Rows kept per trace (every layer of one row each: the router logits are [L, T, E]).
ROW_MEMO = 2


class Document:
    """The selection shared by every view of one window, and the data read for it."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[str], None]] = []
        self._data = Memo(DATA_MEMO)
        self._rows = Memo(ROW_MEMO)
        self.layer = 0   # kept across traces (and restored from the settings at start)
        self._clear(None)

    def _clear(self, trace, infos: dict[str, RunInfo] | None = None,
               unusable: set[str] | None = None) -> None:
        """Forget everything of the previous trace: the one place a trace's state is dropped."""
        self._data.clear()
        self._rows.clear()
        self._divergence: DivergenceSource | None = None
        self.trace = trace
        self.infos: dict[str, RunInfo] = dict(infos or {})   # attributes of the runs read so far
        self.unusable: set[str] = set(unusable or ())
        self.run = None
        self.row = 0
        self.position: int | None = None
        self.reference: str | None = None   # user-chosen reference run, None = default per request

    # -- listeners ------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call `listener(change)` after each change, `change` one of `CHANGES`."""
        self._listeners.append(listener)

    def _changed(self, change: str) -> None:
        for listener in self._listeners:
            listener(change)

    # -- the trace ----------------------------------------------------------------------------

    def set_trace(self, trace, infos: dict[str, RunInfo] | None = None,
                  unusable: set[str] | None = None) -> None:
        """Show `trace` (already open) with the run attributes read so far; `None` closes."""
        self._clear(trace, infos, unusable)
        self._changed("trace")

    @property
    def n_layers(self) -> int:
        return int(self.run.dims["L"]) if self.run is not None else 0

    @property
    def n_rows(self) -> int:
        return int(self.run.dims["B"]) if self.run is not None else 0

    @property
    def names(self) -> list[str]:
        """The runs that can be shown, in write order."""
        if self.trace is None:
            return []
        return [n for n in self.trace.run_names if n not in self.unusable]

    def info(self, name: str) -> RunInfo | None:
        """The run's attributes (read now if the background has not reached it yet)."""
        if name not in self.infos and self.run is not None and self.run.name == name:
            self.infos[name] = run_info(self.run)
        return self.infos.get(name)

    def add_info(self, info: RunInfo) -> None:
        self.infos[info.name] = info

    def mark_unusable(self, name: str) -> None:
        self.unusable.add(name)

    # -- selection ----------------------------------------------------------------------------

    def set_run(self, name: str, row: int | None = None, layer: int | None = None) -> None:
        """Select run `name`; the row becomes `row`, else the probe row (row 0 without a probe), and the
        layer `layer` where given (kept within the run's layers)."""
        if self.trace is None:
            return
        if self.run is not None and self.run.name == name and row is None and layer is None:
            return
        if layer is not None:
            self.layer = max(layer, 0)
        self.run = self.trace.run(name)
        self.row = row if row is not None and 0 <= row < self.n_rows else max(int(self.run.probe_row), 0)
        self.layer = min(self.layer, max(self.n_layers - 1, 0))
        self.position = None
        self._changed("run")

    def set_row(self, row: int) -> None:
        if self.run is None or not 0 <= row < self.n_rows or row == self.row:
            return
        self.row = row
        self.position = None
        self._changed("row")

    def set_layer(self, layer: int) -> None:
        layer = min(max(layer, 0), max(self.n_layers - 1, 0))
        if layer == self.layer:
            return
        self.layer = layer
        self._changed("layer")

    def prefer_layer(self, layer: int) -> None:
        """The layer the next run shown starts at (a saved setting): nothing is shown yet, so nothing
        changes on screen and no signal is due; with a run shown it is `set_layer`."""
        if self.run is not None:
            self.set_layer(layer)
        else:
            self.layer = max(layer, 0)

    def step_layer(self, delta: int) -> None:
        self.set_layer(self.layer + delta)

    def step_row(self, delta: int) -> None:
        self.set_row(min(max(self.row + delta, 0), max(self.n_rows - 1, 0)))

    def select_probe_row(self) -> None:
        """Select the probe's row (nothing when the run has no probe)."""
        if self.run is not None and self.run.probe_row >= 0:
            self.set_row(int(self.run.probe_row))

    def step_run(self, delta: int) -> None:
        names = self.names
        if not names:
            return
        i = names.index(self.run.name) if self.run is not None and self.run.name in names else -delta
        self.set_run(names[min(max(i + delta, 0), len(names) - 1)])

    def set_position(self, position: int | None) -> None:
        if position == self.position:
            return
        self.position = position
        self._changed("position")

    def set_reference(self, name: str | None) -> None:
        if name == self.reference:
            return
        self.reference = name
        self._changed("reference")

    # -- data for the views (read lazily, memoised) -------------------------------------------

    def row_trace(self) -> RowTrace:
        """The selected row of the selected run, every layer (without its next-token logits): what
        the routing, layers and text data are built from, read once per row."""
        key = (self.run.name, self.row)
        return self._rows.get(key, lambda: row_trace(self.run, self.row, logits=False))

    def routing_data(self) -> RoutingData:
        key = ("routing", self.run.name, self.layer, self.row)
        return self._data.get(key, lambda: read_routing(self.trace, self.run, self.row_trace(), self.layer))

    def layers_data(self) -> LayersData:
        key = ("layers", self.run.name, self.row)
        return self._data.get(key, lambda: read_layers(self.trace, self.row_trace()))

    def text_data(self) -> TextData:
        key = ("text", self.run.name, self.row)
        return self._data.get(key, lambda: read_text(self.trace, self.row_trace()))

    def layer_routing(self, layer: int | None = None) -> LayerArrays:
        """The whole batch's routing at one layer (load figure, who-displaced-whom)."""
        layer = self.layer if layer is None else layer
        key = ("layer", self.run.name, layer)
        return self._data.get(key, lambda: layer_routing(self.run, layer))

    def divergence(self) -> DivergenceSource | None:
        """The runs of each request of the open trace and their rows, shared by both divergence
        views (made on first use); None without a trace."""
        if self._divergence is None and self.trace is not None:
            self._divergence = DivergenceSource(self.trace)
        return self._divergence
