"""The one export path of the GUI and the command line: an `Export` to a file (PNG, SVG, PDF or
CSV) or to an image for the clipboard."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from inspector.export.csv import write_csv
from inspector.export.page import DEFAULT_FONT_PT, IMAGE_FORMATS, MIN_FONT_PT, PRESETS, Page, RenderError
from inspector.export.whole import whole_file
from inspector.specs.registry import Export, spec_of
from traces.memory import return_freed_memory

log = logging.getLogger(__name__)

#: Every format an export writes.
FORMATS = (*IMAGE_FORMATS, "csv")
#: Dots per inch of a page unless chosen.
DEFAULT_DPI = 200.0


def format_of(path: str | os.PathLike) -> str | None:
    """The format named by a file's extension, None for an unknown one."""
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    return ext if ext in FORMATS else None


def default_page(view: str, dpi: float = DEFAULT_DPI, width: int | None = None,
                 height: int | None = None, size: str | None = None) -> Page:
    """The view's usual page at `dpi`, or the preset `size` (a key of PRESETS: its width, and its
    height or the view's for that width); a given width or height keeps the page's aspect ratio."""
    spec = spec_of(view)
    w_in, h_in = spec.inches
    if size is not None:
        if size not in PRESETS:
            raise RenderError(f"unknown size {size!r}; expected one of {', '.join(PRESETS)}")
        preset = PRESETS[size]
        w_in = preset.width_in
        h_in = preset.height_in or spec.heights[0 if size == "column" else 1]
        if width is None:
            width = round(w_in * dpi)
    if width is None and height is None:
        width, height = round(w_in * dpi), round(h_in * dpi)
    elif height is None:
        height = round(width * h_in / w_in)
    elif width is None:
        width = round(height * w_in / h_in)
    return Page(int(width), int(height), float(dpi))


def font_pt(size: str | None = None, font: float | None = None) -> float:
    """The font size of an export: `font`, else the preset's, else the default (in points)."""
    if font is None:
        font = PRESETS[size].font_pt if size in PRESETS else DEFAULT_FONT_PT
    if not MIN_FONT_PT <= font <= 48:
        raise RenderError(f"the font size must be {MIN_FONT_PT:g}-48 pt, got {font:g}")
    return float(font)


def print_style(font_size: float = DEFAULT_FONT_PT):
    """The print style: white background, dark text, the colour-blind-safe palette."""
    from inspector.figures.style import FigureStyle

    return FigureStyle(background="#ffffff", foreground="#1a1a1a", font_size=font_size)


@contextmanager
def drawn(export: Export, page: Page, style=None, *, fit_height: bool = False) -> Iterator:
    """A `Canvas` holding the export's figure, drawn, finished and settled; closed on exit.

    The figure takes the fullest of its layouts that fits the page (RenderError, saying what to
    change, when none does). With `fit_height` and a view whose content sets its height (text),
    the page's height becomes what the content needs at the page's width."""
    canvas = _fitted(export, page, style or print_style(), fit_height)
    try:
        yield canvas
    finally:
        canvas.close()


def _fitted(export: Export, page: Page, style, fit_height: bool):
    canvas, closest = _fit(export, page, style, fit_height)
    if canvas is not None:
        return canvas
    w_in, h_in = page.inches
    raise RenderError(f"the {export.view} figure does not fit {w_in:.2f} x {h_in:.2f} in at "
                      f"{style.font_size:g} pt: {closest[0]}; {_advice(export, page, style, fit_height)}")


def _fit(export: Export, page: Page, style, fit_height: bool):
    """(the canvas of the fullest layout that fits, []) or (None, the problems of the closest)."""
    from inspector.export.finish import finish
    from inspector.export.fit import problems
    from inspector.export.render import Canvas

    closest: list[str] = []
    for fit in range(export.spec.fits):
        canvas = Canvas(page, style.background)
        figure = export.draw(canvas.layout, style, fit)
        canvas.figure = figure
        canvas.left_out = list(getattr(figure, "left_out", []))  # named in the caption, not drawn
        finish(canvas, style)
        if fit_height and export.spec.fit_height and hasattr(figure, "strip_height"):
            _fit_height(canvas, figure, style)
        found = problems(canvas)
        if not closest or len(found) < len(closest):
            closest = found
        if not found:
            if fit:
                log.info("%s: a compact layout (%d) fits %s", export.view, fit, page.describe())
            return canvas, []
        canvas.close()
    return None, closest


def _fits(export: Export, page: Page, style, fit_height: bool) -> bool:
    canvas, _ = _fit(export, page, style, fit_height)
    if canvas is not None:
        canvas.close()
    return canvas is not None


def _advice(export: Export, page: Page, style, fit_height: bool) -> str:
    """Changes that make the figure fit, each tried (a taller page, the smallest font, a page
    width), never one that gives what was given."""
    from inspector.export.page import MAX_SIZE

    found = []
    for factor in (1.25, 1.5, 2.0, 3.0):
        height = int(round(page.height * factor))
        if height <= MAX_SIZE and _fits(export, Page(page.width, height, page.dpi), style, fit_height):
            found.append(f"a taller page (--height {height}, {height / page.dpi:.2f} in at {page.dpi:g} dpi)")
            break
    smaller = replace(style, font_size=MIN_FONT_PT)
    if style.font_size > MIN_FONT_PT and _fits(export, page, smaller, fit_height):
        found.append(f"a smaller font (--font-pt {MIN_FONT_PT:g})")
    w_in = page.inches[0]
    wider = [p for p in PRESETS.values() if p.width_in > w_in + 0.01]
    for preset in wider[:1]:
        wide = Page(int(round(preset.width_in * page.dpi)), page.height, page.dpi)
        if _fits(export, wide, style, fit_height):
            found.append(f"a wider page (--size {preset.name})")
    if not found:
        return ("no taller page (up to 3 times as tall), smaller font or wider page preset makes it fit; "
                "choose fewer positions (--range) or another view")
    return "it fits with " + " or ".join(found)


def _fit_height(canvas, figure, style) -> None:
    from inspector.export.finish import finish

    left, top, right, bottom = canvas.layout.layout.getContentsMargins()
    width = canvas.size.width() - left - right
    strip = getattr(figure, "strip", None)
    others = sum(i.geometry().height() + canvas.layout.layout.verticalSpacing()
                 for i in canvas.layout.items if i is not strip)
    needed = figure.strip_height(width) + others + top + bottom  # `others` holds the caption
    canvas.resize_height(max(int(round(needed * canvas.scale)), 64))
    finish(canvas, style)


def caption_path(path: str | os.PathLike) -> str:
    """The caption file beside a figure: its name with `.txt`."""
    return os.path.splitext(os.fspath(path))[0] + ".txt"


def _write_caption(path: str, text: str, stop: Callable[[], None]) -> None:
    """Write a caption whole or not at all (`whole_file`)."""
    try:
        with whole_file(path, stop) as temporary, open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise RenderError(f"{path}: cannot write the caption ({_why(exc)})") from None


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return "the disk is full or the file is over this process's size limit; the previous file is kept"
    return exc.strerror or str(exc)


def save(export: Export, path: str | os.PathLike, fmt: str | None = None, page: Page | None = None,
         style=None, *, fit_height: bool = False, caption: bool = False,
         stop: Callable[[], None] = lambda: None) -> Page | None:
    """Write `export` to `path` as `fmt` (default: from the extension); with `caption` (a figure
    format), also its caption beside it (`caption_path`): the figure in words and what a compact
    layout left out. Every file is written whole or not at all (`whole_file`); `stop` is called
    before each is put in place and may raise (an interrupted export). Returns the page written
    (None for CSV). Raises RenderError for a bad format, page or path."""
    from inspector.export.csv import TableError

    path = os.fspath(path)
    fmt = (fmt or format_of(path) or "").lower()
    if fmt not in FORMATS:
        raise RenderError(f"{path}: unknown format {fmt or os.path.splitext(path)[1] or '(none)'!r}; "
                          f"expected one of {', '.join(FORMATS)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise RenderError(f"{path}: the folder {folder} does not exist")
    if fmt == "csv":
        try:
            with whole_file(path, stop) as temporary:
                write_csv(export.columns(), temporary)
        except OSError as exc:
            raise RenderError(f"{path}: cannot write the CSV file ({_why(exc)})") from None
        except TableError as exc:
            raise RenderError(f"{path}: {exc}") from None
        log.info("wrote %s (csv)", path)
        return None
    from inspector.export.render import write_figure

    page = page or default_page(export.view)
    with drawn(export, page, style, fit_height=fit_height) as canvas:
        stop()
        return_freed_memory()  # what the layouts tried and closed took, before the writer takes its share
        try:
            with whole_file(path, stop) as temporary:
                try:
                    write_figure(canvas, fmt, temporary, title=export.stem())
                except RenderError as exc:  # named by the file asked for, not the temporary one
                    raise RenderError(str(exc).replace(temporary, path)) from None
        except OSError as exc:
            raise RenderError(f"{path}: cannot write the {fmt.upper()} file ({_why(exc)})") from None
        if caption:
            _write_caption(caption_path(path), export.caption(canvas.left_out), stop)
        return canvas.page


def image(export: Export, page: Page | None = None, style=None):
    """The figure as a `QImage` (for the clipboard), carrying the page's DPI."""
    from inspector.export.render import render_image

    page = page or default_page(export.view)
    with drawn(export, page, style, fit_height=True) as canvas:
        return render_image(canvas)


def svg(export: Export, page: Page | None = None, style=None) -> bytes:
    """The figure as SVG bytes (for the clipboard's vector flavour)."""
    from inspector.export.render import sharpen_images, svg_bytes

    page = page or default_page(export.view)
    with drawn(export, page, style, fit_height=True) as canvas:
        sharpen_images(canvas)
        return svg_bytes(canvas, export.stem())
