"""The pair picker of the side-by-side view: request, run A and run B, with a swap button."""

from __future__ import annotations

from inspector.figure_data.divergence_source import DivergenceSource, RunChoice
from inspector.figures.divergence_text import A_COLOR, B_COLOR
from inspector.qt import Qt, QtWidgets, Signal, plain_tip
from inspector.views.fit_combo import FitComboBox
from inspector.views.glossary import tip


class PairPicker(QtWidgets.QWidget):
    """Request, run A and run B combo boxes over a `DivergenceSource`; emits `changed` on a pick."""

    changed = Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.request = FitComboBox()
        self.request.setToolTip("Request (prompt) held by several runs")
        self.request.setMinimumContentsLength(14)
        self.a = FitComboBox()
        self.a.setToolTip("Run A: the reference the cause is stated against")
        self.b = FitComboBox()
        self.b.setToolTip("Run B: the run whose divergence from A is explained")
        for box in (self.a, self.b):
            box.setMinimumContentsLength(18)
        self.swap = QtWidgets.QPushButton("⇄ Swap")
        self.swap.setToolTip("Exchange runs A and B")
        # The request on one line, the pair on the next: two run names side by side and the request
        # on one line do not fit a 1280-pixel window.
        top, pair = QtWidgets.QHBoxLayout(), QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("Request:"))
        top.addWidget(self.request, 1)
        self.top = top  # the view adds its buttons to the request's line
        a_label, b_label = QtWidgets.QLabel("A:"), QtWidgets.QLabel("B:")
        a_label.setToolTip(tip("A"))
        b_label.setToolTip(tip("B"))
        a_label.setStyleSheet(f"color: {A_COLOR}; font-weight: bold;")
        b_label.setStyleSheet(f"color: {B_COLOR}; font-weight: bold;")
        pair.addWidget(a_label)
        pair.addWidget(self.a, 1)
        pair.addWidget(self.swap)
        pair.addWidget(b_label)
        pair.addWidget(self.b, 1)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addLayout(pair)
        self.source: DivergenceSource | None = None
        self.choices: list[RunChoice] = []
        self.a_pinned = False  # run A was picked here: keep it when run B follows the browser
        self.request.activated.connect(self._request_picked)
        self.a.activated.connect(self._a_picked)
        self.b.activated.connect(lambda i: self.changed.emit())
        self.swap.clicked.connect(self._swap)

    # -- filling --------------------------------------------------------------------------------

    def set_source(self, source: DivergenceSource | None) -> None:
        self.source = source
        self.request.clear()
        for r in source.requests() if source is not None else []:
            self.request.addItem(f"{r}: {source.request_text(r)}", r)
        self.choices = []
        self._fill_runs()

    def _fill_runs(self) -> None:
        request = self.current_request()
        self.choices = self.source.choices(request) if request is not None else []
        for box in (self.a, self.b):
            box.blockSignals(True)
            box.clear()
            for i, c in enumerate(self.choices):  # the condition in the tooltip: the name and row fit
                box.addItem(f"{c.run} · row {c.row}{' (probe)' if c.is_probe else ''}", c.key)
                box.setItemData(i, plain_tip(c.text()), Qt.ItemDataRole.ToolTipRole)
            box.blockSignals(False)

    def _request_picked(self, index: int) -> None:
        self._fill_runs()
        self.select(None, None)
        self.changed.emit()

    def _a_picked(self, index: int) -> None:
        self.a_pinned = True
        self.changed.emit()

    def _swap(self) -> None:
        a, b = self.a.currentIndex(), self.b.currentIndex()
        self.a.setCurrentIndex(b)
        self.b.setCurrentIndex(a)
        self.a_pinned = True
        self.changed.emit()

    # -- reading and setting ----------------------------------------------------------------------

    def current_request(self) -> int | None:
        data = self.request.currentData()
        return None if data is None else int(data)

    def pair(self) -> tuple[RunChoice, RunChoice] | None:
        i, j = self.a.currentIndex(), self.b.currentIndex()
        if i < 0 or j < 0:
            return None
        return self.choices[i], self.choices[j]

    def set_request(self, request: int) -> bool:
        """Show `request`; True when it changed."""
        i = self.request.findData(request)
        if i < 0 or i == self.request.currentIndex():
            return False
        self.request.setCurrentIndex(i)
        self._fill_runs()
        self.a_pinned = False
        return True

    def select(self, b_run: str | None, reference: str | None) -> None:
        """Run B := `b_run` (else keep, else the first run); A := `reference` when it holds the
        request, else A as picked here when it differs from B, else the first run of B's condition
        (the run browser's default reference). When B would be that reference itself, A is the
        reference and B the next run of its condition: A is the reference in the app as in the
        export (whose pair is the reference and a run compared with it)."""
        if not self.choices:
            return
        names = [c.run for c in self.choices]
        j = names.index(b_run) if b_run in names else max(self.b.currentIndex(), 0)
        i = self.a.currentIndex()
        same = [k for k, c in enumerate(self.choices) if c.condition == self.choices[j].condition]
        ref = names.index(reference) if reference in names else same[0]
        if ref != j and (reference in names or not self.a_pinned or i < 0 or i == j):
            i = ref
        elif ref == j and not (self.a_pinned and 0 <= i != j):
            others = [k for k in same if k != j] or [k for k in range(len(names)) if k != j] or [j]
            i, j = j, others[0]
        self.a.setCurrentIndex(i)
        self.b.setCurrentIndex(j)

    def pick(self, box: str, run: str) -> None:
        """Choose `run` in combo `box` ("A" or "B") as a user would, emitting `changed`."""
        combo = self.a if box == "A" else self.b
        i = next(k for k, c in enumerate(self.choices) if c.run == run)
        combo.setCurrentIndex(i)
        combo.activated.emit(i)
