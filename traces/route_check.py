"""The check of a serving engine's recorded routes against the router (docs/engines.md).

An engine returns the experts it says each token was routed to; nothing in the ids themselves shows
they are the router's. vLLM 0.30 in compiled mode on CPU, for one, returns experts [0, 0] for every
token of every layer. So the recorder checks every run before it writes it:

- **structure**, every token of every row and layer, always: its K experts are distinct and in
  0..E-1 (`structure`); `info --check` checks the same on the stored arrays, whatever the recording's
  flags;
- **router replay**, every row by default (a random share of rows with `--route-check-sample`): the
  recorded tokens go through the Hugging Face model in the trace's dtype, and at every (layer,
  position) the router's top-K set is compared with the recorded set (`compare`). A disagreement is
  a *near tie* when the router's gap z_(K) - z_(K+1) is at most `WINDOW_ULPS` units in the last
  place of the dtype at the magnitude of the token's router logits (its largest |z|, `gap_ulps`):
  two correct computations in that dtype may order such a pair either way. The others are
  *unexplained*;
- **log-probabilities** of the replayed rows against the reference's in the stated dtype.

The rule is a test: under the null hypothesis that the routes are the router's, an unexplained
disagreement is a rounding flip beyond the window, at a rate of at most `NULL_RATE` (measured on clean
recordings, docs/engines.md); a run is refused
when its unexplained count has a binomial p-value below `LEVEL` under that rate (`p_value`), when a
route is malformed, or when its log-probabilities differ from the reference's by more than the
dtype's `LOGPROB_TOLERANCE`. The result is the run attribute `route_check`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from traces.route_stats import tail, upper_bound

#: A disagreement whose router gap is within this many units in the last place (at the magnitude of
#: the token's largest router logit) is a near tie: it holds 95% of the disagreements of a clean
#: bfloat16 recording and 4.0% of all its pairs (docs/engines.md).
WINDOW_ULPS = 2
#: Explicit mantissa bits of each dtype a trace may be computed in.
MANTISSA_BITS = {"float32": 23, "bfloat16": 7, "float16": 10}
#: Smallest normal number of each dtype (the unit in the last place below it is constant).
SMALLEST_NORMAL = {"float32": 2.0 ** -126, "bfloat16": 2.0 ** -126, "float16": 2.0 ** -14}
#: The null hypothesis: routes that are the router's disagree away from a near tie at most this often
#: (above the 95% upper bound of the rate measured on clean recordings, docs/engines.md).
NULL_RATE = 2e-3
#: A run (or a trace, in `info --check`) whose unexplained disagreements have a p-value below this
#: under `NULL_RATE` is refused.
LEVEL = 1e-3
#: Confidence of the stored upper bound of the unexplained disagreement rate.
CONFIDENCE = 0.95
#: Largest |engine - reference| log-probability of the replayed rows' top-k accepted per dtype:
#: float32 150 times the 6.6e-6 measured between vLLM and transformers in float32; bfloat16 twice the
#: 1.87 measured in bfloat16 (a 16-bit engine is told apart from a float32 one, not from another
#: 16-bit one); float16 between the two, not measured.
LOGPROB_TOLERANCE = {"float32": 1e-3, "float16": 1.0, "bfloat16": 4.0}


@dataclass(frozen=True)
class RouteCheck:
    """What the check of one run found (stored as the run attribute `route_check`)."""

    tokens: int                 # (layer, token) routes of every row checked for structure
    repeated: int               # of those, naming one expert twice among their K
    out_of_range: int           # of those, naming an expert outside 0..E-1 (or none)
    example: tuple[int, ...]    # the first malformed set of experts, () when none
    dtype: str                  # the reference's dtype
    replayed: bool = True       # the rows went through the router (False: --no-route-check)
    rows: tuple[int, ...] = ()  # rows run through the reference
    share: float = 1.0          # share of rows asked for (1: every row)
    draw: int | None = None     # the entropy that drew the rows of a sampled check
    checked: int = 0            # (layer, token) pairs of those rows compared with the router
    agreeing: int = 0           # of those, the recorded expert set equals the router's top-K set
    near_ties: int = 0          # disagreeing pairs at a router near tie
    window_ulps: float | None = WINDOW_ULPS  # near-tie width (None: an older check's rule)
    first: tuple[int, ...] = ()  # (row, layer, position) of the first unexplained disagreement
    logprob_difference: float = math.nan  # max |engine - reference| log-probability, replayed rows
    seconds: float = math.nan   # time of the replay
    seed: int | None = field(default=None, repr=False)  # an older check's row seed

    @property
    def agreement(self) -> float:
        """Share of the checked pairs whose recorded experts are the router's (NaN when none)."""
        return self.agreeing / self.checked if self.checked else math.nan

    @property
    def unexplained(self) -> int:
        """Disagreeing pairs that are not near ties."""
        return self.checked - self.agreeing - self.near_ties

    @property
    def p_value(self) -> float:
        """P(this many unexplained disagreements or more | at most NULL_RATE of the checked pairs)."""
        return tail(self.unexplained, self.checked, NULL_RATE)

    @property
    def rate_bound(self) -> float:
        """The CONFIDENCE upper bound of the unexplained disagreement rate the checked pairs allow."""
        return upper_bound(self.unexplained, self.checked, CONFIDENCE) if self.checked else 1.0

    def refusal(self) -> str:
        """Why these routes cannot be the router's ('' when they can): one clause."""
        if self.repeated or self.out_of_range:
            return malformed(self.repeated, self.out_of_range, self.tokens, self.example)
        tolerance = LOGPROB_TOLERANCE.get(self.dtype)
        if tolerance is not None and self.logprob_difference > tolerance:
            return (f"its log-probabilities differ from transformers' in {self.dtype} by up to "
                    f"{self.logprob_difference:.3g}, more than that dtype's tolerance {tolerance:g}: the "
                    f"engine does not compute in {self.dtype}")
        if self.checked and self.p_value < LEVEL:
            where = f" (first at row {self.first[0]}, layer {self.first[1]}, position {self.first[2]})" \
                if len(self.first) == 3 else ""
            return (f"{self.unexplained} of {self.checked} checked (layer, token) routes differ from the "
                    f"router's top-K in the Hugging Face model ({self.dtype}) away from a near tie{where}, "
                    f"p = {self.p_value:.2g} under a rate of at most {NULL_RATE:g}")
        return ""

    def warnings(self) -> list[str]:
        """What `info --check` flags in routes that were not refused."""
        if not self.replayed:
            return [NOT_REPLAYED]
        if self.unexplained > 0:
            return [f"{self.unexplained} of {self.checked} checked routes differ from the router's top-K "
                    f"away from a near tie (within the rule: p = {self.p_value:.2g})"]
        return []

    def describe(self) -> str:
        """One line: how much was checked, agreement, near ties, the bound and the log-probabilities."""
        if not self.replayed:
            return f"ROUTES NOT REPLAYED through the router (--no-route-check); structure of {self.tokens} " \
                   f"routes checked"
        rows = f"{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}"
        if self.share < 1:
            rows += f" drawn at random ({self.share:g} of the rows, draw {self.draw})"
        text = (f"routes replayed on {rows}: {self.agreeing} of {self.checked} (layer, token) pairs agree "
                f"with the router ({self.dtype}), {self.near_ties} disagree at a near tie, "
                f"{self.unexplained} elsewhere (rate <= {self.rate_bound:.2g} at {CONFIDENCE:.0%})")
        if self.logprob_difference == self.logprob_difference:
            text += f"; log-probabilities differ by up to {self.logprob_difference:.3g}"
        return text

    def to_attr(self) -> dict:
        out = asdict(self)
        for key in ("rows", "example", "first"):
            out[key] = list(out[key])
        for key in ("logprob_difference", "seconds"):
            out[key] = None if math.isnan(out[key]) else out[key]
        if out["seed"] is None:
            del out["seed"]
        out["rate_bound"] = self.rate_bound  # stored for readers; recomputed from the counts when read
        return out

    @classmethod
    def from_attr(cls, value) -> RouteCheck:
        """The check stored in a run attribute (also an older spot check's); ValueError naming what is
        wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, found {type(value).__name__}")
        try:
            counts = {k: _count(value.get(k, 0), k) for k in ("checked", "agreeing", "near_ties", "tokens",
                                                                 "repeated", "out_of_range")}
            check = cls(rows=tuple(_count(r, "rows") for r in value.get("rows", ())),
                        example=tuple(int(e) for e in value["example"]), dtype=str(value["dtype"]),
                        replayed=bool(value.get("replayed", True)), share=_float(value.get("share", 1.0),
                                                                                "share"),
                        draw=None if value.get("draw") is None else _count(value["draw"], "draw"),
                        window_ulps=_optional(value.get("window_ulps"), "window_ulps"),
                        first=tuple(_count(i, "first") for i in value.get("first", ())),
                        logprob_difference=_float(value.get("logprob_difference"), "logprob_difference"),
                        seconds=_float(value.get("seconds"), "seconds"),
                        seed=None if value.get("seed") is None else _count(value["seed"], "seed"), **counts)
        except KeyError as exc:
            raise ValueError(f"missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        if check.agreeing + check.near_ties > check.checked or max(check.repeated, check.out_of_range) > \
                check.tokens:
            raise ValueError("counts that do not add up (agreeing + near_ties > checked, or more malformed "
                             "routes than routes)")
        return check


#: What an engine's run without a router replay says (info, info --check, the app's details).
NOT_REPLAYED = ("routes NOT replayed through the router (recorded with --no-route-check): only their "
                "structure was checked")


def malformed(repeated: int, out_of_range: int, tokens: int, example: tuple[int, ...]) -> str:
    """One clause on malformed routes: how many name an expert twice or one out of range, an example."""
    what = "; ".join(part for part in (
        f"{repeated} of {tokens} (layer, token) routes name one expert twice" if repeated else "",
        f"{out_of_range} of {tokens} name an expert out of range" if out_of_range else "") if part)
    return f"{what} (e.g. {list(example)})"


def aggregate(checks: list[RouteCheck]) -> tuple[int, int, float]:
    """(unexplained, checked, p-value under NULL_RATE) over the replayed checks of a trace."""
    replayed = [c for c in checks if c.replayed]
    x, n = sum(c.unexplained for c in replayed), sum(c.checked for c in replayed)
    return x, n, tail(x, n, NULL_RATE)


def summarize(checks: list[RouteCheck], engine_runs: int) -> str:
    """One line over a trace's checked runs: how many were replayed and how many pairs agree."""
    replayed = [c for c in checks if c.replayed]
    if not replayed:
        return (f"routes: NONE of {engine_runs} engine runs replayed through the router "
                f"({engine_runs - len(checks)} without a check; {len(checks)} structure only)")
    checked, agreeing = sum(c.checked for c in replayed), sum(c.agreeing for c in replayed)
    near = sum(c.near_ties for c in replayed)
    x = checked - agreeing - near
    worst = max((c.logprob_difference for c in replayed if c.logprob_difference == c.logprob_difference),
                default=math.nan)
    text = (f"routes: {len(replayed)} of {engine_runs} engine runs replayed through the router, {agreeing:,} "
            f"of {checked:,} (layer, token) pairs agree ({agreeing / max(checked, 1):.2%}, "
            f"{replayed[0].dtype}), {near} disagree at a near tie, {x} elsewhere (rate <= "
            f"{upper_bound(x, checked, CONFIDENCE):.2g} at {CONFIDENCE:.0%})")
    if worst == worst:
        text += f"; log-probabilities differ by up to {worst:.3g}"
    if len(replayed) < engine_runs:
        text += f"; {engine_runs - len(replayed)} runs NOT replayed"
    return text


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"field {name!r}: expected a count, found {value!r:.40}")
    return value


def _float(value, name: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"field {name!r}: expected a number, found {value!r:.40}")
    return float(value)


def _optional(value, name: str) -> float | None:
    return None if value is None else _float(value, name)


def structure(expert: np.ndarray, n_experts: int, held: np.ndarray | None = None
              ) -> tuple[int, int, int, tuple[int, ...]]:
    """(routes, repeated, out of range, first malformed set) over `expert [L, B, T, K]`. With `held
    [B, T]` (tokens >= 0: an engine's run, where every token has K experts) a route is a (layer, row,
    position) of a held token, and an id outside 0..E-1 (-1 included) is out of range; without it
    (the project's loop, where expert choice may leave a slot empty) a route is a (layer, row,
    position) with any id >= 0, and ids outside -1..E-1 are out of range."""
    e = np.asarray(expert, np.int64)
    if held is None:
        routed = (e >= 0).any(axis=-1)
        out = ((e >= n_experts) | (e < -1)).any(axis=-1) & ((e != -1).any(axis=-1))
        routed = routed | out
    else:
        routed = np.broadcast_to(np.asarray(held, bool), e.shape[:-1])
        out = ((e >= n_experts) | (e < 0)).any(axis=-1) & routed
    ordered = np.sort(e, axis=-1)
    repeated = ((ordered[..., 1:] == ordered[..., :-1]) & (ordered[..., 1:] >= 0)).any(axis=-1) & routed
    bad = repeated | out
    example = tuple(int(x) for x in e[tuple(np.argwhere(bad)[0])]) if bad.any() else ()
    return int(routed.sum()), int(repeated.sum()), int(out.sum()), example


def sample_rows(B: int, share: float, rng: np.random.Generator) -> tuple[int, ...]:
    """The rows a run's replay runs through the reference: all of them at `share` 1, else
    max(1, ceil(share * B)) drawn uniformly without replacement by `rng`, in order."""
    if share >= 1:
        return tuple(range(B))
    n = min(B, max(1, math.ceil(share * B)))
    return tuple(sorted(int(b) for b in rng.choice(B, size=n, replace=False)))


def gap_ulps(router_logits: np.ndarray, K: int, dtype: str) -> np.ndarray:
    """[...]: the router gap z_(K) - z_(K+1) of `router_logits [..., E]` in units in the last place of
    `dtype` at the magnitude of the token's router logits (its largest |z|): a logit's rounding error
    scales with the terms it sums, not with how near zero their sum falls."""
    z = np.sort(np.asarray(router_logits, np.float64), axis=-1)[..., ::-1]
    zk, zk1 = z[..., K - 1], z[..., K]
    magnitude = np.maximum(np.abs(z).max(axis=-1), SMALLEST_NORMAL[dtype])
    _, exponent = np.frexp(magnitude)  # magnitude = f * 2**exponent, 0.5 <= f < 1
    ulp = np.ldexp(1.0, exponent - 1 - MANTISSA_BITS[dtype])
    return (zk - zk1) / ulp


def compare(recorded: np.ndarray, router_logits: np.ndarray, dtype: str, window: float = WINDOW_ULPS
            ) -> tuple[int, int, int, tuple[int, int] | None]:
    """(checked, agreeing, near ties, (layer, position) of the first unexplained disagreement or None)
    of one row: recorded experts `[L, T, K]` against the top-K sets of the reference's router logits
    `[L, T, E]` (computed in `dtype`)."""
    rec = np.asarray(recorded, np.int64)
    z = np.asarray(router_logits, np.float64)
    K = rec.shape[-1]
    top = np.sort(np.argsort(-z, axis=-1, kind="stable")[..., :K], axis=-1)
    agree = (np.sort(rec, axis=-1) == top).all(axis=-1)  # [L, T]
    near = ~agree & (gap_ulps(z, K, dtype) <= window)
    wrong = np.argwhere(~agree & ~near)
    first = (int(wrong[0][0]), int(wrong[0][1])) if len(wrong) else None
    return int(agree.size), int(agree.sum()), int(near.sum()), first


def check_problems(value, engine_run: bool) -> list[tuple[str, str]]:
    """(severity, message) of a run's `route_check` attribute (None when absent) for the validator:
    an error when the routes fail the check, a warning when an engine's run was not replayed or the
    check flags it."""
    if value is None:
        if not engine_run:
            return []
        return [("warning", "routes not checked against the router (attribute 'route_check' absent: recorded "
                            "before the check existed)")]
    try:
        check = RouteCheck.from_attr(value)
    except ValueError as exc:
        return [("error", f"expected attribute 'route_check' to be a route check: {exc}")]
    refusal = check.refusal()
    if refusal:
        return [("error", f"routes fail the check: {refusal}")]
    return [("warning", w) for w in check.warnings()]
