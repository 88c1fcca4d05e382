"""The decision table: a confirmed cause from the analysis' guess and the counterfactual reruns.

The inputs, for one divergent pair (reference row A of run RA, row B of run RB, same request, same
condition, first differing token at position t*):

- `guess`: the cause `traces.analysis.explain_pair` reads off the recorded routing (the first
  routing decision that differs, walking positions then layers; see `traces/analysis/causes.py`);
- `reproduced`: rerunning RA and RB with their recorded settings takes every recorded decision again
  (tokens, steps, experts, kept flags, slots, groups, loads): the `bitwise` or `decisions` level of
  `traces.analysis.reproduction`. Float drift between machines or thread counts is allowed; it is
  reported with the verdict (`level`, `drift`);
- `replay_same` (P): RB rerun with row B forced to replay A's recorded routing (experts, kept set and
  gates of every layer and position) gives A's tokens through t*. It is the one rerun that stays on
  the recorded trajectory: everything of row B is as recorded except its routing;
- `dropless_same` (D): RA and RB rerun dropless (same kernels) give the request the same completion;
- `invariant_same` (I): RA and RB rerun with batch-invariant kernels (same routing policy) give the
  request the same completion;
- `coupled`: the condition's routing lets the rows of a batch compete for expert slots (capacity
  limits with groups spanning rows, or pads counted toward a row's capacity);
- `native`: native kernels, whose reductions depend on the batch's shape.

Why these settle the cause. In this model rows of a batch interact in exactly two ways: through the
capacity queues (only when `coupled`) and through the floating-point reduction order of the native
kernels (only when `native`). Under replay, row B's routing equals A's, so the only difference left
between the two computations of the request is the kernels' batch-shaped numerics. P is the
decisive, same-trajectory test; D and I rerun other trajectories (a dropless or invariant batch
generates other tokens), so they corroborate a mechanism or, where both point away from the
guess, overrule it. The rules, first match wins:

1. Not reproduced: `not_reproduced`; no counterfactual can be trusted.
2. P fails: with A's routing forced the tokens still split. Native kernels: `output_numeric`, since
   only the kernels' batch-shaped numerics are left to differ. Batch-invariant kernels:
   `unexplained`, since nothing is left to differ.
3. P holds (the row's routing carries the divergence); which mechanism changed the routing?
   a. guess `capacity`, coupled, and D or not I: `capacity`. Removing capacity removes the
      divergence (D), or capacity alone keeps the batches apart under invariant kernels (not I).
   b. guess `capacity`, coupled, native, not D but I: `upstream_numeric`. Without capacity the
      pair still splits and without batch-variant numerics it agrees: numeric noise decided which
      candidates the capacity cut.
   c. guess `capacity`, not coupled, native: `upstream_numeric`. Rows cannot compete, so the kept
      set changed through the row's own numerics.
   d. guess `router_flip`, `upstream_numeric` or `renormalization`, native, and I or not D or
      coupled: the guess. The router's input differed while all earlier routing was equal, which
      only the kernels' numerics do. I shows the numerics are needed; not D that they suffice;
      under coupled routing a split of the invariant reruns comes from capacity and contradicts
      nothing. (Uncoupled routing with invariant kernels cannot split: not I there is a
      contradiction.)
   e. guess `seeded_random`: `seeded_random`.
   f. any other guess, batch-invariant kernels, coupled: `capacity`, the only way rows interact.
   g. otherwise: `unexplained` (the reruns contradict the recorded event).

4. A `capacity` verdict from 3a, 3f or the fallback below stands only with a proof
   (`lab.counterfactual.search`): an event, or a 1-minimal set of events, whose intervention alone
   restores the reference's tokens through the first split. The proof's kind settles the verdict:
   capacity events keep `capacity`; numeric events only (the reference's router logits, or its
   choice of experts, at some token) make it `upstream_numeric`; a set of both is `mixed`. Without
   a proof it is `unconfirmed`: the reruns point at capacity, but no event is shown to carry the split.

Without replay (a dense model, or a reference whose routing cannot be forced on the row) the table
falls back on D and I alone: `capacity` when coupled and D; a numeric guess (or `output_numeric`)
when native and I; else `unexplained`.
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.analysis.cause_table import (
    CAPACITY,
    CAUSE_TABLE,
    MIXED,
    NOT_REPRODUCED,
    NUMERIC,
    OUTPUT_NUMERIC,
    SEEDED_RANDOM,
    UNCONFIRMED,
    UNEXPLAINED,
    UPSTREAM_NUMERIC,
    CauseName,
    router_numeric,
)
from traces.analysis.proof import CAPACITY_KIND, NUMERIC_KIND, ProofKind
from traces.analysis.reproduction import BITWISE, DECISIONS, Level


@dataclass(frozen=True)
class Evidence:
    """What is known about one divergent pair (see the module docstring for each field)."""

    guess: str
    reproduced: bool
    dropless_same: bool | None   # None: not run (dense model, or a policy that cannot be dropless)
    invariant_same: bool | None
    replay_same: bool | None     # None: no routing to replay
    coupled: bool
    native: bool
    dropless_recorded: bool = False   # the dropless rerun is the recorded setting (a dropless condition)
    invariant_recorded: bool = False  # the batch-invariant rerun is the recorded setting
    level: Level = BITWISE            # reproduction level of the weaker of the two runs
    drift: str = ""                   # float drift of the reruns ('' when bitwise)
    proof_kind: ProofKind | str = ""  # kind of the proven event or set, '' none
    sufficient: str = ""              # the proven intervention(s), in words


@dataclass(frozen=True)
class Decision:
    """The confirmed cause and the reason, in one sentence."""

    cause: CauseName
    reason: str


def decide(e: Evidence) -> Decision:
    """The confirmed cause of a divergent pair (the table of the module docstring), where `capacity`
    also needs a proof: an event or a minimal set of events that removes the split."""
    decision = _decide(e)
    if decision.cause != CAPACITY or e.proof_kind == CAPACITY_KIND:
        return decision
    if e.proof_kind == NUMERIC_KIND:
        return Decision(UPSTREAM_NUMERIC, f"{decision.reason}, but the proven event is numeric: "
                                          f"{e.sufficient} removes the split")
    if e.proof_kind == ProofKind.MIXED:
        return Decision(MIXED, f"{decision.reason}, and the minimal set of events that removes the split "
                               f"holds both capacity and numeric events")
    return Decision(UNCONFIRMED, f"{decision.reason}, but no single event and no set of events found by "
                                 f"delta debugging is shown to carry the split")


def _decide(e: Evidence) -> Decision:
    if not e.reproduced:
        return Decision(NOT_REPRODUCED, "the reruns took another decision than the recording, so no "
                                        "counterfactual can be trusted")
    if e.replay_same is None:
        return _without_replay(e)
    if not e.replay_same:
        if e.native:
            return Decision(OUTPUT_NUMERIC, "with the reference's routing forced on the row the tokens "
                                            "still split, and only the native kernels' batch-shaped "
                                            "numerics differ then")
        return Decision(UNEXPLAINED, "with the reference's routing forced under batch-invariant kernels "
                                     "nothing should differ, yet the tokens still split")
    return _with_replay(e)


def _with_replay(e: Evidence) -> Decision:
    """P holds: the row's routing carries the divergence; which mechanism changed the routing?"""
    D, I = e.dropless_same, e.invariant_same
    carries = "replaying the reference's routing restores its tokens"
    if e.guess == CAPACITY:
        if e.coupled and (D or I is False):
            why = "dropless reruns agree" if D else "batch-invariant reruns still split"
            return Decision(CAPACITY, f"{carries}, and {why}")
        if e.native and e.coupled and D is False and I:
            return Decision(UPSTREAM_NUMERIC, f"{carries}, but dropless reruns still split while "
                                              f"batch-invariant reruns agree: numeric noise decided "
                                              f"which candidates the capacity cut")
        if e.native and not e.coupled:
            return Decision(UPSTREAM_NUMERIC, f"{carries}; rows cannot compete under this routing, so the "
                                              f"kept set changed through the row's own numerics")
    elif e.guess in router_numeric():
        if e.native and (I or D is False or e.coupled):
            why = ("batch-invariant reruns agree" if I else "dropless reruns still split" if D is False
                   else "the batch-invariant reruns split through capacity")
            return Decision(e.guess, f"{carries}; the router's input differed while all earlier routing "
                                     f"was equal, which only the native kernels' numerics do ({why})")
    elif e.guess == SEEDED_RANDOM:
        return Decision(SEEDED_RANDOM, f"{carries}; the router logits were equal, the seeded choice "
                                       f"was not")
    if not e.native and e.coupled:
        return Decision(CAPACITY, f"{carries}; under batch-invariant kernels rows interact only through "
                                  f"capacity")
    return Decision(UNEXPLAINED, f"{carries}, but the reruns contradict the recorded event "
                                 f"({e.guess}: dropless {_yes_no(D)}, batch-invariant {_yes_no(I)})")


def _without_replay(e: Evidence) -> Decision:
    D, I = e.dropless_same, e.invariant_same
    if e.coupled and e.guess == CAPACITY and D:
        return Decision(CAPACITY, "dropless reruns agree (no routing replay was possible)")
    if e.native and I:
        numeric = e.guess in CAUSE_TABLE and CAUSE_TABLE[e.guess].kind == NUMERIC
        cause = e.guess if numeric else OUTPUT_NUMERIC
        return Decision(cause, "batch-invariant reruns agree (no routing replay was possible)")
    return Decision(UNEXPLAINED, f"no routing replay was possible and the reruns do not settle it "
                                 f"(dropless {_yes_no(D)}, batch-invariant {_yes_no(I)})")


def _yes_no(value: bool | None) -> str:
    return {True: "agree", False: "split", None: "not run"}[value]


def rerun_text(e: Evidence, t_star: int) -> str:
    """What the reruns showed, as one sentence for the explanation table."""
    if not e.reproduced:
        return "Reruns: the recorded runs were not reproduced (a decision differs)."
    parts = []
    if e.dropless_same is not None:
        recorded = " (as recorded)" if e.dropless_recorded else ""
        parts.append(f"dropless{recorded}, the completions {_yes_no(e.dropless_same)}")
    if e.invariant_same is not None:
        recorded = " (as recorded)" if e.invariant_recorded else ""
        parts.append(f"with batch-invariant kernels{recorded} they {_yes_no(e.invariant_same)}")
    if e.replay_same is not None:
        outcome = "restores" if e.replay_same else "does not restore"
        parts.append(f"replaying the reference's routing {outcome} its tokens through position {t_star}")
    if e.level == DECISIONS:
        level = f"recorded runs reproduced at the decisions level, float drift {e.drift or 'none'}"
    else:
        level = "recorded runs reproduced bitwise"
    return f"Reruns ({level}): " + "; ".join(parts) + "."
