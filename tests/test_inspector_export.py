"""Headless export (`moe-inspector export`): every view to PNG, SVG, PDF and CSV from a trace, read
back with independent parsers (PNG chunks, XML, PDF text, CSV) and compared with the trace."""

import csv
import io
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import numpy as np
import pytest
from paths import EXAMPLE

from inspector.cli import main
from inspector.export import SPECS, Page, Selection, read_export, save
from inspector.export.finish import overflow
from inspector.export.output import drawn
from traces import open_trace
from traces.synthetic import write_synthetic_trace

VIEWS = tuple(SPECS)


# -- independent readers of what an export wrote ---------------------------------------------------

def png_info(path) -> tuple[int, int, float, float]:
    """(width, height, dpi x, dpi y) from the PNG's IHDR and pHYs chunks."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, size, dpi = 8, None, (0.0, 0.0)
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"pHYs":
            ppx, ppy, unit = struct.unpack(">IIB", body)
            assert unit == 1  # metres
            dpi = (ppx * 0.0254, ppy * 0.0254)
        pos += 12 + length
    return (*size, *dpi)


def png_pixels(path) -> np.ndarray:
    """[H, W, 3] uint8 pixels of a PNG (decoded by Qt)."""
    from inspector.qt import QtGui

    image = QtGui.QImage(str(path)).convertToFormat(QtGui.QImage.Format.Format_RGB888)
    ptr = image.constBits()
    rows = np.frombuffer(ptr, dtype=np.uint8, count=image.sizeInBytes()).reshape(image.height(), -1)
    return rows[:, : image.width() * 3].reshape(image.height(), image.width(), 3).copy()


def svg_texts(path) -> list[str]:
    root = ET.parse(path).getroot()
    return [" ".join("".join(e.itertext()).split()) for e in root.iter() if e.tag.endswith("text")]


def pdf_objects(data: bytes) -> dict[int, bytes]:
    return {int(n): body for n, body in re.findall(rb"(\d+) 0 obj(.*?)endobj", data, re.S)}


def pdf_stream(body: bytes) -> bytes | None:
    m = re.search(rb"stream\r?\n(.*?)\r?\nendstream", body, re.S)
    if m is None:
        return None
    return zlib.decompress(m.group(1)) if b"/FlateDecode" in body[: m.start()] else m.group(1)


def to_unicode(cmap: bytes) -> dict[int, str]:
    """Glyph code -> text of a ToUnicode CMap (bfchar and both bfrange forms)."""
    out: dict[int, str] = {}
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", cmap, re.S):
        pattern = rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*(\[[^\]]*\]|<[0-9A-Fa-f]+>)"
        for lo, hi, dst in re.findall(pattern, block):
            lo, hi = int(lo, 16), int(hi, 16)
            if dst.startswith(b"["):
                for i, h in enumerate(re.findall(rb"<([0-9A-Fa-f]+)>", dst)):
                    out[lo + i] = bytes.fromhex(h.decode()).decode("utf-16-be")
            else:
                first = int(dst[1:-1], 16)
                for i in range(hi - lo + 1):
                    out[lo + i] = chr(first + i)
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", cmap, re.S):
        for src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            out[int(src, 16)] = bytes.fromhex(dst.decode()).decode("utf-16-be")
    return out


def pdf_glyph_text(path) -> str:
    """The text a PDF draws, decoded without any tool: each font's ToUnicode map, then the glyph
    codes of every `Tj` in the content streams, under the font selected by the last `Tf`."""
    data = Path(path).read_bytes()
    objects = pdf_objects(data)
    maps = {}
    for n, body in objects.items():
        m = re.search(rb"/ToUnicode (\d+) 0 R", body)
        if m is not None:
            maps[n] = to_unicode(pdf_stream(objects[int(m.group(1))]) or b"")
    names = {name: maps.get(int(n)) for name, n in re.findall(rb"/(F\d+) (\d+) 0 R", data)}
    out = []
    for body in objects.values():
        content = pdf_stream(body)
        if content is None or b"BT" not in content:
            continue
        font: dict[int, str] = {}
        for name, codes in re.findall(rb"/(F\d+) [\d.]+ Tf|<([0-9A-Fa-f]+)> Tj", content):
            if name:
                font = names.get(name) or {}
            else:
                out.append("".join(font.get(int(codes[i:i + 4], 16), "?") for i in range(0, len(codes), 4)))
    return "".join(out)


def pdf_text(path) -> str:
    """The PDF's text as a PDF reader extracts it (pypdf), whitespace collapsed."""
    from pypdf import PdfReader

    return " ".join(" ".join(page.extract_text() for page in PdfReader(path).pages).split())


def read_csv(path) -> tuple[list[str], list[list[str]]]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def column(path, name: str) -> list[str]:
    header, rows = read_csv(path)
    i = header.index(name)
    return [r[i] for r in rows]


def softmax_t(logits):
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)).T


# -- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def realistic_path(tmp_path_factory):
    """The shipped example trace, or (before one is recorded) a synthetic one of the model's shape."""
    if EXAMPLE.exists():
        return EXAMPLE
    path = tmp_path_factory.mktemp("export") / "realistic.h5"
    write_synthetic_trace(path, 3, L=4, E=8, K=2, V=256, B=8, T=160, R=4, capacity_factor=1.0)
    return path


def export(trace_path, view: str, out: Path, *options: str) -> int:
    return main(["export", str(trace_path), "--view", view, *options, "-o", str(out)])


# -- formats -------------------------------------------------------------------------------------------

def test_png_has_the_size_and_dpi_asked(qapp, trace_path, tmp_path):
    out = tmp_path / "routing.png"
    assert export(trace_path, "routing", out, "--width", "1234", "--height", "567", "--dpi", "150") == 0
    w, h, dpi_x, dpi_y = png_info(out)
    assert (w, h) == (1234, 567)
    assert round(dpi_x) == 150 and round(dpi_y) == 150
    pixels = png_pixels(out)
    assert pixels.shape == (567, 1234, 3)
    assert (pixels[0, 0] == 255).all()  # a white, print-friendly background


def test_svg_parses_and_holds_labels_title_and_colour_bar(qapp, trace_path, tmp_path):
    out = tmp_path / "routing.svg"
    assert export(trace_path, "routing", out, "--run", "r001", "--row", "2", "--layer", "1") == 0
    texts = svg_texts(out)
    assert "position (token)" in texts and "expert" in texts
    assert "router probability" in texts  # the colour bar's label
    assert {"0", "0.2", "0.4", "0.6", "0.8", "1.0"} <= set(texts)  # and its ticks
    assert any(t.startswith("run r001 · row 2") and "layer 1" in t for t in texts)  # the title
    assert any("dropped" in t for t in texts) and "prompt | generation" in texts  # the legend
    root = ET.parse(out).getroot()
    # 10 x 5 inches at the default DPI: the physical size survives in the header.
    assert root.get("width") == "254mm" and root.get("height") == "127mm"
    images = [e for e in root.iter() if e.tag.endswith("image")]
    assert len(images) == 2  # the heatmap and the colour bar's gradient
    assert any(e.get("image-rendering") == "optimizeSpeed" for e in images)


def test_svg_heatmap_is_embedded_sharp(qapp, trace_path, tmp_path):
    """The heatmap is embedded with each cell repeated to the output resolution, so that no
    viewer's smoothing blurs it: every block of the image holds one colour."""
    from inspector.qt import QtCore, QtGui

    out = tmp_path / "overview.svg"
    assert export(trace_path, "layers", out, "--width", "1600", "--height", "800", "--dpi", "160") == 0
    root = ET.parse(out).getroot()
    image = next(e for e in root.iter() if e.tag.endswith("image"))
    href = image.get("{http://www.w3.org/1999/xlink}href")
    png = QtCore.QByteArray.fromBase64(href.split(",", 1)[1].encode())
    decoded = QtGui.QImage.fromData(png).convertToFormat(QtGui.QImage.Format.Format_RGB888)
    with open_trace(trace_path) as trace:
        run = trace.run(trace.run_names[0])
        L, T = run.dims["L"], run.row_length(int(run.probe_row))
    fx, fy = decoded.width() // T, decoded.height() // L
    assert decoded.width() == T * fx and decoded.height() == L * fy
    assert fx >= 1600 / T * 0.8 and fy >= 4  # about one repeat per output pixel
    ptr = decoded.constBits()
    rows = np.frombuffer(ptr, dtype=np.uint8, count=decoded.sizeInBytes()).reshape(decoded.height(), -1)
    pixels = rows[:, : decoded.width() * 3].reshape(decoded.height(), decoded.width(), 3)
    blocks = pixels.reshape(L, fy, T, fx, 3)
    assert (blocks == blocks[:, :1, :, :1]).all()


def test_pdf_text_is_extractable(qapp, trace_path, tmp_path):
    out = tmp_path / "routing.pdf"
    assert export(trace_path, "routing", out, "--width", "1500", "--height", "750", "--dpi", "150") == 0
    raw = out.read_bytes()
    assert raw.startswith(b"%PDF") and b"/FontFile" in raw and b"/ToUnicode" in raw
    assert b"/Subtype /Image" in raw and b"/DCTDecode" not in raw  # heatmaps stored losslessly, not as JPEG
    # 10 x 5 inches -> a 720 x 360 point page.
    box = [float(v) for v in re.search(rb"/MediaBox \[([^\]]*)\]", raw).group(1).split()]
    assert box[2] - box[0] == pytest.approx(720, abs=1) and box[3] - box[1] == pytest.approx(360, abs=1)
    glyphs = pdf_glyph_text(out)
    for word in ("position", "(token)", "expert", "router", "probability", "run", "dropped"):
        assert word in glyphs
    text = pdf_text(out)
    for label in ("position (token)", "expert", "router probability", "prompt | generation"):
        assert label in text


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_renders_every_format_without_cut_text(qapp, trace_path, tmp_path, view):
    # Only `explain` stores causal maps: the shipped example holds them.
    with open_trace(EXAMPLE if view == "causal_map" else trace_path) as trace:
        ex = read_export(trace, view, Selection())
    page = Page(1400, 1000, 140)
    with drawn(ex, page) as canvas:
        assert overflow(canvas) == []
        assert canvas.layout.geometry().width() <= canvas.size.width() + 0.5
        assert canvas.layout.geometry().height() <= canvas.size.height() + 0.5
    for fmt in ("png", "svg", "pdf", "csv"):
        out = tmp_path / f"{view}.{fmt}"
        written = save(ex, out, fit_height=True)
        assert out.stat().st_size > 0
        if fmt == "svg":
            assert len(svg_texts(out)) > 3
        if fmt == "pdf":
            assert len(pdf_glyph_text(out)) > 20
        if fmt == "png":
            w, h, dpi, _ = png_info(out)
            assert (w, round(dpi)) == (written.width, round(written.dpi))
            pixels = png_pixels(out)
            assert (pixels < 128).any(), "the figure draws something dark (text, axes)"


# -- the data -----------------------------------------------------------------------------------------

def test_routing_csv_holds_the_trace_numbers(trace_path, tmp_path):
    out = tmp_path / "routing.csv"
    assert export(trace_path, "routing", out, "--run", "r002", "--row", "3", "--layer", "2") == 0
    with open_trace(trace_path) as trace:
        run = trace.run("r002")
        T, E = run.row_length(3), run.dims["E"]
        probs = softmax_t(run.router_logits[2, 3, :T])           # [E, T]
        expert, kept = run.expert[2, 3, :T], run.kept[2, 3, :T]  # [T, K]
        tokens = run.tokens[3, :T]
        vocab = trace.vocab
        request = int(run.request_ids[3])
    header, rows = read_csv(out)
    assert header[:5] == ["run", "request", "row", "layer", "model_layer"]
    assert len(rows) == T * E
    pos = np.array(column(out, "position"), dtype=int)
    exp = np.array(column(out, "expert"), dtype=int)
    np.testing.assert_array_equal(pos, np.repeat(np.arange(T), E))
    np.testing.assert_array_equal(exp, np.tile(np.arange(E), T))
    p = np.array(column(out, "probability"), dtype=np.float64)
    np.testing.assert_allclose(p, probs[exp, pos], rtol=1e-6, atol=1e-7)
    assert set(column(out, "run")) == {"r002"} and set(column(out, "request")) == {str(request)}
    choice = np.array(column(out, "choice")).reshape(T, E)  # 1 = first choice, '' not chosen
    dropped = np.array(column(out, "dropped")).reshape(T, E) == "true"
    kept_col = np.array(column(out, "kept")).reshape(T, E) == "true"
    for t in range(T):
        for k, e in enumerate(expert[t]):
            assert choice[t, e] == str(k + 1)
            assert kept_col[t, e] == kept[t, k] and dropped[t, e] == (not kept[t, k])
    assert (choice != "").sum() == expert.size
    assert [int(i) for i in column(out, "token_id")[::E]] == tokens.tolist()
    texts = column(out, "token")[::E]
    assert texts[0] == vocab[int(tokens[0])].replace(" ", "·") or len(texts) == T


def test_csv_floats_read_back_exactly(trace_path, tmp_path):
    """Floats are written in the shortest form of their own dtype: float32 reads back bit for bit."""
    out = tmp_path / "routing.csv"
    assert export(trace_path, "routing", out, "--run", "r000", "--layer", "0") == 0
    with open_trace(trace_path) as trace:
        ex = read_export(trace, "routing", Selection(run="r000", layer=0))
    expected = ex.data.probs.T.reshape(-1)  # float32, [T * E] in (position, expert) order
    got = np.array(column(out, "probability"), dtype=np.float32)
    np.testing.assert_array_equal(got, expected)


def test_load_overview_and_text_csv_match_the_trace(trace_path, tmp_path):
    with open_trace(trace_path) as trace:
        run = trace.run("r001")
        row = int(run.probe_row)
        T, L = run.row_length(row), run.dims["L"]
        expert, kept = run.expert[:, row, :T], run.kept[:, row, :T]  # [L, T, K]
        load_kept = run.load_kept[0, 1]                               # [G, E] at prefill, layer 1
        requested = run.requested[0, 1]
    out = tmp_path / "overview.csv"
    assert export(trace_path, "overview", out, "--run", "r001") == 0
    top1 = np.array(column(out, "top1_expert"), dtype=int).reshape(L, T)
    np.testing.assert_array_equal(top1, expert[:, :, 0])
    np.testing.assert_array_equal(np.array(column(out, "n_dropped"), dtype=int).reshape(L, T),
                                  (~kept).sum(-1))
    out = tmp_path / "text.csv"
    assert export(trace_path, "text", out, "--run", "r001") == 0
    np.testing.assert_array_equal(np.array(column(out, "dropped_all_layers"), dtype=int),
                                  (~kept).sum(axis=(0, 2)))
    out = tmp_path / "load.csv"
    options = ("--run", "r001", "--layer", "1", "--step", "0", "--group", "0")
    assert export(trace_path, "load", out, *options) == 0
    E = load_kept.shape[-1]
    rk = np.array(column(out, "row_kept"), dtype=int).reshape(-1, E)
    rd = np.array(column(out, "row_dropped"), dtype=int).reshape(-1, E)
    np.testing.assert_array_equal(rk.sum(0), load_kept[0])
    np.testing.assert_array_equal((rk + rd).sum(0), requested[0])
    np.testing.assert_array_equal(np.array(column(out, "expert_kept"), dtype=int)[:E], load_kept[0])


def test_divergence_and_runs_csv(trace_path, tmp_path):
    out = tmp_path / "pair.csv"
    assert export(trace_path, "divergence", out, "--pair", "r002,r000", "--layer", "1") == 0
    header, rows = read_csv(out)
    assert set(column(out, "run_a")) == {"r002"} and set(column(out, "run_b")) == {"r000"}
    with open_trace(trace_path) as trace:
        a = trace.run("r002")
        T = a.row_length(int(a.probe_row))
        tokens = a.tokens[int(a.probe_row), :T]
        vocab = trace.vocab
    assert np.array(column(out, "position"), dtype=int).tolist() == list(range(len(rows)))
    assert len(rows) >= T
    assert column(out, "token_a")[0] == vocab[int(tokens[0])]
    assert [int(i) for i in column(out, "token_id_a")[:T]] == tokens.tolist()
    out = tmp_path / "runs.csv"
    assert export(trace_path, "runs", out, "--request", "0", "--condition", "") == 0
    assert column(out, "run") == ["r000", "r001", "r002", "r003"]  # every run holds the probe request


def test_range_limits_the_figure_and_the_table(qapp, trace_path, tmp_path):
    out = tmp_path / "routing.csv"
    assert export(trace_path, "routing", out, "--range", "5:12") == 0
    assert sorted(set(np.array(column(out, "position"), dtype=int))) == list(range(5, 12))
    with open_trace(trace_path) as trace:
        ex = read_export(trace, "routing", Selection(range=(5, 12)))
    from inspector.qt import pg

    with drawn(ex, Page(1000, 500, 100)) as canvas:
        plot = next(i for i in canvas.widget.scene().items()
                    if isinstance(i, pg.PlotItem) and not isinstance(i, pg.ColorBarItem))
        (x0, x1), _ = plot.vb.viewRange()
        assert (x0, x1) == pytest.approx((4.5, 11.5))


# -- the command -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    (["--layer", "7"], "layer 7 outside"),
    (["--view", "layers", "--layer", "1"], "--layer does not apply to the layers view"),
    (["--view", "overview", "--layer", "1"], "--layer does not apply to the layers view"),
    (["--range", "9:3"], "--range needs"),
    (["--range", "abc"], "--range expects"),
    (["--range", "500:600"], "starts outside"),
    (["--run", "nope"], "no run 'nope'"),
    (["--row", "99"], "row 99 outside"),
    (["--width", "5"], "width must be"),
    (["--dpi", "5000"], "dpi must be"),
    (["--view", "load", "--step", "999"], "step 999 outside"),
    (["--view", "pair", "--pair", "r000"], "--pair expects"),
    (["--view", "divergence", "--pair", "r000,zz"], "no run 'zz'"),
    (["--view", "runs", "--condition", "nonesuch"], "condition 'nonesuch'"),
    (["--colormap", "rainbowish"], "--colormap must be"),
])
def test_bad_options_exit_2_with_a_message(trace_path, tmp_path, capsys, options, message):
    args = ["export", str(trace_path), *options, "-o", str(tmp_path / "x.png")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("moe-inspector export: error: ") and message in err
    assert "Traceback" not in err
    assert not (tmp_path / "x.png").exists()


def test_bad_trace_and_output_exit_2(tmp_path, trace_path, capsys):
    not_hdf5 = tmp_path / "notes.h5"
    not_hdf5.write_text("not a trace")
    cases = [
        (["export", str(tmp_path / "gone.h5"), "-o", str(tmp_path / "x.png")], "expected an existing file"),
        (["export", str(not_hdf5), "-o", str(tmp_path / "x.png")], "not HDF5"),
        (["export", str(trace_path), "-o", str(tmp_path / "x.gif")], "cannot tell the format"),
        (["export", str(trace_path), "-o", str(tmp_path / "no" / "x.png")], "does not exist"),
    ]
    for args, message in cases:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("moe-inspector export: error: ") and message in err and "Traceback" not in err
    assert main(["export", str(trace_path), "--view", "bogus", "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err  # argparse's own errors are one line too
    assert err.startswith("moe-inspector export: error: --view must be one of routing, layers")
    assert len(err.splitlines()) == 1


def test_command_runs_without_a_display_and_csv_needs_no_qt(trace_path, tmp_path):
    """In a fresh process with no platform and no display set, the command picks the offscreen
    platform itself; a CSV export never even imports Qt."""
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    png = tmp_path / "fresh.png"
    code = (f"import sys; from inspector.cli import main; "
            f"rc = main(['export', {str(trace_path)!r}, '--view', 'load', '-o', {str(png)!r}]); "
            f"import os; print(os.environ.get('QT_QPA_PLATFORM')); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "offscreen" in result.stdout and png_info(png)[:2] == (2000, 1400)
    out = tmp_path / "fresh.csv"
    code = (f"import sys; from inspector.cli import main; "
            f"rc = main(['export', {str(trace_path)!r}, '-o', {str(out)!r}]); "
            f"print('PySide6' in sys.modules); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("False") and out.stat().st_size > 0


def test_realistic_trace_exports_readable_figures(qapp, realistic_path, tmp_path):
    """The example trace (or one of its shape): the routing figure at print size keeps every label
    on the page and the heatmap's colours."""
    out = tmp_path / "routing.png"
    assert export(realistic_path, "routing", out, "--layer", "1", "--width", "2100", "--dpi", "300") == 0
    w, h, dpi, _ = png_info(out)
    assert (w, h, round(dpi)) == (2100, 1050, 300)
    pixels = png_pixels(out)
    rgb = pixels.astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)
    assert len(np.unique(rgb)) > 50  # the colour map, not a blank page
    with open_trace(realistic_path) as trace:
        ex = read_export(trace, "layers", Selection())
    with drawn(ex, Page(2100, 1050, 300)) as canvas:
        assert overflow(canvas) == []


def test_csv_text_quotes_tokens_with_commas_and_quotes():
    from inspector.export.csv import csv_text
    from inspector.figure_data.table import BOOLEAN, NUMBER, TEXT, Column, Table, finite

    columns = (Column("token", TEXT, "t"), Column("x", NUMBER, "x", empty="not a finite number"),
               Column("ok", BOOLEAN, "ok"))
    text = csv_text(Table(columns, {"token": np.array(['a,b', 'say "hi"', "·"], dtype=object),
                                    "x": finite(np.array([0.1, np.nan, np.inf], dtype=np.float32)),
                                    "ok": np.array([True, False, True])}))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["token", "x", "ok"], ["a,b", "0.1", "true"], ['say "hi"', "", "false"],
                    ["·", "", "true"]]
