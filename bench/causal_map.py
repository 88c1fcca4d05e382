"""Seconds per divergent pair of `explain`'s causal map, and its first-order estimates against exact
patching, on the shipped example.

    python bench/causal_map.py [--pairs 6] [--threads 1 2]

For the first divergent probe pairs of traces/examples/example.h5 (a copy; the trace is not
changed), at each thread count, interleaved pair by pair, wall and CPU seconds (the process's, all
threads; the runs' kept states are made once per run and not timed: `explain` shares them across
the pairs of a run):

- level 1: the map as `explain` makes it without the chain (every decode cell exact, prompt cells
  exact in the estimate's order within the budget, the joint patch, nulls), its reruns stacked as
  copies of the batch;
- the map with the chain (levels 1 and 2): what `explain` stores;
- at the first thread count only, the peer: the same map with one rerun per change (no stacking),
  and the ratio; and the same map with every cell patched exactly, and the estimate of
  every cell beside it: the rank agreement (Spearman, over |effect| of every cell of both
  directions) and how many of the exact top 10 the estimate puts in its top 20.

Prints one row per pair and thread count, and the medians.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.counterfactual.causal_map import MapRunner  # noqa: E402
from lab.counterfactual.pairs import plan_groups  # noqa: E402
from lab.counterfactual.reruns import Reruns  # noqa: E402
from lab.counterfactual.source import load_model, resolve_checkpoint  # noqa: E402
from traces import open_trace  # noqa: E402
from traces.analysis import explain_pair, probe_request, row_trace  # noqa: E402


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation (ties by order; nan for fewer than 3 values)."""
    if len(x) < 3:
        return math.nan
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def top_overlap(exact: np.ndarray, estimate: np.ndarray, k: int = 10, m: int = 20) -> tuple[int, int]:
    """(how many of the exact top k the estimate's top m holds, k actually compared)."""
    top = set(np.argsort(-exact)[:k].tolist())
    return len(top & set(np.argsort(-estimate)[:m].tolist())), len(top)


def timed(runner: MapRunner, v):
    """(map, wall seconds, CPU seconds) of one pair."""
    start, cpu = time.perf_counter(), time.process_time()
    m = runner.pair(v)
    return m, time.perf_counter() - start, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    copy = folder / "example.h5"
    shutil.copy(ROOT / "traces" / "examples" / "example.h5", copy)
    with open_trace(copy) as trace:
        model = load_model(trace.record, resolve_checkpoint(trace.record, copy, None), torch.device("cpu"))
        probe = probe_request(trace)
        pairs = []
        for group in plan_groups(trace, [probe]):
            ref = row_trace(trace.run(group.reference[0]), group.reference[1])
            for run, row in group.others:
                v = explain_pair(ref, row_trace(trace.run(run), row))
                if v.diverged:
                    pairs.append(v)
        pairs = pairs[: args.pairs]
        reruns = Reruns(trace, model)
        level1, full = MapRunner(reruns, chain=False), MapRunner(reruns)
        peer, every = MapRunner(reruns, stack=False), MapRunner(reruns, exact_all=True)
        runners = (level1, full, peer, every)
        print(f"{len(pairs)} divergent probe pairs of the shipped example; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start")
        print("| pair | t* | cells | threads | level 1 wall (s) | level 1 CPU (s) | with chain wall (s) "
              "| with chain CPU (s) | one rerun per change, with chain, wall (s) | ratio (wall) "
              "| Spearman | exact top 10 in estimate top 20 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        rows: dict[int, list[tuple[float, ...]]] = {n: [] for n in args.threads}
        rhos, hits, of = [], 0, 0
        for v in pairs:
            for runner in runners:   # kept states: made once per run, not timed
                for run in (v.run, v.ref_run):
                    runner.forced(run).prepare(int(np.asarray(trace.run(run).step[...]).max()))
            for n_threads in args.threads:
                torch.set_num_threads(n_threads)
                _, w1, c1 = timed(level1, v)
                _, w2, c2 = timed(full, v)
                w3 = math.nan
                if n_threads == args.threads[0]:
                    _, w3, _ = timed(peer, v)
                    everything = every.pair(v)
                    exact = np.array([abs(c.effect) for c in everything.cells])
                    estimate = np.array([abs(c.estimate) for c in everything.cells])
                    rho = spearman(exact, estimate)
                    hit, k = top_overlap(exact, estimate)
                    rhos.append(rho)
                    hits, of = hits + hit, of + k
                    rank = f"{rho:.2f} | {hit} of {k}"
                else:
                    rank = " | "
                rows[n_threads].append((w1, c1, w2, c2, w3))
                print(f"| {v.run} row {v.row} | {v.t_star} | {len(everything.cells)} | {n_threads} "
                      f"| {w1:.2f} | {c1:.2f} | {w2:.2f} | {c2:.2f} | {w3:.2f} | {w3 / w2:.1f} | {rank} |")
        for n_threads, r in rows.items():
            w1, c1, w2, c2, w3 = np.nanmedian(np.array(r), axis=0) if n_threads == args.threads[0] else \
                (*np.median(np.array(r)[:, :4], axis=0), math.nan)
            print(f"{n_threads} thread(s), median per pair: level 1 {w1:.2f} s wall ({c1:.2f} s CPU), "
                  f"with the chain {w2:.2f} s wall ({c2:.2f} s CPU); one rerun per change {w3:.2f} s wall "
                  f"(ratio {w3 / w2:.1f})")
        print(f"Spearman median {float(np.nanmedian(rhos)):.2f}; exact top 10 in the estimate's top 20: "
              f"{hits} of {of}; load average {os.getloadavg()[0]:.1f} at the end")
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
