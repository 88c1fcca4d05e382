"""Data of the text strip: a row's tokens shaded by drops or by router margin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.table import (
    INTEGER,
    NOT_RECORDED,
    NUMBER,
    POSITION_COLUMNS,
    Column,
    finite,
    not_recorded,
)
from inspector.figure_data.tokens import display_token, token_text
from traces import schema
from traces.analysis.measures import drops, router_margin
from traces.analysis.rows import RowTrace

#: Shading modes of the text strip, as the UI names them.
SHADE_MODES = ("drops (all layers)", "drops (this layer)", "router margin (smallest over layers)")

#: Router margins (logit gap between the k-th and (k+1)-th expert) shade on a log scale: a gap at
#: or below MARGIN_TIE gets full shade (a near-tie a rounding difference can flip), one at or above
#: MARGIN_SAFE none.
MARGIN_TIE = 1e-4
MARGIN_SAFE = 1.0


def margin_shade(margin: np.ndarray) -> np.ndarray:
    """Shade in [0, 1] of router margins: 1 at or below MARGIN_TIE, 0 at or above MARGIN_SAFE."""
    m = np.maximum(np.asarray(margin, dtype=np.float64), MARGIN_TIE)
    span = np.log10(MARGIN_SAFE) - np.log10(MARGIN_TIE)
    return np.clip((np.log10(MARGIN_SAFE) - np.log10(m)) / span, 0.0, 1.0)


@dataclass(frozen=True)
class TextData:
    """One row's completion with per-token drop counts and router margins. `T` = row length."""

    run: str
    row: int
    request: int
    texts: list[str]          # [T] display text of each token (spaces kept, line breaks shown)
    tokens: np.ndarray        # [T] token ids
    prompt_len: int
    n_candidates: int         # K, candidates per token per layer
    drops: np.ndarray         # [L, T] dropped candidates per layer
    margin: np.ndarray        # [L, T] router margin per layer (logit gap, inf when E = K)

    @property
    def n_positions(self) -> int:
        return len(self.texts)

    def shade(self, mode: str, layer: int = 0) -> tuple[np.ndarray, str]:
        """([T] shade in [0, 1], caption) of a mode of `SHADE_MODES`; 1 = strongest mark."""
        L = self.drops.shape[0]
        if mode == SHADE_MODES[0]:
            total = self.drops.sum(axis=0)
            top = max(int(total.max(initial=0)), 1)
            return total / top, f"dropped candidates over all {L} layers (darkest = {top})"
        if mode == SHADE_MODES[1]:
            layer = min(max(layer, 0), L - 1)
            return self.drops[layer] / max(self.n_candidates, 1), f"dropped candidates at layer {layer}"
        if mode == SHADE_MODES[2]:
            return (margin_shade(self.smallest_margin),
                    f"router margin, smallest over layers (darkest <= {MARGIN_TIE:g}, "
                    f"none >= {MARGIN_SAFE:g})")
        raise ValueError(f"unknown shading mode {mode!r}; expected one of {', '.join(SHADE_MODES)}")

    def shade_ends(self, mode: str) -> tuple[str, str]:
        """What no shade and full shade mean in `mode`, for the key of the strip."""
        if mode == SHADE_MODES[0]:
            return "0", f"{max(int(self.drops.sum(axis=0).max(initial=0)), 1)} dropped"
        if mode == SHADE_MODES[1]:
            return "0", f"{self.n_candidates} dropped"
        return f"margin ≥ {MARGIN_SAFE:g}", f"≤ {MARGIN_TIE:g}"

    @property
    def smallest_margin(self) -> np.ndarray:
        """[T] smallest router margin over layers."""
        return self.margin.min(axis=0, initial=np.inf)

    def describe(self, t: int) -> str | None:
        """Hover text of token t, or None outside the text."""
        if not 0 <= t < self.n_positions:
            return None
        part = "prompt" if t < self.prompt_len else "generation"
        worst = int(np.argmin(self.margin[:, t]))
        return "\n".join([
            f"position {t} ({part}): {self.texts[t]!r}",
            f"dropped candidates: {int(self.drops[:, t].sum())} over {self.drops.shape[0]} layers",
            f"smallest router margin {self.margin[worst, t]:.3g} (logit gap) at layer {worst}",
        ])

    def to_columns(self, mode: str = SHADE_MODES[0], layer: int = 0) -> dict[str, np.ndarray]:
        """One row per position, shaded in `mode` of `SHADE_MODES` (at `layer`): the values of `COLUMNS`."""
        T = self.n_positions
        no_router = np.isnan(self.margin).all(axis=0)  # [T] the run's router logits not recorded
        shade, _ = self.shade(mode, layer)
        return {
            "position": np.arange(T),
            "generated": np.arange(T) >= self.prompt_len,
            "token_id": np.asarray(self.tokens, dtype=np.int64),
            "token": np.array(self.texts, dtype=object),
            "dropped_all_layers": self.drops.sum(axis=0),
            "smallest_router_margin": finite(self.smallest_margin),
            "shade": finite(np.asarray(shade, dtype=np.float64)),
            "not_recorded": not_recorded({schema.ROUTER_LOGITS: no_router}),
        }


#: The text table's columns after its context: one row per position.
COLUMNS = (
    *POSITION_COLUMNS,
    Column("dropped_all_layers", INTEGER, "the token's dropped candidates over all MoE layers"),
    Column("smallest_router_margin", NUMBER, "smallest router margin over the MoE layers: the gap between "
                                             "the router logits of the K-th and (K+1)-th expert",
           unit="logit", empty="the run's router logits were not recorded, or every expert is chosen "
                               "(no (K+1)-th expert)"),
    Column("shade", NUMBER, "the strip's shade of the token in the mode shade_by names, from 0 (none) to 1 "
                            "(strongest)",
           empty="shade_by is margin and the run's router logits were not recorded"),
    NOT_RECORDED,
)


def text_figure_data(row: RowTrace, *, vocab: Sequence[str]) -> TextData:
    """The strip of one row (`traces.analysis.rows.RowTrace`): its drops and router margins per layer."""
    K = row.kept.shape[-1]
    return TextData(
        run=row.run, row=row.row, request=row.request,
        texts=[display_token(token_text(vocab, int(i))) for i in row.tokens], tokens=np.asarray(row.tokens),
        prompt_len=row.prompt_len,
        n_candidates=K, drops=drops(row.expert, row.kept).astype(np.int64),
        margin=router_margin(row.router_logits, K).astype(np.float64),
    )


def read_text(trace, row: RowTrace) -> TextData:
    """The strip of `row`, read from a run of `trace`."""
    return text_figure_data(row, vocab=trace.vocab)
