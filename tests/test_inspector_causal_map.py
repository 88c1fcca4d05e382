"""The causal map view in the app: the selected pair's map with its cells, hover and chain."""

import os
import shutil

import numpy as np
from paths import EXAMPLE

from inspector.figure_data.causal_map import describe_cell
from inspector.qt import QtWidgets
from inspector.specs.causal_map import read_causal_map
from inspector.specs.selection import Selection
from traces import open_trace

#: A divergent run of the shipped example (its probe row against the reference c00).
RUN, ROW = "c01-gshard-cf1.0-batch-native", 0
#: A trace with that pair's map (the shipped example; another may be named for a check by hand).
MAPPED = os.environ.get("MOE_CAUSAL_MAP_TRACE", str(EXAMPLE))


def test_the_view_shows_the_selected_rows_map_and_its_cells_on_hover(make_window, tmp_path, qtbot):
    copy = tmp_path / "example.h5"
    shutil.copy(MAPPED, copy)
    w = make_window(copy)
    view = next(v for v in w.views if v.name == "causal_map")
    w.state.set_run(RUN, ROW)
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view._dirty and view.data is not None, timeout=20000)
    QtWidgets.QApplication.processEvents()
    data = view.data
    assert (data.run, data.row, data.ref_run) == (RUN, ROW, "c00-gshard-cf1.0-batch-native")
    assert not data.message and data.t_star == data.n_positions > data.prompt_len
    # the two panels hold B's and A's differing cells, the same cells in both
    b, a = np.isfinite(data.effect[0]), np.isfinite(data.effect[1])
    assert b.any() and (b == a).all()
    layer, position = np.argwhere(b)[0]
    said = describe_cell(data, "B", int(layer), int(position))
    assert said.startswith(f"position {position} ") and "logit difference at t*" in said
    assert ("(exact)" in said or "(estimated" in said) and "of its null's" in said
    assert view.figure.hover_text(0, float(position), float(layer)) == said
    assert view.figure.hover_text(0, -5.0, 0.0) is None
    # a run without a map: the notice, no cells
    w.state.set_run("alone-dropless", 0)
    qtbot.waitUntil(lambda: not view._dirty and bool(view.data.message), timeout=20000)
    assert "no causal map" in view.data.message


def test_the_export_reads_the_stored_map_like_the_app():
    with open_trace(MAPPED) as trace:
        data = read_causal_map(trace, Selection(run=RUN, row=ROW))
    assert data.cells["B"] and {(c.layer, c.position) for c in data.cells["B"]} == \
        {(c.layer, c.position) for c in data.cells["A"]}
