"""Axes a reader can line up: on the shipped examples, the exported pair figure draws t* at one x in
every panel of a column at every preset (and at the same place in both columns); every expert axis
labels every expert at a journal column; colour bars are as tall as their heatmaps; token text
comes with position numbers; a log axis keeps one notation; a count axis labels 0."""

from __future__ import annotations

import functools

import pytest

from inspector.app.example import examples_dir
from inspector.export.fit import _tick_labels
from inspector.export.output import default_page, drawn, font_pt, print_style
from inspector.export.page import PRESETS
from inspector.qt import QtCore
from inspector.specs.defaults import informative
from inspector.specs.registry import SPECS, read_export
from inspector.specs.selection import Selection
from traces import open_trace

EXAMPLES = ("example.h5", "tiny-mixtral-bf16.h5")
#: Exports are laid out at this DPI here: the layout is the page's whatever the DPI, and few pixels
#: are cheap to draw.
DPI = 100


def picked(name: str, view: str):
    """The export a bare `moe-inspector export` of example `name` draws for `view`."""
    with open_trace(examples_dir() / name) as trace:
        sel, _ = informative(trace, SPECS[view], Selection())
        return read_export(trace, view, sel)


@functools.cache
def measured(name: str, view: str, size: str | None) -> dict:
    """What the tests read of example `name`'s `view` exported at `size`, drawn once: each pair
    panel's t* line and data area (output pixels), the labels of the expert and count axes, the
    colour bars' and their heatmaps' data areas."""
    from inspector.figures.axes import CountAxis
    from inspector.qt import pg

    export = picked(name, view)
    page, style = default_page(view, DPI, size=size), print_style(font_pt(size))
    out: dict = {}
    with drawn(export, page, style) as canvas:
        items = [i for i in canvas.widget.scene().items() if i.isVisible()]
        out["experts"] = [(len(a.labels), [t for t, _ in _tick_labels(a)]) for a in items
                          if getattr(a, "labelText", "") == "expert"]
        out["counts"] = [[t for t, _ in _tick_labels(a)] for a in items if isinstance(a, CountAxis)]
        out["bars"] = [(b.vb.sceneBoundingRect(), b.parentItem().vb.sceneBoundingRect()) for b in items
                       if isinstance(b, pg.ColorBarItem)]
        figure = canvas.figure
        if view == "pair":
            t_star = figure.data.t_star
            out["t_star"] = t_star
            out["columns"] = [figure.plots] if figure.stacked else [figure.plots[:3], figure.plots[3:]]
            out["columns"] = [[figure.plots.index(p) for p in c] for c in out["columns"]]
            out["lines"] = []
            for plot, line in zip(figure.plots, figure.t_star_lines, strict=True):
                area = plot.vb.sceneBoundingRect()
                out["lines"].append((line.isVisible(), line.scenePos().x() * canvas.scale,
                                     plot.vb.mapViewToScene(QtCore.QPointF(t_star, 0)).x() * canvas.scale,
                                     area.left() * canvas.scale, area.width() * canvas.scale,
                                     area.bottom(), [t for t, _ in _tick_labels(plot.getAxis("bottom"))]
                                     if plot.getAxis("bottom").isVisible() else []))
    return out


@pytest.mark.parametrize("size", [*PRESETS, None])
def test_t_star_is_one_line_through_every_panel_of_the_pair_figure(qapp, size):
    m = measured("example.h5", "pair", size)
    assert m["t_star"] >= 0
    lines = m["lines"]
    for visible, drawn_x, expected, *_ in lines:  # each line where its panel maps t*
        assert visible and abs(drawn_x - expected) <= 1.0
    for column in m["columns"]:
        xs = [lines[i][1] for i in column]
        assert max(xs) - min(xs) <= 1.0, (size, xs)
        # Each column numbers its positions under its bottom panel.
        bottom = max(column, key=lambda i: lines[i][5])
        labels = lines[bottom][6]
        assert len(labels) >= 3 and all(text.isdigit() for text in labels), labels
    # Side by side, the columns map positions alike: the same offset into equally wide areas.
    offsets = [x - left for _, x, _, left, *_ in lines]
    widths = [width for *_, width, _, _ in lines]
    assert max(offsets) - min(offsets) <= 1.0 and max(widths) - min(widths) <= 1.0, (size, offsets, widths)


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("view", ["routing", "pair", "load"])
def test_every_expert_is_labelled_at_a_journal_column(qapp, name, view):
    axes = measured(name, view, "column")["experts"]
    assert axes
    for n, labels in axes:
        assert n == 8 and labels == [str(e) for e in range(n)]


@pytest.mark.parametrize("view", ["routing", "pair"])
def test_colour_bars_are_as_tall_as_their_heatmaps(qapp, view):
    bars = measured("example.h5", view, "column")["bars"]
    assert bars
    for bar, heatmap in bars:
        assert abs(bar.top() - heatmap.top()) <= 1 and abs(bar.bottom() - heatmap.bottom()) <= 1


def test_token_text_comes_with_position_numbers(qtbot):
    from inspector.figures.axes import TokenAxis
    from inspector.qt import pg

    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    axis = TokenAxis("bottom", [chr(ord("a") + i % 26) for i in range(40)])
    plot = widget.addPlot(axisItems={"bottom": axis})
    plot.setXRange(-0.5, 39.5, padding=0)
    widget.resize(1200, 300)
    widget.show()
    # The axis grows a row for the numbers once it has drawn its text.
    qtbot.waitUntil(lambda: axis.shows_text() and any(t.isdigit() for t, _ in _tick_labels(axis)),
                    timeout=3000)
    labels = _tick_labels(axis)
    letters = [text for text, _ in labels if text.isalpha()]
    numbers = [(int(text), rect) for text, rect in labels if text.isdigit()]
    assert len(letters) == 40 and len(numbers) >= 3
    top = min(rect.top() for _, rect in labels)
    assert all(rect.top() > top + 1 for _, rect in numbers)  # a row of their own, under the text
    assert axis.height() >= 2 * min(rect.height() for _, rect in labels)


def test_a_log_axis_keeps_one_notation():
    from inspector.figures.log_axis import decade_labels

    assert decade_labels([-2, -1, 0, 1]) == ["0.01", "0.1", "1", "10"]
    mixed = decade_labels([-6, -4, -3, -2, 0])
    assert mixed == ["10⁻⁶", "10⁻⁴", "10⁻³", "10⁻²", "10⁰"]
    assert decade_labels([-12, -12 + 0.30103]) == ["10⁻¹²", "2·10⁻¹²"]


@pytest.mark.parametrize("size", ["slide", "column"])
def test_count_axes_label_zero(qapp, size):
    counts = measured("example.h5", "load", size)["counts"]
    assert counts and all("0" in labels for labels in counts)
