"""Metadata that steers what the tool does, checked as data before it is used.

A trace comes from anyone, and a few of its attributes do more than describe: the expert count of a
serving engine's trace sizes the arrays that stand in for what the engine does not return, and the
recorded machine's thread count sets how many threads a rerun starts. Each is checked here against the
trace's own arrays and this machine, and refused in one sentence (or clamped, for the threads) instead
of being believed.
"""

from __future__ import annotations

import os

from traces.errors import TraceError

#: Most experts per MoE layer a trace may declare (models with the most have a few hundred).
MAX_EXPERTS = 1024


def meta_problems(meta: dict) -> list[tuple[str, str]]:
    """(where, what) of each steering attribute of the root metadata `meta` that cannot be used: checked
    when the trace opens, before any run is read."""
    engine = meta.get("engine")
    if not isinstance(engine, dict) or engine.get("experts") is None:
        return []
    experts = engine["experts"]
    if (isinstance(experts, bool) or not isinstance(experts, int | float) or experts != int(experts)
            or not 1 <= experts <= MAX_EXPERTS):
        return [("/", f"expected engine.experts to be a whole number from 1 to {MAX_EXPERTS}, found "
                      f"{experts!r}")]
    return []


def engine_experts(meta: dict, largest_chosen: int, path: str, where: str) -> int:
    """E of a serving engine's run: its trace's `engine.experts` when it holds one, else one more than the
    largest expert the run chose (`largest_chosen`). TraceError unless it is a whole number no smaller
    than what the run chose and at most MAX_EXPERTS."""
    engine = meta.get("engine")
    declared = engine.get("experts") if isinstance(engine, dict) else None
    if declared is None:
        declared = largest_chosen + 1
    if isinstance(declared, bool) or not isinstance(declared, int | float) or declared != int(declared):
        raise TraceError(path, "/", f"expected engine.experts to be a whole number, found {declared!r}")
    declared = int(declared)
    if not largest_chosen < declared <= MAX_EXPERTS:
        raise TraceError(path, where, f"expected engine.experts from {largest_chosen + 1} (the run chooses "
                                      f"expert {largest_chosen}) to {MAX_EXPERTS}, found {declared}")
    return declared


def usable_threads(recorded) -> int:
    """The thread count a rerun uses for a trace that recorded `recorded` threads: a whole number of at
    least 1, at most the CPUs this process may run on (a trace cannot make it start 100,000 threads)."""
    try:
        here = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        here = os.cpu_count() or 1
    if isinstance(recorded, bool) or not isinstance(recorded, int) or recorded < 1:
        return 1
    return min(recorded, here)
