"""What the benchmark scripts share: the prompts of a generation workload and interleaved pair timing."""

from __future__ import annotations

import statistics
import time

#: Eight documentation-style prompts of 9 to 44 bytes: the generation workload of the benchmarks.
PROMPTS = ["Return a list of the", "The default value is None, which means that",
           "def __init__(self, name, value=None):", "# If the file does not exist, create it",
           "This module provides functions for", "Raise ValueError if the argument is",
           "import os", "class Connection:\n    \"\"\"A connection to the server."]


def paired(a, b, repeats: int) -> tuple[float, float, float]:
    """Median seconds of a and b and the median of the per-pair ratios b/a (one warm-up each).

    A and B alternate (A, B, A, B, ...), so a change of machine load hits both sides."""
    a(), b()
    ta, tb, ratios = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a()
        t1 = time.perf_counter()
        b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios)
