"""The outcome of a pair's causal map: near-tie, decisive, or no decisive cell, each with its null.

Three outcomes (`Outcome`), tested in this order:

- **near-tie**: a run's margin for its own token at t* (|baseline| of its direction) is at most what
  most random changes do: among the null draws of its strongest cell (largest |effect|; the
  draws are random changes of the same size in the same position class), the share whose |effect|
  is at least |baseline| (`CellEffect.null_exceed`) is at least `TIE_SHARE`. Either run's token
  makes the pair a near-tie (B's, A's or both: the words say whose): the split then follows from a
  token that a routing change of the size found there tips as often as not, so no cell of the map
  can be called its cause. A margin of a thousandth of a logit is a near-tie whatever its cells do.
- **decisive**: not a near-tie, and the strongest cell beating its null (corrected p at most
  `ALPHA`; the cell the chain starts from) alone moves its run's logit difference past the run's
  margin, toward the other token (`flips`): a cell that beats its null by a thousandth of a logit
  against a margin of three hundredths, or that pushes away from the other token, decides nothing.
- **no decisive cell**: neither. The words name the strongest cell beating its null, else the cell
  nearest to beating it (smallest corrected p), its effect against the margin, percentile,
  corrected p and how many cells it was corrected over, and the null's flip rate.

Each share comes with its draw count and a Wilson 95% interval; where that interval holds 1/2 the
near-tie test is *borderline* and the words say so rather than pretend the threshold decides it.
`PairOutcome` is what the explanation table stores of it (version 6) and what the words read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from traces.analysis.map_cells import ALPHA, CellEffect, PairMap
from traces.vocabulary import Vocabulary

__all__ = ["ALPHA", "Outcome", "PairOutcome", "outcome_text", "pair_outcome"]

#: The near-tie threshold: the share of null draws at least as large as the margin.
TIE_SHARE = 0.5
#: Normal quantile of the two-sided 95% Wilson interval.
Z95 = 1.959963984540054


class Outcome(Vocabulary):
    """What a pair's causal map concludes (the explanation table's `outcome` column)."""

    NEAR_TIE = "near_tie"                    # a run's margin at t* is within what random changes do
    DECISIVE = "decisive"                    # not a near-tie, and a cell beats its null
    NO_DECISIVE_CELL = "no_decisive_cell"    # neither


#: Each outcome in words.
OUTCOME_WORDS = {Outcome.NEAR_TIE: "a near-tie", Outcome.DECISIVE: "decisive",
                 Outcome.NO_DECISIVE_CELL: "no decisive cell"}


def wilson(share: float, n: int) -> tuple[float, float]:
    """The Wilson 95% interval of a share observed in `n` draws ((nan, nan) without draws)."""
    if n <= 0 or math.isnan(share):
        return math.nan, math.nan
    z2 = Z95 * Z95
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class TieTest:
    """The near-tie test of one direction: `share` of `draws` null draws at its strongest cell move
    the logit difference by at least |baseline|."""

    baseline: float
    share: float
    draws: int

    @property
    def tested(self) -> bool:
        return self.draws > 0 and not math.isnan(self.share)

    @property
    def tie(self) -> bool:
        return self.tested and self.share >= TIE_SHARE

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.share, self.draws)

    @property
    def borderline(self) -> bool:
        """The share's interval holds the threshold: the draws cannot tell tie from no tie."""
        low, high = self.interval
        return self.tested and low <= TIE_SHARE <= high


NO_TEST = TieTest(math.nan, math.nan, 0)


@dataclass(frozen=True)
class PairOutcome:
    """A map's outcome as stored: its kind, both directions' near-tie tests (B's, then A's), and the
    cell the words name (the decisive cell, or the cell nearest to beating its null)."""

    kind: str                       # an `Outcome`; '' not stated (an older table)
    ties: tuple[TieTest, TieTest] = (NO_TEST, NO_TEST)
    cell: str = ""                  # 'B:layer:position' ('' none)
    effect: float = math.nan
    percentile: float = math.nan
    p_value: float = math.nan
    cells: int = 0                  # cells of the named cell's run tested: its correction's count
    null_flip: float = math.nan     # share of the named cell's null draws that flip the token
    null_draws: int = 0

    def tied(self) -> tuple[str, ...]:
        """Whose token is a near-tie: ('B',), ('A',), ('B', 'A') or () (none)."""
        return tuple(s for s, t in zip(("B", "A"), self.ties, strict=True) if t.tie)


def _strongest(m: PairMap, patched: str) -> CellEffect | None:
    """The run's cell of largest |effect| among those with a near-tie share."""
    cells = [c for c in m.cells if c.patched == patched and c.null_draws > 0 and not math.isnan(c.null_exceed)
             and not math.isnan(c.effect)]
    return max(cells, key=lambda c: abs(c.effect)) if cells else None


def _tie_test(m: PairMap, patched: str, top: CellEffect | None) -> TieTest:
    base = m.baseline.get(patched, math.nan)
    return TieTest(base, top.null_exceed, top.null_draws) if top else TieTest(base, math.nan, 0)


def nearest(m: PairMap) -> CellEffect | None:
    """The cell nearest to beating its null: smallest corrected p, then highest percentile, then the
    largest |effect| (B's before A's on a full tie); None without a null."""
    cells = [c for c in m.cells if not math.isnan(c.p_value)]
    if not cells:
        return None
    return min(cells, key=lambda c: (c.p_value, -c.percentile, -abs(c.effect), c.patched != "B"))


def flips(c: CellEffect, m: PairMap) -> bool:
    """Whether the cell alone moves its run's logit difference at t* past the run's margin, toward the
    other run's token."""
    return c.effect > abs(m.baseline.get(c.patched, math.nan))


def pair_outcome(m: PairMap) -> PairOutcome | None:
    """The map's outcome (None: no cell, or no cell with a null or a near-tie share: nothing was
    tested). A near-tie names the strongest cell of the tied run (of the run with the larger share
    where both are)."""
    named = nearest(m)
    if named is None:
        return None
    tops = (_strongest(m, "B"), _strongest(m, "A"))
    ties = (_tie_test(m, "B", tops[0]), _tie_test(m, "A", tops[1]))
    if not any(t.tested for t in ties):   # cells read from a table that predates the near-tie share
        return None
    beating = m.decisive()
    if any(t.tie for t in ties):
        kind = Outcome.NEAR_TIE
        named = tops[0] if ties[0].tie and (not ties[1].tie or ties[0].share >= ties[1].share) else tops[1]
    elif beating and flips(beating[0], m):
        kind, named = Outcome.DECISIVE, beating[0]
    else:
        kind = Outcome.NO_DECISIVE_CELL
        named = beating[0] if beating else named
    assert named is not None
    tested = sum(1 for c in m.cells if c.patched == named.patched and not math.isnan(c.p_value))
    return PairOutcome(str(kind), ties, f"{named.patched}:{named.layer}:{named.position}", named.effect,
                       named.percentile, named.p_value, tested, named.null_flip, named.null_draws)


def _share(share: float) -> str:
    return f"{share:.1%}" if 0.0005 <= share < 0.01 or 0.99 < share <= 0.9995 else f"{share:.0%}"


def _interval(t: TieTest) -> str:
    low, high = t.interval
    border = "; borderline: the interval holds one half" if t.borderline else ""
    return f"95% interval {_share(low)} to {_share(high)}{border}"


def _reached(t: TieTest, run: str) -> str:
    """"B's margin of 1.8 logits in 12% of 200 draws (95% interval 8% to 17%)"."""
    return (f"{run}'s margin of {abs(t.baseline):.3g} logits in {_share(t.share)} of {t.draws} draws "
            f"({_interval(t)})")


def _flip(o: PairOutcome, run: str) -> str:
    if math.isnan(o.null_flip) or o.null_draws <= 0:
        return ""
    low, high = wilson(o.null_flip, o.null_draws)
    return (f"the null flips {run}'s token in {_share(o.null_flip)} of its draws (95% interval "
            f"{_share(low)} to {_share(high)})")


def _though(beats: tuple[str, float] | None, names: dict[str, str]) -> str:
    """', though B's layer 1, position 21 beats its null (corrected p 0.005)' ('' without one)."""
    if not beats:
        return ""
    run, layer, position = beats[0].split(":")
    p = "" if math.isnan(beats[1]) else f" (corrected p {beats[1]:.2g})"
    return f", though {names.get(run, run)}'s layer {layer}, position {position} beats its null{p}"


def not_a_tie_text(o: PairOutcome, a: str, b: str) -> str:
    """Why the pair is not a near-tie, with each run's share ('' without a test)."""
    parts = [_reached(t, name) for t, name in zip(o.ties, (b, a), strict=True) if t.tested]
    if not parts:
        return ""
    return (f"Not a near-tie: random routing changes of the size of each run's strongest cell, at its "
            f"position, reach {' and '.join(parts)}.")


def outcome_text(o: PairOutcome, a: str, b: str, beats: tuple[str, float] | None = None,
                 brief: bool = False) -> str:
    """The outcome in words, naming run A `a` and run B `b` (a decisive outcome's cell is said by the
    chain's words; this says why it is not a near-tie). `beats`: the strongest cell beating its null
    ('B:layer:position', corrected p or nan), which a near-tie names too. `brief` (a headline): a
    near-tie's flip rate without its interval."""
    names = {"B": b, "A": a}
    if o.kind == Outcome.DECISIVE:
        return not_a_tie_text(o, a, b)
    run, layer, position = o.cell.split(":") if o.cell else ("B", "?", "?")
    patched, other = names.get(run, run), names["A" if run == "B" else "B"]
    where = f"layer {layer}, position {position}"
    flip = _flip(o, patched)
    if o.kind == Outcome.NEAR_TIE:
        whose = o.tied()
        tokens = " and ".join(f"{names[s]}'s" for s in whose) + (" tokens" if len(whose) > 1 else " token")
        tests = [_reached(o.ties[("B", "A").index(s)], names[s]) for s in whose]
        untied = [(t, names[s]) for s, t in zip(("B", "A"), o.ties, strict=True)
                  if t.tested and s not in whose]
        rest = "".join(f" {name[0].upper()}{name[1:]}'s own margin of {abs(t.baseline):.3g} logits is "
                       f"reached in only {_share(t.share)} of {t.draws} draws"
                       + ("." if brief else f" ({_interval(t)}).") for t, name in untied)
        flips = ""
        if not math.isnan(o.null_flip) and o.null_draws > 0:
            low, high = wilson(o.null_flip, o.null_draws)
            flips = f"; they flip {patched}'s token in {_share(o.null_flip)}" + (
                "" if brief else f" (95% interval {_share(low)} to {_share(high)})")
        though = _though(beats, names)
        return (f"A near-tie of {tokens}: random routing changes of the strongest cell's size at its "
                f"position ({patched}'s {where}) reach {' and '.join(tests)}{flips}.{rest}"
                + (f" No cell is called the split's cause{though}." if though else ""))
    if o.kind == Outcome.NO_DECISIVE_CELL:
        margin = abs(o.ties[("B", "A").index(run)].baseline) if run in ("B", "A") else math.nan
        beaten = not math.isnan(o.p_value) and o.p_value <= ALPHA
        lead = ("no cell that beats its null moves its run's token past its margin alone. The strongest "
                "that beats it" if beaten else "no single cell beats its null. The nearest")
        return (f"No decisive cell: {lead}, {where} ({other}'s decision in {patched}), moves {patched}'s "
                f"logit difference at t* by {o.effect:+.3g} of the {margin:.3g} logits that would flip its "
                f"token, "
                f"above {o.percentile:.1f}% of its null's {o.null_draws} draws (corrected p {o.p_value:.2g} "
                f"over {patched}'s {o.cells} cells){'; ' + flip if flip else ''}. "
                f"{not_a_tie_text(o, a, b)}").strip()
    return ""
