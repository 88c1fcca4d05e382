"""What the benchmark scripts share: the prompts of a generation workload, interleaved pair timing,
and one honest reading of a ratio of two timings.

A ratio B/A is read two ways: the ratio of the two medians and the median of the per-pair ratios,
with the spread (interquartile range) of the per-pair ratios, and the machine's load average before
and after the pairs ran. When the two readings disagree by more than 20%, or the load exceeded the
core count, the verdict is "noisy — rerun" instead of ok / OVER: under load a median of per-pair
ratios once read 0.10 for two equal medians, and was marked ok.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import statistics
import time
from dataclasses import dataclass

#: Eight documentation-style prompts of 9 to 44 bytes: the generation workload of the benchmarks.
PROMPTS = ["Return a list of the", "The default value is None, which means that",
           "def __init__(self, name, value=None):", "# If the file does not exist, create it",
           "This module provides functions for", "Raise ValueError if the argument is",
           "import os", "class Connection:\n    \"\"\"A connection to the server."]

#: Interleaved pairs a ratio takes by default, and the fewest its verdict trusts.
MIN_PAIRS = 5
#: The two readings of a ratio may differ by this fraction of the smaller before they count as noise.
AGREEMENT = 0.20
NOISY = "noisy — rerun"
#: Column header matching `Pair.line`: medians of A and B, their ratio B/A, the median and the
#: interquartile range of the per-pair ratios, the load average before -> after.
HEADER = (f"{'ratio':<44}{'A (ms)':>9}{'B (ms)':>9}{'B/A':>9}{'pairs':>8}{'pairs IQR':>13}{'load':>11}"
          f"{'target':>9}  verdict")


def steady_allocator() -> str:
    """Keep the C heap's freed memory mapped (glibc `mallopt`: no trimming, blocks up to 32 MiB from
    the heap), and say what was done.

    With glibc's adaptive defaults a function that frees 16 MiB at the top of the heap hands it back
    to the system and takes page faults to get it again on its next call: the dense FFN of
    bench/model_speed.py took 4,064 minor faults a call (7.7 ms instead of 3.5) in one process
    history and none in another, so a ratio against it read 1.19 or 1.65 for the same code.
    Pinning the allocator times the kernels, not the history of the heap."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return "allocator: the system's (no glibc mallopt here)"
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    if mallopt(M_TRIM_THRESHOLD, 2**30) and mallopt(M_MMAP_THRESHOLD, 2**25):
        return "allocator: glibc, freed memory kept mapped (no trimming; blocks up to 32 MiB from the heap)"
    return "allocator: glibc defaults (mallopt refused)"


def load_average() -> float:
    """The 1-minute load average (processes running or waiting for a CPU)."""
    return os.getloadavg()[0]


def overloaded(load_before: float, load_after: float, cores: int | None = None) -> str | None:
    """Why timings taken between these two load averages cannot be trusted (more processes wanted a
    CPU than there are cores), or None."""
    cores = cores or os.cpu_count() or 1
    load = max(load_before, load_after)
    return f"load average {load:.2f} above {cores} cores" if load > cores else None


@dataclass(frozen=True)
class Pair:
    """Times of A and B measured in interleaved pairs (any one unit), and the load around them."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    load_before: float
    load_after: float
    cores: int

    def __post_init__(self) -> None:
        if len(self.a) != len(self.b) or not self.a:
            raise ValueError(f"Pair: need as many B times as A times, at least one; got {len(self.a)} "
                             f"and {len(self.b)}")
        if min(self.a) <= 0 or min(self.b) < 0:
            raise ValueError("Pair: times must be positive")

    @property
    def median_a(self) -> float:
        return statistics.median(self.a)

    @property
    def median_b(self) -> float:
        return statistics.median(self.b)

    @property
    def ratio_of_medians(self) -> float:
        return self.median_b / self.median_a

    @property
    def ratios(self) -> list[float]:
        """b/a of each pair."""
        return [b / a for a, b in zip(self.a, self.b, strict=True)]

    @property
    def median_ratio(self) -> float:
        """Median of the per-pair ratios."""
        return statistics.median(self.ratios)

    @property
    def spread(self) -> tuple[float, float]:
        """First and third quartiles of the per-pair ratios (both the one ratio when there is one)."""
        r = self.ratios
        if len(r) == 1:
            return r[0], r[0]
        q1, _, q3 = statistics.quantiles(r, n=4, method="inclusive")
        return q1, q3

    @property
    def disagreement(self) -> float:
        """How far the two readings differ, as a fraction of the smaller (inf when one is 0)."""
        lo, hi = sorted((self.ratio_of_medians, self.median_ratio))
        return hi / lo - 1 if lo > 0 else float("inf")

    def noise(self) -> str | None:
        """Why this measurement cannot be trusted, or None."""
        if len(self.a) < MIN_PAIRS:
            return f"{len(self.a)} pairs, fewer than {MIN_PAIRS}"
        if self.disagreement > AGREEMENT:
            return (f"ratio of medians {self.ratio_of_medians:.3f} and median of pair ratios "
                    f"{self.median_ratio:.3f} differ by {self.disagreement:.0%}")
        return overloaded(self.load_before, self.load_after, self.cores)

    def verdict(self, target: float | None = None) -> str:
        """ok / OVER against `target` (B/A at most), "noisy — rerun" when the measurement cannot
        tell, "reported" when there is no target."""
        if self.noise() is not None:
            return NOISY
        if target is None:
            return "reported"
        return "ok" if self.ratio_of_medians <= target else "OVER"

    def line(self, name: str, target: float | None = None, scale: float = 1e3) -> str:
        """One row under `HEADER`: medians of A and B (times `scale`: seconds to ms by default), the
        ratio of medians, the median of the pair ratios, their IQR, the load before -> after, the
        target and the verdict."""
        q1, q3 = self.spread
        goal = "" if target is None else f"<= {target:g}"
        return (f"{name:<44}{self.median_a * scale:>9.1f}{self.median_b * scale:>9.1f}"
                f"{self.ratio_of_medians:>9.3f}{self.median_ratio:>8.3f}{f'{q1:.3f}-{q3:.3f}':>13}"
                f"{f'{self.load_before:.1f}->{self.load_after:.1f}':>11}{goal:>9}  {self.verdict(target)}")


def paired(a, b, repeats: int = MIN_PAIRS, clock=time.perf_counter) -> Pair:
    """Seconds of a and b over `repeats` interleaved pairs (A, B, A, B, ...; one warm-up each), so a
    change of machine load hits both sides, with the load average before and after. `clock`:
    wall time by default; `time.thread_time` counts only the CPU time of this thread, which other
    processes disturb far less (but misses the work of any other thread)."""
    if repeats < 1:
        raise ValueError(f"paired: repeats must be positive, got {repeats}")
    load_before = load_average()
    a(), b()
    ta, tb = [], []
    for _ in range(repeats):
        t0 = clock()
        a()
        t1 = clock()
        b()
        t2 = clock()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return Pair(tuple(ta), tuple(tb), load_before, load_average(), os.cpu_count() or 1)


def block(fn, n: int, then=None):
    """One timed call of `paired` that calls `fn` n times, then `then()` (e.g. a background writer's
    `flush`): work a call leaves running (a write on another thread) is then timed with the block
    that made it instead of spilling into the other side's next call."""
    def run():
        for _ in range(n):
            fn()
        if then is not None:
            then()
    return run


def add_clock_option(parser) -> None:
    """`--cpu-time`: time this thread's CPU time instead of wall time (with `--threads 1` only)."""
    parser.add_argument("--cpu-time", action="store_true",
                        help="time this thread's CPU time (needs --threads 1)")


def clock_of(parser, args):
    """The clock `args` ask for: `time.thread_time` with `--cpu-time` (an error unless one thread),
    else `time.perf_counter`."""
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time counts one thread's CPU time: use it with --threads 1")
    return time.thread_time if args.cpu_time else time.perf_counter
