"""Cost of recording the shipped model into a trace, writer included, as ratios of interleaved pairs.

    .venv/bin/python bench/recording_io.py [--repeats 7] [--threads 2] [--new-tokens 64]

The shipped checkpoint (or the default configuration, randomly initialised, when it is absent), the
eight benchmark prompts (`bench/pairs.py`). Ratios against generation alone (target <= 1.10):
- generation + recorder + a `BackgroundWriter` taking the run (compression and the write run on
  the writer thread and its pool while the next generation goes on; the last run is waited for);
- generation + recorder + `TraceWriter.add_run` inline (what the recorder did before the writer
  thread);
and, with `--logits topk`, the same with the recorder's top-k logits. On a machine other jobs load,
wall times swing; the CPU time of the process (all its threads) per call is printed too: with the
write inline, CPU(generation + recorder + write) / CPU(generation) is the work the recording adds.
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

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, PROMPTS, block, paired  # noqa: E402
from shipped import load_model  # noqa: E402

from lab.experiments.session import writer_threads  # noqa: E402
from model.generate import generate  # noqa: E402
from model.recorder import Recorder, trace_meta  # noqa: E402
from model.routing import RoutingPolicy  # noqa: E402
from model.tokenizer import encode, vocab_strings  # noqa: E402
from traces import TraceWriter  # noqa: E402
from traces.background import BackgroundWriter  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1, as `record`; the writer pool takes the other CPUs)")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--runs-per-block", type=int, default=3,
                   help="runs per timed block of the writer-thread pair")
    p.add_argument("--logits", choices=("full", "topk"), default="full")
    p.add_argument("--dir", default=tempfile.gettempdir())
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, origin = load_model()
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.25)
    prompts = [encode(t) for t in PROMPTS]
    print(f"model: {origin}; {args.threads} torch threads; B={len(prompts)}, {args.new_tokens} new tokens, "
          f"logits {args.logits}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.repeats} interleaved pairs each")
    meta = trace_meta(model, policy)
    names = itertools.count()

    def open_writer(path: str) -> TraceWriter:
        return TraceWriter(path, meta=meta, vocab=vocab_strings(model.config.vocab_size),
                           requests=list(PROMPTS), prompt_tokens=prompts, threads=writer_threads())

    cpu: dict[str, list[float]] = {"bare": [], "inline": [], "bare2": [], "recorder": []}

    def timed(key, fn):
        def run():
            t0 = time.process_time()
            fn()
            cpu[key].append(time.process_time() - t0)
        return run

    def bare():
        generate(model, prompts, args.new_tokens, policy, stop_at_eos=False)

    def recorded(writer):
        def run():
            rec = Recorder(args.logits)
            result = generate(model, prompts, args.new_tokens, policy, recorder=rec, stop_at_eos=False)
            if writer is None:
                rec.arrays(result)
            else:
                rec.write_run(writer, f"r{next(names):04d}", result, policy=policy,
                              request_ids=range(len(prompts)))
        return run

    paths = [os.path.join(args.dir, f"bench_recording_io_{kind}.h5") for kind in ("thread", "inline")]
    try:
        inline = open_writer(paths[1])
        with BackgroundWriter(open_writer(paths[0])) as background:
            # Blocks of runs, each ending when its last write is done: the writer thread's work is
            # timed with the generations it overlapped, not with the next bare block.
            n = args.runs_per_block
            thread = paired(block(bare, n), block(recorded(background), n, background.flush), args.repeats)
        inline_pair = paired(timed("bare", bare), timed("inline", recorded(inline)), args.repeats)
        inline.close()
        alone = paired(timed("bare2", bare), timed("recorder", recorded(None)), args.repeats)
        size = os.path.getsize(paths[0])
    finally:
        for path in paths:
            if os.path.exists(path):
                os.remove(path)
    print(HEADER)
    print(thread.line(f"{n} x (generation + recorder + writer) / alone", 1.10, 1e3 / n))
    print(inline_pair.line("generation + recorder + inline write / alone"))
    print(alone.line("generation + recorder (no write) / alone"))
    c_bare, c_inline, c_bare2, c_rec = (statistics.median(cpu[k])
                                        for k in ("bare", "inline", "bare2", "recorder"))
    print(f"CPU time per call (all threads): generation {c_bare:.2f} s, + recorder + inline write "
          f"{c_inline:.2f} s: ratio {c_inline / c_bare:.3f}; generation {c_bare2:.2f} s, + recorder alone "
          f"{c_rec:.2f} s: ratio {c_rec / c_bare2:.3f}")
    print(f"trace: {size / ((args.repeats + 1) * n) / 1e6:.2f} MB per run on disk")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
