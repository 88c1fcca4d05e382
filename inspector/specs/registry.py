"""The views, each declared once: its name, title, key, the data it reads, its figure builder,
the table behind it, its file stem and the options it reads.

The app's tabs and menus, the export dialog, `moe-inspector export --view` and the tests all read
`SPECS`, when asked (nothing is derived from it at import): a new view is one entry here, plus its
own figure data, figure builder and widget (by default the `View` of `inspector/views/<name>.py`).
No Qt in this module: figure builders and widgets are named, not imported, so a CSV export never
loads Qt.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from inspector.figure_data import causal_map
from inspector.figure_data.table import Table, TableError, TableSpec
from inspector.specs import captions, divergence, figures
from inspector.specs import causal_map as causal_map_spec
from inspector.specs.selection import Selection, SelectionError
from traces import TraceError

#: Where the figure builders named without a module live (imported only to draw).
DRAW_MODULE = "inspector.specs.draw"


@dataclass(frozen=True)
class ViewSpec:
    """One view: everything the app, the export dialog, the `export` command and the tests need."""

    name: str                                      # export --view, file stems, tests
    title: str                                     # tab, menu, export dialog, file title
    key: str                                       # shortcut showing the view in the app ("" for none)
    read: Callable[[Any, Selection], Any]          # (open trace, selection) -> figure data
    figure: str                                    # builder (layout, style, data, selection, fit): a
                                                   # name in DRAW_MODULE, or "module:name"
    columns: TableSpec                             # the table behind the figure: its declared columns
                                                   # and their values (data, selection) -> Table
    stem: Callable[[Any], list[object]]            # what the file name says after the view's name
    options: tuple[str, ...] = ()                  # Selection fields the view reads
    inches: tuple[float, float] = (10.0, 5.0)      # usual page (width, height) in inches
    heights: tuple[float, float] = (2.8, 3.6)      # page height in inches at --size column, page
    fits: int = 1                                  # layouts the builder has, fullest first
    area: str = "tab"                              # app: "tab" of the main area, or "bottom" under it
    fit_height: bool = False                       # page height follows the content (text)
    aliases: tuple[str, ...] = ()                  # older names the command line still accepts
    compares: bool = False                         # compares runs: a bare export picks a pair, not a run
    widget: str = ""                               # the app's widget: "module:Class", or "" for the
                                                   # View named `name` in inspector.views.<name>
    caption: Callable[[Any], list[str]] = lambda data: []   # the figure in words (caption file)

    def draw(self, layout, style, data, sel: Selection, fit: int = 0):
        """Draw `data` into a `pg.GraphicsLayout` with `style` in layout `fit` (0 = fullest, up to
        `fits` - 1: panels stacked, then secondary ones left out); returns the figure builder,
        whose `left_out` names what a compact layout leaves out."""
        return self.builder()(layout, style, data, sel, fit)

    def builder(self) -> Callable:
        """The figure builder `figure` names (its module imported now)."""
        module, _, name = self.figure.rpartition(":")
        return getattr(importlib.import_module(module or DRAW_MODULE), name)


SPECS: dict[str, ViewSpec] = {spec.name: spec for spec in (
    ViewSpec("routing", "Routing", "Ctrl+1", figures.read_routing, "draw_routing", figures.routing_columns,
             figures.routing_stem, ("run", "request", "row", "layer", "range", "colormap", "levels"),
             heights=(3.4, 3.6), fits=2, caption=captions.routing_caption),
    ViewSpec("layers", "All layers", "Ctrl+2", figures.read_layers, "draw_layers", figures.layers_columns,
             figures.row_stem, ("run", "request", "row", "range"), heights=(3.6, 3.6), fits=2,
             aliases=("overview",), caption=captions.layers_caption),
    ViewSpec("load", "Expert load", "Ctrl+3", figures.read_load, "draw_load", figures.load_columns,
             figures.load_stem, ("run", "request", "layer", "step", "group"), inches=(10.0, 7.0),
             heights=(4.2, 5.0), fits=2, caption=captions.load_caption),
    ViewSpec("pair", "Side by side", "Ctrl+4", divergence.read_pair, "draw_pair", divergence.pair_columns,
             divergence.pair_stem, ("request", "pair", "layer", "range"), inches=(13.0, 14.0),
             heights=(9.5, 9.0), fits=6, aliases=("divergence",), compares=True,
             caption=captions.pair_caption),
    ViewSpec("runs", "N runs", "Ctrl+5", divergence.read_runs, "draw_runs", divergence.runs_columns,
             divergence.runs_stem, ("run", "request", "condition", "range"), inches=(11.0, 7.5),
             heights=(5.5, 5.0), fits=3, compares=True, caption=captions.runs_caption),
    ViewSpec("compare", "Compare", "Ctrl+6", divergence.read_compare,
             "inspector.figures.compare:draw_compare",
             divergence.compare_columns, divergence.compare_stem, ("request", "pair", "layer", "range"),
             inches=(10.0, 6.5), heights=(6.2, 6.0), fits=2, compares=True,
             caption=captions.compare_caption),
    ViewSpec("causal_map", "Causal map", "Ctrl+7", causal_map_spec.read_causal_map,
             "inspector.figures.causal_map:draw_causal_map", causal_map_spec.map_columns, causal_map.map_stem,
             ("run", "request", "row", "range"), inches=(10.0, 6.0), heights=(5.0, 5.5), fits=2,
             widget="inspector.views.causal_map:CausalMapView", caption=causal_map.map_caption),
    ViewSpec("text", "Text", "", figures.read_text, "draw_text", figures.text_columns, figures.row_stem,
             ("run", "request", "row", "layer", "shade"), inches=(10.0, 3.0), heights=(2.0, 2.0),
             area="bottom", fit_height=True, caption=captions.text_caption),
)}

def view_names() -> dict[str, str]:
    """Every name `export --view` accepts, to the view it names: the views' names, then their older
    aliases."""
    return {**{n: n for n in SPECS}, **{a: s.name for s in SPECS.values() for a in s.aliases}}


def spec_of(name: str) -> ViewSpec:
    """The view named `name` (or an alias of it); SelectionError for an unknown name."""
    names = view_names()
    if name not in names:
        raise SelectionError(f"unknown view {name!r}; expected one of {', '.join(SPECS)}")
    return SPECS[names[name]]


@dataclass(frozen=True)
class Export:
    """A view's figure ready to draw or tabulate: its data and the selection it was read with."""

    view: str
    data: Any
    selection: Selection = field(default_factory=Selection)

    @property
    def spec(self) -> ViewSpec:
        return SPECS[self.view]

    def columns(self) -> Table:
        """The table behind the figure: its declared columns and one array per column."""
        table = self.spec.columns(self.data, self.selection)
        if not isinstance(table, Table):
            raise TableError(f"the {self.view} view declares no columns (its columns must be a TableSpec)")
        return table

    def draw(self, layout, style, fit: int = 0):
        """Draw the figure into a `pg.GraphicsLayout` with `style` in layout `fit`; returns the builder."""
        return self.spec.draw(layout, style, self.data, self.selection, fit)

    def stem(self) -> str:
        """A file name without extension saying what the figure shows."""
        parts = [self.view, *self.spec.stem(self.data)]
        if self.selection.range is not None and "range" in self.spec.options:
            parts.append(f"t{self.selection.range[0]}-{self.selection.range[1]}")
        return "-".join(str(p) for p in parts if p != "")

    def caption(self, left_out: list[str]) -> str:
        """The figure in words, and what a compact layout left out (the caption file's text)."""
        return captions.caption_text(self.spec.caption(self.data), left_out)

    def with_selection(self, **changes) -> Export:
        """The same figure data with some selection fields changed (range, colours)."""
        return Export(self.view, self.data, replace(self.selection, **changes))


def read_export(trace, view: str, sel: Selection) -> Export:
    """Read what view `view` draws for `sel` from an open trace; SelectionError when the trace
    cannot satisfy `sel` (TraceError passes through for an unreadable file)."""
    spec = spec_of(view)
    try:
        data = spec.read(trace, sel)
    except TraceError:
        raise
    except (KeyError, IndexError) as exc:
        raise SelectionError(f"cannot read the {spec.name} figure: {exc}") from None
    return Export(spec.name, data, sel)
