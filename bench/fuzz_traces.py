"""Longer fuzz run: damaged copies of the shipped example trace and of a small synthetic trace.

Every copy must read as data or fail with `TraceError`, within a per-file time limit (a watchdog
ends the worker on a hang, see `traces/fuzz.py`). Prints the outcome counts, the slowest file, the
worker's peak resident memory and any finding.

    python bench/fuzz_traces.py                           # 2,000 small + 200 example copies
    python bench/fuzz_traces.py --small 300 --example 0   # quick
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

from traces import TraceWriter
from traces.fuzz import fuzz
from traces.synthetic import write_synthetic_trace

EXAMPLE = Path(__file__).resolve().parent.parent / "traces" / "examples" / "example.h5"


def report(name: str, src: Path, n: int, seed: int, limit_s: float, workdir: str) -> int:
    start = time.perf_counter()
    outcomes, peak_kib = fuzz(src, n, seed, workdir, limit_s)
    wall = time.perf_counter() - start
    counts = collections.Counter(o.result if o.result in ("ok", "TraceError", "hang") else "other"
                                 for o in outcomes)
    slowest = max(outcomes, key=lambda o: o.seconds)
    kinds = collections.Counter(o.damage.split()[0] for o in outcomes)
    print(f"{name}: {n} copies of {src.name} ({src.stat().st_size / 1e6:.2f} MB), seed {seed}: "
          f"{counts['ok']} read as data, {counts['TraceError']} TraceError, {counts['hang']} hangs, "
          f"{counts['other']} other exceptions; damage {dict(kinds)}")
    print(f"  wall {wall:.1f} s ({wall / n * 1e3:.0f} ms per copy), slowest {slowest.seconds:.2f} s "
          f"({slowest.damage}), worker peak RSS {peak_kib / 1024:.0f} MiB")
    findings = [o for o in outcomes if o.result not in ("ok", "TraceError")]
    for o in findings[:20]:
        print(f"  FINDING {o.damage}: {o.result}")
    return len(findings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000, help="copies of the small synthetic trace")
    parser.add_argument("--example", type=int, default=200, help="copies of the example trace")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per file before a hang")
    args = parser.parse_args()
    findings = 0
    with tempfile.TemporaryDirectory() as workdir:
        small = Path(workdir) / "small.h5"
        write_synthetic_trace(small, 3, L=2, E=4, K=2, V=16, B=3, T=12, R=4)
        with TraceWriter.append(small) as writer:
            writer.write_table("causes", {"run": ["r000", "r001"], "share": [0.5, 0.5]}, {"n": 2})
        if args.small:
            findings += report("small", small, args.small, args.seed, args.limit, workdir)
        if args.example:
            findings += report("example", EXAMPLE, args.example, args.seed, args.limit, workdir)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
