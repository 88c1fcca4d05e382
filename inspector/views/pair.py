"""Side-by-side view: run A and run B of one request, their texts, routing and what differs.

Run B follows the run selected in the browser (its row holding the request); run A is the
reference chosen in the browser, else the first run of B's condition (when the run selected is that
reference, it is A and B is the next run). Both can be picked here. The
selected position is the shared `state.position`: clicking a token or a panel selects it in every
view.
"""

from __future__ import annotations

import numpy as np

from inspector.figures.divergence_text import A_COLOR, B_COLOR, T_STAR_BG, completion_html
from inspector.figures.pair import PairFigure
from inspector.figures.style import FigureStyle
from inspector.qt import Qt, QtCore, QtGui, QtWidgets, pg
from inspector.views.base import MIN_PLOT_PX
from inspector.views.cause_box import CauseBox
from inspector.views.hover import HoverLine
from inspector.views.pair_choice import PairChoiceView
from inspector.views.token_text import TokenText

HINT = ("Hover over a panel: tokens, experts kept or dropped, what differs, KL and margins. Click a token "
        "or a position to select it in every view; the mouse wheel zooms all panels together.")
#: Height of the completions above the plots, when the window has room for it, and the least.
TEXTS_PX = 110
TEXTS_MIN_PX = 64
#: Height of the cause box before it is measured, and the most of the view's height its headline and
#: sentence take (in a small window the plots keep the rest).
CAUSE_PX = 120
CAUSE_SHARE = 0.45
#: In a view shorter than this (a laptop's 1280 x 720 or 1366 x 768 window) the plots come first: the cause
#: shows its headline alone, the completions fold, and the key is left out (the hover
#: line names every cell); one click on "Details" brings the sentence and the completions back.
SHORT_VIEW_PX = 680


class PairView(PairChoiceView):
    """Two runs of one request side by side: texts, heatmaps at the layer, differences, curves, cause."""

    name = "pair"

    def __init__(self, state, parent=None) -> None:
        super().__init__(state, parent)
        self.style = FigureStyle()
        reset = QtWidgets.QPushButton("Reset zoom")
        reset.setToolTip("Show every position (mouse wheel zooms, drag pans; all panels follow)")
        reset.clicked.connect(self.reset_zoom)
        self.details = QtWidgets.QToolButton()
        self.details.setText("Details")
        self.details.setCheckable(True)
        self.details.setToolTip("Show the cause's sentence (not only its headline) and both completions "
                                "above the plots; the numbers and reruns scroll in the cause's box")
        self.details.toggled.connect(self._details_toggled)
        self._details_chosen = False  # until clicked, the sentence shows unless the view is short
        self.picker.top.addWidget(self.details)
        self.picker.top.addWidget(reset)
        self.picker.top.addWidget(self.export_button())
        self.text_a, self.text_b = TokenText(), TokenText()
        self.cause_box = CauseBox()
        self.texts = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        for widget in (self.text_a, self.text_b):
            self.texts.addWidget(widget)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(self.style.background)
        self.figure = PairFigure(self.graphics.ci, self.style)
        # The cause across the whole width on top, the completions below it, then the plots.
        self.splitter = self.panels = QtWidgets.QSplitter(Qt.Orientation.Vertical)
        self.splitter.setObjectName("divergence")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.cause_box)
        self.splitter.addWidget(self.texts)
        self.splitter.addWidget(self.graphics)
        self.splitter.setCollapsible(1, True)  # a short view folds the completions
        self.splitter.setStretchFactor(2, 1)
        self.splitter.setSizes([CAUSE_PX, TEXTS_PX, 520])
        # The cause box shows its headline and sentence whole (up to CAUSE_SHARE of the view's
        # height); the completions get TEXTS_PX, or what they were dragged to, when the plots leave
        # room; a small window squeezes them, growing gives them back.
        self._texts_px = TEXTS_PX
        self._texts_short_px = 0  # the completions in a short view: folded unless dragged open
        self._cause_px = 0
        self._arranging = False
        self.splitter.splitterMoved.connect(self._dragged)
        self.splitter.installEventFilter(self)
        self.hover = HoverLine(HINT)
        self.graphics.scene().sigMouseMoved.connect(self._moved)
        self.graphics.scene().sigMouseClicked.connect(self._scene_clicked)
        for plot in self.figure.heatmaps:
            plot.vb.setMinimumHeight(MIN_PLOT_PX)
        self.keep_graphics_at_least(self.graphics, 760, 2 * MIN_PLOT_PX + 160)
        self.texts.setMinimumHeight(TEXTS_MIN_PX)
        self.graphics.ci.setContentsMargins(4, 4, 4, 4)
        self.figure.strip.getAxis("bottom").showLabel(False)  # the right column's axis names the positions
        self.figure.strip.vb.setMinimumHeight(42)  # its three rows and their names readable
        layout = self.scrolled_layout()
        layout.addWidget(self.picker)
        layout.addWidget(self.message)
        layout.addWidget(self.notice)
        layout.addWidget(self.splitter, 1)
        self.pin_below(self.hover)
        self._pair_shown: tuple | None = None   # the (A, B) drawn last: a new pair opens on its cause
        for box in (self.text_a, self.text_b):
            box.token_clicked.connect(self.state.set_position)
            box.token_hovered.connect(self._token_hovered)
        self.follow_state(self._show_selected)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.splitter and event.type() == QtCore.QEvent.Type.Resize:
            QtCore.QTimer.singleShot(0, self._arrange)
        return super().eventFilter(watched, event)

    def _dragged(self, *args) -> None:
        if not self._arranging:
            self._cause_px, texts = self.splitter.sizes()[:2]
            if self.details.isChecked():
                self._texts_px = texts
            else:
                self._texts_short_px = texts

    def _details_toggled(self, checked: bool) -> None:
        self._details_chosen = True
        self._cause_px = 0  # the box takes what its text needs now
        self._arrange()

    def _short(self) -> bool:
        return self.scroller.viewport().height() < SHORT_VIEW_PX

    def _arrange(self) -> None:
        """Heights of the cause box (its headline and, unless the view is short, its sentence whole,
        within CAUSE_SHARE of the view), the completions (what they had, as far as the plots leave
        room; folded in a short view) and the plots (the rest)."""
        total = sum(self.splitter.sizes())
        if total <= 0:
            return
        height = self.scroller.viewport().height()
        short = self._short()
        if self.figure.show_key(not short):
            self._fit_timer.start()
        full = self.details.isChecked() if self._details_chosen else not short
        if not self._details_chosen and self.details.isChecked() != full:
            self.details.blockSignals(True)
            self.details.setChecked(full)
            self.details.blockSignals(False)
        self.texts.setMinimumHeight(TEXTS_MIN_PX if full else 0)
        self.cause_box.show_headline_only(not full)
        # Folded, the completions are hidden: a splitter counts a folded pane's least height.
        self.texts.setVisible(full or self._texts_short_px > 0)
        least = max(min(self.cause_box.needed_height(headline_only=not full), int(CAUSE_SHARE * height)), 44)
        if least != self.cause_box.minimumHeight():
            self.cause_box.setMinimumHeight(least)
        plots_least, texts_least = self.graphics.minimumHeight(), self.texts.minimumHeight()
        cause = max(least, min(self._cause_px, total - plots_least - texts_least))
        wanted = self._texts_px if full else self._texts_short_px
        texts = max(min(wanted, total - cause - plots_least), texts_least)
        sizes = [cause, texts, max(total - cause - texts, 0)]
        if sizes != self.splitter.sizes():
            self._arranging = True
            self.splitter.setSizes(sizes)
            self._arranging = False

    # -- drawing --------------------------------------------------------------------------------

    def redraw(self) -> None:
        chosen = self.chosen_pair()
        if chosen is None:
            return
        source, a, b, layer = chosen
        try:
            data = source.pair(a, b, layer)
            pair_key = (a.key, b.key)
            if pair_key != self._pair_shown and self.go_to_cause(data):  # a new pair opens on its cause
                data = source.pair(a, b, min(self.state.layer, source.row(a.run, a.row).n_layers - 1))
            self._pair_shown = pair_key
        except ValueError as exc:
            self.say(f"Runs {a.run} and {b.run} cannot be compared: {exc}")
            return
        problems = "; ".join(source.table_problems)
        self.say(f"Explanation tables left out: {problems}" if problems else None, blank=False)
        key = (data.request, data.length)
        self.figure.set_data(data, keep_view=key == self._shown, selected=self.state.position)
        self._shown = key
        self.cause_box.set_cause(data.cause, self.style)
        self._arrange()
        self._set_texts(scroll_to_t_star=True)

    def clear(self) -> None:
        self._shown = None
        self._pair_shown = None

    def go_to_cause(self, data=None) -> bool:
        """Select the layer and position of the proven cause (without a proof, the first difference; the
        layer whose routing differs first when that is at the logits); False when there is none or it
        is selected already."""
        data = data or self.data
        if data is None:
            return False
        position, layer = data.cause_event
        if layer < 0:  # a cause at the logits, or none: the layer whose routing differs first
            first = data.first_differences()
            differing = np.flatnonzero(first >= 0)
            layer = int(differing[np.argmin(first[differing])]) if differing.size else -1
        position = position if position >= 0 else data.t_star
        moved = False
        if 0 <= layer < data.n_layers and layer != self.state.layer:
            self.state.set_layer(layer)
            moved = True
        if position >= 0 and position != self.state.position:
            self.state.set_position(position)
        return moved

    def go_to_divergence(self) -> bool:
        """Select the first differing token (t*); False when the completions agree."""
        data = self.data
        if data is None or data.t_star < 0:
            return False
        self.state.set_position(data.t_star)
        return True

    def _set_texts(self, scroll_to_t_star: bool = False) -> None:
        data = self.figure.data
        if data is None:
            return
        for box, text, name, color in ((self.text_a, data.text_a, "A", A_COLOR),
                                       (self.text_b, data.text_b, "B", B_COLOR)):
            html, offsets = completion_html(text, name, color, self.style, self.state.position)
            box.set_tokens(html, offsets, text.positions,
                           scroll_to=data.t_star if scroll_to_t_star and data.t_star >= 0 else None)

    def reset_zoom(self) -> None:
        self.figure.reset_zoom()

    def _show_selected(self) -> None:
        self.figure.set_selected(self.state.position)
        self._set_texts()

    # -- interaction ----------------------------------------------------------------------------

    def _plot_at(self, scene_pos) -> tuple[pg.PlotItem, float, float] | None:
        """The panel under a scene position and the data point there (one handler for all panels:
        one per panel would let the others blank the hover line)."""
        for plot in self.figure.plots:
            if plot.vb.sceneBoundingRect().contains(scene_pos):
                p = plot.vb.mapSceneToView(scene_pos)
                return plot, p.x(), p.y()
        return None

    def _moved(self, scene_pos) -> None:
        hit = self._plot_at(scene_pos)
        text = self.figure.hover_text(*hit) if hit is not None else None
        self.hover.show_text(text)
        if text:
            QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), text, self.graphics)
        else:
            QtWidgets.QToolTip.hideText()

    def _scene_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        hit = self._plot_at(event.scenePos())
        t = self.figure.position_at(hit[1]) if hit is not None else None
        if t is not None:
            self.state.set_position(t)

    def _token_hovered(self, t: int | None) -> None:
        data = self.figure.data
        self.hover.show_text(data.describe_position(t) if data is not None and t is not None else None)

    def highlighted_positions(self, which: str) -> list[int]:
        """Positions whose token the text box of run `which` ("A" or "B") shows on the t* colour."""
        return (self.text_a if which == "A" else self.text_b).positions_with_background(T_STAR_BG)
