"""`moe-inspector export TRACE --view V ... -o OUT`: render a view's figure (PNG, SVG, PDF) or the
data behind it (CSV) without a display, through the same code as the app's Export dialog.

Qt runs on the offscreen platform unless a platform is set; a CSV export never loads Qt.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import replace

from inspector.commands.errors import UsageError, message
from inspector.export.output import FORMATS
from inspector.export.page import PRESETS
from inspector.specs.registry import SPECS, spec_of, view_names
from inspector.terminal import printable

#: Bytes of open runs an export keeps (`open_trace`'s cache; its default is the app's): what it frees is
#: what drawing a large page takes.
RUN_CACHE_BYTES = 16 << 20
#: Short names of the text strip's shading modes.
SHADE_CHOICES = ("drops", "layer-drops", "margin")

#: Which view reads each option, for the message when an option does not apply.
_OPTION_FLAGS = {"run": "--run", "request": "--request", "row": "--row", "layer": "--layer",
                 "range": "--range", "step": "--step", "group": "--group", "pair": "--pair",
                 "colormap": "--colormap", "levels": "--levels", "shade": "--shade",
                 "condition": "--condition"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="TRACE", help="trace file (.h5)")
    names = view_names()
    aliases = ", ".join(f"{a} = {n}" for a, n in names.items() if a != n)
    parser.add_argument("--view", default="routing", choices=list(names), metavar="VIEW",
                        help=f"the view whose figure to export: {', '.join(SPECS)} (default: routing; "
                             f"older names: {aliases})")
    what = parser.add_argument_group("what to show (each view reads the ones it needs)")
    what.add_argument("--run", metavar="NAME", help="run (default, with none of --run, --request, --row, "
                      "--pair, --condition: the probe request's first run that diverges, its row and its "
                      "cause's layer (or --layer), as printed; else the first complete run holding "
                      "--request, else the first); runs view: the reference run")
    what.add_argument("--request", metavar="R", type=int, help="request: picks the run's row holding it "
                      "(pair, runs: the request compared)")
    what.add_argument("--row", metavar="B", type=int, help="batch row (default: the probe row)")
    what.add_argument("--layer", metavar="L", type=int, help="MoE layer (default: 0)")
    what.add_argument("--range", metavar="T0:T1", help="positions T0 to T1 - 1 only (figure and CSV)")
    what.add_argument("--step", metavar="S", type=int, help="forward step of the load view (0 = prefill)")
    what.add_argument("--group", metavar="G", type=int, help="group of the load view (default: the probe's)")
    what.add_argument("--pair", metavar="A,B", help="runs A (reference) and B of the pair view "
                      "(default: the request's first two runs)")
    what.add_argument("--condition", metavar="TEXT", help="runs view: compare the runs of this condition "
                      "('' = all; default: the reference's, else the first of several)")
    what.add_argument("--colormap", metavar="NAME", help="colour map of router probabilities "
                      "(default: viridis)")
    what.add_argument("--levels", metavar="LO:HI", help="colour bar limits of router probabilities "
                      "(default: 0:1)")
    what.add_argument("--shade", choices=SHADE_CHOICES, help="shading of the text view (default: drops)")
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, help="output format (default: from OUT's extension)")
    presets = ", ".join(f"{p.name} ({p.about})" for p in PRESETS.values())
    out.add_argument("--size", choices=list(PRESETS), help=f"page preset: {presets}, laid out at that size "
                     "so its fonts print at their point sizes (default: the view's usual page, 10 to 13 in "
                     "wide)")
    out.add_argument("--font-pt", type=float, metavar="PT", help="font size in points on the page, at "
                     "least 7 (default: 8 for column and page, 12 for slide, else 10)")
    out.add_argument("--width", type=int, metavar="PX", help="width in pixels (default: the view's usual "
                     "page, or the --size, at the DPI)")
    out.add_argument("--height", type=int, metavar="PX", help="height in pixels (default: keeps the "
                     "view's aspect; the text view fits its text)")
    out.add_argument("--dpi", type=float, default=None, metavar="D", help="dots per inch (default: 200); "
                     "with the pixels it sets the physical size of SVG and PDF")
    out.add_argument("--caption", action="store_true", help="also write OUT's name with .txt: the figure "
                     "in words, the cause of a divergence and what a compact layout left out (a figure "
                     "carries no such text itself)")
    out.add_argument("-o", "--output", required=True, metavar="OUT", help="file to write")


def _ints(text: str, sep: str, flag: str, kind=int) -> tuple:
    parts = text.split(sep)
    if len(parts) != 2:
        raise UsageError(f"{flag} expects two values separated by '{sep}', got {text!r}")
    try:
        return kind(parts[0]), kind(parts[1])
    except ValueError:
        raise UsageError(f"{flag} expects numbers, got {text!r}") from None


def selection(args: argparse.Namespace):
    """The `Selection` the options ask for; UsageError for malformed or inapplicable options."""
    from inspector.specs.selection import SHADE_BY_NAME, Selection

    spec = spec_of(args.view)
    given = {name for name in _OPTION_FLAGS if getattr(args, name) is not None}
    unused = sorted(given - set(spec.options))
    if unused:
        flags = ", ".join(_OPTION_FLAGS[n] for n in unused)
        raise UsageError(f"{flags} {'does' if len(unused) == 1 else 'do'} not apply to the {spec.name} view "
                         f"(it reads {', '.join(_OPTION_FLAGS[n] for n in spec.options) or 'no options'})")
    kw: dict = {}
    for name in ("run", "request", "row", "layer", "step", "group"):
        value = getattr(args, name)
        if value is not None:
            if name not in ("run",) and value < 0:
                raise UsageError(f"{_OPTION_FLAGS[name]} must be 0 or more, got {value}")
            kw[name] = value
    if args.range is not None:
        t0, t1 = _ints(args.range, ":", "--range")
        if t0 < 0 or t1 <= t0:
            raise UsageError(f"--range needs 0 <= T0 < T1, got {args.range!r}")
        kw["range"] = (t0, t1)
    if args.levels is not None:
        lo, hi = _ints(args.levels, ":", "--levels", float)
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise UsageError(f"--levels needs finite LO < HI, got {args.levels!r}")
        kw["levels"] = (lo, hi)
    if args.colormap is not None:
        from inspector.figures.style import COLORMAPS  # only here: a CSV export loads no Qt

        if args.colormap not in COLORMAPS:
            raise UsageError(f"--colormap must be one of {', '.join(COLORMAPS)}, got {args.colormap!r}")
        kw["colormap"] = args.colormap
    if args.pair is not None:
        parts = [p.strip() for p in args.pair.split(",")]
        if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
            raise UsageError(f"--pair expects two different run names A,B, got {args.pair!r}")
        kw["pair"] = (parts[0], parts[1])
    if args.shade is not None:
        kw["shade"] = SHADE_BY_NAME[args.shade]
    if args.condition is not None:
        kw["condition"] = args.condition
    return Selection(**kw)


def _page(args: argparse.Namespace):
    from inspector.export import RenderError, default_page
    from inspector.export.output import DEFAULT_DPI
    from inspector.export.page import MAX_DPI, MAX_SIZE, MIN_DPI, MIN_SIZE

    dpi = DEFAULT_DPI if args.dpi is None else args.dpi
    if not (math.isfinite(dpi) and MIN_DPI <= dpi <= MAX_DPI):  # before any size is derived from it
        raise UsageError(f"--dpi must be {MIN_DPI}-{MAX_DPI}, got {dpi:g}")
    for flag, value in (("--width", args.width), ("--height", args.height)):
        if value is not None and not MIN_SIZE <= value <= MAX_SIZE:
            raise UsageError(f"{flag} must be {MIN_SIZE}-{MAX_SIZE} pixels, got {value}")
    if args.size is not None and args.width is not None:
        raise UsageError("--size sets the width; give --size or --width, not both")
    try:
        return default_page(args.view, dpi, args.width, args.height, args.size)
    except RenderError as exc:
        raise UsageError(message(exc)) from None


def _style(args: argparse.Namespace):
    from inspector.export import RenderError
    from inspector.export.output import font_pt, print_style

    try:
        return print_style(font_pt(args.size, args.font_pt))
    except RenderError as exc:
        raise UsageError(f"--font-pt: {exc}") from None


def _format(args: argparse.Namespace) -> str:
    from inspector.export import format_of

    fmt = args.format or format_of(args.output)
    if fmt is None:
        raise UsageError(f"cannot tell the format of {args.output!r}: give --format or an extension "
                         ".png, .svg, .pdf or .csv")
    return fmt


def _application() -> None:
    """A QApplication on the offscreen platform (unless a platform is set), created once."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from inspector.qt import QtWidgets

    if QtWidgets.QApplication.instance() is None:
        QtWidgets.QApplication(["moe-inspector export"])


def _check_output(trace: str, output: str) -> None:
    """An export never replaces its input, nor any HDF5 file (a trace is not a figure)."""
    from traces.h5safe import is_hdf5

    try:
        same = os.path.exists(output) and os.path.exists(trace) and os.path.samefile(trace, output)
    except OSError:
        same = False
    if same:
        raise UsageError(f"-o/--output {output!r} is the trace being exported; choose another file")
    if is_hdf5(output):
        raise UsageError(f"-o/--output {output!r} is an HDF5 file; an export never replaces one")


def run(args: argparse.Namespace) -> int:
    """Export one figure; exit status 2 with a one-line message for bad options or a bad trace.
    Ctrl-C or SIGTERM from the start (the imports included) is noted and stops the export before
    anything is renamed into place: exit 130 or 143, the previous file kept."""
    from inspector.export.whole import Interrupted, Interruptions

    try:
        # Noted until the program exits (or `main` gives its caller's handlers back): a signal after the
        # new file is in place must not turn the export's success into an interruption.
        with Interruptions(keep=True) as interruptions:
            return _run(args, interruptions)
    except Interrupted as exc:
        print(f"moe-inspector export: {exc}; {args.output} is as it was", file=sys.stderr)
        return 128 + exc.signum


def _run(args: argparse.Namespace, interruptions) -> int:
    from inspector.export import RenderError, SelectionError
    from inspector.export.whole import other_names
    from traces import TraceError
    from traces.prompts import PromptMismatch

    sel = selection(args)
    fmt = _format(args)
    if args.caption and fmt == "csv":
        raise UsageError("--caption goes with a figure (png, svg, pdf), not with a CSV table")
    page = _page(args) if fmt != "csv" else None
    style = _style(args) if fmt != "csv" else None
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise UsageError(f"the folder of {args.output!r} does not exist")
    _check_output(args.file, args.output)
    shared = other_names(args.output)
    try:
        written = _export(args, sel, fmt, page, style, interruptions)
    except (TraceError, SelectionError, RenderError, PromptMismatch) as exc:
        raise UsageError(message(exc)) from None
    what = f"{written.describe()}" if written is not None else "the data behind the figure"
    print(f"wrote {args.output} ({fmt}: {what})")
    if shared:
        print(f"note: the previous {args.output} had {shared} other name(s) (hard links); they keep its "
              f"previous content")
    if args.caption:
        from inspector.export.output import caption_path

        print(f"wrote {caption_path(args.output)} (its caption)")
    return 0


def _export(args: argparse.Namespace, sel, fmt: str, page, style, interruptions):
    """Draw and write the export; the page written (None for a CSV)."""
    from inspector.export import read_export, save
    from inspector.specs.defaults import CHOOSING, informative
    from traces import open_trace
    from traces.memory import return_freed_memory

    if fmt != "csv":
        _application()
    interruptions.check()
    with open_trace(args.file, cache_bytes=RUN_CACHE_BYTES) as trace:
        given = [name for name in CHOOSING if getattr(args, name) is not None]
        if not given or given == ["layer"]:  # a layer alone keeps the most telling run or pair
            picked_sel, picked = informative(trace, spec_of(args.view), sel)
            # A step or group named keeps its value (the pick is the cause's step and group).
            picked_sel = replace(picked_sel, **{k: getattr(sel, k) for k in ("step", "group")
                                                if getattr(args, k) is not None})
            if given:
                picked_sel = replace(picked_sel, layer=sel.layer)
                picked = picked and f"{picked}; showing MoE layer {sel.layer}, as --layer asks"
            sel = picked_sel
            if picked:
                print(printable(f"{picked} (name --run, --request, --pair... to choose)"))
        export = read_export(trace, args.view, sel)
        return_freed_memory()  # what reading freed, before drawing takes its share
        return save(export, args.output, fmt, page, style, fit_height=args.height is None,
                    caption=args.caption, stop=interruptions.check)
