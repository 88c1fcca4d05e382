"""Figure export, the same for the GUI and the `export` command: every view's figure as PNG, SVG
or PDF (`render`), the data behind it as CSV (`csv`), the views' data and builders (`figures`,
`draw`), and the dialog of the desktop app (`dialog`).

    from inspector.export import Selection, read_export, save
    with open_trace(path) as trace:
        save(read_export(trace, "routing", Selection(layer=2)), "routing.pdf")

PNG, SVG and PDF need a QApplication (on the offscreen platform without a display); CSV needs no Qt.
"""

from inspector.export.figures import SPECS, Export, read_export
from inspector.export.output import FORMATS, default_page, format_of, print_style, save
from inspector.export.page import Page, RenderError
from inspector.export.selection import Selection, SelectionError

__all__ = ["FORMATS", "SPECS", "Export", "Page", "RenderError", "Selection", "SelectionError",
           "default_page", "format_of", "print_style", "read_export", "save"]
