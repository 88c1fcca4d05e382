"""A readable text summary of a trace: the output of `moe-inspector info`."""

from __future__ import annotations

import json
import os
import textwrap

from traces import fingerprint, run_table, schema
from traces.errors import TraceError
from traces.reader import Run, Trace
from traces.route_check import RouteCheck, summarize

#: Width at which `info` wraps the engine's settings.
WRAP = 100


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def _knobs(routing) -> str:
    """Routing knobs on one line: `group_by=batch capacity=factor(cf=1.0) ...`."""
    if not isinstance(routing, dict):
        return str(routing)
    parts = []
    for key, value in routing.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k}={v}" for k, v in value.items() if k != "kind")
            value = f"{value.get('kind', '')}({inner})"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def _ids(request_ids, limit: int = 12) -> str:
    ids = [str(int(r)) for r in request_ids]
    return " ".join(ids[:limit]) + (f" ... ({len(ids)} rows)" if len(ids) > limit else "")


def _shown_attrs() -> list[str]:
    """The run attributes `info` shows one per line: those the run record marks `info`, condition first."""
    shown = [name for name, spec in schema.RECORDS["run"].specs().items() if spec.info]
    return sorted(shown, key=lambda name: name != "condition")


def _shown(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)


def _run_lines(run: Run, default_routing, default_kernel) -> list[str]:
    d, record = run.dims, run.record
    probe = "none" if run.probe_row < 0 else f"row {run.probe_row} (request {run.request_ids[run.probe_row]})"
    stored = sum(s for _, s in run.storage().values())
    raw = sum(r for r, _ in run.storage().values())
    lines = [f"  {run.name}{'' if run.complete else '  [INCOMPLETE]'}: B={d['B']} T={d['T']} S={d['S']} "
             f"G={d['G']}  probe {probe}  {_size(stored)} on disk ({_size(raw)} as arrays)"]
    for key in _shown_attrs():
        value = getattr(record, key)  # a field the run record declares (`Attr.info`)
        if value not in (None, ""):
            lines.append(f"      {key}: {_shown(value)}")
    lines.append(f"      request ids: {_ids(run.request_ids)}")
    if record.routing != default_routing:
        lines.append(f"      routing: {_knobs(record.routing)}")
    if record.kernel_mode != default_kernel:
        lines.append(f"      kernel mode: {record.kernel_mode}")
    if run.not_recorded:
        lines.append(f"      not recorded (by its engine): {', '.join(sorted(run.not_recorded))}")
        check = record.route_check
        lines.append(f"      {RouteCheck.from_attr(check).describe()}" if isinstance(check, dict)
                     else "      ROUTES NOT CHECKED against the router (recorded before the check existed)")
    if run.cached_tokens is not None and (run.cached_tokens != 0).any():
        cached = " ".join("?" if c < 0 else str(int(c)) for c in run.cached_tokens)
        lines.append(f"      prompt tokens from the prefix cache, per row: {cached}")
    return lines


def _dataset_lines(run: Run) -> list[str]:
    lines = [f"datasets of each run (shapes of {run.name}):"]
    storage = run.storage()
    for path, arr in run.arrays.items():
        raw, stored = storage[path]
        shape = " x ".join(f"{letter}={n}" for letter, n in zip(arr.dims, arr.shape, strict=True))
        ratio = f"{stored / raw:.2f}" if raw else "-"
        lines.append(f"  {path:<22} {arr.dtype.name:<8} [{shape}]  {_size(raw)} -> {_size(stored)} ({ratio})")
    return lines


def _engine_lines(engine: dict | None) -> list[str]:
    """The serving engine that generated the runs, with every setting it records (docs/engines.md),
    wrapped at `WRAP` characters, never cut."""
    if not engine:
        return []
    shown = {k: v for k, v in engine.items() if k not in ("name", "package", "version")}
    settings = " ".join(f"{k}={_shown(v)}" for k, v in shown.items())
    return [f"engine: {engine.get('name', '?')} ({engine.get('package', '?')} {engine.get('version', '?')})",
            *textwrap.wrap(settings, WRAP, initial_indent="  ", subsequent_indent="  ", break_long_words=True,
                           break_on_hyphens=False)]


def describe(trace: Trace) -> str:
    """Model and routing settings, kernel mode, runs with their compositions and completeness,
    shapes and sizes on disk."""
    meta = trace.record
    file_size = os.path.getsize(trace.path) if os.path.exists(trace.path) else 0
    lines = [
        f"{trace.path}: {schema.FORMAT} v{meta.format_version}, {_size(file_size)}",
        f"created {meta.created or '?'} by {meta.producer or '?'}",
        "model: " + " ".join(f"{k}={v}" for k, v in meta.model_config.items()),
        f"  MoE layers (L={len(trace.moe_layers)}): {json.dumps(trace.moe_layers)}",
        f"  tokenizer {meta.tokenizer}, device {meta.device}, dtype {meta.dtype}, "
        f"torch {meta.torch_version}, seed {meta.seed}",
        f"routing: {_knobs(meta.routing)}",
        f"kernel mode: {meta.kernel_mode}",
        *_engine_lines(meta.engine),
        "machine: " + fingerprint.short_name(meta.machine),
        *(f"  {line}" for line in fingerprint.lines(meta.machine)),
        f"requests: R={len(trace.requests)}",
        f"runs: {len(trace.run_names)} complete, {len(trace.incomplete_runs)} incomplete",
    ]
    first = None
    total_raw = total_stored = 0
    checks, engine_runs = [], 0
    for name in trace.run_names + trace.incomplete_runs:
        try:
            run = trace.run(name)
        except TraceError as exc:
            state = "incomplete" if name in trace.incomplete_runs else "unreadable"
            lines.append(f"  {name}  [{state.upper()}]: {exc.where}: {exc.expected}")
            continue
        lines.extend(_run_lines(run, meta.routing, meta.kernel_mode))
        if run.not_recorded:
            engine_runs += 1
            if isinstance(run.record.route_check, dict):
                checks.append(RouteCheck.from_attr(run.record.route_check))
        storage = run.storage().values()
        total_raw += sum(r for r, _ in storage)
        total_stored += sum(s for _, s in storage)
        first = first or run
    if first is not None:
        lines.extend(_dataset_lines(first))
        ratio = f" (ratio {total_stored / total_raw:.2f})" if total_raw else ""
        lines.append(f"all runs: {_size(total_raw)} as arrays, {_size(total_stored)} on disk{ratio}")
    if engine_runs:
        lines.append(summarize(checks, engine_runs))
        unreplayed = engine_runs - sum(c.replayed for c in checks)
        if unreplayed:  # said at the top too, under the engine
            at = next(i for i, line in enumerate(lines) if line.startswith("machine: "))
            lines.insert(at, f"  ROUTES NOT REPLAYED through the router in {unreplayed} of {engine_runs} "
                             f"runs (recorded with --no-route-check, or before the check existed): only "
                             f"their structure was checked")
    tables = [name for name in trace.table_names if name != schema.RUN_SUMMARY_TABLE]
    lines.append(f"tables: {', '.join(tables) if tables else 'none'}")
    lines.append(_run_summary_line(trace))
    return "\n".join(lines)


def _run_summary_line(trace: Trace) -> str:
    """Whether the runs are summarised in the run summary table (what a browser lists them from)."""
    try:
        summaries = run_table.read_summaries(trace)
    except TraceError as exc:
        return f"run summary table: unreadable ({exc.where}: {exc.expected}); runs are summarised one by one"
    if summaries is None:
        held = schema.RUN_SUMMARY_TABLE in trace.table_names
        return ("run summary table: " + ("not read (of another version, or runs were added since the trace "
                                         "was opened)" if held else "none; runs are summarised one by one "
                                                                    "from their arrays"))
    return (f"run summary table: {len(summaries)} of {len(trace.run_names)} runs "
            f"(version {schema.RUN_SUMMARY_VERSION})")
