"""The reference run: which run the other runs of a request are compared with. One rule for the
run browser, the runs and pair views, `moe-inspector export` and `moe-inspector explain`.

For a request, the runs of one condition are compared with the first of them in write order. Runs
whose `condition` attribute is empty are told apart by their routing knobs and kernel mode instead, so
a pair never mixes two settings. A reference the user chose, or the one an explanation table used,
replaces the first run where it is among the runs compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Protocol


class Conditioned(Protocol):
    """What names a run's condition: a run's record (`traces.records.RunAttrs`) or its summary."""

    @property
    def condition(self) -> str: ...
    @property
    def routing(self) -> object: ...
    @property
    def kernel_mode(self) -> str: ...


def condition_of(run: Conditioned) -> str:
    """A run's condition: its `condition`, else its routing knobs and kernel mode."""
    if run.condition:
        return run.condition
    routing = run.routing
    knobs = json.dumps(routing, sort_keys=True) if isinstance(routing, dict) else str(routing or "")
    return f"routing {knobs}, {run.kernel_mode}".strip(", ")


def default_references(runs: Iterable[tuple[str, int, str]],
                       first: dict[tuple[int, str], str] | None = None) -> dict[str, str]:
    """The reference of each run: `runs` are (name, request, condition) in write order, and each one's
    reference is the first run of its request and condition. `first` ((request, condition) -> run)
    holds those of runs before `runs`, when the caller keeps it across calls; it is updated."""
    first = {} if first is None else first
    out: dict[str, str] = {}
    for name, request, condition in runs:
        out[name] = first.setdefault((request, condition), name)
    return out


def reference_index(names: Sequence[str], *preferred: str | None) -> int:
    """Index of the reference among `names` (the runs compared, in write order): the first of
    `preferred` (a chosen run, the explanation table's) that is among them, else the first run."""
    for name in preferred:
        if name is not None and name in names:
            return list(names).index(name)
    return 0
