"""Figure export, the same for the GUI and the `export` command, with no widget in it: every view
declared in `inspector.specs` as PNG, SVG or PDF (`render`, `svg`, `fit`, `finish`, `page`) or the
data behind it as CSV (`csv`), through one path (`output.save`). It imports neither `inspector.app`
nor `inspector.views`; the app's dialog lives in `inspector.app`.

    from inspector.export import Selection, read_export, save
    with open_trace(path) as trace:
        save(read_export(trace, "routing", Selection(layer=2)), "routing.pdf")

PNG, SVG and PDF need a QApplication (on the offscreen platform without a display); CSV needs no Qt.
"""

from inspector.export.output import FORMATS, default_page, format_of, print_style, save
from inspector.export.page import Page, RenderError
from inspector.specs.registry import SPECS, Export, ViewSpec, read_export, spec_of
from inspector.specs.selection import Selection, SelectionError

__all__ = ["FORMATS", "SPECS", "Export", "Page", "RenderError", "Selection", "SelectionError",
           "default_page", "format_of", "print_style", "ViewSpec", "read_export", "save", "spec_of"]
