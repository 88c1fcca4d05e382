"""Benchmark: `moe-inspector export --view runs` of a trace of 2,000 runs, as a user runs it (a child
process, CSV output): its wall time, CPU time and peak resident memory, against the targets of
<= 5 s and <= 300 MB. Each reading opens the trace with its run summary table and a copy without it
(a trace written before the table), alternating, and checks that both write the same CSV.

    python bench/runs_export.py                 # 2,000 runs, two readings of each
    python bench/runs_export.py --runs 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from many_runs import trace_of
from pairs import load_average, overloaded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S, TARGET_MB = 5.0, 300.0


def export(path: str, output: str, options: tuple[str, ...] = ()) -> dict[str, float]:
    """Run the export once: wall seconds, CPU seconds and peak resident MB of the command."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "export", "--view", "runs", "-o", output,
                             *options, path], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"export of {path} failed ({proc.returncode}): {proc.stderr.read().strip()}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs in the trace (default 2000)")
    parser.add_argument("--repeat", type=int, default=2, help="readings of each (default 2)")
    parser.add_argument("--format", default="csv", choices=["csv", "png", "svg", "pdf"],
                        help="output format (default csv; the figures are compared to the memory target)")
    args = parser.parse_args(argv)
    paths = {table: trace_of(args.runs, table) for table in (True, False)}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.repeat):
            texts = []
            for table, path in paths.items():
                load_before = load_average()
                m = export(path, os.path.join(folder, f"runs-{table}.{args.format}"))
                note = overloaded(load_before, load_average())
                kind = "with the run summary table" if table else "without the table"
                print(f"{args.runs} runs, {kind}: {m['wall_s']:.1f} s wall (target <= {TARGET_S:g} s), "
                      f"{m['cpu_s']:.1f} s CPU, peak {m['rss_mb']:.0f} MB (target <= {TARGET_MB:g} MB); "
                      f"load average {load_before:.2f} -> {load_average():.2f}"
                      + (f"  NOISY: {note}" if note else ""), flush=True)
                with open(os.path.join(folder, f"runs-{table}.{args.format}"), "rb") as f:
                    texts.append(f.read() if args.format == "csv" else b"")
            print(f"reading {i + 1}: the two CSVs are {'the same' if texts[0] == texts[1] else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
