"""What the views of two runs of one request share (Side by side, Compare): the pair picker, following
the selected run and the reference, and the pair to draw, or a notice saying why there is none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspector.qt import QtWidgets
from inspector.specs.selection import Selection
from inspector.views.base import View
from inspector.views.notice import Notice
from inspector.views.pair_picker import PairPicker

if TYPE_CHECKING:
    from inspector.figure_data.divergence_source import DivergenceSource, RunChoice

NOTHING_TO_COMPARE = ("No request of this trace is held by more than one run: there is nothing to compare. "
                      "Record several batch compositions of one prompt to compare them here.")


class PairChoiceView(View):
    """A view of two runs A and B of one request, chosen in its picker; it follows the selected run
    (shown as B) and the reference (A). Subclasses build `panels` (what a notice hides) and call
    `follow_state` once their widgets exist."""

    panels: QtWidgets.QWidget

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.source: DivergenceSource | None = None   # shared with the other views of runs
        self.picker = PairPicker()
        self.notice = Notice()
        self._shown: tuple | None = None

    def follow_state(self, on_position) -> None:
        """Redraw on a new pair, trace, run, row, reference or layer; `on_position` on a new position."""
        state = self.state
        self.picker.changed.connect(self.invalidate)
        state.trace_changed.connect(self._trace_changed)
        state.run_changed.connect(self._follow_run)
        state.row_changed.connect(self._follow_run)
        state.reference_changed.connect(self._follow_reference)
        state.layer_changed.connect(self.invalidate)
        state.position_changed.connect(on_position)

    def selection(self, d) -> Selection:
        return Selection(request=d.request, pair=(d.run_a, d.run_b), layer=d.layer)

    def exportable(self) -> bool:
        return not self.panels.isHidden()   # hidden panels: the notice says why there is no pair

    def say(self, text: str | None, blank: bool = True) -> None:
        """Show a notice (None hides it); `blank` hides the panels, which would show another pair."""
        self.notice.say(text, self.panels, blank)

    def chosen_pair(self) -> tuple[DivergenceSource, RunChoice, RunChoice, int] | None:
        """(source, A, B, layer) to draw, the layer clamped to the runs' layers; None after saying why
        there is no pair to draw."""
        source = self._ensure_source()
        pair = self.picker.pair()
        if source is None or pair is None:
            self.say(NOTHING_TO_COMPARE)
            return None
        a, b = pair
        if a.key == b.key:
            self.say("Runs A and B are the same run: pick two different runs to compare.")
            return None
        return source, a, b, min(self.state.layer, source.row(a.run, a.row).n_layers - 1)

    def _trace_changed(self) -> None:
        self.source = None
        self._shown = None
        self.picker.set_source(None)
        self.invalidate()

    def _ensure_source(self) -> DivergenceSource | None:
        if self.source is None and self.state.trace is not None:
            self.source = self.state.divergence()
            self.picker.set_source(self.source)
            self._follow_run(invalidate=False)
        return self.source

    def _follow_run(self, *args, invalidate: bool = True) -> None:
        """Show the request of the selected (run, row) with that run as B, when several runs hold it."""
        source, run = self.source, self.state.run
        if source is not None and run is not None:
            request = source.default_request(run.name, self.state.row)
            if request is not None:
                self.picker.set_request(request)
                self.picker.select(run.name, self.state.reference)
        if invalidate:
            self.invalidate()

    def _follow_reference(self) -> None:
        if self.source is not None and self.state.reference is not None:
            pair = self.picker.pair()
            self.picker.select(pair[1].run if pair else None, self.state.reference)
            self.invalidate()
