"""The text `moe-inspector explain` prints: what was rerun, and the confirmed causes with their shares."""

from __future__ import annotations

from lab.counterfactual.explain import ExplainResult
from lab.experiments.tables import markdown_table, percent
from traces import fingerprint
from traces.analysis.cause_table import CauseName
from traces.analysis.reproduction import Level
from traces.analysis.root_summary import map_summary
from traces.analysis.summary import CauseSummary


def cause_table(summary: CauseSummary) -> str:
    """`| cause | runs | share |` over the divergent runs, most common first."""
    rows = [(cause, count, percent(share)) for cause, count, share in summary.rows()]
    return markdown_table(["confirmed cause", "divergent runs", "share"], rows)


def _reproduction_lines(result: ExplainResult) -> list[str]:
    """How the reruns reproduced the recorded runs, and on which machines."""
    lines = []
    if result.levels:
        counts = {level: sum(1 for v in result.levels.values() if v == level) for level in Level}
        lines.append(f"Reruns as recorded: {counts[Level.BITWISE]} runs reproduced bitwise, "
                     f"{counts[Level.DECISIONS]} at the decisions level (same tokens, experts, kept sets, "
                     f"slots and loads), {counts[Level.NOT_REPRODUCED]} not reproduced.")
        drift = ", ".join(f"{path} {value:.2g}" for path, value in result.drift.items() if value > 0)
        if drift:
            lines.append(f"Float drift of the reruns (largest |difference| per dataset): {drift}.")
    if result.not_reproduced:
        lines.append(f"Not reproduced (a decision differs), counted as unexplained: runs "
                     f"{', '.join(result.not_reproduced)}.")
    if result.kept_stronger:
        lines.append(f"--redo kept {result.kept_stronger} earlier verdicts whose reruns were stronger "
                     f"evidence.")
    recorded, rerun = result.recorded_machine, result.rerun_machine
    changed = fingerprint.differences(recorded, rerun)
    here, there = fingerprint.short_name(rerun), fingerprint.short_name(recorded)
    if not recorded:
        lines.append(f"Rerun on {here}; the trace does not record its machine.")
    elif changed:
        lines.append(f"Recorded on {there}, rerun on {here}: {'; '.join(changed)}.")
    else:
        lines.append(f"Recorded and rerun on the same kernels: {here}.")
    return lines


def proof_lines(result: ExplainResult) -> list[str]:
    """How the divergent pairs were proven (single events, minimal sets, necessity, reach) and what the
    search cost: the records of the table whose proof comes from the complete search."""
    searched = [r for r in result.records if r.diverged and r.proof_reruns >= 0]
    if not searched:
        return []
    proven = [r for r in searched if r.proven]
    single = sum(1 for r in proven if r.proof_size == 1)
    sets = sorted(r.proof_size for r in proven if r.proof_size > 1)
    sizes = f" of {sets[0]}-{sets[-1]} events" if sets else ""
    necessary = sum(1 for r in proven if r.necessary)
    whole = sum(1 for r in proven if r.reach_of >= 0 and r.reach >= r.reach_of)
    reruns = sorted(r.proof_reruns for r in searched)
    median = reruns[len(reruns) // 2]
    lines = [f"Proven cause (sufficient through the first split): {len(proven)} of {len(searched)} "
             f"searched pairs, {single} by a single event and {len(sets)} by a 1-minimal set{sizes}; "
             f"{necessary} also necessary; {whole} restore the whole completion."]
    roots = map_summary(searched).describe()
    if roots:
        lines.append(roots)
    if result.rerun:
        lines.append(f"Cost of this call: {result.generations} batches generated ({result.trials} search "
                     f"trials), {result.seconds / 60:.1f} minutes, {result.seconds / result.rerun:.1f} s per "
                     f"divergent pair; the stored searches took {median} reruns per pair (median), "
                     f"{reruns[-1]} at most.")
    return lines


def describe(result: ExplainResult) -> str:
    """The summary printed after an `explain` call."""
    s = result.summary()
    lines = [
        f"{result.path}: {result.compared} runs compared with their reference, {result.divergent} divergent; "
        f"{result.rerun} explained by reruns in this call ({result.generations} batches generated with "
        f"{result.checkpoint} on {result.device}, {result.seconds:.1f} s)"
        + (f", {result.reused} kept from an earlier call." if result.reused else "."),
    ]
    if result.skipped:
        why = "interrupted" if result.interrupted else "--limit"
        lines.append(f"{result.skipped} divergent runs left for a later call ({why}).")
    elif result.interrupted:
        lines.append("Interrupted: the runs explained so far are stored.")
    lines += _reproduction_lines(result)
    lines += proof_lines(result)
    if not result.records:
        lines.append("No request has two runs of one condition: nothing to explain.")
        return "\n".join(lines)
    lines += ["", f"Table /tables/{result.table}: {s.n_runs} runs, {s.n_divergent} divergent "
                  f"(the stored explanations, this call's and earlier ones)."]
    if s.n_divergent:
        lines += ["", cause_table(s)]
    per_condition = result.by_condition()
    if len(per_condition) > 1:
        for condition, summary in per_condition.items():
            lines += ["", f"{condition or '(no condition)'}: {summary.describe()}"]
    tail = f"Unexplained share: {percent(s.unexplained_share)} of {s.n_divergent} divergent runs"
    not_reproduced = s.shares.get(CauseName.NOT_REPRODUCED, 0.0)
    if not_reproduced:
        tail += f" (of which not reproduced by the reruns: {percent(not_reproduced)})"
    lines += ["", tail + "."]
    return "\n".join(lines)
