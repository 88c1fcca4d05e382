"""Data of the side-by-side view: run A and run B of one request, position by position.

A is the reference: the cause is why B's completion leaves A's (`traces.analysis.explain_pair`).
Positions are the sequence's own in both runs, so one x axis serves every panel. Routing is only
compared over the shared prefix (positions before the first differing token t*); from t* on the
inputs differ, and the panels say "not compared" there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.divergence_cause import CauseText, cause_text
from inspector.figure_data.routing import RoutingData, routing_figure_data
from inspector.figure_data.table import (
    BOOLEAN,
    GENERATED,
    INTEGER,
    NOT_RECORDED,
    NUMBER,
    POSITION,
    TEXT,
    Column,
    finite,
    missing,
    not_recorded,
)
from inspector.figure_data.tokens import display_token, token_text
from traces import schema
from traces.analysis import ExplainRecord, RowTrace, Verdict, pair_curves
from traces.analysis.causes import explain_pair_with_differences
from traces.analysis.curves import PairCurves, RoutingDifferences
from traces.analysis.layers import model_layer
from traces.analysis.measures import drops
from traces.analysis.verdict_record import DIFFERENCE_KINDS, DifferenceKind
from traces.toplogits import TopLogits

#: What differs at a (layer, position), most telling last; codes index this tuple.
CELL_KINDS = ("identical", "router logits only", "weights", "kept set", "experts", "not compared")
IDENTICAL, ROUTER_LOGITS, WEIGHTS, KEPT_SET, EXPERTS, NOT_COMPARED = range(len(CELL_KINDS))

#: Rows of the difference strip at the chosen layer.
STRIP_ROWS = ("experts changed", "dropped in A only", "dropped in B only")


def difference_kinds(diff: RoutingDifferences, length: int) -> np.ndarray:
    """[L, length] code of `CELL_KINDS` per (layer, position); past the compared positions
    (or where a row did not route the token) `NOT_COMPARED`."""
    L, T = diff.expert.shape
    kinds = np.full((L, length), NOT_COMPARED, dtype=np.int8)
    inner = np.full((L, T), IDENTICAL, dtype=np.int8)
    for code, mask in ((ROUTER_LOGITS, diff.router_logits), (WEIGHTS, diff.gate), (KEPT_SET, diff.kept),
                       (EXPERTS, diff.expert)):
        inner[mask] = code  # later kinds overwrite earlier ones: the most telling wins
    inner[:, ~diff.routed] = NOT_COMPARED
    kinds[:, :T] = inner
    return kinds


def drop_differences(expert_a: np.ndarray, kept_a: np.ndarray, expert_b: np.ndarray,
                     kept_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[L, T] an expert chosen in both runs was dropped in A but kept in B; and the other way round.

    Inputs are [L, T, K]; experts are matched as sets, so a change of choice order alone is not a drop.
    """
    same = (expert_a[..., :, None] == expert_b[..., None, :]) & (expert_a >= 0)[..., :, None]  # [L, T, K, K]
    a_only = (same & ~kept_a[..., :, None] & kept_b[..., None, :]).any(axis=(-2, -1))
    b_only = (same & kept_a[..., :, None] & ~kept_b[..., None, :]).any(axis=(-2, -1))
    return a_only, b_only


def _stored(values: np.ndarray) -> np.ndarray:
    """Float64 `values` that are all float32 values (a difference or a margin of float32 logits) as
    float32, the dtype they were stored in: a CSV then writes 0.1, not 0.10000000149011612."""
    values = np.asarray(values)
    if values.dtype != np.float64:
        return values
    narrow = values.astype(np.float32)
    return narrow if np.array_equal(narrow.astype(np.float64), values, equal_nan=True) else values


def _pad(values: np.ndarray, length: int, fill=np.nan) -> np.ndarray:
    """`values` [..., T] padded with `fill` to [..., length]."""
    kind = values.dtype.kind
    same = (kind == "f" and isinstance(fill, float)) or (kind == "b" and isinstance(fill, bool))
    # A float keeps its dtype (a CSV writes float32 as the float32 it is); ints padded with NaN widen.
    out = np.full((*values.shape[:-1], length), fill,
                  dtype=values.dtype if same else np.result_type(values.dtype, type(fill)))
    out[..., : values.shape[-1]] = values
    return out


@dataclass(frozen=True)
class CompletionText:
    """One run's text for the side-by-side panel: the prompt's tail, then the completion."""

    run: str
    row: int
    positions: np.ndarray   # [n] positions shown (the prompt's tail and every generated token)
    texts: list[str]        # [n] display text of each shown token
    prompt_len: int
    t_star: int             # highlighted position, -1 none

    def kind(self, i: int) -> str:
        """'prompt', 'shared', 't*' or 'after' for the i-th shown token."""
        t = int(self.positions[i])
        if t < self.prompt_len:
            return "prompt"
        if self.t_star < 0 or t < self.t_star:
            return "shared"
        return "t*" if t == self.t_star else "after"


def completion_text(row: RowTrace, vocab: Sequence[str], t_star: int,
                    prompt_tail: int = 12) -> CompletionText:
    """The last `prompt_tail` prompt tokens and the whole completion of `row`, t* marked."""
    start = max(row.prompt_len - prompt_tail, 0)
    positions = np.arange(start, row.length)
    texts = [display_token(token_text(vocab, int(row.tokens[t]))) for t in positions]
    return CompletionText(run=row.run, row=row.row, positions=positions, texts=texts,
                          prompt_len=row.prompt_len, t_star=t_star)


@dataclass(frozen=True)
class PairData:
    """Everything the side-by-side figure draws. T = the longer row's length (the x extent)."""

    request: int
    layer: int                  # the chosen MoE layer of the heatmaps and the strip
    model_layer: int
    a: RoutingData              # A's heatmap at the layer
    b: RoutingData              # B's heatmap at the layer
    prompt_len: int
    length: int                 # T
    compared: int               # positions 0..compared-1 are compared (the shared prefix)
    t_star: int                 # first differing position, -1 none
    kinds: np.ndarray           # [L, T] code of CELL_KINDS
    changed: np.ndarray         # [L, T] chosen experts differ
    dropped_a_only: np.ndarray  # [L, T] a candidate chosen by both dropped in A, kept in B
    dropped_b_only: np.ndarray  # [L, T]
    expert_a: np.ndarray        # [L, T_a, K] A's chosen experts at every layer
    kept_a: np.ndarray          # [L, T_a, K]
    expert_b: np.ndarray        # [L, T_b, K]
    kept_b: np.ndarray          # [L, T_b, K]
    router_delta: np.ndarray    # [L, T] max |router-logit difference|, NaN where not compared
    kl: np.ndarray              # [T] KL(P_A || P_B) of the next-token distributions, NaN where not compared
    logit_diff: np.ndarray      # [T] max |logit difference|
    logit_margin: np.ndarray    # [T] A's top-1 minus top-2 logit
    drops_a: np.ndarray         # [T] A's dropped candidates over all layers (NaN past A's end)
    drops_b: np.ndarray         # [T]
    logits_recorded: np.ndarray  # [T] both rows hold next-token logits at t (an engine's top-k logits
                                 # leave the prompt out)
    text_a: CompletionText      # A's text for the completion panel
    text_b: CompletionText
    verdict: Verdict
    cause: CauseText
    cause_model_layer: int | None = None  # model layer of the cause event's MoE layer (None: no layer)
    #: False when a row holds top-k logits: `kl` and `logit_diff` are then lower bounds
    #: (docs/trace-format.md, "Top-k logits"); the margin stays exact.
    exact_logits: bool = True
    #: "logit", or "log-probability" when a run holds log-probabilities only (an engine's): `logit_diff`
    #: and `logit_margin` are then log-probability differences and margins.
    values: str = "logit"
    #: The kinds of difference `kinds` compares (`RoutingDifferences.compared`): without router logits
    #: and weights when a run does not record them.
    parts: tuple[DifferenceKind, ...] = DIFFERENCE_KINDS
    #: Datasets each run does not hold (`Run.not_recorded`; empty for the project's loop).
    not_recorded_a: frozenset[str] = frozenset()
    not_recorded_b: frozenset[str] = frozenset()

    @property
    def n_layers(self) -> int:
        return int(self.kinds.shape[0])

    @property
    def run_a(self) -> str:
        return self.a.run

    @property
    def run_b(self) -> str:
        return self.b.run

    def strip(self, layer: int | None = None) -> np.ndarray:
        """[3, T] code per row of `STRIP_ROWS` at `layer` (default the chosen one): 1 where it holds,
        0 where not, -1 where not compared."""
        l = self.layer if layer is None else layer
        out = np.stack([self.changed[l], self.dropped_a_only[l], self.dropped_b_only[l]]).astype(np.int8)
        out[:, self.kinds[l] == NOT_COMPARED] = -1
        return out

    @property
    def cause_event(self) -> tuple[int, int]:
        """(position, layer) of the proven cause's lead event, else of the first difference."""
        return self.cause.event

    def first_differences(self) -> np.ndarray:
        """[L] first position where a routing decision (experts or kept set) differs per layer, -1 none."""
        decision = self.changed | (self.kinds == KEPT_SET)
        return np.where(decision.any(axis=1), np.argmax(decision, axis=1), -1)

    def token(self, which: str, t: int) -> str:
        data = self.a if which == "A" else self.b
        return data.labels[t] if 0 <= t < data.n_positions else "(past the end)"

    def describe_position(self, t: int) -> str | None:
        """Hover text of position t in the curve panels."""
        if not 0 <= t < self.length:
            return None
        if t < self.prompt_len:
            part = "prompt"
        elif self.t_star >= 0 and t == self.t_star:
            part = "first divergent token t*"
        elif self.t_star >= 0 and t > self.t_star:
            part = "after t*: not compared"
        else:
            part = "shared prefix"
        lines = [f"position {t} ({part}): A {self.token('A', t)!r} · B {self.token('B', t)!r}"]
        if t < self.compared:
            at_least = "" if self.exact_logits else ">= "  # top-k logits: lower bounds
            lines.append(f"next-token KL {at_least}{_num(self.kl[t])} nats · max |{self.values} difference| "
                         f"{at_least}{_num(self.logit_diff[t])} · "
                         f"A's top-2 margin {_num(self.logit_margin[t])}")
        lines.append(f"dropped candidates over all layers: A {_count(self.drops_a[t])} · "
                     f"B {_count(self.drops_b[t])}")
        return "\n".join(lines)

    def describe_cell(self, t: int, l: int) -> str | None:
        """Hover text of (position t, layer l) in the difference map."""
        if not (0 <= t < self.length and 0 <= l < self.n_layers):
            return None
        lines = [f"position {t}, layer {l}: {CELL_KINDS[int(self.kinds[l, t])]}"]
        for name, expert, kept in (("A", self.expert_a, self.kept_a), ("B", self.expert_b, self.kept_b)):
            if t < expert.shape[1]:
                chosen = " ".join(f"{int(e)}{'' if k else '✗'}" for e, k in zip(expert[l, t], kept[l, t],
                                                                                 strict=True))
                lines.append(f"{name} experts (✗ = dropped): {chosen}")
        if t < self.compared and self.router_delta[l, t] == self.router_delta[l, t]:
            lines.append(f"max |router-logit difference| {_num(self.router_delta[l, t])}")
        v, cause = self.verdict, self.cause
        if (t, l) in cause.cells:
            lines.append(f"the proven cause ({cause.cause})")
        if (t, l) == (v.position, v.layer):
            lines.append("the first difference" + ("" if cause.proven else " (no proof yet)"))
        if v.root is not None and (t, l) == (v.root.position, v.root.layer):
            lines.append("the first bitwise difference")
        return "\n".join(lines)

    def to_columns(self) -> dict[str, np.ndarray]:
        """One row per position: the values of `COLUMNS`."""
        T = self.length
        positions = np.arange(T)
        compared = positions < self.compared
        unrecorded = compared & ~self.logits_recorded
        strip = self.strip()  # [3, T] 1 holds, 0 not, -1 not compared
        columns = {"position": positions, "generated": positions >= self.prompt_len}
        for name, data in (("a", self.a), ("b", self.b)):
            past = positions >= data.n_positions
            ids = np.zeros(T, np.int64)
            ids[~past] = data.tokens
            labels = np.array([*data.labels, *[""] * (T - data.n_positions)], dtype=object)
            columns[f"token_id_{name}"] = missing(ids, past)
            columns[f"token_{name}"] = missing(labels, past)
        return {
            **columns,
            "compared": compared,
            "kl": finite(np.where(unrecorded, np.nan, self.kl)),
            "max_logit_difference": finite(np.where(unrecorded, np.nan, self.logit_diff)),
            "logit_margin_a": finite(np.where(unrecorded, np.nan, self.logit_margin)),
            "dropped_a": _counts(self.drops_a),
            "dropped_b": _counts(self.drops_b),
            "experts_changed": missing(strip[0] == 1, strip[0] < 0),
            "dropped_a_only": missing(strip[1] == 1, strip[1] < 0),
            "dropped_b_only": missing(strip[2] == 1, strip[2] < 0),
            "not_recorded": not_recorded({schema.LOGITS: unrecorded}),
        }


def _counts(values: np.ndarray) -> np.ma.MaskedArray:
    """Counts held as floats (NaN past a row's end) as integers, empty where NaN."""
    gone = np.isnan(values)
    return missing(np.where(gone, 0, values).astype(np.int64), gone)


def logits_recorded(row: RowTrace) -> np.ndarray:
    """[T] whether `row` holds next-token logits at each position: top-k logits leave a position out
    with MISSING ids (a serving engine's, the prompt's), full logits hold every position."""
    if row.logits is None:
        return np.zeros(row.length, dtype=bool)
    if isinstance(row.logits, TopLogits):
        return np.asarray(row.logits.index[:, 0]) >= 0
    return np.ones(row.length, dtype=bool)


#: The pair table's columns after its context: one row per position.
COLUMNS = (
    POSITION, GENERATED,
    Column("token_id_a", INTEGER, "A's token id at the position", empty="past the end of A's row"),
    Column("token_a", TEXT, "display text of A's token (as token)", empty="past the end of A's row"),
    Column("token_id_b", INTEGER, "B's token id at the position", empty="past the end of B's row"),
    Column("token_b", TEXT, "display text of B's token (as token)", empty="past the end of B's row"),
    Column("compared", BOOLEAN, "the position is compared: it lies before t*, where both runs read the "
                                "same tokens"),
    Column("kl", NUMBER, "KL(P_A || P_B) of the next-token distributions after the token (with top-k "
                         "logits a lower bound: see exact_logits)", unit="nats",
           empty="not compared, or the next-token logits were not recorded there (see not_recorded)"),
    Column("max_logit_difference", NUMBER, "max |logit difference| of the next-token logits over the "
                                           "vocabulary (with top-k logits over the ids both runs kept, a "
                                           "lower bound); when either run records log-probabilities only "
                                           "(an engine's run), both sides' log-probabilities are compared "
                                           "instead", unit="logit",
           empty="not compared, the next-token logits were not recorded there, or the top-k lists share "
                 "no id"),
    Column("logit_margin_a", NUMBER, "A's top-1 minus top-2 next-token logit", unit="logit",
           empty="not compared, or the next-token logits were not recorded there"),
    Column("dropped_a", INTEGER, "A's dropped candidates at the position over all MoE layers",
           empty="past the end of A's row"),
    Column("dropped_b", INTEGER, "B's dropped candidates at the position over all MoE layers",
           empty="past the end of B's row"),
    Column("experts_changed", BOOLEAN, "the chosen experts differ at the MoE layer shown (layer)",
           empty="not compared"),
    Column("dropped_a_only", BOOLEAN, "an expert both runs chose was dropped in A and kept in B, at the "
                                      "layer shown", empty="not compared"),
    Column("dropped_b_only", BOOLEAN, "an expert both runs chose was dropped in B and kept in A, at the "
                                      "layer shown", empty="not compared"),
    NOT_RECORDED,
)


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.3g}"


def _count(x: float) -> str:
    return "-" if x != x else str(int(x))


@dataclass(frozen=True, eq=False)
class Comparison:
    """What two rows' comparison gives whatever the layer shown: the verdict, the routing differences
    and the curves (computed once per pair; `DivergenceSource.pair` keeps them)."""

    verdict: Verdict
    differences: RoutingDifferences
    curves: PairCurves


def compare_rows(a: RowTrace, b: RowTrace) -> Comparison:
    """The verdict of row `b` against the reference row `a`, their differences and curves."""
    verdict, diff = explain_pair_with_differences(a, b)
    return Comparison(verdict, diff, pair_curves(a, b, differences=diff))


def pair_figure_data(a: RowTrace, b: RowTrace, layer: int, *, vocab: Sequence[str],
                     capacity_a: np.ndarray, capacity_b: np.ndarray, moe_layers: Sequence[int] | None = None,
                     record: ExplainRecord | None = None,
                     request_ids: dict[str, np.ndarray] | None = None,
                     comparison: Comparison | None = None) -> PairData:
    """The side-by-side data of rows `a` (the reference) and `b` of one request at MoE layer `layer`.

    `capacity_a`, `capacity_b` are the runs' [S, G] capacities at that layer; `moe_layers` the model
    layer of each MoE layer (default the MoE index itself), which names both the layer on screen and
    the cause's own layer; `record` the
    explanation-table record of the pair (its confirmed cause replaces the guess); `request_ids`
    maps run names to their rows' requests, to name who took the slots. Raises ValueError when the
    rows hold different requests or prompts, or the layer does not exist. `comparison` passes
    `compare_rows(a, b)` when already computed (another layer of the same pair).
    """
    if not 0 <= layer < a.n_layers:
        raise ValueError(f"MoE layer {layer} outside 0..{a.n_layers - 1}")
    comparison = comparison or compare_rows(a, b)
    verdict, diff, curves = comparison.verdict, comparison.differences, comparison.curves
    T = max(a.length, b.length)
    C = curves.length
    ea, ka = a.expert[:, :C], a.kept[:, :C]
    eb, kb = b.expert[:, :C], b.kept[:, :C]
    a_only, b_only = drop_differences(ea, ka, eb, kb)
    routed = diff.routed[None, :]
    shown_layer = model_layer(moe_layers, layer)
    ids = request_ids or {}
    displacing_run = verdict.displacement.run if verdict.displacement is not None else ""
    cause = cause_text(verdict, record, vocab=vocab, request_ids=ids.get(displacing_run),
                       model_layer=model_layer(moe_layers, verdict.layer) if verdict.layer >= 0 else None)
    cause_layer = cause.event[1]
    return PairData(
        request=a.request, layer=layer, model_layer=shown_layer,
        a=routing_figure_data(a, layer, vocab=vocab, capacity=capacity_a, moe_layers=moe_layers),
        b=routing_figure_data(b, layer, vocab=vocab, capacity=capacity_b, moe_layers=moe_layers),
        prompt_len=a.prompt_len, length=T, compared=C, t_star=verdict.t_star,
        kinds=difference_kinds(diff, T),
        changed=_pad(diff.expert, T, False), dropped_a_only=_pad(a_only & routed, T, False),
        dropped_b_only=_pad(b_only & routed, T, False),
        expert_a=a.expert, kept_a=a.kept, expert_b=b.expert, kept_b=b.kept,
        router_delta=_pad(_stored(curves.router_delta), T), kl=_pad(curves.kl, T),
        logit_diff=_pad(_stored(curves.max_logit_diff), T),
        logit_margin=_pad(_stored(curves.logit_margin), T),
        drops_a=_pad(drops(a.expert, a.kept).sum(axis=0).astype(np.float64), T),
        drops_b=_pad(drops(b.expert, b.kept).sum(axis=0).astype(np.float64), T),
        logits_recorded=_pad(logits_recorded(a)[:C] & logits_recorded(b)[:C], T, False),
        text_a=completion_text(a, vocab, verdict.t_star), text_b=completion_text(b, vocab, verdict.t_star),
        verdict=verdict, cause=cause,
        cause_model_layer=model_layer(moe_layers, cause_layer) if cause_layer >= 0 else None,
        exact_logits=curves.exact_logits, values=curves.values, parts=diff.compared,
        not_recorded_a=a.not_recorded, not_recorded_b=b.not_recorded,
    )
