"""The page an export is drawn on: its size in pixels and its DPI (no Qt here)."""

from __future__ import annotations

from dataclasses import dataclass

#: Formats a figure renders to (CSV is the data, written by `inspector.export.csv`).
IMAGE_FORMATS = ("png", "svg", "pdf")
#: Page limits, in output pixels and dots per inch.
MIN_SIZE, MAX_SIZE = 64, 20_000
MIN_DPI, MAX_DPI = 30, 1200


#: No text of an exported figure is smaller than this, in points on the page.
MIN_FONT_PT = 7.0


@dataclass(frozen=True)
class Preset:
    """A page size for print: its width in inches (height: the view's for that width, or fixed)
    and the font size its text is set at, in points on the page."""

    name: str
    width_in: float
    height_in: float | None
    font_pt: float
    about: str


#: The `--size` presets: a journal column, a full page width, a 16:9 slide.
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("column", 3.5, None, 8.0, "a 3.5 in journal column"),
    Preset("page", 7.0, None, 8.0, "a 7 in page width"),
    Preset("slide", 10.0, 5.625, 12.0, "a 16:9 slide, 10 x 5.625 in"),
)}
#: The font size of an export without a preset, in points.
DEFAULT_FONT_PT = 10.0


class RenderError(ValueError):
    """A page that cannot be rendered (size or DPI out of range, unwritable file)."""


@dataclass(frozen=True)
class Page:
    """The output: `width` x `height` pixels at `dpi` dots per inch (for SVG and PDF, the pixels
    at that DPI give the physical size)."""

    width: int = 2000
    height: int = 1250
    dpi: float = 200.0

    def __post_init__(self) -> None:
        if not MIN_DPI <= self.dpi <= MAX_DPI:
            raise RenderError(f"dpi must be {MIN_DPI}-{MAX_DPI}, got {self.dpi:g}")
        for name in ("width", "height"):
            value = getattr(self, name)
            if not MIN_SIZE <= value <= MAX_SIZE:
                raise RenderError(f"{name} must be {MIN_SIZE}-{MAX_SIZE} pixels, got {value}")

    @property
    def inches(self) -> tuple[float, float]:
        return self.width / self.dpi, self.height / self.dpi

    def screen_size(self, screen_dpi: float) -> tuple[float, float]:
        """Size of the layout in screen units (where a point is `screen_dpi` / 72 units)."""
        w_in, h_in = self.inches
        return w_in * screen_dpi, h_in * screen_dpi

    def describe(self) -> str:
        w_in, h_in = self.inches
        return (f"{self.width} x {self.height} px at {self.dpi:g} dpi "
                f"({w_in:.2f} x {h_in:.2f} in, {w_in * 2.54:.1f} x {h_in * 2.54:.1f} cm)")


