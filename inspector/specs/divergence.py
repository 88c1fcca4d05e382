"""The exports of the views comparing runs, read from a trace: two runs of one request side by
side (`pair`) and the N runs of a request (`runs`); the table behind each figure and its file stem.

The calls are the divergence views' own (`DivergenceSource`, `pair_figure_data`,
`runs_figure_data`), so the command and the app draw the same data for the same choice.
No Qt here.
"""

from __future__ import annotations

import numpy as np

from inspector.figure_data.cause_columns import COLUMNS as CAUSE_COLUMNS
from inspector.figure_data.cause_columns import (
    FIRST_DIFFERENCE,
    CauseEvent,
    cause_fields,
    first_difference_fields,
)
from inspector.figure_data.compare import COLUMNS as COMPARE_COLUMNS
from inspector.figure_data.compare import compare_data
from inspector.figure_data.divergence_source import (
    ONCE_ROW_MEMO,
    DivergenceSource,
    RunChoice,
    table_reference,
)
from inspector.figure_data.pair import COLUMNS as PAIR_COLUMNS
from inspector.figure_data.runs import COLUMNS as RUNS_COLUMNS
from inspector.figure_data.runs import runs_figure_data
from inspector.figure_data.table import BOOLEAN, INTEGER, REQUEST, TEXT, Column, TableSpec
from inspector.specs.selection import Selection, SelectionError, in_range, with_context
from traces.analysis.reference import reference_index


def pick_request(source: DivergenceSource, sel: Selection, runs: tuple[str, ...] = ()) -> int:
    """The request compared: `sel.request`, else one every run of `runs` holds (their probe's
    first), else the run's (`sel.run`) probe request, else the trace's default."""
    requests = source.requests()
    if not requests:
        raise SelectionError(f"no request of {source.trace.path} is held by more than one run: "
                             "there is nothing to compare")
    if sel.request is not None:
        if sel.request not in requests:
            raise SelectionError(f"request {sel.request} is not held by several runs; requests that are: "
                                 f"{', '.join(str(r) for r in requests)}")
        return sel.request
    names = [n for n in (*runs, sel.run) if n]
    for name in names:
        if name not in source.trace.run_names:
            raise SelectionError(f"no run {name!r} in {source.trace.path}; runs: "
                                 f"{', '.join(source.trace.run_names)}")
    if runs:
        held = [set(np.asarray(source.request_ids(n)).tolist()) for n in runs]
        common = [r for r in requests if all(r in h for h in held)]
        if not common:
            raise SelectionError(f"runs {', '.join(runs)} hold no common request held by several runs")
        probe = source.default_request(runs[0], int(source.trace.run(runs[0]).probe_row))
        return probe if probe in common else common[0]
    if sel.run is not None:
        request = source.default_request(sel.run, int(source.trace.run(sel.run).probe_row))
        return request if request is not None else requests[0]
    return int(source.default_request())


def _choice(choices: list[RunChoice], run: str, request: int) -> RunChoice:
    found = [c for c in choices if c.run == run]
    if not found:
        raise SelectionError(f"run {run!r} does not hold request {request}; runs that do: "
                             f"{', '.join(c.run for c in choices)}")
    return found[0]


def read_pair(trace, sel: Selection):
    """The side-by-side data (`PairData`) of runs `sel.pair` (default: the request's first two
    runs) at MoE layer `sel.layer`."""
    source = DivergenceSource(trace, ONCE_ROW_MEMO)
    request = pick_request(source, sel, sel.pair or ())
    choices = source.choices(request)
    if sel.pair is not None:
        a, b = (_choice(choices, name, request) for name in sel.pair)
    else:
        a, b = choices[0], choices[1]
    n_layers = source.row(a.run, a.row).n_layers
    if not 0 <= sel.layer < n_layers:
        raise SelectionError(f"layer {sel.layer} outside 0..{n_layers - 1}")
    try:
        data = source.pair(a, b, sel.layer)
    except ValueError as exc:
        raise SelectionError(f"runs {a.run} and {b.run} cannot be compared: {exc}") from None
    sel.positions(data.length)
    return data


def read_compare(trace, sel: Selection):
    """The compare view's data (`CompareData`) of runs `sel.pair` at MoE layer `sel.layer`, split at t*
    (else at the end of the prompt)."""
    return compare_data(read_pair(trace, sel))


def read_runs(trace, sel: Selection):
    """The runs view's data (`RunsData`) of request `sel.request` (default: the probe's),
    the runs of condition `sel.condition` ('' = all; default: the reference run's, else the first
    of several), against reference run `sel.run` (default: the explanation table's, else the
    first run of the request in the condition: `traces.analysis.reference`)."""
    source = DivergenceSource(trace, ONCE_ROW_MEMO)
    request = pick_request(source, sel)
    choices = source.choices(request)
    conditions = source.conditions(request)
    condition = sel.condition
    if condition is None:
        own = next((c.condition for c in choices if c.run == sel.run), None)
        condition = own if own is not None and len(conditions) > 1 else (
            conditions[0] if len(conditions) > 1 else "")
    elif condition and condition not in conditions:
        raise SelectionError(f"no run of request {request} has condition {condition!r}; conditions: "
                             f"{', '.join(repr(c) for c in conditions)}")
    if condition:
        choices = [c for c in choices if c.condition == condition]
    if len(choices) < 2:
        raise SelectionError(f"request {request} has fewer than two runs of condition {condition!r}")
    rows = source.rows(choices)
    records = source.records()
    names = [c.run for c in choices]
    if sel.run is not None and sel.run not in names:
        raise SelectionError(f"run {sel.run!r} is not among the runs compared: {', '.join(names)}")
    reference = reference_index(names, sel.run, table_reference(records, choices))
    try:
        data = runs_figure_data(rows, choices, reference, vocab=source.vocab, records=records,
                                    condition=condition)
    except ValueError as exc:
        raise SelectionError(f"these runs cannot be compared: {exc}") from None
    sel.positions(data.prompt_len + data.n_new)
    return data


def _pair_values(data, sel: Selection) -> dict[str, np.ndarray]:
    cause = data.cause
    position, layer = cause.event
    event = CauseEvent(position, layer, len(cause.cells) if cause.proven else 0)
    fields = cause_fields(data.verdict.diverged, cause.cause, cause.confirmed, event)
    # The cause event's own layer, whatever layer the figure shows: the proven cause's lead event, else
    # the first difference ("proven" says which).
    context = {"request": data.request, "run_a": data.run_a, "row_a": data.a.row, "run_b": data.run_b,
               "row_b": data.b.row, "layer": data.layer, "model_layer": data.model_layer,
               "exact_logits": data.exact_logits, "t_star": data.t_star if data.t_star >= 0 else None,
               **fields,
               "cause_model_layer": data.cause_model_layer if fields["cause_layer"] is not None else None,
               **first_difference_fields(data.verdict)}
    return in_range(with_context(context, data.to_columns()), sel)


def _compare_values(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"request": data.request, "run_a": data.run_a, "row_a": data.pair.a.row, "run_b": data.run_b,
               "row_b": data.pair.b.row, "layer": data.layer, "model_layer": data.model_layer,
               "split": data.split}
    return in_range(with_context(context, data.to_columns()), sel)


def _runs_values(data, sel: Selection) -> dict[str, np.ndarray]:
    context = {"request": data.request, "reference": data.reference_run, "n_new": data.n_new,
               "n_unique": data.n_unique}
    return with_context(context, data.to_columns())


pair_columns = TableSpec(
    (REQUEST,
     Column("run_a", TEXT, "run A, the reference"),
     Column("row_a", INTEGER, "batch row of run A holding the request"),
     Column("run_b", TEXT, "run B, compared with A"),
     Column("row_b", INTEGER, "batch row of run B holding the request"),
     Column("layer", INTEGER, "MoE layer shown (the experts_changed, dropped_a_only and dropped_b_only "
                              "columns)"),
     Column("model_layer", INTEGER, "the model's own number of that MoE layer"),
     Column("exact_logits", BOOLEAN, "both runs hold full next-token logits (false: a run holds top-k "
                                     "logits, and kl and max_logit_difference are lower bounds)"),
     Column("t_star", INTEGER, "t*: first position where B's tokens leave A's",
            empty="B gives A's tokens over the positions compared"),
     *CAUSE_COLUMNS,
     Column("cause_model_layer", INTEGER, "the model's own number of cause_layer", empty="cause_layer is "
                                                                                         "empty"),
     *FIRST_DIFFERENCE, *PAIR_COLUMNS),
    "one row per position", _pair_values)
compare_columns = TableSpec(
    (REQUEST,
     Column("run_a", TEXT, "run A, the reference"),
     Column("row_a", INTEGER, "batch row of run A holding the request"),
     Column("run_b", TEXT, "run B, compared with A"),
     Column("row_b", INTEGER, "batch row of run B holding the request"),
     Column("layer", INTEGER, "MoE layer shown"),
     Column("model_layer", INTEGER, "the model's own number of that MoE layer"),
     Column("split", INTEGER, "the split panel's split: it shows A at positions before it, B from it on"),
     *COMPARE_COLUMNS),
    "one row per (position, expert)", _compare_values)
runs_columns = TableSpec(
    (REQUEST,
     Column("reference", TEXT, "the reference run every run is compared with"),
     Column("n_new", INTEGER, "new tokens compared (the shortest completion's)"),
     Column("n_unique", INTEGER, "U(N): distinct completions among the runs"),
     *RUNS_COLUMNS),
    "one row per run", _runs_values)


def pair_stem(data) -> list[object]:
    return [f"request{data.request}", data.run_a, data.run_b, f"layer{data.layer}"]


def compare_stem(data) -> list[object]:
    return [f"request{data.request}", data.run_a, data.run_b, f"layer{data.layer}"]


def runs_stem(data) -> list[object]:
    return [f"request{data.request}", f"ref-{data.reference_run}"]
