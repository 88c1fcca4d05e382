"""The generation loop's own cost: wall time of `generate` against the time spent in the model's
forward steps, for a static batch and for rows arriving while others decode (continuous batching).

    .venv/bin/python bench/generate_loop.py [--repeats 5] [--new-tokens 128] [--batch 8]

Each case runs `--repeats` times, interleaved; the loop's share is (wall - forward) / wall, the
median over repeats with its range. Continuous and static runs generate the same rows, so their
wall ratio shows what admitting rows mid-batch costs (read as in bench/pairs.py: ratio of medians,
median and spread of the per-pair ratios, load before and after).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, PROMPTS, Pair, load_average  # noqa: E402

from model.checkpoint import load_checkpoint  # noqa: E402
from model.generate import generate  # noqa: E402
from model.routing import RoutingPolicy  # noqa: E402
from model.tokenizer import encode  # noqa: E402


class Timed:
    """The model with the seconds spent in its forward calls counted."""

    def __init__(self, model):
        self.model, self.seconds = model, 0.0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = self.model(*args, **kwargs)
        self.seconds += time.perf_counter() - t0
        return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    if min(args.repeats, args.new_tokens, args.batch, args.threads) < 1:
        p.error("--repeats, --new-tokens, --batch and --threads must be positive")
    torch.set_num_threads(args.threads)
    model, _ = load_checkpoint(ROOT / "assets" / "moe-default")
    prompts = [encode(PROMPTS[b % len(PROMPTS)]) for b in range(args.batch)]
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.0)
    arrivals = [(b * args.new_tokens) // (2 * args.batch) for b in range(args.batch)]
    cases = {"static batch": None, "continuous (rows arrive over half the window)": arrivals}
    load_before = load_average()
    walls: dict[str, list[float]] = {k: [] for k in cases}
    shares: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):
        for name, arr in cases.items():
            timed = Timed(model)
            t0 = time.perf_counter()
            generate(timed, prompts, args.new_tokens, policy, "native", stop_at_eos=False, arrivals=arr)
            wall = time.perf_counter() - t0
            walls[name].append(wall)
            shares[name].append((wall - timed.seconds) / wall)
    load_after = load_average()
    print(f"B={args.batch}, {args.new_tokens} new tokens, gshard cf 1.0, native, {args.threads} thread(s); "
          f"{args.repeats} interleaved repeats; load average {load_before:.2f} before, {load_after:.2f} "
          f"after on {os.cpu_count()} CPUs")
    print(f"{'case':<48}{'wall (ms)':>11}{'loop share':>12}{'range':>16}")
    for name in cases:
        s = shares[name]
        print(f"{name:<48}{statistics.median(walls[name]) * 1e3:>11.1f}{statistics.median(s):>12.3f}"
              f"{f'{min(s):.3f}-{max(s):.3f}':>16}")
    static, continuous = (tuple(walls[name]) for name in cases)
    pair = Pair(static, continuous, load_before, load_after, os.cpu_count() or 1)
    print(HEADER)
    print(pair.line("continuous / static wall"))
    return 0


if __name__ == "__main__":
    with torch.no_grad():
        sys.exit(main())
