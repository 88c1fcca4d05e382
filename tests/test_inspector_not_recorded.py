"""What a serving engine did not record is drawn as absent in every curve and heatmap: on an engine's
runs (no router logits, gates or slots; no next-token logits for the prompt) no not-recorded position
or cell has a drawn value, the gap is hatched, and the key names the hatching."""

from __future__ import annotations

import numpy as np
import pytest
from engine_trace import write_engine_trace

from inspector.export.output import default_page, drawn, print_style
from inspector.qt import QtCore
from inspector.specs.registry import read_export
from inspector.specs.selection import Selection
from traces import open_trace


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return write_engine_trace(tmp_path_factory.mktemp("engine") / "engine.h5")


def _export(path, view: str):
    with open_trace(path) as trace:
        return read_export(trace, view, Selection(request=0, pair=("alone", "routing")))


@pytest.mark.parametrize("size", ["column", "page", "slide", None])
def test_no_curve_draws_a_value_where_the_engine_recorded_none(qapp, engine, size):
    export = _export(engine, "pair")
    data = export.data
    absent = (np.arange(data.length) < data.compared) & ~data.logits_recorded
    assert absent.any()  # the prompt: an engine keeps no log-probabilities of prompt tokens
    with drawn(export, default_page("pair", 100, size=size), print_style(8.0)) as canvas:
        figure = canvas.figure
        for curve in (figure.kl_curve, figure.diff_curve, figure.margin_curve):
            x, y = curve.getData()
            drawn_at = np.isfinite(y)
            assert not (drawn_at & absent[x.astype(int)]).any(), curve.name()
        regions = sorted(tuple(band.getRegion()) for band in figure.not_recorded)
        assert regions and all(r[1] - r[0] >= 1 for r in regions)
        hatched = np.zeros(data.length, bool)
        for t0, t1 in regions:
            hatched[int(np.ceil(t0)):int(np.floor(t1)) + 1] = True
        assert np.array_equal(hatched[:data.compared], absent[:data.compared])
        if figure.key is not None and figure._key_shown:
            assert "not recorded" in figure.key.texts()


def test_no_heatmap_draws_a_probability_the_engine_did_not_record(qapp, engine):
    from inspector.figures.compare import ABSENT

    export = _export(engine, "compare")
    data = export.data
    assert not data.recorded and np.isnan(data.difference).all()
    with drawn(export, default_page("compare", 100, size="page"), print_style(8.0)) as canvas:
        figure = canvas.figure
        for panel in figure.panels:
            assert np.isnan(panel.image.image).all()  # every cell empty over the hatching
            assert panel.absent.isVisible()
        assert ABSENT in figure.key.texts()
    table = export.columns()
    assert np.ma.getmaskarray(table["probability_a"]).all() and np.ma.getmaskarray(table["difference"]).all()
    assert set(table["not_recorded"]) == {"A:routing/router_logits B:routing/router_logits"}


def test_the_engine_routing_colour_bar_names_its_steps_apart_from_its_title(qapp, engine):
    from inspector.export.fit import overlaps

    with open_trace(engine) as trace:
        export = read_export(trace, "routing", Selection(run="alone"))
    for size in ("column", "page", "slide", None):
        with drawn(export, default_page("routing", 100, size=size), print_style(8.0)) as canvas:
            bar = canvas.figure.colorbar
            assert bar.axis.label.toPlainText().strip() == "expert choice"
            assert overlaps(canvas) == [], size
            # "none" and the bar's name are apart: the name runs beside the ticks, never over one.
            ticks = [QtCore.QRectF(rect) for text, rect in _tick_rects(bar.axis)]
            name = bar.axis.label.mapRectToItem(bar.axis, bar.axis.label.boundingRect())
            assert ticks and not any(name.intersects(t) for t in ticks), size


def _tick_rects(axis):
    from inspector.export.fit import _tick_labels

    return _tick_labels(axis)
