"""Memory of the writer and the reader over many runs: resident memory must stay flat.

Writes `--runs` runs (default 1,000) of a small synthetic shape with `TraceWriter`, printing the
resident memory every 100 runs; then opens the trace, visits every run the way the app's run
summary does (open the run, read one window of each per-token array), printing the same, and
prints what is left after `close()`. One process; RSS from /proc/self/statm.

    python bench/trace_memory.py               # 1,000 runs
    python bench/trace_memory.py --runs 200    # quick
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time

import numpy as np

from traces import TraceWriter, open_trace
from traces.records import RunAttrs
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays

PAGE = os.sysconf("SC_PAGE_SIZE")
L, E, K, V, B, T = 4, 8, 2, 256, 4, 64


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def write(path: str, n: int, every: int) -> list[float]:
    rng = np.random.default_rng(0)
    arrays = synthetic_run_arrays(L, B, T, K, E, V, rng, prompt_len=8, request_ids=np.zeros(B, int))
    attrs = RunAttrs(request_ids=np.zeros(B, int), probe_row=0, batch_size=B, max_new_tokens=T - 8,
                     label="bench", condition="bench", experiment="bench", routing=synthetic_routing())
    marks = []
    with TraceWriter(path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V), requests=["probe"],
                     prompt_tokens=[[1, 2, 3]]) as writer:
        for i in range(n):
            writer.add_run(f"r{i:05d}", attrs=attrs, arrays=arrays)
            if (i + 1) % every == 0:
                marks.append(rss_mib())
    return marks


def read(path: str, every: int) -> tuple[list[float], float, float]:
    marks = []
    trace = open_trace(path)
    before = rss_mib()
    for i, name in enumerate(trace.run_names):
        run = trace.run(name)
        for array in run.arrays.values():
            array[tuple(slice(0, 1) for _ in array.shape[:-1])]
        del run
        if (i + 1) % every == 0:
            marks.append(rss_mib())
    trace.close()
    gc.collect()
    return marks, before, rss_mib()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    every = max(1, args.runs // 10)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "many.h5")
        start, t0 = rss_mib(), time.perf_counter()
        marks = write(path, args.runs, every)
        print(f"writer: {args.runs} runs (L={L} B={B} T={T} E={E} V={V}) "
              f"in {time.perf_counter() - t0:.0f} s; "
              f"RSS {start:.0f} MiB before, every {every} runs: {' '.join(f'{m:.0f}' for m in marks)} MiB "
              f"(growth after the first {every}: {marks[-1] - marks[0]:+.1f} MiB)")
        t0 = time.perf_counter()
        marks, opened, closed = read(path, every)
        print(f"reader: visited {args.runs} runs in {time.perf_counter() - t0:.0f} s; RSS {opened:.0f} MiB "
              f"open, every {every} runs: {' '.join(f'{m:.0f}' for m in marks)} MiB "
              f"(growth: {marks[-1] - marks[0]:+.1f} MiB), after close {closed:.0f} MiB")


if __name__ == "__main__":
    main()
