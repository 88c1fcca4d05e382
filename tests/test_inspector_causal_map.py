"""The causal map view in the app: the selected pair's map with its cells, hover and chain."""

import os
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from paths import EXAMPLE

from inspector.figure_data.causal_map import describe_cell, map_records
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


def _texts(svg: bytes) -> tuple[list[tuple[str, float, float, float, str]], dict[str, list[float]], float]:
    """(text, left x, right x, baseline y, fill) of every unrotated text, the x of every vertical line by
    stroke colour, and the page's width, in the SVG's own coordinates."""
    from test_inspector_svg_labels import SVG, _matrix, _times

    from inspector.qt import QtGui

    root = ET.fromstring(svg)
    texts, lines = [], {}

    def walk(element, m, stroke):
        m = _times(m, _matrix(element.get("transform")))
        stroke = element.get("stroke", stroke)
        tag = element.tag.replace(SVG, "")
        if tag == "text" and (element.text or "").strip() and abs(m[1]) < 1e-9 and abs(m[2]) < 1e-9:
            font = QtGui.QFont("DejaVu Sans")
            font.setPixelSize(max(1, round(float(element.get("font-size", "12")))))
            width = QtGui.QFontMetricsF(font).horizontalAdvance(element.text.strip())
            x, y = float(element.get("x", "0")), float(element.get("y", "0"))
            left = m[0] * x + m[4]
            texts.append((element.text.strip(), left, left + m[0] * width, m[3] * y + m[5],
                          element.get("fill", "").lower()))
        if tag in ("polyline", "path"):
            points = element.get("points") or element.get("d") or ""
            xs = [float(v) for v in re.findall(r"(-?[\d.]+),-?[\d.]+", points)]
            if len(xs) == 2 and abs(xs[0] - xs[1]) < 0.01 and stroke:
                lines.setdefault(stroke.lower(), []).append(m[0] * xs[0] + m[4])
        for child in element:
            walk(child, m, stroke)

    walk(root, (1.0, 0.0, 0.0, 1.0, 0.0, 0.0), None)
    return texts, lines, float(root.get("viewBox").split()[2])


@pytest.mark.parametrize("size", ["column", "page", "slide", None])
def test_the_exported_map_reads_alone_with_its_colour_bar_and_key(qapp, tmp_path, size):
    """At every page size: the colour bar's scale right of the map, t*'s name on its line, and a key
    naming grey cells, the colours, and every outline and chain the figure draws, its entries apart."""
    from inspector.cli import main

    with open_trace(MAPPED) as trace:
        records, _ = map_records(trace)
    chained = next((r for r in records if r.map_chain), records[0])   # a pair with a chain, if one is
    out = tmp_path / "map.svg"
    argv = ["export", str(MAPPED), "--view", "causal_map", "--run", chained.run, "--row", str(chained.row),
            "-o", str(out)]
    assert main(argv + (["--size", size] if size else [])) == 0
    texts, lines, width = _texts(out.read_bytes())
    said = [t[0] for t in texts]
    key = {"grey: the runs agree (nothing to patch)", "red: toward the other run's token",
           "blue: away from it",
           "t* (the tokens split)"}
    if chained.map_chain:
        key |= {"chain from the batch event (dot)", "outlined: beats its position-matched null"}
    assert key <= set(said), key - set(said)
    # every text on the page, and the key's entries side by side or one under another, never overlapping
    assert all(left >= -1 and right <= width + 1 for _, left, right, _, _ in texts), width
    entries = [t for t in texts if t[0] in key]
    for i, a in enumerate(entries):
        for b in entries[i + 1:]:
            assert abs(a[3] - b[3]) > 8 or a[2] <= b[1] or b[2] <= a[1], (a, b)
    # t*'s name is centred on a vertical line of its own colour, and the colour bar's 0 lies right of it
    assert any(t[0] == "t*" for t in texts)
    for _, left, right, _, fill in [t for t in texts if t[0] == "t*"]:
        assert min(abs((left + right) / 2 - x) for x in lines.get(fill, [float("inf")])) <= 2.0, (size, fill)
        zeros = [t for t in texts if t[0] == "0" and t[1] > right - 2]
        assert zeros, "the colour bar's scale"
