"""The single-run views' exports (routing, layers, load, text): their data read from a trace for a
`Selection`, the table behind each figure and what its file name says. No Qt here.

`inspector.specs.registry` declares each view with these functions; `inspector.specs.divergence`
holds the same for the views comparing runs (pair, runs).
"""

from __future__ import annotations

import numpy as np

from inspector.figure_data.layers import COLUMNS as LAYERS_COLUMNS
from inspector.figure_data.layers import read_layers as read_layers_data
from inspector.figure_data.load import COLUMNS as LOAD_COLUMNS
from inspector.figure_data.load import load_data
from inspector.figure_data.routing import COLUMNS as ROUTING_COLUMNS
from inspector.figure_data.routing import read_routing as read_routing_data
from inspector.figure_data.table import (
    INTEGER,
    LAYER,
    MODEL_LAYER,
    REQUEST,
    ROW,
    RUN,
    TEXT,
    Column,
    TableSpec,
)
from inspector.figure_data.text import COLUMNS as TEXT_COLUMNS
from inspector.figure_data.text import SHADE_MODES
from inspector.figure_data.text import read_text as read_text_data
from inspector.specs.selection import (
    SHADE_BY_NAME,
    Selection,
    SelectionError,
    check_layer,
    in_range,
    pick_row,
    pick_run,
    with_context,
)
from traces.analysis.rows import layer_routing, row_trace

# -- reading ----------------------------------------------------------------------------------------

def read_routing(trace, sel: Selection):
    run = pick_run(trace, sel)
    layer = check_layer(run, sel.layer)
    data = read_routing_data(trace, run, row_trace(run, pick_row(run, sel), logits=False), layer)
    sel.positions(data.n_positions)
    return data


def read_layers(trace, sel: Selection):
    run = pick_run(trace, sel)
    data = read_layers_data(trace, row_trace(run, pick_row(run, sel), logits=False))
    sel.positions(data.n_positions)
    return data


def read_text(trace, sel: Selection):
    run = pick_run(trace, sel)
    data = read_text_data(trace, row_trace(run, pick_row(run, sel), logits=False))
    check_layer(run, sel.layer)
    if sel.shade not in SHADE_MODES:
        raise SelectionError(f"unknown shading {sel.shade!r}")
    return data


def read_load(trace, sel: Selection):
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

def _routing_values(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row, "layer": data.layer,
               "model_layer": data.model_layer}
    return in_range(with_context(context, data.to_columns()), sel)


def _layers_values(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row}
    return in_range(with_context(context, data.to_columns()), sel)


def _text_values(data, sel: Selection) -> dict[str, np.ndarray]:
    by = next(name for name, mode in SHADE_BY_NAME.items() if mode == sel.shade)
    context = {"run": data.run, "request": data.request, "row": data.row, "shade_by": by,
               "shade_layer": sel.layer if sel.shade == SHADE_BY_NAME["layer-drops"] else None}
    return with_context(context, data.to_columns(sel.shade, sel.layer))


def _load_values(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "step": data.step, "layer": data.layer, "group": data.group}
    return with_context(context, data.to_columns())


ROW_CONTEXT = (RUN, REQUEST, ROW)
routing_columns = TableSpec((*ROW_CONTEXT, LAYER, MODEL_LAYER, *ROUTING_COLUMNS),
                            "one row per (position, expert)", _routing_values)
layers_columns = TableSpec((*ROW_CONTEXT, *LAYERS_COLUMNS), "one row per (layer, position)", _layers_values)
text_columns = TableSpec(
    (*ROW_CONTEXT,
     Column("shade_by", TEXT, "what the shade column shows (--shade): drops (dropped candidates over all "
                              "layers), layer-drops (at shade_layer), margin (smallest router margin)"),
     Column("shade_layer", INTEGER, "MoE layer of the layer-drops shading", empty="shade_by is not "
                                                                                   "layer-drops"),
     *TEXT_COLUMNS),
    "one row per position", _text_values)
load_columns = TableSpec(
    (RUN,
     Column("step", INTEGER, "forward step shown (0 = the prompt's)"),
     LAYER,
     Column("group", INTEGER, "capacity group shown within the step"),
     *LOAD_COLUMNS),
    "one row per (batch row, expert)", _load_values)


# -- file stems -------------------------------------------------------------------------------------

def row_stem(data) -> list[object]:
    return [data.run, f"row{data.row}"]


def routing_stem(data) -> list[object]:
    return [*row_stem(data), f"layer{data.layer}"]


def load_stem(data) -> list[object]:
    return [data.run, f"layer{data.layer}", f"step{data.step}", f"group{data.group}"]
