"""Speed of the divergence analysis: causes and curves for 30 runs of one request.

Target: 30 runs x 512 positions x 8 layers x 8 experts (top-2, vocabulary 256) analysed in <= 0.2 s:
U(N), t*, the prefix tree, the cause of every run against the reference (with the displacing rows
of capacity drops) and the per-position curves of every pair. The runs are realistic synthetic
ones (`traces.synthetic`): four rows per batch, the request in a random row, partners random.
Row extraction from in-memory runs is included; building the runs is not. For scale, the same
analysis is also timed reading the rows from a trace file, against the in-memory one in interleaved
pairs (the ratio read as in bench/pairs.py).

    .venv/bin/python bench/analysis_speed.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from pairs import HEADER, Pair, paired

from traces import TraceWriter, open_trace
from traces.analysis import RunArrays, aligned_rows, analyse_request, row_trace
from traces.records import RunAttrs
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays

TARGET_S = 0.2
N, T, L, E, K, V, B, PROMPT = 30, 512, 8, 8, 2, 256, 4, 64


def build_runs(seed: int, noise: float) -> tuple[list[RunArrays], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(32, 127, size=PROMPT).astype(np.int32) for _ in range(8)]
    runs = []
    for i in range(N):
        ids = rng.integers(1, 8, size=B)
        probe = int(rng.integers(B))
        ids[probe] = 0
        arrays = synthetic_run_arrays(L, B, T, K, E, V, rng, prompts=[prompts[r] for r in ids],
                                      request_ids=ids, seed=seed, noise=noise, capacity_factor=1.0)
        runs.append(RunArrays.from_schema(f"r{i:02d}", arrays, request_ids=ids, probe_row=probe))
    return runs, prompts


def analyse(rows) -> tuple[object, list]:
    analysis = analyse_request(rows, reference=0)
    curves = [analysis.curves(i) for i in range(1, len(rows))]
    return analysis, curves


def best_of(repeats: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{N} runs x {T} positions x {L} layers x {E} experts (K={K}, V={V}, B={B}), "
          f"best of {args.repeats}:")
    # Small noise: the completions agree, so every pair is compared over all T positions (slowest).
    # Larger noise: completions split at near-ties, pairs are compared up to their t*.
    for label, noise in (("completions agree (full length)", 1e-3), ("completions diverge", 3e-2)):
        runs, prompts = build_runs(seed=1, noise=noise)

        def in_memory(runs=runs):
            return analyse([row_trace(run, int(run.probe_row)) for run in runs])

        seconds, (analysis, _) = best_of(args.repeats, in_memory)
        print(f"  {label}: {analysis.completions.describe()}")
        print(f"    {analysis.summary().describe()}")
        print(f"    causes and curves, in memory: {seconds:.3f} s (target <= {TARGET_S} s, "
              f"{seconds / TARGET_S:.2f} of the target) {'PASS' if seconds <= TARGET_S else 'FAIL'}")
    from_file = time_from_file(runs, prompts, in_memory, args.repeats)
    print(f"  {HEADER}\n  {from_file.line('rows from a gzip trace / in memory')}")


def time_from_file(runs: list[RunArrays], prompts: list[np.ndarray], in_memory, repeats: int) -> Pair:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.h5"
        meta = synthetic_meta(L, E, K, V)
        requests = [f"request {i}" for i in range(len(prompts))]
        with TraceWriter(path, meta=meta, vocab=byte_vocab(V), requests=requests,
                         prompt_tokens=prompts) as writer:
            for run in runs:
                attrs = RunAttrs(request_ids=run.request_ids, probe_row=run.probe_row, batch_size=B,
                                 max_new_tokens=T - PROMPT, label=run.name, condition="bench",
                                 experiment="bench", routing=synthetic_routing(), seed=1)
                writer.add_run(run.name, attrs=attrs, arrays=run.arrays())
        with open_trace(path) as trace:
            return paired(in_memory, lambda: analyse(aligned_rows(trace, 0)), repeats)


if __name__ == "__main__":
    main()
