"""The single-run views' exports (routing, layers, load, text): their data read from a trace for a
`Selection`, the table behind each figure and what its file name says. No Qt here.

`inspector.specs.registry` declares each view with these functions; `inspector.specs.divergence`
holds the same for the views comparing runs (pair, runs).
"""

from __future__ import annotations

import numpy as np

from inspector.figure_data.layers import read_layers as read_layers_data
from inspector.figure_data.load import load_data
from inspector.figure_data.routing import read_routing as read_routing_data
from inspector.figure_data.text import SHADE_MODES
from inspector.figure_data.text import read_text as read_text_data
from inspector.specs.selection import (
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

def routing_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row, "layer": data.layer,
               "model_layer": data.model_layer}
    return in_range(with_context(context, data.to_columns()), sel)


def layers_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row}
    columns = data.to_columns()
    columns["model_layer"] = np.asarray(data.model_layers)[columns["layer"]]
    return in_range(with_context(context, columns), sel)


def text_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "request": data.request, "row": data.row}
    columns = data.to_columns()
    shade, _ = data.shade(sel.shade, sel.layer)
    columns["shade"] = np.asarray(shade, dtype=np.float64)
    return with_context(context, columns)


def load_columns(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"run": data.run, "step": data.step, "layer": data.layer, "group": data.group}
    return with_context(context, data.to_columns())


# -- file stems -------------------------------------------------------------------------------------

def row_stem(data) -> list[object]:
    return [data.run, f"row{data.row}"]


def routing_stem(data) -> list[object]:
    return [*row_stem(data), f"layer{data.layer}"]


def load_stem(data) -> list[object]:
    return [data.run, f"layer{data.layer}", f"step{data.step}", f"group{data.group}"]
