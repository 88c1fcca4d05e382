"""Rows of the run browser: each run's composition, drops, completion and divergence mark."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from inspector.figure_data.tokens import preview
from traces import TraceError
from traces.analysis import reference
from traces.run_table import RunSummary, first_difference, read_summaries, summarise_run


def _capacity_text(routing: Mapping) -> str | None:
    """`cf 1.25 deepspeed`, `C=64` or `dropless`, from flat knobs (`capacity_mode`, ...) or a
    nested `capacity` dict (`{"kind": "factor", "cf": ...}`)."""
    nested = routing.get("capacity")
    if isinstance(nested, Mapping):
        mode = nested.get("kind") or nested.get("mode")
        factor, fixed = nested.get("cf", nested.get("factor")), nested.get("C")
        formula = nested.get("formula")
    else:
        mode = routing.get("capacity_mode")
        factor, fixed = routing.get("capacity_factor"), routing.get("fixed_capacity")
        formula = routing.get("capacity_formula")
    if mode == "dropless":
        return "dropless"
    if mode == "fixed":
        return f"C={fixed}"
    if mode == "factor":
        return f"cf {factor}" + (f" {formula}" if formula else "")
    return None


def routing_summary(routing: object) -> str:
    """One line naming the resolved routing knobs of a run, e.g.
    `k=2 · group batch · cf 1.0 deepspeed · kmajor_position · norm before_drop`; defaults that
    rarely change (batch-major flattening, softmax scores) are named only when they differ."""
    if not isinstance(routing, Mapping):
        return "" if routing is None else str(routing)
    parts = []
    if routing.get("top_k") is not None:
        parts.append(f"k={routing['top_k']}")
    group_by = routing.get("group_by")
    if group_by:
        size = routing.get("group_size")
        parts.append(f"group {group_by}" + (f" ({size})" if group_by == "fixed" and size else ""))
    capacity = _capacity_text(routing)
    if capacity:
        parts.append(capacity)
    priority = routing.get("priority")
    if priority:
        parts.append(priority + (f" seed {routing.get('seed')}" if priority == "random" else ""))
    if routing.get("norm"):
        parts.append(f"norm {routing['norm']}")
    if routing.get("flatten") not in (None, "batch_major"):
        parts.append(str(routing["flatten"]))
    if routing.get("score_fn") not in (None, "softmax"):
        parts.append(str(routing["score_fn"]))
    return " · ".join(parts) if parts else json.dumps(routing, sort_keys=True)


@dataclass(frozen=True)
class RunInfo:
    """What the run's attributes say: cheap, known as soon as the trace opens."""

    name: str
    index: int
    complete: bool
    label: str
    condition: str
    experiment: str
    batch_size: int
    request_ids: tuple[int, ...]
    probe_row: int
    routing: str             # one-line summary
    routing_json: str        # every knob, for the tooltip
    kernel_mode: str
    compared_in: str = ""    # the condition its reference is chosen in (traces.analysis.reference)

    @property
    def focus_row(self) -> int:
        """The row whose completion the browser shows: the probe, else row 0."""
        return self.probe_row if self.probe_row >= 0 else 0

    @property
    def focus_request(self) -> int:
        return self.request_ids[self.focus_row] if self.request_ids else -1

    @property
    def requests_text(self) -> str:
        ids = self.request_ids
        shown = ", ".join(str(r) for r in ids[:8])
        return shown + (f", … ({len(ids)})" if len(ids) > 8 else "")


@dataclass(frozen=True)
class RunStats:
    """What needs reading a run's arrays: drops and the focus row's completion."""

    name: str
    batch_dropped: int       # dropped candidates of the whole batch, all layers and steps
    batch_requested: int     # candidates of the whole batch
    focus_dropped: int       # dropped candidates of the focus row (probe, else row 0)
    prompt_len: int          # prompt length of the focus row
    completion: np.ndarray = field(repr=False)  # generated token ids of the focus row
    preview: str = ""

    @property
    def drop_rate(self) -> float:
        return self.batch_dropped / self.batch_requested if self.batch_requested else 0.0


def run_info(run) -> RunInfo:
    """The browser's cheap columns, from a `traces` Run's record."""
    record = run.record
    return RunInfo(
        name=run.name, index=-1 if record.index is None else int(record.index), complete=bool(run.complete),
        label=record.label, condition=record.condition, experiment=record.experiment,
        batch_size=int(run.batch_size), request_ids=tuple(int(r) for r in record.request_ids),
        probe_row=int(run.probe_row), **routing_texts(record.routing),
        kernel_mode=record.kernel_mode, compared_in=reference.condition_of(record),
    )


def routing_texts(routing) -> dict[str, str]:
    """A run's routing knobs as RunInfo shows them: one line (`routing`) and every knob (`routing_json`)."""
    return {"routing": routing_summary(routing),
            "routing_json": json.dumps(routing, indent=1, sort_keys=True) if routing is not None else ""}


def run_stats(run, vocab: Sequence[str]) -> RunStats:
    """Read the load tables and the focus row to count drops and decode the completion."""
    return summary_stats(summarise_run(run), vocab)


def summary_info(summary: RunSummary, texts: dict[str, str] | None = None) -> RunInfo:
    """The browser's cheap columns, from a run's summary (`traces.run_table`); `texts` its
    `routing_texts` when the caller has them."""
    return RunInfo(
        name=summary.run, index=summary.index, complete=True, label=summary.label,
        condition=summary.condition, experiment=summary.experiment, batch_size=summary.batch_size,
        request_ids=summary.request_ids, probe_row=summary.probe_row,
        **(texts or routing_texts(summary.routing)),
        kernel_mode=summary.kernel_mode, compared_in=summary.compared_in,
    )


def summary_stats(summary: RunSummary, vocab: Sequence[str], text: str | None = None) -> RunStats:
    """Drops and the focus row's completion, from a run's summary (`traces.run_table`); `text` the
    completion's preview when the caller has it."""
    return RunStats(
        name=summary.run, batch_dropped=summary.dropped, batch_requested=summary.requested,
        focus_dropped=summary.focus_dropped, prompt_len=summary.prompt_len, completion=summary.completion,
        preview=preview(vocab, summary.completion) if text is None else text,
    )


@dataclass(frozen=True)
class TableRun:
    """What the run summary table says of one run: its info, stats, and mark against `reference`
    (its default reference)."""

    info: RunInfo
    stats: RunStats
    reference: str
    mark: Mark


def table_summaries(trace) -> dict[str, TableRun] | None:
    """What the run summary table says of the trace's listed runs (`traces.run_table.read_summaries`);
    None without a table (the runs are then summarised one by one)."""
    summaries = read_summaries(trace)
    if summaries is None:
        return None
    vocab = trace.vocab
    # Runs share their routing (one decoded object per text) and, mostly, their completions.
    texts: dict[int, dict[str, str]] = {}
    previews: dict[bytes, str] = {}
    out = {}
    for name, s in summaries.items():
        if id(s.routing) not in texts:
            texts[id(s.routing)] = routing_texts(s.routing)
        key = s.completion.tobytes()
        if key not in previews:
            previews[key] = preview(vocab, s.completion)
        out[name] = TableRun(summary_info(s, texts[id(s.routing)]), summary_stats(s, vocab, previews[key]),
                             s.reference, table_mark(s))
    return out


def table_mark(summary: RunSummary) -> Mark:
    """The mark the table gives a run against its default reference (`RunSummary.reference`)."""
    if summary.reference == summary.run:
        return Mark("ref")
    return Mark("same") if summary.first_difference < 0 else Mark("differs", summary.first_difference)


def default_references(infos: Sequence[RunInfo], firsts: dict | None = None) -> dict[str, str]:
    """Reference run of each run for its focus request (`traces.analysis.reference`). `firsts` (kept
    by the caller) holds the first run of each request and condition of earlier calls, for infos
    that all come after those (write order): it is updated."""
    ordered = sorted(infos, key=lambda i: i.index)
    return reference.default_references(((i.name, i.focus_request, i.compared_in) for i in ordered),
                                        firsts)


def references(infos: Sequence[RunInfo], chosen: str | None, firsts: dict | None = None,
               known: Mapping[str, RunInfo] | None = None) -> dict[str, str]:
    """Reference of each run; a `chosen` run replaces the default for every run of its request.
    `firsts`: see `default_references`; `known` the infos by name the chosen run is among (default:
    `infos`)."""
    refs = default_references(infos, firsts)
    by_name = {i.name: i for i in infos} if known is None else known
    if chosen in by_name:
        request = by_name[chosen].focus_request
        for info in infos:
            if info.focus_request == request:
                refs[info.name] = chosen
    return refs


@dataclass(frozen=True)
class Mark:
    """How a run's completion compares with its reference's: `kind` is `ref` (the reference itself),
    `same`, `differs` (first at sequence position `position`) or `unknown` (not summarised yet)."""

    kind: str
    position: int = -1

    @property
    def differs(self) -> bool:
        return self.kind == "differs"

    def text(self) -> str:
        """'ref', '=', '≠ @p' or '' (unknown): what the browser's column shows."""
        return {"ref": "ref", "same": "=", "differs": f"≠ @{self.position}"}.get(self.kind, "")

    def sort_key(self) -> int:
        """The reference first, then equal runs, then by first differing position, unknown last."""
        return {"ref": -2, "same": -1, "differs": self.position}.get(self.kind, 1 << 30)


def divergence_mark(name: str, reference: str, stats: Mapping[str, RunStats]) -> Mark:
    """How run `name`'s completion compares with its reference's (`Mark`)."""
    if name == reference:
        return Mark("ref")
    if name not in stats or reference not in stats:
        return Mark("unknown")
    t = first_difference(stats[name].completion, stats[reference].completion)
    return Mark("same") if t is None else Mark("differs", stats[name].prompt_len + t)


def first_divergent_run(trace, limit: int = 64, known: Mapping[str, TableRun] | None = None) -> str | None:
    """The first run (of the first `limit`, write order) whose probe completion differs from its
    reference's (`default_references`); None when none does. Reads attributes and the probe rows'
    tokens only, so it is cheap enough to pick the run a trace opens on; runs `known` from the run
    summary table (`table_summaries`) are not read at all."""
    known = known or {}
    infos: list[RunInfo] = []
    completions: dict[str, np.ndarray] = {}

    def completion(info: RunInfo) -> np.ndarray:
        if info.name not in completions:
            run = trace.run(info.name)
            row = info.focus_row
            start, end = int(run.prompt_len[row]), run.row_length(row)
            completions[info.name] = np.asarray(run.tokens[row, start:end])
        return completions[info.name]

    by_name: dict[str, RunInfo] = {}
    for name in list(trace.run_names)[:limit]:
        try:
            if name in known:
                info = known[name].info
                completions[name] = known[name].stats.completion
            else:
                run = trace.run(name)
                if not run.complete:
                    continue
                info = run_info(run)
            if info.probe_row < 0:
                continue
            reference = default_references([*infos, info])[name]
            if reference != name and first_difference(completion(info),
                                                       completion(by_name[reference])) is not None:
                return name
        except TraceError:  # a damaged run is neither shown first nor anyone's reference
            continue
        infos.append(info)
        by_name[name] = info
    return None
