"""The plain-language cause panel of a pair of runs: the cause with its numbers, who took the slots,
and, when the `explain` command stored counterfactual reruns, the cause they confirmed.

The sentence itself is `Verdict.describe` (the same words as the export and the tables); this
module adds the headline, the numbers as (name, value) pairs and the displacing candidates as rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traces.analysis import ExplainRecord, Verdict
from traces.analysis.displacement import capacity_text
from traces.analysis.explain_table import NOT_CONFIRMED
from traces.analysis.verdict_text import ordinal, token_text

#: What each cause means, in the words of docs/experiments.md (cause of a divergence).
CAUSE_MEANINGS: dict[str, str] = {
    "capacity": "a candidate was dropped for lack of expert slots (capacity coupling with the batch)",
    "router_flip": "a numeric near-tie flipped the router's choice of experts",
    "seeded_random": "a seeded random choice of experts differs",
    "renormalization": "the after-drop renormalization of the weights differs",
    "upstream_numeric": "a numeric difference upstream of the router (no routing decision differs)",
    "output_numeric": "routing is identical; a numeric difference in the expert or attention reductions",
    "numeric_routing": "routing changed without a capacity limit (numeric): the chosen experts differ in a "
                       "dropless engine",
    "token_near_tie": "next-token near-tie: routing identical up to the split, the token choice flipped",
    "unexplained": "the tokens differ but no routing or logit difference precedes them",
    "unconfirmed": "the reruns point at capacity, but no single routing event is shown to carry the split",
    "not_reproduced": "the reruns took another decision than the recording, so they confirm nothing",
    "identical": "the two runs agree on tokens, routing and logits",
}

#: Displacing candidates listed one by one; beyond this they are counted per row.
MAX_LISTED = 6


@dataclass(frozen=True)
class DisplacingCandidate:
    """A candidate that took a slot ahead of the dropped one, in slot order."""

    row: int
    request: int
    position: int
    rank: int
    slot: int
    kept: bool
    own_row: bool   # a token of the same row (sequence) as the dropped candidate


@dataclass(frozen=True)
class CauseText:
    """What the cause panel says about run B against run A."""

    cause: str                 # the cause shown: the confirmed one when counterfactuals settled it
    guessed: str               # the cause read from the recorded routing (`Verdict.cause`)
    confirmed: bool
    headline: str
    sentence: str              # `Verdict.describe(vocab)`
    facts: tuple[tuple[str, str], ...]
    counterfactuals: tuple[str, ...]   # one line per counterfactual rerun the table holds
    displacing_run: str        # run whose queue the displacing candidates are in ('' none)
    displacing: tuple[DisplacingCandidate, ...]
    displacing_summary: str    # 'rows 0, 2, 0 took slots 0-2 ahead of it' ('' none)

    @property
    def displacing_rows(self) -> tuple[int, ...]:
        return tuple(c.row for c in self.displacing)


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.3g}"


def headline(cause: str, guessed: str, record: ExplainRecord | None,
             diverged: bool = True) -> tuple[str, bool]:
    """The panel's first line, and whether the cause is confirmed by counterfactual."""
    confirmed = record is not None and record.confirmed_cause not in NOT_CONFIRMED
    if not diverged:
        if cause == "identical":
            return "No divergence: runs A and B agree bitwise on tokens, routing and logits.", confirmed
        return (f"No divergence in the completions compared, but the runs differ inside: the first "
                f"difference is of kind {cause} ({CAUSE_MEANINGS.get(cause, '')})."), confirmed
    meaning = CAUSE_MEANINGS.get(cause, "")
    if confirmed:
        text = f"Cause: {cause} — confirmed by counterfactual"
        if guessed != cause:
            text += f" (the recorded routing alone suggested {guessed})"
    elif record is not None and record.confirmed_cause:
        text = (f"Cause (from the recorded routing, not confirmed by counterfactual): {guessed} — "
                f"{record.confirmed_cause}")
        meaning = CAUSE_MEANINGS.get(record.confirmed_cause, "")
    elif record is not None:
        text = f"Cause (from the recorded routing; the counterfactual reruns did not settle it): {cause}"
    else:
        text = f"Cause (from the recorded routing, not confirmed by counterfactual): {cause}"
    return (f"{text}. {meaning[0].upper()}{meaning[1:]}." if meaning else f"{text}."), confirmed


def counterfactual_lines(record: ExplainRecord | None) -> tuple[str, ...]:
    """One sentence per counterfactual rerun stored in `record` (none when it holds none)."""
    if record is None:
        return ()
    reruns = (("dropless_same", f"the batch of run {record.run} rerun dropless"),
              ("invariant_same", f"the batch of run {record.run} rerun with batch-invariant kernels"),
              ("replay_same", f"run {record.run} forced to replay run {record.ref_run}'s routing"))
    lines = []
    for field, what in reruns:
        same = getattr(record, field)
        if same is not None:
            outcome = (f"gives run {record.ref_run}'s completion" if same
                       else f"still differs from run {record.ref_run}")
            lines.append(f"{what} {outcome}")
    named = f"at the named event (position {record.position}, layer {record.layer})"
    single = (("keep_same", "keeping the dropped candidate alone"),
              ("withdraw_same", "withdrawing the displacing rows from that expert's queue alone"),
              ("logits_same", f"giving the row run {record.ref_run}'s router logits alone"))
    for field, what in single:
        same = getattr(record, field)
        if same is not None:
            lines.append(f"{named}, {what} {'removes' if same else 'does not remove'} the split")
    if record.sufficient:
        at_named = (record.proof_position, record.proof_layer) == (record.position, record.layer)
        where = "the named event" if at_named else "another event, found by search"
        lines.append(f"proof at one event ({where}; scope {record.scope}): {record.sufficient}")
    elif record.replay_same:
        lines.append("no intervention within one forward step and one layer restores the reference's tokens: "
                     "the cause is unconfirmed")
    return tuple(lines)


def verdict_facts(v: Verdict, vocab: Sequence[str] | None,
                  model_layer: int | None = None) -> list[tuple[str, str]]:
    """The numbers behind a verdict as (name, value) pairs, in reading order."""
    runs = f"A = run {v.ref_run} row {v.ref_row}, B = run {v.run} row {v.row} (request {v.request})"
    facts: list[tuple[str, str]] = [("runs", runs)]
    if v.diverged:
        facts.append(("first divergent token t*",
                      f"position {v.t_star} (new token {v.new_index}): {token_text(v.ref_token, vocab)} "
                      f"in A, {token_text(v.token, vocab)} in B"))
    else:
        facts.append(("first divergent token t*", f"none over the {v.compared} positions compared"))
    if v.position >= 0 and v.layer >= 0:
        where = f"position {v.position}, layer {v.layer}"
        if model_layer is not None:
            where += f" (model layer {model_layer})"
        facts.append(("cause event", where))
        facts.append(("experts (choice order)",
                      f"A {list(v.ref_experts)} kept {_kept(v.ref_kept)}, "
                      f"B {list(v.experts)} kept {_kept(v.kept)}"))
    elif v.cause == "output_numeric":
        facts.append(("cause event", f"next-token logits at position {v.position}"))
    d, c = v.displacement, v.counterpart
    if d is not None:
        facts.append(("dropped candidate",
                      f"{ordinal(d.rank + 1)} choice expert {d.expert} of row {d.row} in run {d.run}: slot "
                      f"{d.slot} ≥ {capacity_text(d.capacity)} (group {d.group}, step {d.step})"))
        if c is not None:
            facts.append(("same candidate elsewhere",
                          f"run {c.run}: slot {c.slot}, {capacity_text(c.capacity)}, "
                          f"{'kept' if c.kept else 'dropped'}"))
    if v.router_margin == v.router_margin:
        facts.append(("router margin (A)",
                      f"{_num(v.router_margin)} (router-logit gap at the choice that differs)"))
    if v.router_delta == v.router_delta:
        facts.append(("router logit difference", f"up to {_num(v.router_delta)}"))
    if v.logit_margin == v.logit_margin:
        flip = "reaches" if v.flip_within_perturbation else "does not reach"
        facts.append(("top-2 logit margin at t*-1", f"{_num(v.logit_margin)} in A; the logit difference "
                                                    f"{_num(v.logit_delta)} (x2) {flip} it"))
        facts.append(("KL at t*-1", f"{_num(v.kl)} nats"))
    if v.root is not None:
        facts.append(("first bitwise difference", v.root.describe()))
    return facts


def _kept(kept: tuple[bool, ...]) -> str:
    return "[" + " ".join("✓" if k else "✗" for k in kept) + "]"


def cause_text(v: Verdict, record: ExplainRecord | None, *, vocab: Sequence[str] | None = None,
               request_ids: np.ndarray | None = None, model_layer: int | None = None) -> CauseText:
    """The cause panel of verdict `v` (run B = `v.run` against A = `v.ref_run`).

    `record` is the explanation-table record of the same pair, if any; its confirmed cause replaces
    the guess. `request_ids` [B] of the run whose queue dropped the candidate names each displacing
    row's request.
    """
    shown = v.cause if record is None or record.confirmed_cause in NOT_CONFIRMED else record.confirmed_cause
    head, confirmed = headline(shown, v.cause, record, v.diverged)
    d = v.displacement
    displacing: tuple[DisplacingCandidate, ...] = ()
    if d is not None:
        ids = np.asarray(request_ids) if request_ids is not None else None
        displacing = tuple(
            DisplacingCandidate(row=c.row,
                                request=int(ids[c.row]) if ids is not None and c.row < len(ids) else -1,
                                position=c.position, rank=c.rank, slot=c.slot, kept=c.kept,
                                own_row=c.row == d.row)
            for c in d.ahead)
    return CauseText(
        cause=shown, guessed=v.cause, confirmed=confirmed, headline=head,
        sentence=v.describe(list(vocab) if vocab is not None else None),
        facts=tuple(verdict_facts(v, vocab, model_layer)), counterfactuals=counterfactual_lines(record),
        displacing_run=d.run if d is not None else "", displacing=displacing,
        displacing_summary=d.describe_ahead() if d is not None else "",
    )
