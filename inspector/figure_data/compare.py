"""Data of the compare view: two runs of one request over the same axes, the way two images are
compared. The router probabilities of run A and run B at one MoE layer ([E, T] each), their
difference A − B, the split position where the split panel changes from A to B, and what each run
chose there. No Qt here.

A cell holds no value (NaN) past the end of a run's row, and where the run did not record its
router's logits (a serving engine's run records only its choices): such a cell is drawn as absent,
never as a probability of 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from inspector.figure_data.pair import PairData
from inspector.figure_data.routing import RoutingData
from inspector.figure_data.table import (
    BOOLEAN,
    INTEGER,
    NOT_RECORDED,
    NUMBER,
    POSITION,
    TEXT,
    Column,
    missing,
    not_recorded,
)
from traces import schema


def _probabilities(run: RoutingData, T: int) -> np.ndarray:
    """[E, T] router probabilities of `run`, NaN past its row's end or where none were recorded."""
    E = run.n_experts
    out = np.full((E, T), np.nan, dtype=np.float32)
    if run.probabilities:
        out[:, :run.n_positions] = run.probs
    return out


def _choices(run: RoutingData, T: int) -> tuple[np.ndarray, np.ndarray]:
    """[E, T] whether `run` chose each expert at each position, and whether it kept it."""
    chosen = np.zeros((run.n_experts, T), dtype=bool)
    kept = np.zeros((run.n_experts, T), dtype=bool)
    t, k = np.nonzero(run.expert >= 0)
    e = run.expert[t, k]
    chosen[e, t] = True
    kept[e, t] = run.kept[t, k]
    return chosen, kept


@dataclass(frozen=True, eq=False)
class CompareData:
    """Runs A and B of one request at one MoE layer, on one grid of E experts x T positions (T the
    longer row's length)."""

    pair: PairData         # the side-by-side data the comparison is read from (texts, t*, cause)
    prob_a: np.ndarray     # [E, T] A's router probability, NaN where absent
    prob_b: np.ndarray     # [E, T]
    chosen_a: np.ndarray   # [E, T] A chose the expert at the position
    kept_a: np.ndarray     # [E, T] ... and kept it
    chosen_b: np.ndarray
    kept_b: np.ndarray
    split: int             # the split panel shows A left of this position, B from it on

    @property
    def request(self) -> int:
        return self.pair.request

    @property
    def layer(self) -> int:
        return self.pair.layer

    @property
    def model_layer(self) -> int:
        return self.pair.model_layer

    @property
    def run_a(self) -> str:
        return self.pair.run_a

    @property
    def run_b(self) -> str:
        return self.pair.run_b

    @property
    def length(self) -> int:
        return int(self.prob_a.shape[1])

    @property
    def n_experts(self) -> int:
        return int(self.prob_a.shape[0])

    @property
    def t_star(self) -> int:
        return self.pair.t_star

    @property
    def prompt_len(self) -> int:
        return self.pair.prompt_len

    @property
    def difference(self) -> np.ndarray:
        """[E, T] A − B, NaN where either is absent."""
        return self.prob_a - self.prob_b

    @property
    def recorded(self) -> bool:
        """Both runs recorded their router probabilities (else the difference is absent)."""
        return self.pair.a.probabilities and self.pair.b.probabilities

    def largest(self) -> float:
        """The largest |A − B| (0 when nothing differs or nothing was recorded)."""
        d = np.abs(self.difference)
        return float(np.nanmax(d)) if np.isfinite(d).any() else 0.0

    def split_view(self) -> np.ndarray:
        """[E, T] the split panel: A's probabilities left of `split`, B's from it on."""
        out = self.prob_b.copy()
        out[:, :self.split] = self.prob_a[:, :self.split]
        return out

    def split_choices(self) -> tuple[np.ndarray, np.ndarray]:
        """[E, T] chosen and kept as the split panel shows them (A's left of `split`)."""
        chosen, kept = self.chosen_b.copy(), self.kept_b.copy()
        s = self.split
        chosen[:, :s], kept[:, :s] = self.chosen_a[:, :s], self.kept_a[:, :s]
        return chosen, kept

    def with_split(self, split: int) -> CompareData:
        return replace(self, split=min(max(int(split), 0), self.length))

    def token(self, which: str, t: int) -> str:
        return self.pair.token(which, t)

    def readout(self, t: int, e: int) -> str | None:
        """Both runs at (layer, position t, expert e), for the crosshair's readout."""
        if not (0 <= t < self.length and 0 <= e < self.n_experts):
            return None
        values = []
        for name, prob, chosen, kept in (("A", self.prob_a, self.chosen_a, self.kept_a),
                                         ("B", self.prob_b, self.chosen_b, self.kept_b)):
            choice = (" kept" if kept[e, t] else " dropped") if chosen[e, t] else ""
            values.append(f"{name} {_value(prob[e, t])}{choice}")
        d = self.difference[e, t]
        where = (f"layer {self.layer}, position {t}, expert {e}: A {self.token('A', t)!r} · "
                 f"B {self.token('B', t)!r}")
        return f"{where}\n{' · '.join(values)} · A − B {_signed(d)}"

    def to_columns(self) -> dict[str, np.ndarray]:
        """One row per (position, expert): the values of `COLUMNS`."""
        E, T = self.prob_a.shape
        positions = np.repeat(np.arange(T), E)
        columns: dict[str, np.ndarray] = {"position": positions,
                                          "generated": positions >= self.prompt_len,
                                          "expert": np.tile(np.arange(E), T)}
        for name, run in (("a", self.pair.a), ("b", self.pair.b)):
            past = np.repeat(np.arange(T) >= run.n_positions, E)
            labels = np.array([*run.labels, *[""] * (T - run.n_positions)], dtype=object)
            columns[f"token_{name}"] = missing(np.repeat(labels, E), past)
        absent = {}
        for name, prob, chosen, kept, run in (("a", self.prob_a, self.chosen_a, self.kept_a, self.pair.a),
                                              ("b", self.prob_b, self.chosen_b, self.kept_b, self.pair.b)):
            past = np.repeat(np.arange(T) >= run.n_positions, E)
            values = prob.T.reshape(-1)
            columns[f"probability_{name}"] = missing(values, ~np.isfinite(values))
            columns[f"chosen_{name}"] = missing(chosen.T.reshape(-1), past)
            columns[f"kept_{name}"] = missing(kept.T.reshape(-1), past)
            absent[name] = ~past & (not run.probabilities)
        d = self.difference.T.reshape(-1)
        columns["difference"] = missing(d, ~np.isfinite(d))
        columns["split_shows"] = np.where(positions < self.split, "A", "B").astype(object)
        columns["not_recorded"] = not_recorded({f"A:{schema.ROUTER_LOGITS}": absent["a"],
                                                f"B:{schema.ROUTER_LOGITS}": absent["b"]})
        return columns


def _value(x: float) -> str:
    return "absent" if x != x else f"{x:.3f}"


def _signed(x: float) -> str:
    return "absent" if x != x else f"{x:+.3f}".replace("-", "−")


def compare_data(pair: PairData, split: int | None = None) -> CompareData:
    """The compare view's data of `pair` (A the reference), split at `split` (default: t*, else the
    end of the prompt)."""
    T = pair.length
    chosen_a, kept_a = _choices(pair.a, T)
    chosen_b, kept_b = _choices(pair.b, T)
    if split is None:
        split = pair.t_star if pair.t_star >= 0 else pair.prompt_len
    return CompareData(pair, _probabilities(pair.a, T), _probabilities(pair.b, T), chosen_a, kept_a,
                       chosen_b, kept_b, min(max(int(split), 0), T))


def _per_run(name: str, what: str, empty: str) -> Column:
    return Column(name, BOOLEAN, what, empty=empty)


#: The compare table's columns after its context: one row per (position, expert).
COLUMNS = (
    POSITION,
    Column("generated", BOOLEAN, "the position lies after the prompt"),
    Column("expert", INTEGER, "expert id"),
    Column("token_a", TEXT, "display text of A's token at the position", empty="past the end of A's row"),
    Column("token_b", TEXT, "display text of B's token at the position", empty="past the end of B's row"),
    Column("probability_a", NUMBER, "A's router probability of the expert (softmax of the router logits)",
           empty="past the end of A's row, or A did not record its router logits (see not_recorded)"),
    _per_run("chosen_a", "A chose the expert at the position", "past the end of A's row"),
    _per_run("kept_a", "A chose the expert and kept it (false: not chosen, or dropped)",
             "past the end of A's row"),
    Column("probability_b", NUMBER, "B's router probability of the expert",
           empty="past the end of B's row, or B did not record its router logits (see not_recorded)"),
    _per_run("chosen_b", "B chose the expert at the position", "past the end of B's row"),
    _per_run("kept_b", "B chose the expert and kept it (false: not chosen, or dropped)",
             "past the end of B's row"),
    Column("difference", NUMBER, "A − B: probability_a minus probability_b (the difference map's colour)",
           empty="probability_a or probability_b is empty"),
    Column("split_shows", TEXT, "the run the split panel shows at the position: A left of the split, B "
                                "from it on"),
    Column(NOT_RECORDED.name, TEXT, "the run and trace data behind the row's empty probabilities that "
                                    "the run does not hold, space separated: A:routing/router_logits, "
                                    "B:routing/router_logits (a serving engine records only its "
                                    "choices)", empty="both runs recorded their router logits"),
)
