"""Which figure each view exports: the view's data read from a trace for a `Selection`, the table
behind it, and (in `inspector.export.draw`) the builder that draws it.

The GUI and the `export` command meet here: the GUI wraps what a view shows in an `Export`, the
command reads the same data with `read_export`, and both hand the `Export` to
`inspector.export.save`. No Qt in this module, so a CSV export never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from inspector.export.divergence import pair_columns, read_pair, read_runs, runs_columns
from inspector.export.selection import (
    Selection,
    SelectionError,
    check_layer,
    in_range,
    pick_row,
    pick_run,
    with_context,
)
from inspector.figure_data.load import load_data
from inspector.figure_data.overview import read_overview
from inspector.figure_data.routing import read_routing
from inspector.figure_data.text import SHADE_MODES, read_text
from traces import TraceError
from traces.analysis.rows import layer_routing


@dataclass(frozen=True)
class ViewSpec:
    """One exportable view: how its data is read and tabulated, and its usual page shape."""

    name: str
    title: str
    inches: tuple[float, float]                    # default page (width, height) in inches
    read: Callable[[Any, Selection], Any]          # (open trace, selection) -> figure data
    columns: Callable[[Any, Selection], dict[str, np.ndarray]]
    options: tuple[str, ...] = ()                  # Selection fields the view reads
    fit_height: bool = False                       # page height follows the content (text)


@dataclass(frozen=True)
class Export:
    """A view's figure ready to draw or tabulate: its data and the selection it was read with."""

    view: str
    data: Any
    selection: Selection = field(default_factory=Selection)

    @property
    def spec(self) -> ViewSpec:
        return SPECS[self.view]

    def columns(self) -> dict[str, np.ndarray]:
        """The table behind the figure (one array per column, equal lengths)."""
        return self.spec.columns(self.data, self.selection)

    def draw(self, layout, style):
        """Draw the figure into a `pg.GraphicsLayout` with `style`; returns the builder."""
        from inspector.export import draw

        return draw.DRAW[self.view](layout, style, self.data, self.selection)

    def stem(self) -> str:
        """A file name without extension saying what the figure shows."""
        return "-".join(str(p) for p in _stem_parts(self) if p != "")


# -- reading ----------------------------------------------------------------------------------------

def _read_routing(trace, sel: Selection):
    run = pick_run(trace, sel)
    data = read_routing(trace, run, check_layer(run, sel.layer), pick_row(run, sel))
    sel.positions(data.n_positions)
    return data


def _read_overview(trace, sel: Selection):
    run = pick_run(trace, sel)
    data = read_overview(trace, run, pick_row(run, sel))
    sel.positions(data.n_positions)
    return data


def _read_text(trace, sel: Selection):
    run = pick_run(trace, sel)
    data = read_text(trace, run, pick_row(run, sel))
    check_layer(run, sel.layer)
    if sel.shade not in SHADE_MODES:
        raise SelectionError(f"unknown shading {sel.shade!r}")
    return data


def _read_load(trace, sel: Selection):
    run = pick_run(trace, sel)
    layer = layer_routing(run, check_layer(run, sel.layer))
    S, G = layer.capacity.shape
    if not 0 <= sel.step < S:
        raise SelectionError(f"step {sel.step} outside 0..{S - 1} of run {run.name}")
    if sel.group is not None and not 0 <= sel.group < G:
        raise SelectionError(f"group {sel.group} outside 0..{G - 1} of run {run.name}")
    try:
        return load_data(layer, sel.step, sel.group)
    except ValueError as exc:
        raise SelectionError(str(exc)) from None


# -- tables -----------------------------------------------------------------------------------------

def _routing_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row, "layer": data.layer,
               "model_layer": data.model_layer}
    return in_range(with_context(context, data.to_columns()), sel)


def _overview_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row}
    columns = data.to_columns()
    columns["model_layer"] = np.asarray(data.model_layers)[columns["layer"]]
    return in_range(with_context(context, columns), sel)


def _text_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row}
    columns = data.to_columns()
    shade, _ = data.shade(sel.shade, sel.layer)
    columns["shade"] = np.asarray(shade, dtype=np.float64)
    return with_context(context, columns)


def _load_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "step": data.step, "layer": data.layer, "group": data.group}
    return with_context(context, data.to_columns())


SPECS: dict[str, ViewSpec] = {
    "routing": ViewSpec("routing", "Routing", (10.0, 5.0), _read_routing, _routing_columns,
                        ("run", "request", "row", "layer", "range", "colormap", "levels")),
    "overview": ViewSpec("overview", "All layers", (10.0, 5.0), _read_overview, _overview_columns,
                         ("run", "request", "row", "range")),
    "load": ViewSpec("load", "Expert load", (10.0, 7.0), _read_load, _load_columns,
                     ("run", "request", "layer", "step", "group")),
    "text": ViewSpec("text", "Text", (10.0, 3.0), _read_text, _text_columns,
                     ("run", "request", "row", "layer", "shade"), fit_height=True),
    "divergence": ViewSpec("divergence", "Side by side", (13.0, 14.0), read_pair, pair_columns,
                           ("request", "pair", "layer", "range")),
    "runs": ViewSpec("runs", "Runs of a request", (11.0, 7.5), read_runs, runs_columns,
                     ("run", "request", "condition", "range")),
}


def read_export(trace, view: str, sel: Selection) -> Export:
    """Read what view `view` draws for `sel` from an open trace; SelectionError when the trace
    cannot satisfy `sel` (TraceError passes through for an unreadable file)."""
    if view not in SPECS:
        raise SelectionError(f"unknown view {view!r}; expected one of {', '.join(SPECS)}")
    try:
        data = SPECS[view].read(trace, sel)
    except TraceError:
        raise
    except (KeyError, IndexError) as exc:
        raise SelectionError(f"cannot read the {view} figure: {exc}") from None
    return Export(view, data, sel)


def _stem_parts(export: Export) -> list[object]:
    d, sel = export.data, export.selection
    view = export.view
    if view in ("routing", "overview", "text"):
        parts: list[object] = [view, d.run, f"row{d.row}"]
        if view == "routing":
            parts.append(f"layer{d.layer}")
    elif view == "load":
        parts = [view, d.run, f"layer{d.layer}", f"step{d.step}", f"group{d.group}"]
    elif view == "divergence":
        parts = [view, f"request{d.request}", d.run_a, d.run_b, f"layer{d.layer}"]
    elif view == "runs":
        parts = [view, f"request{d.request}", f"ref-{d.reference_run}"]
    else:
        parts = [view]
    if sel.range is not None and "range" in export.spec.options:
        parts.append(f"t{sel.range[0]}-{sel.range[1]}")
    return parts


def with_selection(export: Export, **changes) -> Export:
    """The same figure data with some selection fields changed (range, colours)."""
    return Export(export.view, export.data, replace(export.selection, **changes))
