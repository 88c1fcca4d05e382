"""Labels sit where their marks are, measured in the exported SVG itself: every name of a vertical
line (t*, the prompt | generation boundary, the compare view's A | B split) is centred within 2 px
of a line of its own colour (a boundary's name with its bar there), at every page size."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from paths import EXAMPLES

from inspector.cli import main
from inspector.qt import QtGui

SVG = "{http://www.w3.org/2000/svg}"
#: The labels of vertical lines, and the colour of their line.
LABELS = {"t*": "#000000", "prompt | generation": "#ff8c00", "A | B": "#d6006e"}
TOLERANCE_PX = 2.0


def _matrix(text: str | None) -> tuple[float, ...]:
    if not text:
        return (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    numbers = [float(v) for v in re.findall(r"-?[\d.]+(?:e-?\d+)?", text)]
    if text.startswith("translate"):
        return (1.0, 0.0, 0.0, 1.0, numbers[0], numbers[1] if len(numbers) > 1 else 0.0)
    return tuple(numbers)


def _times(m, n):
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + c * b2, b * a2 + d * b2, a * c2 + c * d2, b * c2 + d * d2, a * e2 + c * f2 + e,
            b * e2 + d * f2 + f)


def measure(svg: bytes) -> tuple[list[tuple[str, float]], dict[str, list[float]]]:
    """(label text, its centre x) of every line label (a text in its line's colour: a key's text is
    not one), and the x of every vertical line by colour, in the SVG's own coordinates."""
    root = ET.fromstring(svg)
    labels, lines = [], {}

    def walk(element, m, stroke):
        m = _times(m, _matrix(element.get("transform")))
        stroke = element.get("stroke", stroke)
        tag = element.tag.replace(SVG, "")
        text = element.text or ""
        if tag == "text" and text in LABELS and element.get("fill", "").lower() == LABELS[text]:
            font = QtGui.QFont("DejaVu Sans")
            font.setPixelSize(max(1, round(float(element.get("font-size", "12")))))
            width = QtGui.QFontMetricsF(font).horizontalAdvance(element.text)
            x = float(element.get("x", "0"))
            bar = text.find("|")  # a boundary's name has its bar on the line
            anchor = (QtGui.QFontMetricsF(font).horizontalAdvance(text[:bar])
                      + QtGui.QFontMetricsF(font).horizontalAdvance("|") / 2) if bar >= 0 else width / 2
            labels.append((text, m[0] * (x + anchor) + m[4]))
        if tag in ("polyline", "line", "path"):
            points = element.get("points") or element.get("d") or ""
            xs = [float(v) for v in re.findall(r"(-?[\d.]+),-?[\d.]+", points)]
            if tag == "line":
                xs = [float(element.get("x1", "0")), float(element.get("x2", "0"))]
            if len(xs) == 2 and abs(xs[0] - xs[1]) < 0.01 and stroke:
                lines.setdefault(stroke.lower(), []).append(m[0] * xs[0] + m[4])
        for child in element:
            walk(child, m, stroke)

    walk(root, (1.0, 0.0, 0.0, 1.0, 0.0, 0.0), None)
    return labels, lines


@pytest.mark.parametrize("view", ["pair", "compare", "routing"])
@pytest.mark.parametrize("size", ["column", "page", "slide", None])
def test_every_line_label_is_centred_on_its_line_in_the_svg(qapp, tmp_path, view, size):
    out = tmp_path / f"{view}.svg"
    argv = ["export", str(EXAMPLES / "example.h5"), "--view", view, "-o", str(out)]
    assert main(argv + (["--size", size] if size else [])) == 0
    labels, lines = measure(out.read_bytes())
    assert any(text == "t*" for text, _ in labels) or view == "routing"
    assert any(text == "prompt | generation" for text, _ in labels)
    for text, centre in labels:
        xs = lines.get(LABELS[text], [])
        assert xs, (view, size, text)
        off = min(abs(centre - x) for x in xs)
        assert off <= TOLERANCE_PX, (view, size, text, round(off, 1))
