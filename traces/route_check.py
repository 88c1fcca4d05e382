"""The spot check of a serving engine's recorded routes against the router (docs/engines.md).

An engine returns the experts it says each token was routed to; nothing in the ids themselves shows
they are the router's. vLLM 0.30 in compiled mode on CPU, for one, returns experts [0, 0] for every
token of every layer. So the recorder checks every run before it writes it:

- **structure**, every token of every row and layer: its K experts are distinct and in 0..E-1;
- **agreement**, a seeded sample of rows (the probe's row and one other, `sample_rows`): their
  recorded tokens go through the Hugging Face model in the trace's dtype, and at every (layer,
  position) the router's top-K set is compared with the recorded set (`compare`). A disagreement is
  a *near tie* when the router's margin z_(K) - z_(K+1) is within `NEAR_TIE_EPS` machine epsilons
  of the dtype, at the scale of the token's largest router logit: two correct computations in that
  dtype may order such a pair either way.

A run is refused (`RouteCheck.refusal`) when a token repeats an expert or names one out of range, or
when fewer than `REFUSE_BELOW` of the checked pairs agree: such routes cannot be the router's. It is
flagged (`RouteCheck.warnings`, `info --check`) when agreement is below `MIN_AGREEMENT` or a
disagreement is not a near tie. The result is stored in the run attribute `route_check`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from traces.analysis.measures import router_margin

#: Below this share of agreeing (layer, token) pairs a run's routes cannot be the router's: refused.
REFUSE_BELOW = 0.9
#: Below this share of agreeing pairs `info --check` warns.
MIN_AGREEMENT = 0.99
#: A router margin within this many machine epsilons of the logits' scale is a near tie.
NEAR_TIE_EPS = 8
#: Machine epsilon of each dtype a trace may be computed in.
EPSILON = {"float32": 2.0 ** -23, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


@dataclass(frozen=True)
class RouteCheck:
    """What the spot check of one run found (stored as the run attribute `route_check`)."""

    rows: tuple[int, ...]       # rows run through the reference
    checked: int                # (layer, token) pairs of those rows compared with the router
    agreeing: int               # of those, the recorded expert set equals the router's top-K set
    near_ties: int              # disagreeing pairs at a router near tie (NEAR_TIE_EPS)
    tokens: int                 # (layer, token) pairs of every row checked for structure
    repeated: int               # of those, naming one expert twice among their K
    out_of_range: int           # of those, naming an expert outside 0..E-1
    example: tuple[int, ...]    # the first malformed set of experts, () when none
    dtype: str                  # the reference's dtype
    seed: int                   # seed of the row sample
    logprob_difference: float = math.nan  # max |engine - reference| log-probability, sampled rows

    @property
    def agreement(self) -> float:
        """Share of the checked pairs whose recorded experts are the router's (NaN when none)."""
        return self.agreeing / self.checked if self.checked else math.nan

    @property
    def unexplained(self) -> int:
        """Disagreeing pairs that are not near ties."""
        return self.checked - self.agreeing - self.near_ties

    def refusal(self) -> str:
        """Why these routes cannot be the router's ('' when they can)."""
        if self.repeated or self.out_of_range:
            what = "; ".join(part for part in (
                f"{self.repeated} of {self.tokens} (layer, token) routes name one expert twice"
                if self.repeated else "",
                f"{self.out_of_range} of {self.tokens} name an expert out of range" if self.out_of_range
                else "") if part)
            return f"{what} (e.g. {list(self.example)})"
        if self.checked and self.agreement < REFUSE_BELOW:
            return (f"only {self.agreement:.1%} of {self.checked} checked (layer, token) routes are the "
                    f"router's top-K in the Hugging Face model ({self.dtype})")
        return ""

    def warnings(self) -> list[str]:
        """What `info --check` flags in routes that were not refused."""
        out = []
        if self.checked and self.agreement < MIN_AGREEMENT:
            out.append(f"routes agree with the router at {self.agreement:.1%} of {self.checked} checked "
                       f"(layer, token) pairs, below {MIN_AGREEMENT:.0%}")
        if self.unexplained > 0:
            out.append(f"{self.unexplained} checked routes differ from the router's top-K away from a near "
                       f"tie")
        return out

    def describe(self) -> str:
        """One line: agreement, near ties and the log-probability difference."""
        rows = " and ".join(str(r) for r in self.rows) or "none"
        text = (f"routes checked on rows {rows}: {self.agreeing} of {self.checked} (layer, token) pairs "
                f"agree with the router ({self.dtype})")
        if self.near_ties:
            text += f", {self.near_ties} disagree{'s' if self.near_ties == 1 else ''} at a near tie"
        if self.logprob_difference == self.logprob_difference:
            text += f"; log-probabilities differ by up to {self.logprob_difference:.3g}"
        return text

    def to_attr(self) -> dict:
        out = asdict(self)
        out["rows"], out["example"] = list(self.rows), list(self.example)
        out["logprob_difference"] = None if math.isnan(self.logprob_difference) else self.logprob_difference
        return out

    @classmethod
    def from_attr(cls, value) -> RouteCheck:
        """The check stored in a run attribute; ValueError naming what is wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, found {type(value).__name__}")
        try:
            counts = {k: _count(value[k], k) for k in ("checked", "agreeing", "near_ties", "tokens",
                                                          "repeated", "out_of_range", "seed")}
            check = cls(rows=tuple(_count(r, "rows") for r in value["rows"]),
                        example=tuple(int(e) for e in value["example"]), dtype=str(value["dtype"]),
                        logprob_difference=_float(value.get("logprob_difference")), **counts)
        except KeyError as exc:
            raise ValueError(f"missing field {exc.args[0]!r}") from None
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        if check.agreeing + check.near_ties > check.checked or max(check.repeated, check.out_of_range) > \
                check.tokens:
            raise ValueError("counts that do not add up (agreeing + near_ties > checked, or more malformed "
                             "routes than routes)")
        return check


def summarize(checks: list[RouteCheck], engine_runs: int) -> str:
    """One line over a trace's checked runs: how many were checked and how many pairs agree."""
    if not checks:
        return f"routes: none of {engine_runs} engine runs checked against the router"
    checked, agreeing = sum(c.checked for c in checks), sum(c.agreeing for c in checks)
    near = sum(c.near_ties for c in checks)
    worst = max((c.logprob_difference for c in checks if c.logprob_difference == c.logprob_difference),
                default=math.nan)
    text = (f"routes: {len(checks)} of {engine_runs} engine runs checked, {agreeing:,} of {checked:,} "
            f"(layer, token) pairs agree with the router ({agreeing / max(checked, 1):.2%}, "
            f"{checks[0].dtype}), {near} disagree at a near tie, {checked - agreeing - near} elsewhere")
    if worst == worst:
        text += f"; log-probabilities differ by up to {worst:.3g}"
    return text


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"field {name!r}: expected a count, found {value!r:.40}")
    return value


def _float(value) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"field 'logprob_difference': expected a number, found {value!r:.40}")
    return float(value)


def structure(expert: np.ndarray, n_experts: int) -> tuple[int, int, int, tuple[int, ...]]:
    """(routes, repeated, out of range, first malformed set) over `expert [L, B, T, K]`, counting the
    (layer, row, position) triples that hold a route (any id >= 0; -1 fills past a row's end)."""
    e = np.asarray(expert, np.int64)
    routed = np.asarray((e >= 0).any(axis=-1))  # [L, B, T]
    ordered = np.sort(e, axis=-1)
    repeated = ((ordered[..., 1:] == ordered[..., :-1]) & (ordered[..., 1:] >= 0)).any(axis=-1) & routed
    out = ((e >= n_experts) | ((e < 0) & routed[..., None])).any(axis=-1) & routed
    bad = repeated | out
    example = tuple(int(x) for x in e[tuple(np.argwhere(bad)[0])]) if bad.any() else ()
    return int(routed.sum()), int(repeated.sum()), int(out.sum()), example


def sample_rows(B: int, probe_row: int, seed: int) -> tuple[int, ...]:
    """The rows a run's check runs through the reference: the probe's (when the run has one) and one
    other drawn with `seed` (the first row when there is no probe and only one row)."""
    rng = np.random.default_rng(seed)
    first = probe_row if 0 <= probe_row < B else int(rng.integers(B))
    others = [b for b in range(B) if b != first]
    return (first, int(rng.choice(others))) if others else (first,)


def compare(recorded: np.ndarray, router_logits: np.ndarray, dtype: str) -> tuple[int, int, int]:
    """(checked, agreeing, near ties) of one row: recorded experts `[L, T, K]` against the top-K sets
    of the reference's router logits `[L, T, E]` (computed in `dtype`)."""
    rec = np.asarray(recorded, np.int64)
    z = np.asarray(router_logits, np.float64)
    K = rec.shape[-1]
    top = np.sort(np.argsort(-z, axis=-1, kind="stable")[..., :K], axis=-1)
    agree = (np.sort(rec, axis=-1) == top).all(axis=-1)  # [L, T]
    margin = router_margin(z, K)  # [L, T]
    scale = np.abs(z).max(axis=-1)
    near = ~agree & (margin <= NEAR_TIE_EPS * EPSILON.get(dtype, EPSILON["float32"]) * scale)
    return int(agree.size), int(agree.sum()), int(near.sum())


def check_problems(value, engine_run: bool) -> list[tuple[str, str]]:
    """(severity, message) of a run's `route_check` attribute (None when absent) for the validator:
    an error when the routes fail the check, a warning when an engine's run was not checked or
    the check flags it."""
    if value is None:
        if not engine_run:
            return []
        return [("warning", "routes not checked against the router (attribute 'route_check' absent: recorded "
                            "before the check existed, or with --no-route-check)")]
    try:
        check = RouteCheck.from_attr(value)
    except ValueError as exc:
        return [("error", f"expected attribute 'route_check' to be a route check: {exc}")]
    refusal = check.refusal()
    if refusal:
        return [("error", f"routes fail the spot check: {refusal}")]
    return [("warning", w) for w in check.warnings()]
