"""Explain every divergence of a trace by counterfactual reruns, and store the verdicts in the trace.

For each request with two or more runs under one condition (`pairs`), every run is compared with
the reference by `traces.analysis.explain_pair` (the guess). Each run whose completion differs is
then rerun with the model (`reruns`): both batches as recorded (checked bit for bit), dropless,
with batch-invariant kernels, and the divergent row forced to replay the reference's recorded
routing. When that replay restores the reference's tokens, `search.prove` finds the proven cause:
the event, or 1-minimal set of events, whose intervention alone removes the split, with its
necessity and reach. `decide` turns the guess, the reruns and the proof's kind into a confirmed
cause, and `store` writes the records to the table `explain_counterfactual` of the trace.

A rerun on another machine or thread count rarely gives the recorded floats back bit for bit; it is
enough that it takes the same decisions (`traces.analysis.reproduction`). Each record says at which
level its runs were reproduced and how far the floats drifted, and the sentence names both machines
when they differ. `redo` never replaces a verdict with weaker evidence: a cause confirmed on bitwise
reruns stays when a rerun elsewhere only reproduces the decisions, or nothing; a proven event weighs
more than bitwise reruns without one (`evidence_rank`).

Divergent pairs are taken in turns across the groups (the first of every request and condition,
then the second of each, ...), so `--limit` samples every condition. Pairs an earlier call already
confirmed and mapped with the same checkpoint are kept rather than rerun (unless `redo`); a pair whose
record predates the complete search or the causal map is rerun and mapped. So a call stopped by
Ctrl-C or `--limit` resumes where it stopped; Ctrl-C stores the pairs done so far. Progress counts
the comparisons, then the reruns, as one bar.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lab.counterfactual.causal_map import MapRunner
from lab.counterfactual.decide import Evidence, decide, rerun_text
from lab.counterfactual.pairs import Group, plan_groups
from lab.counterfactual.reruns import RerunError, Reruns
from lab.counterfactual.search import Proof, prove
from lab.counterfactual.source import (
    ExplainError,
    checkpoint_digest,
    checkpoint_name,
    load_hf_model,
    load_model,
    resolve_checkpoint,
)
from lab.counterfactual.store import TABLE, earlier_records, record_key, store
from lab.experiments.progress import ProgressFn, no_progress
from model.device import resolve_device
from model.fingerprint import machine_fingerprint
from traces import fingerprint, open_trace
from traces.analysis import ExplainRecord, Verdict, explain_pair, row_trace
from traces.analysis.causal_map import PairMap, format_decisive, format_links, map_text
from traces.analysis.cause_table import IDENTICAL, NOT_REPRODUCED, OUTPUT_NUMERIC
from traces.analysis.explain_table import (
    evidence_rank,
    outcome_fields,
    summarize_records,
    with_counterfactuals,
)
from traces.analysis.map_outcome import pair_outcome
from traces.analysis.proof import ProofKind, format_cells, necessity_text, proof_sentence, reach_text
from traces.analysis.reference import condition_of
from traces.analysis.reproduction import Level, weakest
from traces.analysis.summary import CauseSummary
from traces.records import KernelMode

log = logging.getLogger(__name__)

#: A divergent pair: the analysis' verdict and its table record (counterfactuals not yet filled in).
Pair = tuple[Verdict, ExplainRecord]

@dataclass
class ExplainResult:
    """What one `explain` call did; `records` are every record of the table after the call."""

    path: str
    checkpoint: str
    device: str
    table: str
    records: list[ExplainRecord]
    conditions: dict[str, str]          # run -> condition
    compared: int = 0                   # pairs compared in this call
    divergent: int = 0                  # of which diverge
    rerun: int = 0                      # divergent pairs explained by reruns in this call
    reused: int = 0                     # divergent pairs an earlier call had explained
    skipped: int = 0                    # divergent pairs left for a later call (--limit or Ctrl-C)
    generations: int = 0                # batches generated
    trials: int = 0                     # of which counterfactual trials of the proof search
    seconds: float = 0.0
    interrupted: bool = False
    not_reproduced: list[str] = field(default_factory=list)
    kept_stronger: int = 0              # --redo pairs whose earlier, stronger verdict was kept
    levels: dict[str, str] = field(default_factory=dict)    # run -> reproduction level of its rerun
    drift: dict[str, float] = field(default_factory=dict)   # dataset -> largest float drift of the reruns
    recorded_machine: dict = field(default_factory=dict)    # fingerprint stored in the trace
    rerun_machine: dict = field(default_factory=dict)       # fingerprint of this call's reruns
    maps: dict = field(default_factory=dict)                # pair key -> causal map made in this call

    def summary(self) -> CauseSummary:
        """Counts and shares of the confirmed causes over every record of the table."""
        return summarize_records(self.records)

    def by_condition(self) -> dict[str, CauseSummary]:
        groups: dict[str, list[ExplainRecord]] = {}
        for r in self.records:
            groups.setdefault(self.conditions.get(r.run, ""), []).append(r)
        return {c: summarize_records(rs) for c, rs in groups.items()}


def explain(path: str | Path, *, checkpoint: str | None = None, device: str = "cpu",
            requests: list[int] | None = None, limit: int | None = None, redo: bool = False,
            progress: ProgressFn = no_progress) -> ExplainResult:
    """Load the trace's model (or `checkpoint`) on `device` and run `explain_trace`.

    Raises `traces.TraceError` for an unusable trace and `ExplainError` for a bad option.
    """
    if limit is not None and limit < 1:
        raise ExplainError(f"--limit: must be at least 1, got {limit}")
    with open_trace(path) as trace:
        meta = trace.record
    torch_device = resolve_device(device, ExplainError)
    if meta.model_source == "huggingface":
        model, stem = load_hf_model(meta, checkpoint, torch_device, path)
    else:
        stem = resolve_checkpoint(meta, path, checkpoint)
        model = load_model(meta, stem, torch_device)
    return explain_trace(path, model, checkpoint=checkpoint_name(stem, path), device=str(torch_device),
                         requests=requests, limit=limit, redo=redo, progress=progress,
                         digest=checkpoint_digest(stem))


def explain_trace(path: str | Path, model, *, checkpoint: str = "", device: str = "cpu",
                  requests: list[int] | None = None, limit: int | None = None, redo: bool = False,
                  progress: ProgressFn = no_progress, digest: str = "") -> ExplainResult:
    """Confirm the cause of the divergences of `requests` (default all) in trace `path` with `model`.

    `limit` caps the divergent pairs rerun in this call; `redo` reruns pairs an earlier call with
    the same checkpoint (by `checkpoint` name, or by content `digest`, `checkpoint_digest`) already
    explained. Raises `traces.TraceError` for an unusable trace and
    `ExplainError` for a request the trace does not hold.
    """
    started = time.perf_counter()
    path = str(path)
    with open_trace(path) as trace:
        if requests is not None:
            bad = [r for r in requests if not 0 <= r < len(trace.requests)]
            if bad:
                raise ExplainError(f"--request: the trace holds requests 0..{len(trace.requests) - 1}, "
                                   f"not {bad[0]}")
        order = {name: i for i, name in enumerate(trace.run_names)}
        conditions = {name: condition_of(trace.run(name).record) for name in order}
        reruns = Reruns(trace, model)  # runs the trace's kernels where this build has them
        mapper = MapRunner(reruns)
        result = ExplainResult(path, checkpoint, device, TABLE, [], conditions,
                               recorded_machine=dict(trace.record.machine or {}),
                               rerun_machine=machine_fingerprint(
                                   device, model.kernel_version, model.kernel_path))
        earlier = earlier_records(trace, checkpoint, digest)
        machines = _machines_text(result.recorded_machine, result.rerun_machine)
        fresh: dict = {}
        try:
            todo = _compare(trace, plan_groups(trace, requests), result, fresh, progress)
            todo = _reuse(todo, earlier, result, fresh, limit, redo)
            compared = result.compared
            for i, (verdict, record) in enumerate(todo):
                key = record_key(record)
                new = _confirm(record, verdict, reruns, mapper, machines, result.maps)
                old = earlier.get(key)
                if old is not None and evidence_rank(old) > evidence_rank(new):
                    log.info("kept the earlier verdict of run %s row %d (%s, %s) over this rerun's (%s, %s)",
                             record.run, record.row, old.confirmed_cause, old.reproduction,
                             new.confirmed_cause, new.reproduction)
                    # The map measured now still belongs to the pair: the kept verdict gets it.
                    new = with_map(old, result.maps[key]) if key in result.maps else old
                    result.kept_stronger += 1
                fresh[key] = new
                result.rerun += 1
                progress(compared + i + 1, compared + len(todo),
                         f"request {verdict.request}, run {verdict.run} row {verdict.row}")
        except KeyboardInterrupt:
            result.interrupted = True
            result.skipped = result.divergent - result.rerun - result.reused
            log.info("interrupted after %d divergent pairs", result.rerun)
        result.generations = reruns.generations
        result.trials = reruns.trials
        result.not_reproduced = reruns.not_reproduced()
        result.levels = reruns.levels()
        result.drift = _largest_drift(reruns.reproductions())
    records = {**earlier, **fresh}
    result.records = sorted(records.values(), key=lambda r: (order.get(r.run, len(order)), r.row))
    result.seconds = time.perf_counter() - started
    if fresh:
        store(path, result.records, checkpoint=checkpoint, device=device,
              not_reproduced=result.not_reproduced, rerun_machine=result.rerun_machine, maps=result.maps,
              **({"checkpoint_sha256": digest} if digest else {}))
    return result


def _compare(trace, groups: list[Group], result: ExplainResult, out: dict,
             progress: ProgressFn) -> list[Pair]:
    """Compare every pair; store the agreeing ones in `out` and return the divergent ones, in turns
    across the groups. Progress counts the comparisons; the reruns then continue the same count."""
    vocab = trace.vocab
    total = sum(len(g.others) for g in groups)
    queues = []
    for group in groups:
        rows = {m: row_trace(trace.run(m[0]), m[1]) for m in group.members}
        ref = rows[group.reference]
        queue = []
        for member in group.others:
            verdict = explain_pair(ref, rows[member])
            record = ExplainRecord.from_verdict(verdict, vocab)
            result.compared += 1
            progress(result.compared, total,
                     f"compared request {group.request}, run {member[0]} row {member[1]}")
            if verdict.diverged:
                queue.append((verdict, record))
            else:
                confirmed = IDENTICAL if verdict.cause == IDENTICAL else ""
                out[record_key(record)] = dataclasses.replace(record, confirmed_cause=confirmed)
        queues.append(queue)
        result.divergent += len(queue)
    longest = max((len(q) for q in queues), default=0)
    return [q[i] for i in range(longest) for q in queues if i < len(q)]


def _reuse(todo, earlier: dict, result: ExplainResult, out: dict, limit: int | None,
           redo: bool) -> list[Pair]:
    """Keep the pairs an earlier call confirmed and mapped (a pair it could not reproduce is tried again,
    and so is one whose record predates the complete search or the causal map), cap the rest at `limit`;
    return those to rerun."""
    rerun = []
    for verdict, record in todo:
        old = earlier.get(record_key(record))
        current = old is not None and old.proof_reruns >= 0 and old.map_cells >= 0
        if current and old.confirmed_cause not in ("", NOT_REPRODUCED) and not redo:
            out[record_key(record)] = old
            result.reused += 1
        elif limit is not None and len(rerun) >= limit:
            result.skipped += 1
        else:
            rerun.append((verdict, record))
    return rerun


def _confirm(record: ExplainRecord, v: Verdict, reruns: Reruns, mapper: MapRunner, machines: str,
             maps: dict) -> ExplainRecord:
    """Rerun one divergent pair and fill in its counterfactual columns, reproduction level, causal map,
    proven cause (event or minimal set, necessity, reach) and confirmed cause."""
    try:
        evidence, proof, pair_map = _evidence(v, reruns, mapper)
    except RerunError as exc:
        sentence = f"{record.sentence} Reruns impossible: {exc}. Confirmed: {NOT_REPRODUCED}."
        return dataclasses.replace(record, confirmed_cause=NOT_REPRODUCED, reproduction="", sentence=sentence)
    decision = decide(evidence)
    reproductions = (reruns.reproduction(v.ref_run), reruns.reproduction(v.run))
    extra = "".join(f" Run {r.run} rerun took another decision: {r.difference}." for r in reproductions
                    if not r.reproduced)
    said = f" {map_text(pair_map, v.run, v.ref_run)}" if pair_map is not None else ""
    sentence = (f"{record.sentence} {rerun_text(evidence, v.t_star)}{said}{_proof_text(v, proof, evidence)}"
                f"{extra}{machines} Confirmed: {decision.cause} ({decision.reason}).")
    updated = with_counterfactuals(record, dropless_same=evidence.dropless_same,
                                   invariant_same=evidence.invariant_same, replay_same=evidence.replay_same,
                                   confirmed_cause=decision.cause)
    lead = proof.lead
    kind = proof.kind or (ProofKind.OUTPUT_NUMERIC if decision.cause == OUTPUT_NUMERIC else "")
    updated = dataclasses.replace(
        updated, sentence=sentence, reproduction=evidence.level, drift=evidence.drift, keep_same=proof.keep,
        withdraw_same=proof.withdraw, logits_same=proof.logits, sufficient=evidence.sufficient,
        scope=proof.scope, proof_step=lead.step if lead else -1, proof_layer=lead.layer if lead else -1,
        proof_position=lead.position if lead else -1, proof_kind=kind,
        proof_cells=format_cells((e.layer, e.position) for e in proof.events), proof_size=len(proof.events),
        proof_reruns=proof.reruns, necessary=proof.necessary, reach=proof.reach, reach_of=proof.n_new,
        proof_how=lead.how if lead and len(proof.events) == 1 else "", proof_run=lead.run if lead else "")
    if pair_map is None:   # a dense model: no routing cell to map (0, so that a later call keeps it)
        return dataclasses.replace(updated, map_cells=0)
    maps[record_key(record)] = pair_map
    return with_map(updated, pair_map)


def with_map(record: ExplainRecord, m: PairMap) -> ExplainRecord:
    """`record` with the causal map's columns (versions 5 and 6) filled in."""
    nan = float("nan")
    return dataclasses.replace(
        record, map_baseline=m.baseline.get("B", nan), map_baseline_ref=m.baseline.get("A", nan),
        map_joint=m.joint.get("B", nan), map_joint_ref=m.joint.get("A", nan),
        map_sum=m.sum_singles.get("B", nan), map_sum_ref=m.sum_singles.get("A", nan),
        map_cells=sum(1 for c in m.cells if c.patched == "B"),
        map_exact=sum(1 for c in m.cells if c.exact), decisive_cells=format_decisive(m),
        concentration=m.concentration(), map_chain=format_links(m.chain), map_seconds=m.seconds,
        **outcome_fields(pair_outcome(m)))


def _proof_text(v: Verdict, proof: Proof, e: Evidence) -> str:
    """' Proven cause: ... Necessary ... Reach ...' or what the search found not to suffice."""
    if proof.events:
        lead = proof.lead
        other = v.ref_run if lead.run == v.run else v.run
        how = lead.how if len(proof.events) == 1 else ""
        parts = [proof_sentence(e.sufficient, len(proof.events), proof.kind, v.t_star, v.new_index,
                                lead.run, other, how),
                 necessity_text(proof.necessary), reach_text(proof.reach, proof.n_new),
                 f"The search took {proof.reruns} reruns."]
        return " " + " ".join(p for p in parts if p)
    if e.replay_same:
        return (f" No event at the map's strongest cells and no set of the differing events found by delta "
                f"debugging restores the reference's tokens ({proof.reruns} reruns).")
    return ""


def _machines_text(recorded: dict, rerun: dict) -> str:
    """' Recorded on X, rerun on Y (threads 1 -> 2).' when the machines differ, else ''."""
    if not recorded:
        return f" Rerun on {fingerprint.short_name(rerun)}; the trace does not record its machine."
    changed = fingerprint.differences(recorded, rerun)
    if not changed:
        return ""
    return (f" Recorded on {fingerprint.short_name(recorded)}, rerun on {fingerprint.short_name(rerun)} "
            f"({'; '.join(changed)}).")


def _evidence(v: Verdict, reruns: Reruns, mapper: MapRunner) -> tuple[Evidence, Proof, PairMap | None]:
    ref_run, ref_row, run, row = v.ref_run, v.ref_row, v.run, v.row
    ref_s, s = reruns.settings(ref_run), reruns.settings(run)
    coupled, native = ref_s.coupled or s.coupled, KernelMode.NATIVE in (ref_s.kernel_mode, s.kernel_mode)
    reproductions = (reruns.reproduction(ref_run), reruns.reproduction(run))
    level = weakest(r.level for r in reproductions)
    drift = _drift_text(reproductions)
    if level == Level.NOT_REPRODUCED:
        return Evidence(v.cause, False, None, None, None, coupled, native, level=level), Proof(), None
    n_new = min(ref_s.max_new_tokens, s.max_new_tokens)

    def agree(variant: str) -> bool | None:
        a, b = reruns.tokens(ref_run, variant), reruns.tokens(run, variant)
        if a is None or b is None:
            return None
        return _completion(a[ref_row], v.prompt_len, n_new) == _completion(b[row], v.prompt_len, n_new)

    dropless, invariant = agree("dropless"), agree("batch_invariant")
    replay_same = None
    if reruns.model.config.is_moe:
        reference = np.asarray(reruns.trace.run(ref_run).tokens[ref_row, : v.t_star + 1]).astype(int).tolist()
        replayed = reruns.trial(run, row, reference, replay={row: reruns.reference_routing(ref_run, ref_row)})
        replay_same = list(replayed[: v.t_star + 1]) == reference
    as_recorded = [reruns.as_recorded(ref_run, variant) and reruns.as_recorded(run, variant)
                   for variant in ("dropless", "batch_invariant")]
    pair_map = mapper.pair(v) if reruns.model.config.is_moe else None
    strongest = sorted((c for c in pair_map.cells if c.patched == "B"),
                       key=lambda c: (not c.beats_null, -abs(c.effect))) if pair_map else []
    proof = prove(v, reruns, [(c.layer, c.position) for c in strongest]) if replay_same else Proof()
    evidence = Evidence(v.cause, True, dropless, invariant, replay_same, coupled, native, *as_recorded,
                        level=level, drift=drift, proof_kind=proof.kind, sufficient=proof.words(v))
    return evidence, proof, pair_map


def _largest_drift(reproductions) -> dict[str, float]:
    """The largest float drift of each dataset over some reruns."""
    drift: dict[str, float] = {}
    for r in reproductions:
        for path, value in r.drift.items():
            drift[path] = max(drift.get(path, 0.0), value)
    return drift


def _drift_text(reproductions) -> str:
    """The largest float drift of each dataset over both runs' reruns, as text ('' when none)."""
    drift = _largest_drift(reproductions)
    return ", ".join(f"{path} {value:.2g}" for path, value in drift.items() if value > 0)


def _completion(tokens: list[int], prompt_len: int, n_new: int) -> list[int]:
    return list(tokens[prompt_len: prompt_len + n_new])
