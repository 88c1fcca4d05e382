"""Text of the side-by-side view as HTML: both completions with t* highlighted, and the cause panel.

The same HTML feeds the view's text boxes and, through `HtmlBlock`, the exported figure. A
completion comes with the document position where each token starts, so a click or hover maps to
a token without one link element per token (hundreds of elements make Qt's rich text slow).
"""

from __future__ import annotations

import html

import numpy as np

from inspector.figure_data.divergence_cause import MAX_LISTED, CauseText
from inspector.figure_data.pair import CompletionText
from inspector.figures.style import FigureStyle
from inspector.qt import QtWidgets, pg

#: Colours of run A and run B in every panel.
A_COLOR = "#1f77b4"
B_COLOR = "#2ca02c"
#: Background of the first divergent token, and of the selected position.
T_STAR_BG = "#ffc400"
SELECTED_BG = "#80deea"
PROMPT_CSS = "color: #8a8a8a;"
BOUNDARY_CSS = "color: #ff8c00; font-weight: bold;"


def doc_length(text: str) -> int:
    """Positions `text` takes in a QTextDocument (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def token_css(kind: str, color: str, selected: bool) -> str:
    """Style of one token of kind 'prompt', 'shared', 't*' or 'after' (see `CompletionText.kind`)."""
    css = {"prompt": PROMPT_CSS, "shared": "", "t*": f"background-color: {T_STAR_BG}; font-weight: bold;",
           "after": f"color: {color};"}[kind]
    if selected:
        css += f" background-color: {SELECTED_BG}; text-decoration: underline;"
    return css


def completion_html(text: CompletionText, name: str, color: str, style: FigureStyle,
                    selected: int | None = None) -> tuple[str, np.ndarray]:
    """HTML of one run's text, and [n + 1] document positions where each shown token starts (the
    last is the end). A header in the run's colour, the prompt's tail in grey, shared tokens plain,
    t* bold on amber, tokens after t* in the run's colour, the selected token on cyan, underlined."""
    runs: list[list[str]] = []  # [css, visible text]; neighbours of the same style merge
    pos = 0

    def add(css: str, visible: str) -> None:
        nonlocal pos
        if runs and runs[-1][0] == css:
            runs[-1][1] += visible
        else:
            runs.append([css, visible])
        pos += doc_length(visible)

    add(f"color: {color}; font-weight: bold; font-family: sans-serif;",
        f"{name}: run {text.run} row {text.row}")
    add("", "\n")
    if text.positions.size and text.positions[0] > 0:
        add(PROMPT_CSS, "…")
    offsets = np.zeros(len(text.texts) + 1, dtype=np.int64)
    for i, token in enumerate(text.texts):
        t = int(text.positions[i])
        if t == text.prompt_len and t > 0:
            add(BOUNDARY_CSS, "▌")
        offsets[i] = pos
        add(token_css(text.kind(i), color, t == selected), token)
        if "↵" in token:
            add("", "\n")
    offsets[-1] = pos
    body = "".join((f'<span style="{css}">{_escape(visible)}</span>' if css else _escape(visible))
                   for css, visible in runs)
    return (f'<div style="font-family: monospace; font-size: {style.font_size + 1}pt; white-space: pre-wrap; '
            f'color: {style.foreground};">{body}</div>'), offsets


def _escape(visible: str) -> str:
    # A line break is one document position, as "\n" counts in `completion_html`.
    return html.escape(visible).replace("\n", "<br>")


def cause_html(cause: CauseText, style: FigureStyle, brief: str = "") -> str:
    """HTML of the cause panel: headline, sentence, the numbers, counterfactuals, who took the slots
    (`brief` "sentence": the headline and the sentence alone, "headline": the headline alone)."""
    color = "#1b7f3b" if cause.confirmed else "#8a4b00"
    parts = [f'<div style="color: {style.foreground};">',
             f'<p style="margin: 0 0 4px 0;"><b style="color: {color};">{html.escape(cause.headline)}</b>'
             f'</p>']
    if brief == "headline":
        return "".join(parts) + "</div>"
    parts.append(f'<p style="margin: 0 0 4px 0;">{html.escape(cause.sentence)}</p>')
    if brief:
        return "".join(parts) + "</div>"
    if cause.counterfactuals:
        items = "; ".join(html.escape(c) for c in cause.counterfactuals)
        parts.append(f'<p style="margin: 0 0 4px 0;"><b>Counterfactual reruns:</b> {items}.</p>')
    rows = "".join(f"<tr><td style='color: #505050; padding-right: 8px;'>{html.escape(k)}</td>"
                   f"<td>{html.escape(v)}</td></tr>" for k, v in cause.facts)
    parts.append(f"<table cellspacing='0' cellpadding='1'>{rows}</table>")
    if cause.displacing:
        parts.append(f'<p style="margin: 4px 0 2px 0;"><b>Who took the slots</b> (in '
                     f'{html.escape(cause.letter(cause.displacing_run))}): '
                     f'{html.escape(cause.displacing_summary)}.</p>')
        head = "".join(f"<th align='left'>{h}</th>" for h in ("slot", "row", "request", "position", "choice",
                                                               "outcome"))
        cells = [f"<tr>{head}</tr>"]
        for c in cause.displacing[:MAX_LISTED]:
            who = " (same sequence)" if c.own_row else ""
            cells.append(f"<tr><td>{c.slot}</td><td>{c.row}{who}</td><td>{c.request}</td><td>{c.position}</td>"
                         f"<td>{c.rank + 1}</td><td>{'kept' if c.kept else 'dropped'}</td></tr>")
        more = len(cause.displacing) - MAX_LISTED
        parts.append(f"<table cellspacing='0' cellpadding='1'>{''.join(cells)}</table>")
        if more > 0:
            parts.append(f"<p>… and {more} more.</p>")
    parts.append("</div>")
    return "".join(parts)


class HtmlBlock(pg.GraphicsWidget):
    """Wrapped rich text inside a pyqtgraph layout that asks for the height its text needs at its
    width (for the exported figure, which has no scroll bars)."""

    def __init__(self, style: FigureStyle | None = None, scale: float = 1.0) -> None:
        super().__init__()
        self.style = style or FigureStyle()
        self.text = QtWidgets.QGraphicsTextItem(self)
        self.text.setPos(4, 2)
        self.text.document().setDefaultFont(self.style.font(scale))
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Preferred)

    def set_html(self, text: str) -> None:
        self.text.setHtml(text)
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        width = max(self.size().width() - 8, 120)
        if abs(self.text.textWidth() - width) > 0.5:
            self.text.setTextWidth(width)
        height = self.text.document().size().height() + 6
        if abs(self.minimumHeight() - height) > 0.5:
            self.setMinimumHeight(height)
            self.setMaximumHeight(height)
            self.updateGeometry()

    def plain_text(self) -> str:
        return self.text.toPlainText()
