"""The plain-language sentence of a verdict (`VerdictRecord`): the same words in the GUI, the export and
the tables. Sentences name runs through a `RunLabel` ("run r1" by default; the cause panel calls its two
runs "A" and "B"), so a view that names runs otherwise passes a label instead of rewriting the words."""

from __future__ import annotations

from collections.abc import Callable

from traces.analysis import cause_table as table
from traces.analysis.displacement import capacity_text
from traces.analysis.verdict_record import KIND_WORDS, DifferenceKind, VerdictRecord

#: How a sentence names a run.
RunLabel = Callable[[str], str]


def run_label(run: str) -> str:
    """'run r1': a run by its whole name."""
    return f"run {run}"


def letter_labels(run_a: str, run_b: str) -> RunLabel:
    """A label that calls `run_a` "A" and `run_b` "B" (any other run, or both when they are one run,
    'run <name>')."""
    letters = {run_a: "A", run_b: "B"} if run_a and run_b and run_a != run_b else {}
    return lambda run: letters.get(run, run_label(run))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def quoted_token(vocab: list[str] | None, token: int) -> str:
    """A token as its vocabulary string in quotes, or as 'token 17' without a vocabulary."""
    if vocab is not None and 0 <= token < len(vocab):
        return repr(vocab[token])
    return f"token {token}"


def _num(x: float) -> str:
    return f"{x:.3g}"


def _experts(experts: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(e) for e in experts) + "]"


def _whose(v: VerdictRecord, probe: bool) -> str:
    return "the probe's" if probe else f"request {v.request}'s"


def numeric_flip(v: VerdictRecord) -> str:
    """A numeric cause at the output in words: 'the next token flipped by a logit change of 6.69 at a
    near-tie of 0.0628' (the largest logit difference against the reference's top-2 margin at the
    position before the split), or without logits at hand 'the next token flipped at a near-tie'."""
    if v.logit_delta == v.logit_delta and v.logit_margin == v.logit_margin:
        return (f"the next token flipped by a logit change of {_num(v.logit_delta)} at a near-tie of "
                f"{_num(v.logit_margin)}")
    return "the next token flipped at a near-tie (the logits were not recorded)"


def describe_verdict(v: VerdictRecord, vocab: list[str] | None = None, label: RunLabel = run_label) -> str:
    """Event sentence, then how the tokens split, then the first bitwise difference when elsewhere;
    runs named by `label`."""
    parts = [_event(v, label)]
    if v.diverged:
        parts.append(_split(v, vocab, label))
    elif v.cause != table.IDENTICAL:
        n = v.compared - v.prompt_len
        parts.append(f"The completions still agree over the {n} new token{'s' if n != 1 else ''} compared.")
    if v.root is not None and (v.root.position, v.root.layer) != (v.position, v.layer):
        parts.append(f"(The runs first differ bitwise at {v.root.describe()}.)")
    return " ".join(parts)


def _event(v: VerdictRecord, label: RunLabel) -> str:
    at = f"Position {v.position}, layer {v.layer}:"
    ref, run = label(v.ref_run), label(v.run)
    pair = f"{ref} row {v.ref_row}"
    if v.cause == table.CAPACITY:
        return _capacity(v, at, label)
    if v.cause == table.ROUTER_FLIP:
        return (f"{at} router flip at a near-tie: {_whose(v, v.is_probe)} experts changed from "
                f"{_experts(v.ref_experts)} in {ref} to {_experts(v.experts)} in {run} "
                f"(router margin {_num(v.router_margin)} between its {ordinal(v.rank + 1)} and "
                f"{ordinal(v.rank + 2)} choice, router logits differ by up to {_num(v.router_delta)}).")
    if v.cause == table.SEEDED_RANDOM:
        return (f"{at} same router logits, different experts ({_experts(v.ref_experts)} in {ref}, "
                f"{_experts(v.experts)} in {run}): a seeded random choice.")
    if v.cause == table.RENORMALIZATION:
        kept = [e for e, k in zip(v.ref_experts, v.ref_kept, strict=True) if k]
        gates_ref = ", ".join(_num(g) for g in v.ref_gates)
        gates = ", ".join(_num(g) for g in v.gates)
        return (f"{at} same router logits and kept experts {_experts(tuple(kept))}, different weights "
                f"({gates_ref} in {ref}, {gates} in {run}): the after-drop "
                f"renormalization differs.")
    if v.cause == table.UPSTREAM_NUMERIC:
        return (f"{at} the router logits differ by up to {_num(v.router_delta)} although all earlier routing "
                f"was identical: a numeric difference upstream of the router (router margin there "
                f"{_num(v.router_margin)}); no choice of experts or kept set differs "
                f"{'before the tokens split' if v.diverged else 'in the positions compared'}.")
    if v.cause == table.NUMERIC_ROUTING:
        return (f"{at} routing changed without a capacity limit (numeric): {_whose(v, v.is_probe)} experts "
                f"changed from {_experts(v.ref_experts)} in {ref} to {_experts(v.experts)} in run "
                f"{v.run}, with identical routing before it; the engine computes every chosen expert "
                f"(dropless), so only a numeric difference in the router's input can change them (router "
                f"logits were not recorded).")
    if v.cause == table.TOKEN_NEAR_TIE:
        return (f"Next-token near-tie: routing is identical up to the divergence, and the token chosen "
                f"after position {v.position} differs (router logits were not recorded; the recorded "
                f"log-probability margin says how near the tie was).")
    if v.cause == table.OUTPUT_NUMERIC:
        return (f"Routing is identical up to the divergence; the next-token {plural(v.values)} first differ "
                f"at position {v.position}: a numeric difference in the expert or attention reductions.")
    if v.cause == table.UNEXPLAINED:
        return (f"The tokens differ at position {v.t_star} but no routing or logit difference "
                f"precedes it (against {pair}).")
    return f"{_capital(run)} row {v.row} and {pair} {agreement(v)} over {v.compared} positions."


def agreement(v: VerdictRecord) -> str:
    """'agree bitwise on tokens, routing and logits', or, for a pair with an engine's run, what was
    compared and what was not (`Verdict.parts`)."""
    if set(KIND_WORDS) <= set(v.parts):
        return "agree bitwise on tokens, routing and logits"
    D = DifferenceKind
    said = [KIND_WORDS[k] for k in (D.EXPERT, D.KEPT, D.ROUTER_LOGITS, D.GATE) if k in v.parts]
    unrecorded = [KIND_WORDS[k] for k in (D.ROUTER_LOGITS, D.GATE) if k not in v.parts]
    notes = [f"the engine records no {' or '.join(unrecorded)}"] if unrecorded else []
    if D.LOGITS not in v.parts:
        notes.append(f"next-token {plural(v.values)} compared as values, not bitwise")
    text = f"agree on tokens, {_and(said)}"
    return f"{text} ({'; '.join(notes)})" if notes else text


def plural(word: str) -> str:
    """'logit' -> 'logits', 'log-probability' -> 'log-probabilities'."""
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


def _and(words: list[str]) -> str:
    return " and ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + " and " + words[-1]


def _capacity(v: VerdictRecord, at: str, label: RunLabel) -> str:
    d, c = v.displacement, v.counterpart
    known = len(v.ref_experts) if d is not None else min(len(v.ref_experts), len(v.ref_kept), len(v.slots),
                                                         len(v.ref_slots))
    if not 0 <= v.rank < known:
        return f"{at} a candidate was kept in one run and dropped in the other (capacity)."
    choice = f"{ordinal(v.rank + 1)} choice expert {v.ref_experts[v.rank]}"
    if d is None:
        in_other = v.ref_kept[v.rank]
        dropper = v.run if in_other else v.ref_run
        slot = v.slots[v.rank] if in_other else v.ref_slots[v.rank]
        probe = v.is_probe if in_other else v.ref_is_probe
        return (f"{at} {_whose(v, probe)} {choice} was dropped in {label(dropper)} (slot {slot}; the "
                f"whole run is not at hand to name who took the slots ahead).")
    text = (f"{at} {_whose(v, d.is_probe)} {choice} was dropped in {label(d.run)} "
            f"({capacity_text(d.capacity)} in group {d.group} of step {d.step}, slot {d.slot}); "
            f"{d.describe_ahead()}.")
    if c is not None:
        text += f" In {label(c.run)} it was kept (slot {c.slot}, {capacity_text(c.capacity)})."
    return text


def _split(v: VerdictRecord, vocab: list[str] | None, label: RunLabel) -> str:
    text = (f"The tokens split at position {v.t_star} (new token {v.new_index}): "
            f"{quoted_token(vocab, v.ref_token)} in {label(v.ref_run)}, "
            f"{quoted_token(vocab, v.token)} in {label(v.run)}")
    if v.logit_margin == v.logit_margin:  # not NaN: logits are at hand
        text += (f"; the reference's top-2 {v.values} margin at position {v.t_star - 1} was "
                 f"{_num(v.logit_margin)} against a {v.values} difference of up to {_num(v.logit_delta)}")
    return text + "."
