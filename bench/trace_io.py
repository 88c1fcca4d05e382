"""Trace I/O benchmark: TraceWriter against plain uncompressed h5py, size on disk, lazy window reads.

Measured side by side in one process on a synthetic trace shaped like real use (L=8, E=8, K=2,
V=256, 32 rows x 512 positions per run; by default enough runs to pass 1 GB of raw array bytes):

- write time of one run with `TraceWriter` (gzip-1 + shuffle, chunks compressed on `--threads`
  worker threads and stored with direct chunk writes, three flushes per run) against writing the
  same arrays uncompressed and contiguous with plain h5py, in interleaved pairs (`bench/pairs.py`);
- size on disk against raw array bytes, and bytes on disk per token position (and variants with
  `--variants`);
- open the trace and read one (run, layer, row, 512-position) window of every per-token array:
  wall time and growth of resident memory (from /proc/self/statm);
- with `--topk-V V` (e.g. 152064), bytes on disk per token position at that vocabulary with the
  top-k logits (`--logits-k`, default 64) against full float32 logits' raw bytes (B=8, T=512);
- with `--rewrite TRACE` (e.g. traces/examples/example.h5), a recorded trace's runs written again
  with full and with top-k logits: bytes on disk per valid token of real data.

    python bench/trace_io.py                 # full size (slow on 2 cores)
    python bench/trace_io.py --runs 4 --variants   # quick
    python bench/trace_io.py --runs 4 --topk-V 152064
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, paired  # noqa: E402

from traces import TraceWriter, open_trace, schema  # noqa: E402
from traces.records import RunAttrs  # noqa: E402
from traces.schema import DEFAULT_LOGITS_K  # noqa: E402
from traces.synthetic import byte_vocab, synthetic_meta, synthetic_routing, synthetic_run_arrays  # noqa: E402
from traces.toplogits import TopLogits  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def run_attrs(B: int, i: int) -> RunAttrs:
    return RunAttrs(request_ids=np.arange(B) % 8, probe_row=0, batch_size=B, max_new_tokens=0,
                    label=f"run {i}", condition="bench", experiment="bench", routing=synthetic_routing(),
                    seed=i)


def write_both(args, pool, trace_path, plain_path, logits_dtype=None, compression="gzip"):
    """Write runs with plain h5py (A) and with TraceWriter (B) in interleaved pairs (`args.runs`
    pairs after one warm-up each); return (the `Pair` of seconds per run, raw bytes TraceWriter wrote)."""
    L, E, K, V, B = args.L, args.E, args.K, args.V, args.B
    prompts = [np.full(4, 65, dtype=np.int32)] * 8
    writer = TraceWriter(trace_path, meta=synthetic_meta(L, E, K, V), vocab=byte_vocab(V),
                         requests=[f"request {r}" for r in range(8)], prompt_tokens=prompts,
                         compression=compression, threads=args.threads)
    plain = h5py.File(plain_path, "w")
    if logits_dtype is not None:
        pool = [{**arrays, schema.LOGITS: arrays[schema.LOGITS].astype(logits_dtype)} for arrays in pool]
    counter = {"trace": itertools.count(), "plain": itertools.count()}
    raw = [0]

    def trace_run():
        i = next(counter["trace"])
        arrays = pool[i % len(pool)]
        raw[0] += sum(a.nbytes for a in arrays.values())
        writer.add_run(f"r{i:03d}", attrs=run_attrs(B, i), arrays=arrays)

    def plain_run():
        i = next(counter["plain"])
        group = plain.create_group(f"r{i:03d}")
        for path, arr in pool[i % len(pool)].items():
            group.create_dataset(path, data=arr)
        plain.flush()

    try:
        pair = paired(plain_run, trace_run, args.runs)
    finally:
        writer.close()
        plain.close()
    return pair, raw[0]


def topk_bytes_per_token(args, path: str) -> None:
    """Bytes on disk per token position at vocabulary `args.topk_V` with top-k logits (B=8, T=512)."""
    L, E, K, V, k, B, T = args.L, args.E, args.K, args.topk_V, args.logits_k, 8, 512
    rng = np.random.default_rng(4)
    prompts = [np.full(4, 65, dtype=np.int32)] * 8
    writer = TraceWriter(path, meta=synthetic_meta(L, E, K, V), vocab=[f"<{i}>" for i in range(V)],
                         requests=[f"request {r}" for r in range(8)], prompt_tokens=prompts,
                         threads=args.threads)
    runs, t_write = 2, 0.0
    with writer:
        for i in range(runs):
            arrays = synthetic_run_arrays(L, B, T, K, E, 256, rng)  # routing; the logits are made below
            del arrays[schema.LOGITS]
            tops = []
            for b in range(B):  # one row of full float32 logits at a time: [T, V] is 0.6 GB at 152k
                full = (rng.standard_normal((T, V), dtype=np.float32) * 2.0)
                tops.append(TopLogits.from_full(full, arrays[schema.TOKENS][b], k,
                                                valid=arrays[schema.STEP][b] >= 0))
            for field in ("index", "value", "lse", "chosen"):
                arrays[f"logits_topk/{field}"] = np.stack([getattr(t, field) for t in tops])
            t0 = time.perf_counter()
            writer.add_run(f"r{i}", attrs=run_attrs(B, i), arrays=arrays)
            t_write += time.perf_counter() - t0
    with open_trace(path) as trace:
        storage = [trace.run(n).storage() for n in trace.run_names]
    tokens = runs * B * T
    stored = sum(s for st in storage for _, s in st.values())
    logits = sum(s for st in storage for p, (_, s) in st.items() if p.startswith("logits_topk"))
    print(f"V={V}, top-{k} logits, B={B} T={T}, {runs} runs: {stored / tokens:.0f} bytes on disk per token "
          f"({logits / tokens:.0f} of them logits); full float32 logits would be {4 * V} raw bytes per "
          f"token ({4 * V * B * T / 2**30:.2f} GiB per run); write {t_write / runs * 1e3:.0f} ms per run")


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


def rewrite(args, source: str, path: str) -> None:
    """Bytes per valid token of a recorded trace's runs, written with full and with top-k logits."""
    from traces.synthetic import topk_arrays

    with open_trace(source) as trace:
        meta = trace.record.without_writer_fields()
        names, runs = trace.run_names, [trace.run(n) for n in trace.run_names]
        arrays = [{p: a[...] for p, a in run.arrays.items()} for run in runs]
        attrs = [run.record.without_writer_fields() for run in runs]
        tokens = sum(int((run.tokens[...] >= 0).sum()) for run in runs)
        requests = [trace.requests.prompt_tokens(r) for r in range(len(trace.requests))]
        texts, vocab = trace.requests.text, trace.vocab
    print(f"{source}: {len(runs)} runs, {tokens} valid tokens, V={len(vocab)}")
    for label, convert in (("full float32 logits", lambda a: a),
                           (f"top-{args.logits_k} logits", lambda a: topk_arrays(a, args.logits_k))):
        with TraceWriter(path, meta=meta, vocab=vocab, requests=texts, prompt_tokens=requests,
                         threads=args.threads) as writer:
            for name, a, at in zip(names, arrays, attrs, strict=True):
                writer.add_run(name, attrs=at, arrays=convert(a))
        with open_trace(path) as trace:
            stored = [trace.run(n).storage() for n in trace.run_names]
        total = sum(s for st in stored for _, s in st.values())
        logits = sum(s for st in stored for p, (_, s) in st.items() if p.startswith("logits"))
        print(f"  {label}: {total / tokens:.0f} bytes on disk per token "
              f"({logits / tokens:.0f} of them logits)")
        os.remove(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="runs to write (default: pass 1 GB raw)")
    parser.add_argument("--L", type=int, default=8)
    parser.add_argument("--E", type=int, default=8)
    parser.add_argument("--K", type=int, default=2)
    parser.add_argument("--V", type=int, default=256)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--T", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None,
                        help="TraceWriter's compression threads (default: the CPUs this process may use)")
    parser.add_argument("--pool", type=int, default=3, help="distinct synthetic runs cycled through")
    parser.add_argument("--variants", action="store_true",
                        help="also measure float16 logits and uncompressed chunked storage")
    parser.add_argument("--topk-V", type=int, default=None, metavar="V",
                        help="also measure bytes per token with top-k logits at this vocabulary size")
    parser.add_argument("--logits-k", type=int, default=DEFAULT_LOGITS_K)
    parser.add_argument("--rewrite", metavar="TRACE", help="also rewrite this trace's runs (real data)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary files go")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    pool = [synthetic_run_arrays(args.L, args.B, args.T, args.K, args.E, args.V, rng)
            for _ in range(args.pool)]
    per_run = sum(a.nbytes for a in pool[0].values())
    if args.runs is None:
        args.runs = (10**9 // per_run) + 1
    print(f"shape per run: L={args.L} B={args.B} T={args.T} K={args.K} E={args.E} V={args.V}; "
          f"{per_run / 1e6:.1f} MB raw per run, {args.runs} interleaved pairs (+1 warm-up); load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for path, arr in pool[0].items():
        print(f"  {path:<22} {arr.dtype.name:<8} {arr.nbytes / per_run:6.1%} of raw bytes")

    trace_path = os.path.join(args.dir, "bench_trace_io.h5")
    plain_path = os.path.join(args.dir, "bench_trace_io_plain.h5")
    tokens_per_run = args.B * args.T
    try:
        pair, raw = write_both(args, pool, trace_path, plain_path)
        t_trace, t_plain = pair.median_b, pair.median_a
        size = os.path.getsize(trace_path)
        n_runs = args.runs + 1
        with open_trace(trace_path) as trace:
            logits_stored = sum(trace.run(n).storage()[schema.LOGITS][1] for n in trace.run_names)
        print(f"raw array bytes           {raw / 1e9:.3f} GB")
        for label, t in (("TraceWriter (gzip-1+shuf)", t_trace), ("plain h5py uncompressed  ", t_plain)):
            print(f"{label} {per_run / t / 1e6:7.1f} MB/s   {t * 1e3:.0f} ms per run (median)")
        print(HEADER)
        print(pair.line("TraceWriter / plain h5py, time per run", 2.0))
        q1, q3 = pair.spread
        print(f"write throughput ratio    {1 / pair.ratio_of_medians:.2f} (of medians), "
              f"{1 / pair.median_ratio:.2f} (median of pairs), pairs {1 / q3:.2f}-{1 / q1:.2f}; "
              f"target >= 0.5: {pair.verdict(2.0)}")
        print(f"size on disk / raw bytes  {size / raw:.3f}   ({size / 1e9:.3f} GB; target <= 0.6)")
        print(f"bytes on disk per token position: {size / (n_runs * tokens_per_run):.0f} "
              f"({logits_stored / (n_runs * tokens_per_run):.0f} of them logits: float32 logits stored at "
              f"{logits_stored / (n_runs * tokens_per_run * args.V * 4):.3f} of their raw bytes)")
        times, growth = read_windows(trace_path, args)
        print(f"open + read one (run, layer, row, 512-position) window of every per-token array: "
              f"median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms "
              f"(target <= 50 ms); "
              f"resident memory growth max {max(growth) / 1e6:.1f} MB (target <= 50 MB)")
        variants = [("float16 logits (lossy), gzip-1+shuffle", np.float16, "gzip"),
                    ("float32, chunked, uncompressed", None, None)] if args.variants else []
        for label, logits_dtype, compression in variants:
            os.remove(trace_path)
            pair_v, _ = write_both(args, pool, trace_path, plain_path, logits_dtype, compression)
            ratio_v = 1 / pair_v.ratio_of_medians
            size_v = os.path.getsize(trace_path)
            print(f"variant {label}: size on disk / raw float32 bytes {size_v / (n_runs * per_run):.3f}; "
                  f"ratio against plain h5py writing the same arrays {ratio_v:.2f}")
        if args.topk_V:
            os.remove(trace_path)
            topk_bytes_per_token(args, trace_path)
        if args.rewrite:
            os.remove(trace_path)
            rewrite(args, args.rewrite, trace_path)
    finally:
        for path in (trace_path, plain_path):
            if os.path.exists(path):
                os.remove(path)


if __name__ == "__main__":
    main()
