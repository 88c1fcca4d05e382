"""Does a drawn figure fit its page? Every plot keeps a readable area, nothing runs off the page
and no text is cut; and the note a compact layout adds saying what it left out."""

from __future__ import annotations

from inspector.export.finish import overflow
from inspector.export.render import Canvas
from inspector.figures.style import FigureStyle
from inspector.qt import pg

#: The smallest plot area, in inches: its height, and the width of a plot (not a colour bar).
MIN_PANEL_IN = 0.45
MIN_PLOT_WIDTH_IN = 1.2


def _name(plot: pg.PlotItem) -> str:
    title = plot.titleLabel.text if plot.titleLabel.isVisible() else ""
    left = plot.getAxis("left").labelText if plot.getAxis("left").isVisible() else ""
    text = title or left or "a plot"
    return text if len(text) < 50 else text[:47] + "…"


def problems(canvas: Canvas) -> list[str]:
    """What keeps the figure from fitting its page, one phrase each (none when it fits)."""
    dpi, width, height = canvas.dpi, canvas.size.width(), canvas.size.height()
    out, titles = [], []
    for item in canvas.layout.items:
        rect = item.sceneBoundingRect()
        if rect.bottom() > height + 1 or rect.right() > width + 1:
            out.append(f"its panels need {max(rect.right(), width) / dpi:.2f} x "
                       f"{max(rect.bottom(), height) / dpi:.2f} in")
            break
    for item in canvas.widget.scene().items():
        if isinstance(item, pg.PlotItem) and item.isVisible():
            area = item.vb.sceneBoundingRect()
            narrow = isinstance(item, pg.ColorBarItem)  # a colour bar is narrow by design
            if area.height() < MIN_PANEL_IN * dpi or (not narrow and area.width() < MIN_PLOT_WIDTH_IN * dpi):
                out.append(f"the plot {_name(item)!r} gets {area.width() / dpi:.2f} x "
                           f"{area.height() / dpi:.2f} in")
            left = item.getAxis("left")
            if not narrow and left.isVisible() and left.label.isVisible() and left.labelText:
                titles.append((left.labelText, left.label.sceneBoundingRect()))
    for i, (text, rect) in enumerate(titles):
        clash = next((other for other, r in titles[i + 1:] if r.intersects(rect)), None)
        if clash is not None:
            out.append(f"the axis titles {text!r} and {clash!r} overlap")
    out.extend(f"text {t} is cut off" for t in overflow(canvas)[:1])
    return out


def add_note(layout: pg.GraphicsLayout, style: FigureStyle, left_out: list[str]) -> None:
    """A line under the figure saying what a compact layout left out."""
    if not left_out:
        return
    text = "Left out to fit the page: " + "; ".join(left_out) + "."
    label = pg.LabelItem(text, justify="left", color=style.foreground, size=f"{style.font_size}pt")
    columns = max(layout.layout.columnCount(), 1)
    layout.addItem(label, row=layout.layout.rowCount(), col=0, colspan=columns)
