"""The plain-language cause panel of a pair of runs: the proven cause when `explain` stored one, else
the first difference (observed, no proof yet), with its numbers and who took the slots.

Two things are named apart (`traces.analysis.proof`): the *first difference* is what the recorded
routing shows (`Verdict`, walking positions then layers); the *proven cause* is the event or minimal
set of events whose intervention removed the split in `explain`'s reruns. The headline, the event the
view points at (`cause_event`) and the sentence lead with the proven cause; without one they say
"first difference (no proof yet)". The first difference's own sentence is `Verdict.describe` (the
same words as the export and the tables). Every sentence built here names runs A and B by letter
through a run label (`letter_labels`); the 'runs' fact names them once in full. Words stored by
`explain` (the proven intervention) are shown as stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.figure_data.words import as_words
from traces.analysis import ExplainRecord, Verdict
from traces.analysis.causal_map import record_headline
from traces.analysis.cause_table import IDENTICAL, OUTPUT_NUMERIC, meaning, settles
from traces.analysis.displacement import capacity_text
from traces.analysis.explain_table import proof_cells
from traces.analysis.proof import (
    EVENT_WORDS,
    NO_PROOF,
    ROUTER_EVENTS,
    alternatives_text,
    chain_text,
    is_weak,
    meaning_of_event,
    necessity_text,
    placebo_text,
    proof_sentence,
    reach_text,
)
from traces.analysis.root_summary import chain_events
from traces.analysis.verdict_text import (
    RunLabel,
    agreement,
    letter_labels,
    numeric_flip,
    ordinal,
    quoted_token,
    run_label,
)

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
    guessed: str               # the kind of the first difference (`Verdict.cause`)
    confirmed: bool
    headline: str
    sentence: str              # the proof in words (when proven), then the first difference's
    proven: bool               # an event or minimal set of events is proven to carry the split
    event: tuple[int, int]     # (position, layer) the view points at: the proof's lead event when
                               # proven, else the first difference ((-1, -1) none)
    cells: tuple[tuple[int, int], ...]   # (position, layer) of every proven event (empty: none)
    facts: tuple[tuple[str, str], ...]
    counterfactuals: tuple[str, ...]   # one line per counterfactual rerun the table holds
    displacing_run: str        # run whose queue the displacing candidates are in ('' none)
    displacing: tuple[DisplacingCandidate, ...]
    displacing_summary: str    # 'rows 0, 2, 0 took slots 0-2 ahead of it' ('' none)
    run_a: str = ""            # the runs the sentences call A and B (named once, in the 'runs' fact)
    run_b: str = ""
    intervention: str = ""     # the proven intervention in the words explain stored ('' none): shown
                               # as stored, so it may name the runs in full

    def letter(self, run: str) -> str:
        """'A' or 'B' for one of the two runs, else 'run <name>'."""
        return letter_labels(self.run_a, self.run_b)(run) if run else ""

    @property
    def displacing_rows(self) -> tuple[int, ...]:
        return tuple(c.row for c in self.displacing)


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.3g}"


def _where(position: int, layer: int, prompt_len: int) -> str:
    new = position - prompt_len
    token = f" (new token {new})" if new >= 0 else " (prompt)"
    return f"position {position}{token}, layer {layer}" if layer >= 0 else f"position {position}{token}"


def proven(record: ExplainRecord | None) -> bool:
    """Whether the record stores a proven event or minimal set of events."""
    return record is not None and record.proven and settles(record.confirmed_cause)


def headline(v: Verdict, record: ExplainRecord | None) -> tuple[str, bool]:
    """The panel's first line, and whether the cause is confirmed by counterfactual."""
    cause = v.cause
    confirmed = record is not None and settles(record.confirmed_cause)
    if not v.diverged:
        if cause == IDENTICAL:
            return f"No divergence: runs A and B {agreement(v)}.", confirmed
        return (f"No divergence in the completions compared, but the runs differ inside: the first "
                f"difference is of kind {as_words(cause)}: {meaning(cause)}."), confirmed
    first = _where(v.position, v.layer, v.prompt_len) if v.position >= 0 else "none"
    if proven(record):
        shown = record.confirmed_cause
        where = _where(record.proof_position, record.proof_layer, v.prompt_len)
        what = f"at {where}" if record.proof_size == 1 else \
            f"a minimal set of {record.proof_size} events, the first at {where}"
        text = f"Proven cause: {as_words(shown)} — {what}"
        if record.placebo >= 0 and is_weak(record.placebo):   # the placebo restores too: say so first
            text += ", weak: a near-tie"
        if (record.proof_position, record.proof_layer) != (v.position, v.layer):
            text += f"; the first difference, at {first}, is not it"
        if record.proof_how in ROUTER_EVENTS:   # the event is a router choice, not a drop
            said = meaning_of_event(shown)
            return (f"{text}. {said[0].upper()}{said[1:]}." if said else f"{text}.") + _map_words(record), \
                confirmed
    elif confirmed and record.confirmed_cause == OUTPUT_NUMERIC:
        shown = record.confirmed_cause
        text = (f"Cause: {numeric_flip(v)} — confirmed by counterfactual reruns: no routing event carries "
                f"the split")
    elif confirmed:
        shown = record.confirmed_cause
        text = (f"Cause: {as_words(shown)} — confirmed by counterfactual reruns of the whole batch; the "
                f"event shown is the {NO_PROOF}: {_observed(v)} at {first}")
    else:
        shown = cause
        text = f"Cause: {NO_PROOF}: {_observed(v)} at {first}"
        if record is None:
            where = "next-token values" if cause == OUTPUT_NUMERIC else "routing"
            text += f" — observed in the recorded {where}; nothing is proven until explain reruns the pair"
        elif record.confirmed_cause:
            text += f" — explain found no proof: {as_words(record.confirmed_cause)}"
            shown = record.confirmed_cause
    said = meaning(shown)
    return (f"{text}. {said[0].upper()}{said[1:]}." if said else f"{text}.") + _map_words(record), confirmed


def _map_words(record: ExplainRecord | None) -> str:
    """' Causal map: ...' (the chain from the batch to the token, or a near-tie), '' without a map."""
    if record is None or record.map_cells < 0:
        return ""
    said = record_headline(record.map_outcome(), record.decisive_cells, record.map_chain)
    return f" {said}" if said else ""


def _observed(v: Verdict) -> str:
    """The first difference's kind: its name, or for a numeric one at the output what happened."""
    return numeric_flip(v) if v.cause == OUTPUT_NUMERIC else as_words(v.cause)


def proof_text(v: Verdict, record: ExplainRecord | None, label: RunLabel = run_label) -> str:
    """'Proven cause: ... Necessary ... Reach ...' of a proven record ('' otherwise)."""
    if not proven(record):
        return ""
    other = (record.ref_run if record.proof_run == record.run else record.run) if record.proof_run else ""
    parts = [proof_sentence(record.sufficient, record.proof_size, record.proof_kind, v.t_star, v.new_index,
                            record.proof_run, other, label=label),
             alternatives_text(record.alternatives, record.candidates, record.alternative_cells,
                               (record.proof_layer, record.proof_position), record.candidates_all),
             placebo_text(record.placebo),
             necessity_text(record.necessary), reach_text(record.reach, record.reach_of),
             chain_text(record.chain_cells, record.chain_reach, record.chain_end, record.reach,
                        record.reach_of, brief=True)]
    return " ".join(p for p in parts if p)


def counterfactual_lines(record: ExplainRecord | None, label: RunLabel = run_label) -> tuple[str, ...]:
    """One sentence per counterfactual rerun stored in `record` (none when it holds none)."""
    if record is None:
        return ()
    run, ref = label(record.run), label(record.ref_run)
    reruns = (("dropless_same", f"the batch of {run} rerun dropless"),
              ("invariant_same", f"the batch of {run} rerun with batch-invariant kernels"),
              ("replay_same", f"{run} forced to replay {ref}'s routing"))
    lines = []
    for field, what in reruns:
        same = getattr(record, field)
        if same is not None:
            outcome = f"gives {ref}'s completion" if same else f"still differs from {ref}"
            lines.append(f"{what} {outcome}")
    named = f"at the first difference (position {record.position}, layer {record.layer})"
    single = (("keep_same", "keeping the dropped candidate alone"),
              ("withdraw_same", "withdrawing the displacing rows from that expert's queue alone"),
              ("logits_same", f"giving the row {ref}'s router logits alone"))
    for field, what in single:
        same = getattr(record, field)
        if same is not None:
            lines.append(f"{named}, {what} {'removes' if same else 'does not remove'} the split")
    if record.proof_reruns >= 0:
        lines.append(f"the search for the proven cause took {record.proof_reruns} reruns")
    if not proven(record) and record.replay_same:
        lines.append("no single event and no minimal set of events was shown to restore the reference's "
                     "tokens: the cause is unconfirmed")
    return tuple(lines)


def verdict_facts(v: Verdict, vocab: Sequence[str] | None, model_layer: int | None = None,
                  label: RunLabel = run_label) -> list[tuple[str, str]]:
    """The numbers behind a verdict as (name, value) pairs, in reading order; runs named by `label`
    but in the 'runs' fact, which names both in full."""
    runs = f"A = run {v.ref_run} row {v.ref_row}, B = run {v.run} row {v.row} (request {v.request})"
    facts: list[tuple[str, str]] = [("runs", runs)]
    if v.diverged:
        facts.append(("first divergent token t*",
                      f"position {v.t_star} (new token {v.new_index}): {quoted_token(vocab, v.ref_token)} "
                      f"in A, {quoted_token(vocab, v.token)} in B"))
    else:
        facts.append(("first divergent token t*", f"none over the {v.compared} positions compared"))
    if v.position >= 0 and v.layer >= 0:
        where = f"position {v.position}, layer {v.layer}"
        if model_layer is not None:
            where += f" (model layer {model_layer})"
        facts.append(("first difference", where))
        facts.append(("experts (choice order)",
                      f"A {list(v.ref_experts)} kept {_kept(v.ref_kept)}, "
                      f"B {list(v.experts)} kept {_kept(v.kept)}"))
    elif v.cause == OUTPUT_NUMERIC:
        facts.append(("cause event", f"next-token logits at position {v.position}"))
    d, c = v.displacement, v.counterpart
    if d is not None:
        facts.append(("dropped candidate",
                      f"{ordinal(d.rank + 1)} choice expert {d.expert} of row {d.row} in {label(d.run)}: "
                      f"slot {d.slot} ≥ {capacity_text(d.capacity)} (group {d.group}, step {d.step})"))
        if c is not None:
            facts.append(("same candidate elsewhere",
                          f"{label(c.run)}: slot {c.slot}, {capacity_text(c.capacity)}, "
                          f"{'kept' if c.kept else 'dropped'}"))
    if v.router_margin == v.router_margin:
        facts.append(("router margin (A)",
                      f"{_num(v.router_margin)} (router-logit gap at the choice that differs)"))
    if v.router_delta == v.router_delta:
        facts.append(("router logit difference", f"up to {_num(v.router_delta)}"))
    if v.logit_margin == v.logit_margin:
        flip = "reaches" if v.flip_within_perturbation else "does not reach"
        facts.append((f"top-2 {v.values} margin at t*-1",
                      f"{_num(v.logit_margin)} in A; the {v.values} difference {_num(v.logit_delta)} (x2) "
                      f"{flip} it"))
        facts.append(("KL at t*-1", f"{_num(v.kl)} nats"))
    if v.root is not None:
        facts.append(("first bitwise difference", v.root.describe()))
    return facts


def _kept(kept: tuple[bool, ...]) -> str:
    return "[" + " ".join("✓" if k else "✗" for k in kept) + "]"


def cause_text(v: Verdict, record: ExplainRecord | None, *, vocab: Sequence[str] | None = None,
               request_ids: np.ndarray | None = None, model_layer: int | None = None) -> CauseText:
    """The cause panel of verdict `v` (run B = `v.run` against A = `v.ref_run`).

    `record` is the explanation-table record of the same pair, if any: its proven event (or set) and
    confirmed cause replace the first difference and its guess. `request_ids` [B] of the run whose
    queue dropped the candidate names each displacing row's request.
    """
    shown = v.cause if record is None or not settles(record.confirmed_cause) else record.confirmed_cause
    head, confirmed = headline(v, record)
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
    is_proven = proven(record)
    label = letter_labels(v.ref_run, v.run)
    first = v.describe(list(vocab) if vocab is not None else None, label)
    if is_proven:
        sentence = f"{proof_text(v, record, label)} First difference (observed): {first}"
        cells = tuple((p, l) for l, p in proof_cells(record))
        event = (record.proof_position, record.proof_layer)
    else:
        sentence = f"First difference (observed, no proof yet): {first}" if v.diverged else first
        cells = ()
        event = (v.position, v.layer)
    facts = verdict_facts(v, vocab, model_layer, label)
    if is_proven:
        kind = record.proof_kind.replace("_", " ") or shown
        facts.insert(2, ("proven cause", f"{kind}: {record.sufficient}"))
        facts[3:3] = _scan_facts(record, label)
    return CauseText(
        cause=shown, guessed=v.cause, confirmed=confirmed, headline=head, sentence=sentence, proven=is_proven,
        event=event, cells=cells, facts=tuple(facts), counterfactuals=counterfactual_lines(record, label),
        displacing_run=d.run if d is not None else "", displacing=displacing,
        displacing_summary=d.describe_ahead() if d is not None else "", run_a=v.ref_run, run_b=v.run,
        intervention=record.sufficient if is_proven else "",
    )


def _scan_facts(record: ExplainRecord, label: RunLabel) -> list[tuple[str, str]]:
    """The root-event scan's facts: which run is changed, the alternatives, the specificity."""
    facts = []
    if record.proof_how in EVENT_WORDS:
        facts.append(("the event changes", EVENT_WORDS[record.proof_how]))
    if record.proof_run:
        other = record.ref_run if record.proof_run == record.run else record.run
        facts.append(("changed run", f"{label(record.proof_run)} (it then gives {label(other)}'s tokens)"))
    if record.alternatives > 0:
        scanned = (f"the earliest {record.candidates} of {record.candidates_all}"
                   if record.candidates_all > record.candidates else f"{record.candidates}")
        facts.append(("alternatives", f"1 of {record.alternatives} events that each suffice "
                                      f"(of {scanned} scanned)"))
    if record.placebo >= 0:
        weak = "weak: a near-tie" if is_weak(record.placebo) else "specific"
        facts.append(("specificity", f"{record.placebo:.0%} of random routings there also restore ({weak})"))
    if record.chain_end:
        events = chain_events(record)
        last = record.chain_reach.split()[-1] if record.chain_reach else str(record.reach)
        whole = " (the whole completion)" if record.chain_end == "whole" else ""
        said = f"{events} event{'s' if events > 1 else ''} restore {last} of {record.reach_of} new tokens"
        facts.append(("chain", f"{said}{whole}"))
    return facts
