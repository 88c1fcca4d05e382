"""The decode path of kernel version 2 against version 1's, side by side in one process (both on the
pure-PyTorch path: the model runs `use_kernels(2)`; version 3's compiled kernels are timed against the
peers by bench/moe_peers.py and bench/model_speed.py).

    .venv/bin/python bench/decode_speed.py [--repeats 9] [--threads 1] [--new-tokens 64] [--cpu-time]

Version 1 is still in the code: the tensor paths of `route` and `MoE.combine` (taken here by setting
the small-step thresholds to 0) and, for batch-invariant experts, one bmm over all E experts per tile
slot (the fallback of `MoE._experts_tiled`). Native results are bitwise the same in both versions, so
the native rows time the same arithmetic with less bookkeeping; batch-invariant experts differ in
bits (kernel version 2). Ratios new / old (bench/pairs.py): the MoE block on one decode step of 8
tokens, and whole generations of the benchmark workload (bench/model_speed.py).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, PROMPTS, add_clock_option, clock_of, paired, steady_allocator  # noqa: E402
from shipped import load_model  # noqa: E402

from model import moe as moe_module  # noqa: E402
from model import routing  # noqa: E402
from model.generate import generate  # noqa: E402
from model.routing import RoutingPolicy  # noqa: E402
from model.tokenizer import encode  # noqa: E402


@contextlib.contextmanager
def version_1():
    """Version 1's decode path: no host routing or sorting, batch-invariant tiles as bmm."""
    saved = routing.SMALL_TOKENS, moe_module.SMALL_CANDIDATES, moe_module.MoE._experts_tiled
    tiled = moe_module.MoE._experts_tiled
    routing.SMALL_TOKENS = moe_module.SMALL_CANDIDATES = 0
    moe_module.MoE._experts_tiled = lambda self, xs, counts, tile, grouped: tiled(self, xs, counts, tile,
                                                                                  False)
    try:
        yield
    finally:
        routing.SMALL_TOKENS, moe_module.SMALL_CANDIDATES, moe_module.MoE._experts_tiled = saved


def old(fn):
    def run():
        with version_1():
            fn()
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=64)
    add_clock_option(p)
    args = p.parse_args(argv)
    timed = functools.partial(paired, clock=clock_of(p, args))
    torch.set_num_threads(args.threads)
    allocator = steady_allocator()
    model, origin = load_model()
    model.use_kernels(2)  # both sides on the pure-PyTorch path (bench/moe_peers.py times version 3)
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.25)
    prompts = [encode(t) for t in PROMPTS]
    print(f"model: {origin}; {args.threads} threads; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs; {allocator}; {'thread CPU' if args.cpu_time else 'wall'} time; "
          f"A = version 1, B = version 2\n")
    torch.manual_seed(1)
    step = torch.randn(8, 1, model.config.d_model)  # one decode step of 8 tokens
    valid = torch.ones(8, 1, dtype=torch.bool)
    moe = model.blocks[0].ffn
    rows = []
    with torch.no_grad():
        for mode in ("native", "batch_invariant"):
            def block(mode=mode):
                moe(step, valid, policy, mode=mode)
            rows.append((f"MoE block, decode step, {mode}", timed(old(block), block, args.repeats * 3)))
        for mode in ("native", "batch_invariant"):
            def gen(mode=mode):
                generate(model, prompts, args.new_tokens, policy, kernel_mode=mode, stop_at_eos=False)
            rows.append((f"generation, {mode}", timed(old(gen), gen, args.repeats)))
    print(HEADER)
    for name, pair in rows:
        print(pair.line(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
