"""Wall time of a whole `moe-inspector record` against the same command from another source tree (the
previous commit), run alternately as child processes.

    git worktree add /tmp/before HEAD~1   # or: git archive HEAD~1 | tar -x -C /tmp/before
    .venv/bin/python bench/record_speed.py --before /tmp/before [--pairs 5] \
        -- -e e1 -n 3 --new-tokens 64 --repeats 1

Each child is `python -m inspector.cli record ... -o <tmp> --force -q` with PYTHONPATH set to its tree.
The ratio after / before is read twice (bench/pairs.py): over wall time, and over the CPU time of the
children (user + system), which other jobs on a shared machine disturb far less.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, Pair, load_average  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(tree: Path, args: list[str], out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `record` from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cpu, t0 = children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "inspector.cli", "record", *args, "-o", str(out), "--force", "-q"],
                   cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0, children_cpu() - cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, required=True, help="source tree of the previous commit")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("record_args", nargs="+", help="arguments of `record` (after --)")
    args = p.parse_args(argv)
    before, after = args.before.resolve(), ROOT
    print(f"record {' '.join(args.record_args)}: before = {before}, after = {after}; "
          f"load average {load_average():.2f} on {os.cpu_count()} CPUs")
    walls: tuple[list[float], list[float]] = ([], [])
    cpus: tuple[list[float], list[float]] = ([], [])
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            for side, tree in enumerate((before, after)):
                wall, cpu = run(tree, args.record_args, Path(tmp) / f"{side}.h5")
                walls[side].append(wall)
                cpus[side].append(cpu)
            print(f"pair {i + 1}: wall {walls[0][-1]:.1f} / {walls[1][-1]:.1f} s, CPU {cpus[0][-1]:.1f} / "
                  f"{cpus[1][-1]:.1f} s, load {load_average():.1f}", flush=True)
    load_after = load_average()
    cores = os.cpu_count() or 1
    print(HEADER)
    print(Pair(tuple(walls[0]), tuple(walls[1]), load_before, load_after, cores).line(
        "record, after / before, wall", 0.6, scale=1))
    print(Pair(tuple(cpus[0]), tuple(cpus[1]), load_before, load_after, cores).line(
        "record, after / before, children CPU", 0.6, scale=1))
    print("(A and B columns in seconds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
