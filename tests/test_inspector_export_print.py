"""Figures for print: every view's SVG drawn by another renderer (cairosvg) looks like its PNG, each
page preset gives a PDF of its size whose smallest text is 7 pt and whose panels have room, a
figure that cannot fit fails with exit 2, the fit check sees texts over each other, words broken
by wrapping and linked panels showing other positions, and the cause names its own layer."""

import csv
import math
import re
import unicodedata
import xml.etree.ElementTree as ET

import cairosvg
import numpy as np
import pytest
from paths import EXAMPLE
from png_pixels import png_gray
from pypdf import PdfReader

from inspector.cli import main
from inspector.export import SPECS
from inspector.export.page import MIN_FONT_PT, PRESETS
from inspector.export.svg import final_coordinates
from inspector.figure_data.divergence_source import DivergenceSource
from inspector.figure_data.pair import pair_figure_data
from inspector.specs.defaults import informative
from inspector.specs.registry import read_export
from inspector.specs.selection import Selection
from traces import open_trace

VIEWS = tuple(SPECS)
#: Grayscale images are compared after averaging BLOCK x BLOCK pixel blocks (at 100 dpi, about a
#: line of 10 pt text): the same figure, whatever each renderer's anti-aliasing and glyph hinting.
BLOCK = 8


def export(trace_path, view: str, out, *options: str) -> int:
    return main(["export", str(trace_path), "--view", view, *options, "-o", str(out)])


def blocks(image: np.ndarray) -> np.ndarray:
    h, w = (image.shape[0] // BLOCK) * BLOCK, (image.shape[1] // BLOCK) * BLOCK
    return image[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK).mean(axis=(1, 3))


# -- SVG ----------------------------------------------------------------------------------------------

NS = "{http://www.w3.org/2000/svg}"


def _box(numbers: list[float]) -> tuple[float, float, float, float]:
    xs, ys = numbers[0::2], numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def clipped_away(svg: bytes) -> list[str]:
    """Shapes (in page coordinates) that lie wholly outside the clip of their group: drawn under
    a clip that is not theirs, so no viewer shows them."""
    root = ET.fromstring(svg)
    clips = {c.get("id"): _box([float(v) for v in re.findall(r"[-\d.e]+", c.find(f"{NS}path").get("d"))])
             for c in root.iter(f"{NS}clipPath")}
    out = []
    for outer in root.iter(f"{NS}g"):
        found = re.match(r"url\(#(\w+)\)", outer.get("clip-path", ""))
        if not found:
            continue
        x0, y0, x1, y1 = clips[found.group(1)]
        for group in outer.findall(f"{NS}g"):
            if group.get("transform"):
                continue
            for shape in group:
                if shape.tag == f"{NS}rect":
                    x, y = float(shape.get("x")), float(shape.get("y"))
                    box = (x, y, x + float(shape.get("width")), y + float(shape.get("height")))
                elif shape.tag in (f"{NS}polyline", f"{NS}polygon", f"{NS}path"):
                    text = shape.get("points") or shape.get("d")
                    box = _box([float(v) for v in re.findall(r"-?[\d.]+(?:e-?\d+)?", text)])
                else:
                    continue
                if box[2] < x0 - 1 or box[0] > x1 + 1 or box[3] < y0 - 1 or box[1] > y1 + 1:
                    out.append(f"{shape.tag[len(NS):]} at {box} outside clip {found.group(1)}")
    return out


@pytest.mark.parametrize("view", VIEWS)
def test_svg_drawn_by_cairosvg_looks_like_the_png(qapp, trace_path, tmp_path, view):
    png, svg = tmp_path / f"{view}.png", tmp_path / f"{view}.svg"
    for out in (png, svg):
        assert export(trace_path, view, out, "--size", "page", "--dpi", "100") == 0
    text = svg.read_text(encoding="utf-8")
    assert "non-scaling-stroke" not in text and "vector-effect" not in text
    assert clipped_away(svg.read_bytes()) == []
    families = set(re.findall(r'font-family="([^"]*)"', text))
    generic = ("sans-serif", "monospace")
    assert families and all(f.startswith("DejaVu Sans") and f.split(",")[-1].strip() in generic
                            for f in families), families
    expected = png_gray(png.read_bytes())
    drawn = png_gray(cairosvg.svg2png(url=str(svg), output_width=expected.shape[1],
                                  output_height=expected.shape[0]))
    assert drawn.shape == expected.shape
    a, b = blocks(expected).ravel(), blocks(drawn).ravel()
    assert np.corrcoef(a, b)[0, 1] >= 0.9


def test_final_coordinates_moves_strokes_out_of_stretching_transforms():
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100">'
           b'<g stroke="#000" stroke-width="1" transform="matrix(10,0,0,-20,5,90)" font-family="Sans Serif">'
           b'<rect vector-effect="non-scaling-stroke" x="0" y="0" width="2" height="1"/>'
           b'<polyline vector-effect="non-scaling-stroke" points="0,0 1,1"/>'
           b'<path vector-effect="non-scaling-stroke" d="M0,0 L1,2 C1,1 2,2 3,3"/>'
           b'<text x="0" y="0" font-size="10.6667">t</text></g>'
           b'<g stroke="#000" stroke-width="0.1" transform="matrix(10,0,0,10,0,0)">'
           b'<polyline points="0,0 1,1"/></g></svg>')
    root = ET.fromstring(final_coordinates(svg))
    ns = "{http://www.w3.org/2000/svg}"
    groups = root.findall(f"{ns}g")
    flat = groups[0]
    assert flat.get("transform") is None and flat.get("stroke-width") == "1"
    rect = flat.find(f"{ns}rect")
    assert (rect.get("x"), rect.get("y"), rect.get("width"), rect.get("height")) == ("5", "70", "20", "20")
    assert flat.find(f"{ns}polyline").get("points") == "5,90 15,70"
    assert flat.find(f"{ns}path").get("d") == "M 5,90 L 15,50 C 15,70 25,50 35,30"
    kept = groups[1]  # the text keeps its transform (and the size Qt drew it at)
    assert kept.get("transform") == "matrix(10,0,0,-20,5,90)"
    assert kept.find(f"{ns}text").get("font-size") == "11"
    scaled = groups[2]  # a scaling pen's width and the shape move to page units together
    assert scaled.get("transform") is None and scaled.get("stroke-width") == "1"
    assert scaled.find(f"{ns}polyline").get("points") == "0,0 10,10"
    assert "vector-effect" not in final_coordinates(svg).decode()


def test_text_clips_span_the_page_so_wider_glyphs_are_not_cut(tmp_path):
    # Qt fills a label's box by its own metrics and clips the text to that box; cairosvg sets small
    # text ~3% wider, which cut the ")" off a full line of the text view at the column preset.
    line = "run c01-gshard-cf1.0-batch-native · row 0 (request 0)"
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="336" height="60" viewBox="0 0 336 60">'
           '<defs><clipPath id="c"><path d="M12,10 L316,10 L316,40 L12,40 L12,10"/></clipPath></defs>'
           '<rect width="336" height="60" fill="#fff"/>'
           '<g clip-path="url(#c)">'
           '<g transform="matrix(1,0,0,1,12,10)" font-family="DejaVu Sans" font-size="11">'
           f'<text x="4" y="14" fill="#000">{line}</text></g></g>'
           '<g clip-path="url(#c)"><rect x="0" y="45" width="336" height="10" fill="#000"/></g>'
           '</svg>').encode()
    root = ET.fromstring(final_coordinates(svg))
    text_group, shape_group = (g for g in root.findall(f"{NS}g") if g.get("clip-path"))
    assert shape_group.get("clip-path") == "url(#c)"  # a plot's data clip stays as it was
    widened = text_group.get("clip-path")[len("url(#"):-1]
    path = root.find(f".//{NS}clipPath[@id='{widened}']/{NS}path").get("d")
    assert _box([float(v) for v in re.findall(r"[-\d.]+", path)]) == (0, 10, 336, 40)

    def ink_right(data: bytes) -> int:
        columns = np.nonzero((png_gray(cairosvg.svg2png(bytestring=data))[10:40] < 128).any(0))[0]
        return int(columns.max())
    # a line longer than its box: the box's clip ends it at x = 316, the widened one at the page's edge
    long = svg.replace(line.encode(), f"{line} {line}".encode())
    assert ink_right(long) <= 316 < ink_right(final_coordinates(long))


# -- page presets -----------------------------------------------------------------------------------

def _mult(a, b):
    return [a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
            a[2] * b[1] + a[3] * b[3], a[4] * b[0] + a[5] * b[2] + b[4], a[4] * b[1] + a[5] * b[3] + b[5]]


def pdf_facts(path) -> tuple[float, float, float, list[float], str]:
    """(width in, height in, smallest text in pt, heights in pt of the images drawn, text)."""
    page = PdfReader(path).pages[0]
    sizes, images, texts = [], [], []

    def text_seen(text, cm, tm, font, size):
        if text.strip():
            m = _mult(tm, cm)
            sizes.append(size * math.hypot(m[2], m[3]))
            texts.append(text)

    def operator(op, args, cm, tm):
        if op == b"Do":
            images.append(math.hypot(cm[2], cm[3]))

    page.extract_text(visitor_text=text_seen, visitor_operand_before=operator)
    return (float(page.mediabox.width) / 72, float(page.mediabox.height) / 72, min(sizes), images,
            " ".join(texts))


@pytest.mark.parametrize("size", PRESETS)
@pytest.mark.parametrize("view", VIEWS)
def test_each_preset_gives_a_legible_pdf_of_its_size(qapp, trace_path, tmp_path, view, size):
    out = tmp_path / f"{view}-{size}.pdf"
    assert export(trace_path, view, out, "--size", size, "--dpi", "72") == 0
    width, height, smallest, images, _ = pdf_facts(out)
    preset = PRESETS[size]
    assert width == pytest.approx(preset.width_in, abs=0.02)
    if SPECS[view].fit_height:  # the text strip's page is as tall as its text
        assert 0.3 < height < 4
    elif preset.height_in is not None:
        assert height == pytest.approx(preset.height_in, abs=0.02)
    else:
        assert height == pytest.approx(SPECS[view].heights[0 if size == "column" else 1], abs=0.02)
    assert smallest >= MIN_FONT_PT - 0.01
    assert all(h >= 0.3 * 72 for h in images), images  # no heatmap of zero height
    if view in ("routing", "layers", "pair", "runs"):
        assert images


def test_a_figure_that_cannot_fit_exits_2_and_says_what_to_change(trace_path, tmp_path, capsys):
    out = tmp_path / "routing.png"
    assert export(trace_path, "routing", out, "--size", "column", "--height", "80", "--dpi", "100") == 2
    err = capsys.readouterr().err
    assert "does not fit" in err and "it fits with a taller page (--height" in err
    assert "--size column" not in err.split("does not fit")[1]  # never the change already given
    assert not out.exists()


@pytest.mark.parametrize("size", ["page", "slide"])
def test_a_pair_figure_draws_no_app_text_and_its_caption_holds_the_cause(qapp, trace_path, tmp_path, size):
    out = tmp_path / "pair.pdf"
    assert export(trace_path, "pair", out, "--size", size, "--dpi", "72", "--caption") == 0
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", pdf_facts(out)[4]))
    for app_text in ("Left out", "moe-inspector", "Side by side", "Cause", "explain"):
        assert app_text not in text
    caption = (tmp_path / "pair.txt").read_text(encoding="utf-8")
    with open_trace(trace_path) as trace:  # what the bare export picked
        data = read_export(trace, "pair", informative(trace, SPECS["pair"], Selection())[0]).data
    assert data.cause.headline in caption and data.cause.sentence in caption
    if size == "slide":  # too short for the completions and the key: the caption says so
        assert "Left out of the figure" in caption and "the completions" in caption and "the key" in caption
        assert "KL(A‖B)" in text and "router logits differ" not in text
    else:
        assert "router logits differ" in text or "weights differ" in text  # the key


def test_caption_goes_with_figures_only(trace_path, tmp_path, capsys):
    assert export(trace_path, "routing", tmp_path / "r.csv", "--caption") == 2
    assert "--caption" in capsys.readouterr().err and not (tmp_path / "r.txt").exists()


@pytest.mark.parametrize("options", [("--font-pt", "6"), ("--size", "column", "--width", "500")])
def test_bad_print_options_exit_2(trace_path, tmp_path, capsys, options):
    assert export(trace_path, "routing", tmp_path / "x.png", *options) == 2
    assert "error" in capsys.readouterr().err


# -- defaults and tables ------------------------------------------------------------------------------

def test_headless_defaults_pick_a_divergent_run_and_say_so(trace_path, tmp_path, capsys):
    out = tmp_path / "routing.csv"
    assert export(trace_path, "routing", out) == 0
    said = capsys.readouterr().out
    found = re.search(r"picked request (\d+): run (\S+) row (\d+), .*MoE layer (\d+)", said)
    assert found, said
    header, *rows = [line.split(",") for line in out.read_text().splitlines()]
    first = dict(zip(header, rows[0], strict=True))
    assert (first["request"], first["run"], first["row"], first["layer"]) == found.groups()


def test_a_bare_load_export_shows_the_cause_at_its_step_and_says_which(tmp_path, capsys):
    example = EXAMPLE
    out = tmp_path / "load.csv"
    assert export(example, "load", out) == 0
    said = capsys.readouterr().out
    # The proven cause: new token 0 (position 28), layer 0, routed at the first decode step.
    assert "MoE layer 0, the cause's; step 1, the cause's" in said, said
    header, *rows = [line.split(",") for line in out.read_text().splitlines()]
    assert {dict(zip(header, row, strict=True))["step"] for row in rows} == {"1"}
    assert export(example, "load", tmp_path / "step0.csv", "--step", "0") == 0  # a step named stays
    header, *rows = [line.split(",") for line in (tmp_path / "step0.csv").read_text().splitlines()]
    assert {dict(zip(header, row, strict=True))["step"] for row in rows} == {"0"}


def test_csv_says_dropless_and_no_cause_as_empty_fields(trace_path, tmp_path):
    with open_trace(trace_path) as trace:
        runs = trace.run_names
    out = tmp_path / "load.csv"
    assert export(trace_path, "load", out, "--run", runs[0]) == 0
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert all((r["capacity"] == "") == (r["dropless"] == "true") for r in rows)
    assert all(r["capacity"] == "" or int(r["capacity"]) >= 0 for r in rows)
    out = tmp_path / "runs.csv"
    assert export(trace_path, "runs", out, "--condition", "") == 0
    rows = list(csv.DictReader(out.read_text().splitlines()))
    for values in rows:
        assert (values["cause"] == "") == (values["t_star"] == "")
        assert values["t_star"] == "" or int(values["t_star"]) >= 0


def test_the_cause_names_its_own_layer_when_the_view_shows_another(trace_path):
    with open_trace(trace_path) as trace:
        source = DivergenceSource(trace)
        found = None
        for request in source.requests():
            choices = source.choices(request)
            a = source.row(choices[0].run, choices[0].row)
            for c in choices[1:]:
                b = source.row(c.run, c.row)
                probe = pair_figure_data(a, b, 0, vocab=source.vocab, capacity_a=source.capacity(a.run, 0),
                                         capacity_b=source.capacity(b.run, 0))
                if probe.verdict.layer >= 0:
                    found = (a, b, probe.verdict.layer)
                    break
            if found:
                break
        assert found, "the synthetic trace holds a pair whose cause has a layer"
        a, b, cause_layer = found
        shown = (cause_layer + 1) % a.n_layers
        moe_layers = [10 + 3 * i for i in range(a.n_layers)]  # model layers unlike the MoE indices
        data = pair_figure_data(a, b, shown, vocab=source.vocab, capacity_a=source.capacity(a.run, shown),
                                capacity_b=source.capacity(b.run, shown), moe_layers=moe_layers)
    from inspector.specs.divergence import pair_columns
    from inspector.specs.selection import Selection

    assert data.model_layer == moe_layers[shown]
    facts = " ".join(v for _, v in data.cause.facts)
    assert f"layer {cause_layer} (model layer {moe_layers[cause_layer]})" in facts
    assert f"(model layer {moe_layers[shown]})" not in facts
    assert f"layer {cause_layer}" in data.cause.sentence.lower()
    columns = pair_columns(data, Selection(layer=shown))
    assert set(columns["first_difference_layer"]) == {cause_layer}   # integers, as the CSV writes them
    if data.verdict.diverged:  # the cause's own layer; a pair that does not diverge has no cause
        assert set(columns["cause_layer"]) == {cause_layer}
        assert set(columns["cause_model_layer"]) == {moe_layers[cause_layer]}
    else:
        assert columns["cause_layer"].mask.all() and columns["cause_model_layer"].mask.all()
    assert set(columns["layer"]) == {shown} and set(columns["model_layer"]) == {moe_layers[shown]}


def test_runs_that_never_diverge_get_a_note_not_an_empty_chart(qapp, tmp_path):
    example = EXAMPLE
    out = tmp_path / "runs.pdf"
    assert export(example, "runs", out, "--request", "0", "--condition", "MoE dropless, native",
                  "--size", "page", "--dpi", "72", "--caption") == 0
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", pdf_facts(out)[4]))
    assert "causes of the 0" not in text and "Left out" not in text
    assert "no run diverges from the reference" in (tmp_path / "runs.txt").read_text(encoding="utf-8")


# -- what the fit check sees --------------------------------------------------------------------------

def _canvas(width: int, height: int, font_pt: float):
    from inspector.export.output import print_style
    from inspector.export.page import Page
    from inspector.export.render import Canvas

    style = print_style(font_pt)
    return Canvas(Page(width, height, 96.0), style.background), style


def test_an_axis_title_over_its_tick_labels_is_seen_and_the_axis_widens(qapp):
    from inspector.export.finish import finish
    from inspector.export.fit import overlaps, problems
    from inspector.figures.log_axis import DecadeAxis

    canvas, style = _canvas(400, 260, 12.0)
    with canvas:
        plot = canvas.layout.addPlot(row=0, col=0, axisItems={"left": DecadeAxis("left")})
        style.style_plot(plot)
        plot.setLogMode(y=True)
        plot.plot([0, 1, 2, 3], [1e-4, 1e-3, 1e-2, 1.0])
        plot.setLabel("left", "KL(A‖B)")
        plot.setYRange(-4.2, 0.2, padding=0)
        plot.getAxis("left").setWidth(50)  # laid out for a smaller font: the tick labels and title need more
        canvas.settle()
        seen = overlaps(canvas)
        assert any("KL(A‖B)" in s and "10⁻²" in s for s in seen), seen
        finish(canvas, style)
        assert plot.getAxis("left").width() > 50
        assert overlaps(canvas) == [] and problems(canvas) == []


def test_a_caption_over_the_text_under_it_is_seen_and_the_export_has_none(qapp, trace_path):
    import pyqtgraph as pg

    from inspector.export.fit import overlaps
    from inspector.export.output import default_page, drawn, print_style
    from inspector.specs.registry import read_export
    from inspector.specs.selection import Selection

    with open_trace(trace_path) as trace:
        export_ = read_export(trace, "text", Selection())
    page = default_page("text", 96.0, size="column")
    with drawn(export_, page, print_style(8.0), fit_height=True) as canvas:
        caption = next(i for i in canvas.widget.scene().items()
                       if isinstance(i, pg.LabelItem) and "prompt tokens" in i.text)
        assert caption.item.document().size().height() > 2.5 * caption.item.font().pointSizeF()  # wrapped
        assert overlaps(canvas) == []
        caption.setMinimumHeight(10)
        caption.setMaximumHeight(10)  # held to less than its text, as a one-line caption was
        canvas.settle()
        seen = overlaps(canvas)
        assert any("shade:" in s or "prompt tokens" in s for s in seen), seen


def test_a_word_broken_by_wrapping_is_seen_and_titles_wrap_between_words(qapp):
    import pyqtgraph as pg

    from inspector.export.finish import finish
    from inspector.export.fit import broken_words

    canvas, style = _canvas(300, 200, 10.0)
    with canvas:
        label = pg.LabelItem("what differs (layer × position)", size="10pt")
        canvas.layout.addItem(label, row=0, col=0)
        label.item.setTextWidth(30)  # narrower than "position"
        label.resizeEvent(None)
        canvas.settle()
        assert any("wraps inside a word" in s for s in broken_words(canvas))
        canvas2, _ = _canvas(200, 300, 10.0)
        with canvas2:
            plot = canvas2.layout.addPlot(row=0, col=0)
            plot.setTitle("what differs (layer × position) and a good deal more words", size="10pt")
            finish(canvas2, style)
            assert plot.titleLabel.item.document().begin().layout().lineCount() > 1  # wrapped
            assert broken_words(canvas2) == []


def test_panels_sharing_positions_show_the_same_ones(qapp):
    import pyqtgraph as pg

    from inspector.export.fit import unshared_ranges
    from inspector.figures.axes import XZoomViewBox

    for box, differs in ((pg.ViewBox, True), (XZoomViewBox, False)):
        canvas, _ = _canvas(400, 300, 10.0)
        with canvas:
            top = canvas.layout.addPlot(row=0, col=0, viewBox=box())
            bottom = canvas.layout.addPlot(row=1, col=0, viewBox=box())
            bottom.getAxis("left").setWidth(120)  # narrower than the one it follows
            top.getAxis("left").setWidth(40)
            bottom.setXLink(top)
            top.setXRange(0, 90, padding=0)
            canvas.settle()
            top.setXRange(0, 90, padding=0)
            assert bool(unshared_ranges(canvas)) is differs
