"""The navigation bar: which run, which row (the probe marked) and which MoE layer."""

from __future__ import annotations

from inspector.qt import Qt, QtCore, QtWidgets, plain_tip
from inspector.state.signals import InspectorState


class NavigationBar(QtWidgets.QToolBar):
    """Row selector and layer slider bound to the shared state, both ways."""

    def __init__(self, state: InspectorState, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Navigation", parent)
        self.setObjectName("navigation")
        self.setMovable(False)
        self.state = state
        self.run_label = QtWidgets.QLabel("no run")
        self.run_label.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # may show a trace's text
        self.run_label.setMinimumWidth(160)
        self.row = QtWidgets.QComboBox()
        self.row.setMinimumContentsLength(28)
        self.row.setToolTip("Batch row (Page Up / Page Down); ★ marks the probe")
        self.layer = QtWidgets.QSlider(Qt.Orientation.Horizontal)
        self.layer.setMinimumWidth(180)
        self.layer.setPageStep(1)
        self.layer.setTickPosition(QtWidgets.QSlider.TickPosition.TicksBelow)
        self.layer.setToolTip("MoE layer (Left / Right)")
        self.layer_label = QtWidgets.QLabel()
        self.layer_label.setMinimumWidth(170)
        self.addWidget(QtWidgets.QLabel(" Run: "))
        self.addWidget(self.run_label)
        self.addSeparator()
        self.addWidget(QtWidgets.QLabel(" Row: "))
        self.addWidget(self.row)
        self.addSeparator()
        self.addWidget(QtWidgets.QLabel(" Layer: "))
        self.addWidget(self.layer)
        self.addWidget(self.layer_label)
        self.row.activated.connect(lambda i: state.set_row(self.row.itemData(i)))
        self.layer.valueChanged.connect(state.set_layer)
        state.trace_changed.connect(self.sync)
        state.run_changed.connect(self.sync)
        state.row_changed.connect(self._sync_row)
        state.layer_changed.connect(self._sync_layer)
        self.sync()

    def sync(self) -> None:
        run = self.state.run
        self.setEnabled(run is not None)
        self.row.blockSignals(True)
        self.row.clear()
        if run is not None:
            info = self.state.info(run.name)
            # The name in the bar (a long batch label would push the layer off a 1280-pixel window);
            # the label in its tooltip, in the run browser's tooltip and in the details panel.
            self.run_label.setText(run.name)
            tip = f"{run.name} · {info.label}" if info and info.label else run.name
            self.run_label.setToolTip(plain_tip(tip))
            for b, r in enumerate(run.request_ids):
                star = "★ probe · " if b == run.probe_row else ""
                self.row.addItem(f"{star}row {b} · request {int(r)}", b)
        else:
            self.run_label.setText("no run")
            self.run_label.setToolTip("")
        self.row.blockSignals(False)
        self.layer.blockSignals(True)
        self.layer.setRange(0, max(self.state.n_layers - 1, 0))
        self.layer.blockSignals(False)
        self._sync_row()
        self._sync_layer()

    def _sync_row(self) -> None:
        self.row.blockSignals(True)
        self.row.setCurrentIndex(self.row.findData(self.state.row))
        self.row.blockSignals(False)

    def _sync_layer(self) -> None:
        self.layer.blockSignals(True)
        self.layer.setValue(self.state.layer)
        self.layer.blockSignals(False)
        if self.state.run is None:
            self.layer_label.setText("")
            return
        L = self.state.n_layers
        moe = self.state.trace.moe_layers
        model = moe[self.state.layer] if self.state.layer < len(moe) else self.state.layer
        self.layer_label.setText(f" MoE layer {self.state.layer} of {L} (model layer {model})")
