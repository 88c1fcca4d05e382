"""Every view of both example traces exports at every page size as PNG, SVG and PDF; no axis labels
fewer than three ticks, no text lies over data or over another text, and the heatmaps' marks (drop
crosses or ticks, kept frames) sit in the same places, in the same colours, in the PNG and in
cairosvg's drawing of the SVG, with the cell's own colour showing inside a frame."""


import cairosvg
import numpy as np
import pytest
from paths import EXAMPLES
from png_pixels import png_rgb, rgb
from pypdf import PdfReader

from inspector.cli import main
from inspector.export import SPECS, read_export
from inspector.export.fit import overlaps, problems, sparse_axes, texts_over_data
from inspector.export.output import default_page, drawn, font_pt, print_style
from inspector.export.render import render_image, sharpen_images, svg_bytes, write_pdf
from inspector.figures.marks import CellMarks
from inspector.qt import pg
from inspector.specs.defaults import informative
from inspector.specs.selection import Selection
from traces import open_trace

TRACES = ("example", "tiny-mixtral-bf16")
SIZES = (None, "column", "page", "slide")
#: Pixels per inch of the files written here: enough for a frame two pixels wide (the default
#: export's); the pages of 13 x 14 in (the pair view's own) at fewer, to keep the test fast.
DPI = 200.0
BIG_PAGE_DPI = 120.0
#: Marked cells sampled per marks item.
SAMPLES = 12


def near(image: np.ndarray, x: float, y: float, color, reach: int = 1) -> float:
    """The least colour distance to `color` within `reach` pixels of (x, y)."""
    h, w = image.shape[:2]
    xi, yi = int(round(x)), int(round(y))
    patch = image[max(yi - reach, 0):min(yi + reach + 1, h), max(xi - reach, 0):min(xi + reach + 1, w)]
    diff = patch.reshape(-1, 3).astype(float) - np.asarray(color, float)
    return float(np.sqrt((diff ** 2).sum(axis=1)).min())


def mark_samples(canvas) -> list[tuple[str, tuple[int, int, int], float, float, float, float]]:
    """(what, colour, x, y of a point on the mark, x, y of the cell's centre) in output pixels for
    a few marked cells of every drawn marks item, away from the lines drawn across the cells
    ('(crossed)' in `what`: a drop mark is drawn on the cell too)."""
    out = []
    marks = [i for i in canvas.widget.scene().items() if isinstance(i, CellMarks) and i.isVisible()]
    crossed = {(a, b, id(i.getViewBox())) for i in marks if i.kind == "cross"
               for a, b in zip(*i.cells(), strict=True)}
    for item in marks:
        if item.mode() == "none":
            continue
        view = item.getViewBox().viewRect()
        ux, uy = item.cell_size()
        x, y = item.cells()
        inside = [(a, b) for a, b in zip(x, y, strict=True)
                  if view.left() + 1 < a < view.right() - 1 and view.top() + 1 < b < view.bottom() - 1]
        lines = [line.value() for line in item.getViewBox().childGroup.childItems()
                 if isinstance(line, pg.InfiniteLine) and line.isVisible() and line.angle == 90]
        inside = [(a, b) for a, b in inside if all(abs(a - v) > 1.5 for v in lines)]
        color = item.color.getRgb()[:3]
        mode = item.mode()
        for a, b in inside[:: max(len(inside) // SAMPLES, 1)][:SAMPLES]:
            if mode in ("cross", "tick"):
                point = item.mapToScene(a, b)  # a cross's and a tick's middle is the cell's
            else:
                shade = max(item.width / 2, 0.5) if item.shadow is not None else 0.0
                band = min(item.width, 0.25 * (min(ux, uy) if mode == "frame" else uy))
                reach = uy * (0.5 - item._inset) - shade - band / 2  # layout units from the middle
                point = item.mapToScene(a, b - reach / uy)
            centre = item.mapToScene(a, b)
            s = canvas.scale
            alone = (a, b, id(item.getViewBox())) not in crossed
            out.append((f"{mode}{'' if alone else ' (crossed)'} at cell ({a:g}, {b:g})", color,
                        point.x() * s, point.y() * s,
                        centre.x() * s, centre.y() * s))
    return out


def export_all(view: str, trace_name: str, tmp_path) -> None:
    with open_trace(EXAMPLES / f"{trace_name}.h5") as trace:
        sel, _ = informative(trace, SPECS[view], Selection())
        export = read_export(trace, view, sel)
    for size in SIZES:
        page = default_page(view, DPI if size or view != "pair" else BIG_PAGE_DPI, None, None, size)
        where = f"{trace_name} {view} at {size or 'its own size'}"
        with drawn(export, page, print_style(font_pt(size)), fit_height=True) as canvas:
            assert problems(canvas) == [], where
            assert sparse_axes(canvas) == [] and overlaps(canvas) == [], where
            assert texts_over_data(canvas) == [], where
            samples = mark_samples(canvas)
            png = rgb(render_image(canvas))
            sharpen_images(canvas)
            svg = svg_bytes(canvas, export.stem())
            pdf = tmp_path / f"{view}-{size}.pdf"
            write_pdf(canvas, str(pdf), export.stem())
            w_in, h_in = canvas.page.inches
        box = PdfReader(str(pdf)).pages[0].mediabox
        assert (float(box.width), float(box.height)) == pytest.approx((w_in * 72, h_in * 72), abs=1.0), where
        assert svg.startswith(b"<?xml") and b"<svg" in svg, where
        if view == "routing":  # every position keeps a candidate: there are frames to compare
            assert samples, f"{where}: no marked cell to compare"
        if not samples or (view not in ("routing", "layers") and size != "column"):
            continue  # (the pair's heatmaps are compared at a column: cairosvg is slow on big pages)
        drawn_svg = png_rgb(cairosvg.svg2png(bytestring=svg, output_width=png.shape[1],
                                             output_height=png.shape[0]))
        for what, color, x, y, cx, cy in samples:
            if what.startswith("frame (crossed)"):  # a red frame round a red cross: drawn alike
                here = png[int(round(y)), int(round(x))]
                assert near(drawn_svg, x, y, here, 2) < 60, f"{where}: the SVG differs at the {what}"
                continue
            for name, image in (("PNG", png), ("SVG", drawn_svg)):
                # A frame's band is one or two pixels wide, blended with the cell at its edges: within
                # two pixels of where it belongs, clearly nearer its colour than the cell is.
                reach = 1 if what.startswith(("cross", "tick")) else 2
                mark = near(image, x, y, color, reach)
                cell = near(image, cx, cy, color, 0)
                assert mark < 40 or (what.startswith(("frame", "edges")) and mark < 0.6 * cell), \
                    f"{where}: {name} lacks the {what}"
            # Inside a frame the cell's colour shows, alike in both (no box hides it).
            if what.startswith("frame at"):
                a, b = png[int(round(cy)), int(round(cx))], drawn_svg[int(round(cy)), int(round(cx))]
                assert np.abs(a.astype(int) - b.astype(int)).max() < 40, f"{where}: the {what} hides its cell"


@pytest.mark.parametrize("trace_name", TRACES)
@pytest.mark.parametrize("view", tuple(SPECS))
def test_every_view_exports_at_every_size_with_readable_axes_and_marks_alike(qapp, tmp_path, view,
                                                                             trace_name):
    export_all(view, trace_name, tmp_path)


def test_the_tiny_hugging_face_text_exports_from_the_command_line(qapp, tmp_path, capsys):
    """Its subword tokens run together into words longer than a column's line: they break inside."""
    out = tmp_path / "text.png"
    code = main(["export", str(EXAMPLES / "tiny-mixtral-bf16.h5"), "--view", "text", "--size", "column",
                 "--dpi", "72", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert out.stat().st_size > 0


def test_the_fit_check_sees_a_text_over_bars(qapp):
    """A label put over the load view's bars is a problem; the capacity's own label is beside them."""
    with open_trace(EXAMPLES / "example.h5") as trace:
        sel, _ = informative(trace, SPECS["load"], Selection())
        export = read_export(trace, "load", sel)
    with drawn(export, default_page("load", 100, None, None, "page"), print_style(8)) as canvas:
        assert texts_over_data(canvas) == []
        totals = next(i for i in canvas.widget.scene().items()
                      if isinstance(i, pg.PlotItem) and i.titleLabel.text.startswith("run"))
        label = pg.TextItem("over the bars", anchor=(0.5, 0.5))
        label.setPos(float(np.argmax(export.data.requested)), float(export.data.requested.max()) / 2)
        totals.addItem(label)
        canvas.settle()
        assert any("over the bars" in p for p in texts_over_data(canvas))


def test_a_layer_alone_keeps_the_telling_pair_and_says_so(qapp, tmp_path, capsys):
    out = tmp_path / "pair.csv"
    args = ["export", str(EXAMPLES / "example.h5"), "--view", "pair", "--layer", "1", "-o", str(out)]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "the first to diverge" in said and "showing MoE layer 1, as --layer asks" in said
    header, first = out.read_text().splitlines()[:2]
    row = dict(zip(header.split(","), first.split(","), strict=False))
    assert row["layer"] == "1" and f"run {row['run_b']} row {row['row_b']}, the first to diverge" in said
