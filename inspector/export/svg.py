"""Making Qt's SVG render the same in every viewer (no Qt here).

`QSvgGenerator` writes each painter state as a `<g transform=...>` in the painter's coordinates and
marks cosmetic pens `vector-effect="non-scaling-stroke"`. Inside a plot the transform stretches
the data 10 to 100 times, so a viewer that ignores that attribute (librsvg, cairosvg, most
converters) draws every 1 px frame, bar edge and curve 10 to 100 px wide. `final_coordinates`
applies each such transform to the shapes' coordinates instead, so every stroke is drawn in the
page's units with no `vector-effect` at all; text and images keep their transforms (a text's
rotation, an image's cell grid). Font families end in a generic family, DejaVu Sans first, and
font sizes are the whole pixels Qt set the text in. A clip that holds only text (a label's or a
text box's own rectangle) spans the page's width: Qt lays text out to fill its box by its own
metrics, and cairosvg, which advances each glyph by whole pixels, sets small text about 3% wider,
so the end of a full line would be cut off.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
#: The font families written for Qt's sans-serif and monospace text.
SANS = "DejaVu Sans, Verdana, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"

_SHAPES = {"path", "polyline", "polygon", "rect", "line", "circle", "ellipse"}
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_MATRIX = re.compile(r"^\s*matrix\(([^)]*)\)\s*$")

Matrix = tuple[float, float, float, float, float, float]


def _tag(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def _matrix(text: str | None) -> Matrix | None:
    if not text:
        return (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    found = _MATRIX.match(text)
    if found is None:
        return None
    values = [float(v) for v in _NUMBER.findall(found.group(1))]
    return tuple(values) if len(values) == 6 else None  # type: ignore[return-value]


def _apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


def _num(v: float) -> str:
    return f"{v:.4f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


def _points(m: Matrix, text: str) -> str | None:
    values = [float(v) for v in _NUMBER.findall(text)]
    if len(values) % 2:
        return None
    pairs = (_apply(m, values[i], values[i + 1]) for i in range(0, len(values), 2))
    return " ".join(f"{_num(x)},{_num(y)}" for x, y in pairs)


def _path(m: Matrix, d: str) -> str | None:
    """An absolute path (M, L, C, Q, S, T, Z: coordinates in x,y pairs) transformed; None for one
    with relative, H, V or A commands."""
    commands = set(re.sub(r"[\s,]+", "", _NUMBER.sub("", d)))
    if not commands <= set("MLCQSTZ"):
        return None
    out, pending = [], []
    for token in re.findall(r"[MLCQSTZ]|" + _NUMBER.pattern, d):
        if token in set("MLCQSTZ"):
            out.append(token)
            continue
        pending.append(float(token))
        if len(pending) == 2:
            x, y = _apply(m, *pending)
            out.append(f"{_num(x)},{_num(y)}")
            pending = []
    return None if pending else " ".join(out)


def _shape(element: ET.Element, m: Matrix) -> ET.Element | None:
    """`element` with `m` applied to its coordinates, or None when it cannot be."""
    tag, a, b, c, d = _tag(element), m[0], m[1], m[2], m[3]
    axis_aligned = b == 0 and c == 0
    new = ET.Element(element.tag, dict(element.attrib))
    new.attrib.pop("vector-effect", None)
    if tag in ("polyline", "polygon"):
        points = _points(m, element.get("points", ""))
        if points is None:
            return None
        new.set("points", points)
    elif tag == "path":
        path = _path(m, element.get("d", ""))
        if path is None:
            return None
        new.set("d", path)
    elif tag == "line":
        x1, y1 = _apply(m, float(element.get("x1", 0)), float(element.get("y1", 0)))
        x2, y2 = _apply(m, float(element.get("x2", 0)), float(element.get("y2", 0)))
        new.attrib.update(x1=_num(x1), y1=_num(y1), x2=_num(x2), y2=_num(y2))
    elif tag == "rect":
        x, y = float(element.get("x", 0)), float(element.get("y", 0))
        w, h = float(element.get("width", 0)), float(element.get("height", 0))
        corners = [_apply(m, x, y), _apply(m, x + w, y), _apply(m, x + w, y + h), _apply(m, x, y + h)]
        if not axis_aligned or element.get("rx") or element.get("ry"):
            if element.get("rx") or element.get("ry"):
                return None
            new = ET.Element(f"{{{SVG_NS}}}polygon", {k: v for k, v in new.attrib.items()
                                                       if k not in ("x", "y", "width", "height")})
            new.set("points", " ".join(f"{_num(px)},{_num(py)}" for px, py in corners))
            return new
        xs, ys = [p[0] for p in corners], [p[1] for p in corners]
        new.attrib.update(x=_num(min(xs)), y=_num(min(ys)), width=_num(max(xs) - min(xs)),
                          height=_num(max(ys) - min(ys)))
    elif tag in ("circle", "ellipse") and axis_aligned:
        cx, cy = _apply(m, float(element.get("cx", 0)), float(element.get("cy", 0)))
        new.attrib.update(cx=_num(cx), cy=_num(cy))
        if tag == "circle":
            if abs(abs(a) - abs(d)) > 1e-9:
                return None
            new.set("r", _num(float(element.get("r", 0)) * abs(a)))
        else:
            new.attrib.update(rx=_num(float(element.get("rx", 0)) * abs(a)),
                              ry=_num(float(element.get("ry", 0)) * abs(d)))
    else:
        return None
    return new


def _scaled_stroke(attrib: dict[str, str], scale: float) -> dict[str, str]:
    """A group's attributes with its (scaling) stroke width and dashes in page units."""
    out = dict(attrib)
    if "stroke-width" in out:
        out["stroke-width"] = _num(float(out["stroke-width"]) * scale)
    if out.get("stroke-dasharray", "none") != "none":
        out["stroke-dasharray"] = ",".join(_num(float(v) * scale)
                                           for v in _NUMBER.findall(out["stroke-dasharray"]))
    if "stroke-dashoffset" in out:
        out["stroke-dashoffset"] = _num(float(out["stroke-dashoffset"]) * scale)
    return out


def _flatten_group(group: ET.Element) -> list[ET.Element]:
    """The group as groups whose shapes are in their parent's coordinates (no transform), and
    whose other children (text, images) keep the group's transform; in the painting order."""
    m = _matrix(group.get("transform"))
    if m is None:
        return [group]
    scale = math.sqrt(abs(m[0] * m[3] - m[1] * m[2]))
    plain = {k: v for k, v in group.attrib.items() if k != "transform"}
    out: list[ET.Element] = []
    current: ET.Element | None = None
    current_kind = ""
    for child in list(group):
        shape = _shape(child, m) if _tag(child) in _SHAPES else None
        kind = "flat" if shape is not None else "kept"
        if shape is not None and child.get("vector-effect") != "non-scaling-stroke":
            kind = "flat-scaled"
        if current is None or kind != current_kind:
            attrib = dict(group.attrib) if kind == "kept" else (
                _scaled_stroke(plain, scale) if kind == "flat-scaled" else dict(plain))
            current = ET.Element(group.tag, attrib)
            current.text, current.tail = group.text, group.tail
            current_kind = kind
            out.append(current)
        current.append(shape if shape is not None else child)
    return out or [group]


def _fonts(element: ET.Element) -> None:
    size = element.get("font-size")
    if size is not None and _NUMBER.fullmatch(size):
        # Qt sets text in whole pixels of the layout (PNG and PDF draw 10.67 px text at 11 px) but
        # writes the size asked: write the one drawn, or viewers set narrower text.
        element.set("font-size", str(max(round(float(size)), 1)))
    family = element.get("font-family")
    if family is not None:
        element.set("font-family", MONO if "mono" in family.lower() or "courier" in family.lower() else SANS)


def _clip_box(clip: ET.Element) -> list[float] | None:
    """[x0, y0, x1, y1] of a clipPath that is one axis-aligned rectangle, else None."""
    if len(clip) != 1 or _tag(clip[0]) != "path":
        return None
    numbers = [float(v) for v in _NUMBER.findall(clip[0].get("d", ""))]
    if len(numbers) != 10:
        return None
    xs, ys = numbers[0::2], numbers[1::2]
    if not all(x in (min(xs), max(xs)) for x in xs) or not all(y in (min(ys), max(ys)) for y in ys):
        return None
    return [min(xs), min(ys), max(xs), max(ys)]


def _widen_text_clips(root: ET.Element) -> None:
    """Give each group that draws only text under a rectangular clip that rectangle widened to the
    page (the module docstring says why); its top and bottom stay, so scrolled-away lines stay hidden."""
    view_box = [float(v) for v in _NUMBER.findall(root.get("viewBox", ""))]
    defs = next((d for d in root if _tag(d) == "defs"), None)
    if len(view_box) != 4 or defs is None:
        return
    clips = {c.get("id"): c for c in defs if _tag(c) == "clipPath"}
    widened: dict[str, str] = {}
    for group in list(root.iter(f"{{{SVG_NS}}}g")):
        found = re.fullmatch(r"url\(#([^)]+)\)", group.get("clip-path", ""))
        inside = {_tag(e) for e in group.iter()} - {"g"}
        if found is None or found.group(1) not in clips or not inside or not inside <= {"text", "tspan"}:
            continue
        name = found.group(1)
        if name not in widened:
            box = _clip_box(clips[name])
            if box is None:
                continue
            x0, y0, x1, y1 = view_box[0], box[1], view_box[0] + view_box[2], box[3]
            clip = ET.SubElement(defs, f"{{{SVG_NS}}}clipPath", id=f"{name}-text")
            ET.SubElement(clip, f"{{{SVG_NS}}}path", d=f"M{_num(x0)},{_num(y0)} L{_num(x1)},{_num(y0)} "
                          f"L{_num(x1)},{_num(y1)} L{_num(x0)},{_num(y1)} L{_num(x0)},{_num(y0)}")
            widened[name] = f"{name}-text"
        group.set("clip-path", f"url(#{widened[name]})")


def final_coordinates(svg: bytes) -> bytes:
    """Qt's SVG with every shape in its group's parent coordinates, no `vector-effect`, and text
    clips as wide as the page."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(svg)

    def walk(parent: ET.Element) -> None:
        children = list(parent)
        replaced: list[ET.Element] = []
        for child in children:
            if _tag(child) == "g" and child.get("transform") and not any(_tag(c) == "g" for c in child):
                replaced.extend(_flatten_group(child))
            else:
                if _tag(child) == "g":
                    walk(child)
                replaced.append(child)
        parent[:] = replaced

    walk(root)
    _widen_text_clips(root)
    for element in root.iter():
        _fonts(element)
        element.attrib.pop("vector-effect", None)
    return b'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + ET.tostring(root, encoding="utf-8")
