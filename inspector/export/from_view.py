"""What an open view exports: the figure data it shows and the choices made in it (run, row,
layer, step, colour map, shading...), as the same `Export` the command line reads from a file."""

from __future__ import annotations

import math
from collections.abc import Callable

from inspector.export.figures import Export, Selection
from inspector.views.base import View
from inspector.views.divergence import DivergenceView
from inspector.views.divergence_overview import DivergenceOverviewView
from inspector.views.load import LoadView
from inspector.views.overview import OverviewView
from inspector.views.routing import RoutingView
from inspector.views.text import TextView


def _routing(view: RoutingView) -> Export | None:
    d = view.data
    if d is None:
        return None
    low, high = view.figure.colorbar.levels()
    sel = Selection(run=d.run, row=d.row, layer=d.layer, colormap=view.colormap.currentText(),
                    levels=(float(low), float(high)))
    return Export("routing", d, sel)


def _overview(view: OverviewView) -> Export | None:
    d = view.data
    return None if d is None else Export("overview", d, Selection(run=d.run, row=d.row))


def _load(view: LoadView) -> Export | None:
    d = view.data
    if d is None:
        return None
    return Export("load", d, Selection(run=d.run, layer=d.layer, step=d.step, group=d.group))


def _text(view: TextView) -> Export | None:
    d = view.data
    if d is None:
        return None
    return Export("text", d, Selection(run=d.run, row=d.row, layer=view.state.layer,
                                       shade=view.mode.currentText()))


def _pair(view: DivergenceView) -> Export | None:
    d = view.data
    if d is None or view.splitter.isHidden():  # hidden panels: the view says why there is no pair
        return None
    return Export("divergence", d, Selection(request=d.request, pair=(d.run_a, d.run_b), layer=d.layer))


def _runs(view: DivergenceOverviewView) -> Export | None:
    d = view.data
    if d is None or view.splitter.isHidden():
        return None
    return Export("runs", d, Selection(run=d.reference_run, request=d.request, condition=d.condition))


#: How each kind of view makes its `Export`.
FROM_VIEW: dict[type, Callable[[View], Export | None]] = {
    RoutingView: _routing,
    OverviewView: _overview,
    LoadView: _load,
    TextView: _text,
    DivergenceView: _pair,
    DivergenceOverviewView: _runs,
}


def exportable(view: object) -> bool:
    """Whether exports know this kind of view."""
    return any(isinstance(view, cls) for cls in FROM_VIEW)


def export_of(view: View) -> Export | None:
    """The `Export` of what `view` shows now; None when it shows nothing or is not exportable."""
    for cls, make in FROM_VIEW.items():
        if isinstance(view, cls):
            return make(view)
    return None


def visible_positions(view: View) -> tuple[int, int] | None:
    """Positions [T0, T1) the view's plot shows now, None when it shows them all (or has no x
    axis of positions)."""
    export = export_of(view)
    figure = getattr(view, "figure", None)
    plot = getattr(figure, "plot", None)
    if export is None or plot is None or "range" not in export.spec.options:
        return None
    n = int(getattr(export.data, "n_positions", getattr(export.data, "length", 0)))
    (x0, x1), _ = plot.vb.viewRange()
    # A cell t spans [t - 0.5, t + 0.5]; keep the cells at least half shown.
    t0 = max(0, math.ceil(x0))
    t1 = min(n, math.floor(x1) + 1)
    if t1 <= t0 or (t0 == 0 and t1 == n):
        return None
    return t0, t1
