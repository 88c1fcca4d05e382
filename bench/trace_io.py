"""Trace I/O benchmark: TraceWriter against plain uncompressed h5py, size on disk, lazy window reads.

Measured side by side in one process on a synthetic trace shaped like real use (L=8, E=8, K=2,
V=256, 32 rows x 512 positions per run; by default enough runs to pass 1 GB of raw array bytes):

- write throughput of `TraceWriter` (gzip-1 + shuffle, chunked, three flushes per run) against
  writing the same arrays uncompressed and contiguous with plain h5py, run by run interleaved;
- size on disk against raw array bytes (and variants with `--variants`);
- open the trace and read one (run, layer, row, 512-position) window of every per-token array:
  wall time and growth of resident memory (from /proc/self/statm).

    python bench/trace_io.py                 # full size (slow on 2 cores)
    python bench/trace_io.py --runs 4 --variants   # quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import h5py
import numpy as np

from traces import TraceWriter, open_trace
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def run_attrs(B: int, i: int) -> dict:
    return {"request_ids": np.arange(B) % 8, "probe_row": 0, "batch_size": B, "max_new_tokens": 0,
            "label": f"run {i}", "condition": "bench", "experiment": "bench", "routing": synthetic_routing(),
            "kernel_mode": "native", "seed": i, "wall_time_s": 0.0}


def write_both(args, pool, trace_path, plain_path, logits_dtype=None, compression="gzip"):
    """Write n runs with TraceWriter and with plain h5py, interleaved; return (t_trace, t_plain, raw)."""
    L, E, K, V, B = args.L, args.E, args.K, args.V, args.B
    prompts = [np.full(4, 65, dtype=np.int32)] * 8
    writer = TraceWriter(trace_path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V),
                         requests=[f"request {r}" for r in range(8)], prompt_tokens=prompts,
                         compression=compression)
    plain = h5py.File(plain_path, "w")
    t_trace = t_plain = 0.0
    raw = 0
    for i in range(args.runs):
        arrays = pool[i % len(pool)]
        if logits_dtype is not None:
            arrays = {**arrays, "logits": arrays["logits"].astype(logits_dtype)}
        raw += sum(a.nbytes for a in pool[i % len(pool)].values())
        t0 = time.perf_counter()
        writer.add_run(f"r{i:03d}", attrs=run_attrs(B, i), arrays=arrays)
        t1 = time.perf_counter()
        group = plain.create_group(f"r{i:03d}")
        for path, arr in arrays.items():
            group.create_dataset(path, data=arr)
        plain.flush()
        t2 = time.perf_counter()
        t_trace += t1 - t0
        t_plain += t2 - t1
    writer.close()
    plain.close()
    return t_trace, t_plain, raw


def read_windows(path: str, args, n: int = 12):
    """Open the trace fresh and read one (run, layer, row, 512-position) window, n times."""
    rng = np.random.default_rng(1)
    times, growth = [], []
    for _ in range(n):
        before = rss_bytes()
        t0 = time.perf_counter()
        with open_trace(path) as trace:
            run = trace.run(trace.run_names[int(rng.integers(len(trace.run_names)))])
            l, b = int(rng.integers(args.L)), int(rng.integers(args.B))
            t = int(rng.integers(max(1, run.dims["T"] - 511)))
            window = np.s_[l, b, t:t + 512]
            parts = [run.expert[window], run.gate[window], run.kept[window], run.slot[window],
                     run.group[window], run.router_logits[window], run.tokens[b, t:t + 512],
                     run.step[b, t:t + 512], run.logits[b, t:t + 512]]
            elapsed = time.perf_counter() - t0
            growth.append(rss_bytes() - before)
        times.append(elapsed)
        assert all(p.shape[0] == min(512, run.dims["T"] - t) for p in parts)
    return times, growth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="runs to write (default: pass 1 GB raw)")
    parser.add_argument("--L", type=int, default=8)
    parser.add_argument("--E", type=int, default=8)
    parser.add_argument("--K", type=int, default=2)
    parser.add_argument("--V", type=int, default=256)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--T", type=int, default=512)
    parser.add_argument("--pool", type=int, default=3, help="distinct synthetic runs cycled through")
    parser.add_argument("--variants", action="store_true",
                        help="also measure float16 logits and uncompressed chunked storage")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary files go")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    pool = [synthetic_run_arrays(args.L, args.B, args.T, args.K, args.E, args.V, rng)
            for _ in range(args.pool)]
    per_run = sum(a.nbytes for a in pool[0].values())
    if args.runs is None:
        args.runs = (10**9 // per_run) + 1
    print(f"shape per run: L={args.L} B={args.B} T={args.T} K={args.K} E={args.E} V={args.V}; "
          f"{per_run / 1e6:.1f} MB raw per run, {args.runs} runs")
    for path, arr in pool[0].items():
        print(f"  {path:<22} {arr.dtype.name:<8} {arr.nbytes / per_run:6.1%} of raw bytes")

    trace_path = os.path.join(args.dir, "bench_trace_io.h5")
    plain_path = os.path.join(args.dir, "bench_trace_io_plain.h5")
    try:
        t_trace, t_plain, raw = write_both(args, pool, trace_path, plain_path)
        size = os.path.getsize(trace_path)
        print(f"raw array bytes           {raw / 1e9:.3f} GB")
        print(f"TraceWriter (gzip-1+shuf) {raw / t_trace / 1e6:7.1f} MB/s   {t_trace:.1f} s")
        print(f"plain h5py uncompressed   {raw / t_plain / 1e6:7.1f} MB/s   {t_plain:.1f} s")
        print(f"write throughput ratio    {t_plain / t_trace:.2f}   (target >= 0.5)")
        print(f"size on disk / raw bytes  {size / raw:.3f}   ({size / 1e9:.3f} GB; target <= 0.6)")
        times, growth = read_windows(trace_path, args)
        print(f"open + read one (run, layer, row, 512-position) window of every per-token array: "
              f"median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms "
              f"(target <= 50 ms); "
              f"resident memory growth max {max(growth) / 1e6:.1f} MB (target <= 50 MB)")
        variants = [("float16 logits (lossy), gzip-1+shuffle", np.float16, "gzip"),
                    ("float32, chunked, uncompressed", None, None)] if args.variants else []
        for label, logits_dtype, compression in variants:
            os.remove(trace_path)
            t_v, t_plain_v, raw = write_both(args, pool, trace_path, plain_path, logits_dtype, compression)
            size_v = os.path.getsize(trace_path)
            print(f"variant {label}: size on disk / raw float32 bytes {size_v / raw:.3f}; "
                  f"write {raw / t_v / 1e6:.1f} MB/s of float32 array bytes, ratio against plain h5py "
                  f"writing the same arrays {t_plain_v / t_v:.2f}")
    finally:
        for path in (trace_path, plain_path):
            if os.path.exists(path):
                os.remove(path)


if __name__ == "__main__":
    main()
