"""Colours, fonts and colour maps shared by the figure builders."""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np

from inspector.qt import QtCore, QtGui, QtWidgets, pg

#: Colour maps offered for router probabilities: sequential and perceptually uniform only.
COLORMAPS = ("viridis", "inferno", "magma", "plasma", "cividis", "CET-L1", "CET-L3")

#: The one qualitative palette of experts and of completion clusters, in the app and in exports:
#: Paul Tol's muted scheme, told apart by colour-blind readers (it has no pure red, which marks
#: dropped candidates). Past its end, `categorical_colors` adds golden-ratio hues.
PALETTES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "tol-muted": ((51, 34, 136), (136, 204, 238), (68, 170, 153), (17, 119, 51), (153, 153, 51),
                  (221, 204, 119), (204, 102, 119), (136, 34, 85), (170, 68, 153)),
}
PALETTE = "tol-muted"

@dataclass(frozen=True)
class FigureStyle:
    """How figures look; the app uses the default, an export may pass its own."""

    background: str = "#ffffff"
    foreground: str = "#202020"
    font_size: float = 10.0        # points, for axis labels and ticks
    kept_pen: str = "#ffffff"      # outline of kept candidates (over dark and light cells alike)
    kept_shadow: str = "#000000"
    dropped: str = "#e8101a"       # red X of dropped candidates
    boundary: str = "#ff8c00"      # prompt | generation line
    probe: str = "#ff7f0e"         # the probe row in stacked bars
    requested: str = "#9ecae1"
    kept: str = "#08519c"
    capacity: str = "#d62728"
    colormap: str = "viridis"
    palette: str = PALETTE         # qualitative palette of experts and clusters, a key of PALETTES

    def font(self, scale: float = 1.0) -> QtGui.QFont:
        """The style's font at `scale` times its size, but not below 7 pt (the smallest legible
        on paper) unless the style's own size is smaller."""
        font = QtGui.QFont()
        font.setPointSizeF(max(self.font_size * scale, min(self.font_size, 7.0)))
        return font

    def style_plot(self, plot: pg.PlotItem) -> None:
        """Apply foreground colour and fonts to a plot's axes and title."""
        for name in ("left", "bottom", "right", "top"):
            axis = plot.getAxis(name)
            axis.setPen(pg.mkPen(self.foreground))
            axis.setTextPen(pg.mkPen(self.foreground))
            axis.setTickFont(self.font())
            axis.label.setFont(self.font())


def categorical_colors(n: int, palette: str = PALETTE) -> np.ndarray:
    """`n` distinct RGB colours [n, 3] uint8: the qualitative `palette` (a key of PALETTES), then
    golden-ratio hues (no reds)."""
    out = list(PALETTES.get(palette, PALETTES[PALETTE])[:n])
    i = 0
    while len(out) < n:
        h = (i * 0.618033988749895) % 1.0
        if h < 0.05 or h > 0.93:  # no reds
            i += 1
            continue
        r, g, b = colorsys.hsv_to_rgb(h, 0.55 + 0.35 * ((i // 7) % 2), 0.95 - 0.25 * ((i // 3) % 2))
        out.append((int(r * 255), int(g * 255), int(b * 255)))
        i += 1
    return np.array(out, dtype=np.uint8).reshape(n, 3)


def row_colors(n_rows: int, probe_row: int, probe: str) -> list[QtGui.QColor]:
    """Colours of batch rows in stacked bars: greys and blues for partners, `probe` for the probe."""
    partners = [(158, 202, 225), (107, 174, 214), (66, 146, 198), (189, 189, 189), (150, 150, 150),
                (115, 115, 115)]
    colors = [QtGui.QColor(*partners[b % len(partners)]) for b in range(n_rows)]
    if 0 <= probe_row < n_rows:
        colors[probe_row] = QtGui.QColor(probe)
    return colors


def colormap(name: str) -> pg.ColorMap:
    """A pyqtgraph colour map by name, falling back to viridis for an unknown name."""
    try:
        cmap = pg.colormap.get(name)
    except (FileNotFoundError, KeyError, ValueError):
        cmap = None
    return cmap if cmap is not None else pg.colormap.get("viridis")


def place_legend(layout: pg.GraphicsLayout, legend: pg.LegendItem, row: int, col: int) -> None:
    """Put `legend` in its own layout cell, at its natural height, at the top of the cell."""
    legend.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Fixed)
    layout.addItem(legend, row=row, col=col)
    layout.layout.setAlignment(legend, QtCore.Qt.AlignmentFlag.AlignTop | QtCore.Qt.AlignmentFlag.AlignLeft)
