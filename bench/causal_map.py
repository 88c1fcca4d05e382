"""Seconds per divergent pair of `explain`'s causal map, and its first-order estimates against exact
patching, on the shipped example.

    python bench/causal_map.py [--pairs 6] [--threads 1]

For the first divergent probe pairs of traces/examples/example.h5 (a copy; the trace is not
changed), interleaved pair by pair:

- the map as `explain` makes it (every decode cell exact, prompt cells exact in the estimate's
  order within the budget, nulls, chain), seconds per pair, wall and CPU (the process's, all
  threads) (the runs' kept states are made once per
  run and not timed: `explain` shares them across the pairs of a run);
- the same map with every cell patched exactly, and the estimate of every cell beside it: the rank
  agreement (Spearman, over |effect| of every cell of both directions) and how many of the exact
  top 10 the estimate puts in its top 20.

Prints one row per pair and the totals.
"""

from __future__ import annotations

import argparse
import math
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
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
        fast, every = MapRunner(reruns), MapRunner(reruns, exact_all=True)
        print(f"{len(pairs)} divergent probe pairs of the shipped example, {args.threads} thread(s)")
        print("| pair | t* | cells | exact (map) | map (s) | map CPU (s) | every cell exact (s) | Spearman "
              "| exact top 10 in estimate top 20 |")
        print("|---|---|---|---|---|---|---|---|---|")
        totals, rhos, hits, of, cpu_total = [0.0, 0.0], [], 0, 0, 0.0
        for v in pairs:
            for runner in (fast, every):   # kept states: made once per run, not timed
                for run in (v.run, v.ref_run):
                    runner.forced(run).prepare(int(np.asarray(trace.run(run).step[...]).max()))
            start, cpu = time.perf_counter(), time.process_time()
            m = fast.pair(v)
            t_map, c_map = time.perf_counter() - start, time.process_time() - cpu
            start = time.perf_counter()
            full = every.pair(v)
            t_all = time.perf_counter() - start
            exact = np.array([abs(c.effect) for c in full.cells])
            estimate = np.array([abs(c.estimate) for c in full.cells])
            rho = spearman(exact, estimate)
            hit, k = top_overlap(exact, estimate)
            rhos.append(rho)
            hits, of = hits + hit, of + k
            totals = [totals[0] + t_map, totals[1] + t_all]
            cpu_total += c_map
            print(f"| {v.run} row {v.row} | {v.t_star} | {len(full.cells)} | {sum(c.exact for c in m.cells)} "
                  f"| {t_map:.2f} | {c_map:.2f} | {t_all:.2f} | {rho:.2f} | {hit} of {k} |")
        n = max(len(pairs), 1)
        print(f"per pair: map {totals[0] / n:.2f} s ({cpu_total / n:.2f} s CPU), every cell exact "
              f"{totals[1] / n:.2f} s; Spearman median "
              f"{float(np.nanmedian(rhos)):.2f}; exact top 10 in the estimate's top 20: {hits} of {of}")
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
