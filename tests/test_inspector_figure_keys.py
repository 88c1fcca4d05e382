"""A figure says only what it draws: no text about the app on an exported page (its caption file says
what a small page left out, and the cause); a key entry for each mark drawn and none for a mark not
drawn, the ★ named by whether a proof exists, each swatch drawn as its mark; the ★ whole at the map's
edge and over the ○; titles that keep a number with its word; a dropless group without a capacity
line or a dropped entry; an engine run's choices on a stepped scale and its unrecorded positions
hatched, never drawn as 0; a word of the text strip that fits a line never split."""

from __future__ import annotations

import functools
import re
from dataclasses import replace

import numpy as np
import pytest
from test_model_vllm_adapter import trace  # noqa: F401 (the engine trace fixture)

from inspector.app.example import examples_dir
from inspector.cli import main
from inspector.export.fit import _tick_labels
from inspector.export.output import default_page, drawn, print_style
from inspector.qt import QtGui, pg
from inspector.specs.defaults import informative
from inspector.specs.registry import SPECS, read_export
from inspector.specs.selection import Selection
from traces import open_trace

EXAMPLE = examples_dir() / "example.h5"
#: Words only the app says: they never reach a figure's page.
APP_WORDS = ("Left out", "moe-inspector", "Side by side", "explain", "the app")


def picked(view: str, path=EXAMPLE, **changes):
    with open_trace(path) as opened:
        sel, _ = informative(opened, SPECS[view], Selection())
        return read_export(opened, view, replace(sel, **changes))


def page_texts(canvas) -> list[str]:
    from inspector.export.fit import _text_boxes

    return [text for text, _rect, _item in _text_boxes(canvas)]


@pytest.mark.parametrize("view", list(SPECS))
def test_no_export_carries_text_about_the_app(qapp, tmp_path, view):
    out = tmp_path / f"{view}.pdf"
    assert main(["export", str(EXAMPLE), "--view", view, "--size", "column", "--dpi", "72", "--caption",
                 "-o", str(out)]) == 0
    from pypdf import PdfReader

    text = " ".join(page.extract_text() for page in PdfReader(str(out)).pages)
    assert not [w for w in APP_WORDS if w in text], text
    assert (tmp_path / f"{view}.txt").read_text(encoding="utf-8").strip()  # the figure in words


@functools.cache
def pair_page() -> dict:
    """What the tests read of the example's pair figure at a page width, drawn once."""
    export = picked("pair")
    with drawn(export, default_page("pair", 100, size="page"), print_style(8.0)) as canvas:
        figure = canvas.figure
        (x0, x1), (y0, y1) = figure.map.vb.viewRange()
        px, py = figure.map.vb.viewPixelSize()
        markers = [(spot.pos().x(), spot.pos().y(), item.opts["size"] / 2 * px, item.opts["size"] / 2 * py)
                   for item in (figure.event_mark, figure.root_mark) for spot in item.points()]
        titles = []
        for plot in figure.heatmaps:
            block = plot.titleLabel.item.document().begin()
            layout = block.layout()
            titles.append((plot.titleLabel.text, block.text(),
                           [layout.lineAt(i).textStart() + layout.lineAt(i).textLength()
                            for i in range(layout.lineCount() - 1)]))
        return {"key": figure.key.texts(), "proven": figure.data.cause.proven,
                "selected": figure.selected_lines[0].isVisible(), "roots": len(figure.root_mark.data),
                "texts": page_texts(canvas), "view": (x0, x1, y0, y1), "markers": markers,
                "z": (figure.event_mark.zValue(), figure.root_mark.zValue(),
                      max(line.zValue() for line in figure.t_star_lines + figure.selected_lines)),
                "titles": titles}


def test_the_pair_key_names_each_mark_drawn_and_only_those(qapp):
    page = pair_page()
    texts = page["key"]
    assert page["proven"] and "proven cause" in texts  # the ★ is the proof's event
    assert "first difference (no proof)" not in texts
    assert "selected position" not in texts and not page["selected"]  # none is selected on a page
    assert "first bitwise difference" in texts and page["roots"] == 1
    assert not [w for w in APP_WORDS if any(w in t for t in page["texts"])]
    # The ★ lies over the ○ and over every line, and whole inside the map even at its edge.
    star, root, lines = page["z"]
    assert star > root > lines
    x0, x1, y0, y1 = page["view"]
    for x, y, half_x, half_y in page["markers"]:
        assert x0 <= x - half_x and x + half_x <= x1 and y0 <= y - half_y and y + half_y <= y1


def test_without_a_proof_the_star_says_first_difference(qtbot, trace_path):
    from inspector.figure_data.divergence_source import DivergenceSource
    from inspector.figures.pair import PairFigure

    with open_trace(trace_path) as opened:
        source = DivergenceSource(opened)
        choices = source.choices(source.default_request())
        data = next(d for d in (source.pair(choices[0], c, 0) for c in choices[1:])
                    if d.verdict.diverged and not d.cause.proven and d.cause.event[1] >= 0)
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    figure = PairFigure(widget.ci, with_key=True)
    figure.set_data(data)
    assert "first difference (no proof)" in figure.key.texts() and "proven cause" not in figure.key.texts()


def test_dropped_swatch_is_drawn_as_the_dropped_cells_at_every_size(qapp):
    """The key's sample of a dropped candidate paints the figure's own marks (its red frame, then its
    cross or tick) with their own code, in a cell of the figure's size: what a dropped cell shows."""
    from inspector.figures.marks import MarkSample

    export = picked("routing")
    modes = set()
    for size in ("column", "page", "slide"):
        with drawn(export, default_page("routing", 100, size=size), print_style(8.0)) as canvas:
            figure = canvas.figure
            sample = next(i for i in canvas.widget.scene().items() if isinstance(i, MarkSample)
                          and figure.dropped in i.marks)
            assert sample.marks == [figure.dropped_outline, figure.dropped]
            ux, uy = figure.dropped.cell_size()
            assert sample.cell() == (min(ux, 18.0), min(uy, 14.0))
            modes.add((figure.dropped_outline.mode(), figure.dropped.mode()))
            image = QtGui.QImage(24, 20, QtGui.QImage.Format.Format_ARGB32)
            image.fill(0)
            painter = QtGui.QPainter(image)
            fill, sample.fill = sample.fill, None  # the marks alone, without the cell's colour
            sample.paint(painter)
            sample.fill = fill
            painter.end()
            red = [QtGui.QColor(image.pixel(x, y)) for x in range(24) for y in range(20)]
            assert any(c.red() > 200 and c.green() < 80 and c.alpha() > 200 for c in red), size
    assert ("none", "tick") in modes and ("frame", "cross") in modes  # both looks, each keyed as drawn


def test_a_dropless_group_has_no_capacity_line_and_no_dropped_entry(qapp):
    with open_trace(EXAMPLE) as opened:
        export = read_export(opened, "load", Selection(run="alone-dropless", layer=0))
    with drawn(export, default_page("load", 100, size="page"), print_style(8.0)) as canvas:
        figure = canvas.figure
        assert not any(line.isVisible() for line in figure.capacity_lines)
        assert figure.totals_legend.texts() == ["requested", "kept"]
        assert not any("dropped" in t for t in figure.shares_legend.texts())
        assert "hatched" not in figure.shares.titleLabel.text


def test_titles_keep_a_number_with_its_word(qapp):
    for title, text, line_ends in pair_page()["titles"]:
        assert "row\u00a0" in title  # "row 2" never breaks as "row / 2"
        assert not any(text[:end].rstrip().endswith("row") for end in line_ends), text


def test_an_engine_run_is_drawn_as_what_it_holds(qapp, trace):  # noqa: F811 (the fixture)
    """On a serving engine's runs (`tests/test_model_vllm_adapter.py`'s, written without vLLM)."""
    engine_trace = trace
    from inspector.figures.pair import PairFigure

    export = picked("routing", engine_trace)
    with drawn(export, default_page("routing", 100, size="page"), print_style(8.0)) as canvas:
        bar = canvas.figure.colorbar
        ticks = [text for text, _ in _tick_labels(bar.axis)]
        assert ticks == ["none", "2nd", "1st"]  # a step per choice, not a scale of 0.2 to 0.8
        assert "dropped" not in canvas.figure.plot.titleLabel.text
    columns = export.columns()
    assert np.ma.getmaskarray(columns["probability"]).all()  # empty in the CSV, never 0
    assert all("routing/router_logits" in why for why in columns["not_recorded"])
    # Positions without recorded logits: hatched in the curves, empty in the table, never 0.
    pair = picked("pair", engine_trace)
    data = pair.data
    margin = np.array(data.logit_margin)
    margin[: data.prompt_len - 1] = np.nan  # what an engine records: no prompt log-probabilities
    data = replace(data, logit_margin=margin, kl=np.where(np.isnan(margin), np.nan, data.kl),
                   logit_diff=np.where(np.isnan(margin), np.nan, data.logit_diff))
    widget = pg.GraphicsLayoutWidget()
    figure = PairFigure(widget.ci, with_key=True)
    figure.set_data(data)
    spans = sorted({tuple(b.getRegion()) for b in figure.not_recorded})
    assert spans == [(-0.5, data.prompt_len - 1.5)]
    assert "not recorded" in figure.key.texts()
    table = replace(pair, data=data).columns()
    missing = table["not_recorded"] == "logits"
    assert missing.sum() == data.prompt_len - 1 and np.ma.getmaskarray(table["kl"])[missing].all()
    widget.close()
    # The verdict names only what both runs hold.
    assert "router_logits" not in data.verdict.parts and "gate" not in data.verdict.parts


def test_a_numeric_cause_reads_in_words(qapp):
    from inspector.figure_data.divergence_cause import cause_text
    from traces.analysis import ExplainRecord

    path = examples_dir() / "tiny-mixtral-bf16.h5"
    with open_trace(path) as opened:
        from inspector.figure_data.divergence_source import DivergenceSource

        source = DivergenceSource(opened)
        numeric = [r for r in source.records() if r.confirmed_cause == "output_numeric"]
        assert numeric
        record: ExplainRecord = numeric[0]
        choices = source.choices(record.request)
        a = next(c for c in choices if c.run == record.ref_run and c.row == record.ref_row)
        b = next(c for c in choices if c.run == record.run and c.row == record.row)
        data = source.pair(a, b, 0)
    cause = cause_text(data.verdict, record)
    assert "output_numeric" not in cause.headline
    assert re.search(r"the next token flipped by a logit change of [\d.e-]+ at a near-tie of [\d.e-]+",
                     cause.headline), cause.headline
    assert cause.confirmed and not cause.proven


def test_a_word_that_fits_a_line_is_never_split(qapp):
    from inspector.figures.text import long_words

    texts = ["the", " ", "s", "a", "m", "e", " ", "x" * 3, "y" * 3, "z" * 3]
    # Only a word longer than a line may break, between its tokens: "xxxyyyzzz" at 8, "same" too at 3.
    assert np.flatnonzero(long_words(texts, 8)).tolist() == [8, 9]
    assert np.flatnonzero(long_words(texts, 3)).tolist() == [3, 4, 5, 8, 9]
    export = picked("text")
    with drawn(export, default_page("text", 100, size="column"), print_style(8.0)) as canvas:
        strip = canvas.figure.strip
        doc = strip.text.document()
        plain = doc.toPlainText()
        block = doc.begin()
        while block.isValid():
            layout, text = block.layout(), block.text()
            for i in range(layout.lineCount() - 1):
                end = layout.lineAt(i).textStart() + layout.lineAt(i).textLength()
                before, after = text[:end].rstrip("\u200b"), text[end:].lstrip("\u200b")
                head = re.findall(r"\S+$", before)
                tail = re.findall(r"^\S+", after)
                if head and tail:  # a word split across lines is wider than a line
                    assert len(head[0] + tail[0]) > strip.line_chars(strip.text.textWidth()), plain
            block = block.next()
