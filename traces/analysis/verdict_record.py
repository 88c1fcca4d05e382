"""The facts of a verdict on two runs of one request (`VerdictRecord`), the places where two runs
differ (`Difference`) and the words for each kind of difference.

The record is the data that `traces.analysis.verdict_text` puts into words and that
`traces.analysis.verdict.Verdict` extends with its sentence; it imports neither, so the words and the
verdict both build on it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.analysis.cause_table import CauseName
from traces.analysis.displacement import Displacement
from traces.vocabulary import Vocabulary


class DifferenceKind(Vocabulary):
    """What differs at one place, in the order checked at a (position, layer); each is named as the
    part of `RoutingDifferences` (and the run's dataset) it compares."""

    ROUTER_LOGITS = "router_logits"
    EXPERT = "expert"
    KEPT = "kept"
    GATE = "gate"
    LOGITS = "logits"


#: What a difference at one place is, in the order checked at a (position, layer).
DIFFERENCE_KINDS: tuple[DifferenceKind, ...] = tuple(DifferenceKind)

#: What each kind of difference is called in the sentences.
KIND_WORDS = {DifferenceKind.ROUTER_LOGITS: "router logits", DifferenceKind.EXPERT: "chosen experts",
              DifferenceKind.KEPT: "kept set", DifferenceKind.GATE: "weights",
              DifferenceKind.LOGITS: "logits"}

#: Layer index used for the next-token logits stage.
LOGITS_LAYER = -1


@dataclass(frozen=True)
class Difference:
    """A place where two runs differ: position, layer (-1 for the next-token logits), and what."""

    position: int
    layer: int
    kind: DifferenceKind

    def describe(self) -> str:
        where = "the next-token logits" if self.layer == LOGITS_LAYER else f"layer {self.layer}"
        return f"position {self.position}, {where} ({KIND_WORDS[self.kind]})"


@dataclass(frozen=True)
class VerdictRecord:
    """Why run `run` row `row` diverges from the reference `ref_run` row `ref_row` (same request).

    Positions are the sequence's own; `t_star` is the first position whose token differs (-1 when
    the completions agree over the `compared` positions). Floats are NaN where they do not apply.
    """

    run: str
    row: int
    ref_run: str
    ref_row: int
    request: int
    is_probe: bool                  # this row is the probe of its run
    ref_is_probe: bool
    prompt_len: int
    compared: int                   # positions compared: the shared prefix
    t_star: int                     # first differing position, -1 none
    token: int                      # this run's token at t*, -1 none
    ref_token: int                  # the reference's token at t*, -1 none
    cause: CauseName                # a cause of the table the walk names
    position: int                   # of the cause event, -1 none
    layer: int                      # of the cause event; -1 for the logits stage or none
    root: Difference | None         # first bitwise difference of any kind
    experts: tuple[int, ...] = ()   # at the event, this run, choice order
    ref_experts: tuple[int, ...] = ()
    kept: tuple[bool, ...] = ()
    ref_kept: tuple[bool, ...] = ()
    gates: tuple[float, ...] = ()
    ref_gates: tuple[float, ...] = ()
    slots: tuple[int, ...] = ()
    ref_slots: tuple[int, ...] = ()
    rank: int = -1                  # first choice rank that differs at the event
    router_margin: float = float("nan")  # reference's router-logit gap at `rank` (capacity: z_(K)-z_(K+1))
    router_delta: float = float("nan")   # max |router logit difference| at the event
    displacement: Displacement | None = None  # the dropped candidate in the run that dropped it
    counterpart: Displacement | None = None   # the same candidate in the other run
    logit_margin: float = float("nan")   # reference's top-1 - top-2 logit at t* - 1
    logit_delta: float = float("nan")    # max |logit difference| at t* - 1
    kl: float = float("nan")             # KL(P_ref || P_run) at t* - 1
    #: The kinds of DIFFERENCE_KINDS compared: an engine's run records no router logits or weights,
    #: and its log-probabilities are not compared bitwise with the project's logits.
    parts: tuple[DifferenceKind, ...] = DIFFERENCE_KINDS
    values: str = "logit"                # next-token values compared as "logit" or "log-probability"

    @property
    def diverged(self) -> bool:
        return self.t_star >= 0

    @property
    def new_index(self) -> int:
        """t* as a 0-based index into the new tokens, -1 none."""
        return self.t_star - self.prompt_len if self.diverged else -1

    @property
    def dropped_in(self) -> str:
        """Run that dropped the candidate of a capacity cause ('' otherwise or when unknown)."""
        return self.displacement.run if self.displacement is not None else ""

    @property
    def flip_within_perturbation(self) -> bool:
        """The logits moved enough to flip the argmax: 2 * max |difference| >= the margin at t* - 1."""
        return bool(2 * self.logit_delta >= self.logit_margin)
