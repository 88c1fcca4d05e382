"""Which rows are compared: each request's runs under one condition, against the first of them.

The reference rule is the viewer's default (`inspector.figure_data.browser.default_references`): for a
request, the runs of one condition are compared with the first of them in write order. Runs whose
`condition` attribute is empty are told apart by their routing knobs and kernel mode instead, so a
pair never mixes two settings. Within a run the request's row is the probe row when the run holds
the request there, else its first row (`traces.analysis.runs_of_request`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from traces.analysis import probe_request
from traces.analysis.alignment import runs_by_request


@dataclass(frozen=True)
class Group:
    """The rows holding one request under one condition; `members[0]` is the reference."""

    request: int
    condition: str
    members: tuple[tuple[str, int], ...]   # (run, row) in write order

    @property
    def reference(self) -> tuple[str, int]:
        return self.members[0]

    @property
    def others(self) -> tuple[tuple[str, int], ...]:
        return self.members[1:]


def condition_of(run) -> str:
    """The run's condition: its `condition` attribute, else its routing knobs and kernel mode."""
    attrs = run.attrs
    condition = str(attrs.get("condition", "") or "")
    if condition:
        return condition
    routing = attrs.get("routing")
    knobs = json.dumps(routing, sort_keys=True) if isinstance(routing, dict) else str(routing or "")
    return f"routing {knobs}, {attrs.get('kernel_mode', '')}".strip(", ")


def request_order(trace, requests: list[int] | None = None) -> list[int]:
    """The requests to explain: `requests` as given, else every request, the probe request first."""
    if requests is not None:
        return list(requests)
    probe = probe_request(trace)
    rest = [r for r in range(len(trace.requests)) if r != probe]
    return ([probe] if probe is not None else []) + rest


def plan_groups(trace, requests: list[int] | None = None) -> list[Group]:
    """Every group of two or more runs of one request and condition, requests in `request_order`.

    One pass over the runs reads their conditions and rows (linear in the runs, whatever the number of
    requests)."""
    runs = [run for run in trace.runs() if getattr(run, "complete", True)]
    conditions = {run.name: condition_of(run) for run in runs}
    holding = runs_by_request([(run.name, run.request_ids, run.probe_row) for run in runs])
    groups: list[Group] = []
    for request in request_order(trace, requests):
        by_condition: dict[str, list[tuple[str, int]]] = {}
        for name, row in holding.get(request, []):
            by_condition.setdefault(conditions[name], []).append((name, row))
        groups += [Group(request, condition, tuple(members))
                   for condition, members in by_condition.items() if len(members) > 1]
    return groups
