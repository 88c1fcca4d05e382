"""Which rows are compared: each request's runs under one condition, against the first of them.

The reference rule is `traces.analysis.reference`, the viewer's: for a request, the runs of one
condition (`condition_of`) are compared with the first of them in write order. Within a run the
request's row is the probe row when the run holds the request there, else its first row
(`traces.analysis.runs_of_request`).
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.analysis import probe_request
from traces.analysis.alignment import runs_by_request
from traces.analysis.reference import condition_of, default_references


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
    runs = [run for run in trace.runs() if run.complete]
    conditions = {run.name: condition_of(run.record) for run in runs}
    holding = runs_by_request([(run.name, run.request_ids, run.probe_row) for run in runs])
    groups: list[Group] = []
    for request in request_order(trace, requests):
        members = holding.get(request, [])
        refs = default_references((name, request, conditions[name]) for name, _ in members)
        by_reference: dict[str, list[tuple[str, int]]] = {}
        for name, row in members:
            by_reference.setdefault(refs[name], []).append((name, row))
        groups += [Group(request, conditions[ref], tuple(group))
                   for ref, group in by_reference.items() if len(group) > 1]
    return groups
