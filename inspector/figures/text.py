"""The text strip: a row's tokens as wrapped text, each shaded by its drops or router margin, the
prompt set apart from the generation."""

from __future__ import annotations

import html

import numpy as np

from inspector.figure_data.text import TextData
from inspector.figures.style import FigureStyle
from inspector.qt import QtCore, QtGui, QtWidgets, pg

#: An invisible break opportunity between the tokens of a word.
ZERO_WIDTH_SPACE = "\u200b"
#: Full-shade colour per kind of measure.
SHADE_COLORS = {"drops": (214, 39, 40), "margin": (117, 63, 181)}


def shade_colors(values: np.ndarray, rgb: tuple[int, int, int]) -> list[str]:
    """White blended towards `rgb` by each value in [0, 1] (at most 85 %), as #rrggbb strings."""
    v = np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)[:, None] * 0.85      # [T, 1]
    c = np.rint(255 + (np.asarray(rgb, dtype=np.float64)[None, :] - 255) * v).astype(np.int64)
    packed = (c[:, 0] << 16) | (c[:, 1] << 8) | c[:, 2]
    return [f"#{x:06x}" for x in packed.tolist()]


def scale_html(rgb: tuple[int, int, int], low: str, high: str, steps: int = 6) -> str:
    """A key of the shading: `low`, swatches from none to full shade, `high`."""
    swatches = "".join(f'<span style="background-color: {c};">&nbsp;&nbsp;&nbsp;</span>'
                       for c in shade_colors(np.linspace(0.0, 1.0, steps), rgb))
    return f"{html.escape(low)} {swatches} {html.escape(high)}"


def joined(previous: str, text: str) -> bool:
    """Whether token `text` continues the word `previous` ends (subword and byte tokens)."""
    return bool(previous and text and not previous[-1].isspace() and not text[0].isspace()
                and previous[-1] != "↵")


def long_words(texts: list[str], line_chars: int | None) -> np.ndarray:
    """[T] whether token t continues a word (a run of joined tokens) longer than `line_chars`
    characters: only such a word may break between its tokens (None: every word may)."""
    out = np.zeros(len(texts), dtype=bool)
    start = 0
    for t in range(1, len(texts) + 1):
        if t == len(texts) or not joined(texts[t - 1], texts[t]):
            if line_chars is None or sum(len(x) for x in texts[start:t]) > line_chars:
                out[start + 1:t] = True
            start = t
    return out


def text_html(data: TextData, shade: np.ndarray, rgb: tuple[int, int, int], style: FigureStyle,
              line_chars: int | None = None) -> tuple[str, np.ndarray]:
    """HTML of the strip and the [T + 1] character offsets where each token starts in plain text.

    The prompt is grey, the generation bold and underlined, with an orange bar between them. A word
    wider than a line of `line_chars` characters may break between its tokens; a shorter one
    breaks only where a space is, so no word that fits a line is split."""
    colors = shade_colors(shade, rgb)
    breakable = long_words(data.texts, line_chars)
    offsets = np.zeros(data.n_positions + 1, dtype=np.int64)
    parts = [f'<div style="font-family: monospace; font-size: {style.font_size + 1}pt; '
             f'color: {style.foreground}; line-height: 150%;">',
             '<span style="color: #6a6a6a;">']
    pos = 0
    for t, text in enumerate(data.texts):
        if breakable[t]:
            # A break opportunity between two tokens of a word wider than a line (byte tokens, code).
            parts.append(ZERO_WIDTH_SPACE)
            pos += 1
        if t == data.prompt_len:
            if t > 0:
                parts.append('</span><span style="color: #ff8c00; font-weight: bold;">▌</span>')
                pos += 1
            else:
                parts.append("</span>")
            parts.append(f'<span style="color: {style.foreground}; font-weight: bold; '
                         f'text-decoration: underline;">')
        offsets[t] = pos
        parts.append(f'<span style="background-color: {colors[t]};">{html.escape(text)}</span>')
        pos += len(text)
        if "↵" in text:  # the token ends a line in the completion: break here too
            parts.append("<br>")
            pos += 1
    offsets[data.n_positions] = pos
    parts.append("</span></div>")
    return "".join(parts), offsets


class TextStrip(pg.GraphicsWidget):
    """A wrapped rich-text block inside a pyqtgraph layout; it takes the width it is given and tells
    `on_width` how many characters a line then holds (the figure breaks only longer words)."""

    #: Runs of subword tokens wider than a line break inside (the export's fit check allows it).
    breaks_inside_words = True

    def __init__(self, on_width=None, point_size: float | None = None) -> None:
        super().__init__()
        self.on_width = on_width
        self._point_size = point_size  # of the text's font (its HTML sets it)
        self.text = QtWidgets.QGraphicsTextItem(self)
        self.text.setPos(6, 4)
        # Subword tokens run together into "words" longer than a line (byte tokens, code): break
        # between words, else (where the figure put break opportunities) between tokens, and inside
        # a token only when it is wider than a line.
        option = self.text.document().defaultTextOption()
        option.setWrapMode(QtGui.QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.text.document().setDefaultTextOption(option)
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Expanding)

    def set_html(self, text: str) -> None:
        self.text.setHtml(text)
        self._rewrap()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._rewrap()

    def _rewrap(self) -> None:
        width = max(self.size().width() - 12, 100)
        if abs(self.text.textWidth() - width) > 0.5:
            self.text.setTextWidth(width)
            if self.on_width is not None:
                self.on_width(self.line_chars(width))
        self.updateGeometry()

    def line_chars(self, width: float) -> int:
        """Characters of the strip's (monospace, bold) font a line of `width` px holds."""
        font = QtGui.QFont(self.text.document().defaultFont())
        font.setFamily("monospace")
        font.setStyleHint(QtGui.QFont.StyleHint.Monospace)
        font.setBold(True)
        if self._point_size:
            font.setPointSizeF(self._point_size)
        advance = QtGui.QFontMetricsF(font).horizontalAdvance("0") or 8.0
        return max(int((width - 4) // advance), 1)

    def content_height(self, width: float) -> float:
        """Height the text needs at `width` px."""
        doc = self.text.document().clone()
        doc.setTextWidth(max(width - 12, 100))
        return doc.size().height() + 8

    def char_at(self, pos: QtCore.QPointF) -> int:
        """Character index under `pos` (item coordinates), -1 outside the text."""
        local = self.text.mapFromParent(pos)
        layout = self.text.document().documentLayout()
        return layout.hitTest(local, QtCore.Qt.HitTestAccuracy.ExactHit)


class TextFigure:
    """Draws `TextData` into a `pg.GraphicsLayout`: a caption at (row, 0), the strip at (row + 1, 0)."""

    def __init__(self, layout: pg.GraphicsLayout, style: FigureStyle | None = None, row: int = 0) -> None:
        self.style = style or FigureStyle()
        self.data: TextData | None = None
        self._line_chars: int | None = None  # of the strip's present width (None: not laid out yet)
        self.caption = pg.LabelItem(justify="left", color=self.style.foreground,
                                    size=f"{self.style.font_size}pt")
        layout.addItem(self.caption, row=row, col=0)
        self.strip = TextStrip(self._line_chars_changed, self.style.font_size + 1)
        layout.addItem(self.strip, row=row + 1, col=0)
        self.shade = np.zeros(0)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._rgb = SHADE_COLORS["drops"]

    def set_data(self, data: TextData, mode: str, layer: int = 0) -> None:
        """Show `data` shaded by `mode` (one of `SHADE_MODES`); `layer` for per-layer modes."""
        self.data = data
        self.shade, caption = data.shade(mode, layer)
        rgb = self._rgb = SHADE_COLORS["margin" if "margin" in mode else "drops"]
        self._set_text()
        n_gen = data.n_positions - data.prompt_len
        low, high = data.shade_ends(mode)
        self.caption.setText(
            f"run {html.escape(data.run)} · row {data.row} (request {data.request}) · {data.prompt_len} "
            f"prompt tokens (grey), {n_gen} generated (bold, underlined)<br>"
            f"shade: {html.escape(caption)} &nbsp; {scale_html(rgb, low, high)}")
        self.caption.setMaximumHeight(self.caption.minimumHeight())  # the text gets any extra room

    def _set_text(self) -> None:
        text, self._offsets = text_html(self.data, self.shade, self._rgb, self.style, self._line_chars)
        self.strip.set_html(text)

    def _line_chars_changed(self, chars: int) -> None:
        if chars != self._line_chars:
            self._line_chars = chars
            if self.data is not None:
                self._set_text()

    def token_at_char(self, char: int) -> int | None:
        """Token index containing plain-text character `char`, or None."""
        if self.data is None or char < 0 or char >= self._offsets[-1]:
            return None
        t = int(np.searchsorted(self._offsets, char, side="right") - 1)
        return t if 0 <= t < self.data.n_positions else None

    def token_at(self, scene_pos: QtCore.QPointF) -> int | None:
        """Token under a scene position, or None."""
        return self.token_at_char(self.strip.char_at(self.strip.mapFromScene(scene_pos)))

    def hover_text_at(self, scene_pos: QtCore.QPointF) -> str | None:
        t = self.token_at(scene_pos)
        return None if t is None or self.data is None else self.data.describe(t)

    def strip_height(self, width: float) -> float:
        """Height of the strip at `width`, its words broken as at that width."""
        self._line_chars_changed(self.strip.line_chars(max(width - 12, 100)))
        return self.strip.content_height(width)

    def preferred_height(self, width: float) -> float:
        """Height of the caption and the strip at `width`."""
        return self.strip_height(width) + 30

