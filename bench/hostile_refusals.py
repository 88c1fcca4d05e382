"""How long refusing a trace built to exhaust the safe open takes: groups nested 10,000 deep, a group
of a million members, and (for scale) groups nested just within the limit. Each is opened in this
process (`open_trace`, the median of three) and by `moe-inspector info` as a user runs it (wall time
of the whole process, start-up included).

    PYTHONPATH=$PWD .venv/bin/python bench/hostile_refusals.py [--members 1000000] [--depth 10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py

from traces import TraceError, open_trace
from traces.h5walk import MAX_DEPTH
from traces.synthetic import write_synthetic_trace


def nested(base: Path, path: Path, depth: int) -> Path:
    shutil.copy(base, path)
    with h5py.File(path, "r+") as f:
        group = f.require_group("tables")
        for _ in range(depth):
            group = group.create_group("g")
    return path


def crowded(base: Path, path: Path, members: int) -> Path:
    shutil.copy(base, path)
    with h5py.File(path, "r+", libver="latest") as f:
        group = f.create_group("crowd")
        first = group.create_dataset("0", data=[0])
        for i in range(1, members):
            group[str(i)] = first
    return path


def open_seconds(path: Path) -> tuple[float, str]:
    """Median seconds of three opens, and what the last one said."""
    times, said = [], "opened"
    for _ in range(3):
        start = time.perf_counter()
        try:
            open_trace(path).close()
        except TraceError as exc:
            said = str(exc)
        times.append(time.perf_counter() - start)
    return statistics.median(times), said


def info_seconds(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "inspector.cli", "info", str(path)], capture_output=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": os.getcwd()})
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--depth", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / "base.h5"
        write_synthetic_trace(base, 2, L=2, E=4, K=2, V=64, B=3, T=24, R=2)
        cases = {"base": base,
                 f"nested {MAX_DEPTH - 2} deep (within the limit)": nested(base, Path(folder) / "n.h5",
                                                                            MAX_DEPTH - 2),
                 f"nested {args.depth} deep": nested(base, Path(folder) / "deep.h5", args.depth),
                 f"a group of {args.members} members": crowded(base, Path(folder) / "crowd.h5", args.members)}
        for name, path in cases.items():
            seconds, said = open_seconds(path)
            wall, status = info_seconds(path)
            print(f"{name} ({path.stat().st_size / 1e6:.1f} MB): open_trace {seconds * 1000:.1f} ms, "
                  f"`info` {wall:.2f} s with exit {status}: {said[-110:]}", flush=True)


if __name__ == "__main__":
    main()
