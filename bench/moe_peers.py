"""The MoE block against its peers on the same weights and tokens: ours (routing included), transformers'
`MixtralSparseMoeBlock` (its eager experts and its `grouped_mm` experts), vLLM's CPU fused MoE kernel
(where vLLM is installed; routing by torch softmax, top-k and renormalisation, as its CPU path does),
and the dense SwiGLU FFN of equal active parameters.

    .venv/bin/python bench/moe_peers.py [--threads 1] [--repeats 15] [--tokens 8 64 2048]
                                        [--sizes shipped large] [--policy dropless] [--percentile 50]
                                        [--contenders ours "vLLM CPU fused" ...] [--scaling]

Sizes: `shipped` is the shipped model's block (d_model 128, 8 experts of 256, top-2; its trained weights
where the checkpoint is present), `large` d_model 1024, 8 experts of 2816, top-2 (random weights).
Every cell is the median of `--repeats` rounds; in each round every contender runs once per token
count, in turn (interleaved, so a change of load hits all of them; each round starts with the next
contender, so none always runs after the same one), each call timed alone after a warm-up. The table
prints the median microseconds and, beside each peer, ours / peer (below 1: ours
is faster) and each contender / the dense FFN, each ratio the median of the rounds' ratios with their
interquartile range (as bench/pairs.py reads interleaved pairs). `--scaling` then times ours and the
peers again at 1, 2, 4, ... threads up to every core and prints each one's speed-up over its own
1-thread time (medians of the rounds). All contenders' outputs are checked
against ours first (the largest difference is printed). Float32, no autograd; the load average is
printed before and after. Python's collector is frozen after the set-up (the imports' objects are not
traversed during timed calls) and numpy's OpenBLAS runs one thread (its idle threads spin): both for
every contender.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import torch

# numpy's OpenBLAS threads spin between calls and take the other core from whichever contender runs
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import load_average  # noqa: E402
from shipped import load_model  # noqa: E402

from model.experts import choose  # noqa: E402
from model.layers import SwiGLU  # noqa: E402
from model.moe import MoE  # noqa: E402
from model.routing import RoutingPolicy  # noqa: E402

SIZES = {"shipped": (128, 256), "large": (1024, 2816)}  # (d_model C, expert width F)
E, K = 8, 2


def our_block(size: str) -> tuple[MoE, str]:
    """Our MoE block of `size`: the shipped checkpoint's first MoE layer, or random weights."""
    C, F = SIZES[size]
    if size == "shipped":
        model, which = load_model()
        for block in model.blocks:
            if block.is_moe and block.ffn.w_in.shape[-1] == C:
                return block.ffn, which
    torch.manual_seed(0)
    moe = MoE(C, E, F).eval()
    for p, std in ((moe.router, 0.02), (moe.w_in, 0.02), (moe.w_out, 0.02 / 2 ** 0.5)):
        torch.nn.init.normal_(p, std=std)
    return moe, "random weights"


def hf_block(moe: MoE, implementation: str):
    """transformers' Mixtral block holding our block's weights, with the given experts implementation."""
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    C = moe.w_in.shape[-1]
    F = moe.w_out.shape[-1]
    config = MixtralConfig(hidden_size=C, intermediate_size=F, num_local_experts=E, num_experts_per_tok=K,
                           router_jitter_noise=0.0)
    config._experts_implementation = implementation
    block = MixtralSparseMoeBlock(config).eval()
    with torch.no_grad():
        block.gate.weight.copy_(moe.router)
        block.experts.gate_up_proj.copy_(moe.w_in)
        block.experts.down_proj.copy_(moe.w_out)
    return lambda x: block(x)


def vllm_block(moe: MoE):
    """vLLM's CPU fused MoE on our block's weights (prepacked for its `vec` kernel), or None."""
    try:
        import vllm._custom_ops as ops
    except Exception:  # noqa: BLE001 - vLLM absent or without its CPU ops: no column
        return None
    if not hasattr(ops, "cpu_fused_moe"):
        return None
    w13 = ops.cpu_prepack_moe_weight(moe.w_in.detach().contiguous(), "vec")
    w2 = ops.cpu_prepack_moe_weight(moe.w_out.detach().contiguous(), "vec")
    router = moe.router.detach()

    def run(x: torch.Tensor) -> torch.Tensor:
        xf = x.reshape(-1, x.shape[-1])
        p = torch.softmax(torch.nn.functional.linear(xf, router), -1)
        w, i = torch.topk(p, K, -1)
        w = w / w.sum(-1, keepdim=True)
        out = torch.empty_like(xf)
        ops.cpu_fused_moe(out, xf, w13, w2, None, None, w, i.to(torch.int32), "silu", "vec")
        return out.view_as(x)
    return run


def contenders(size: str, policy: RoutingPolicy, wanted: list[str] | None = None) -> tuple[dict, str]:
    moe, which = our_block(size)
    C = moe.w_in.shape[-1]
    F = moe.w_out.shape[-1]
    dense = SwiGLU(C, K * F).eval()
    torch.manual_seed(1)
    torch.nn.init.normal_(dense.w_in, std=0.02)
    torch.nn.init.normal_(dense.w_out, std=0.02)
    out = {"ours": lambda x: moe(x, None, policy)[0],  # every token routed, as the peers route them
           "HF eager": hf_block(moe, "eager"), "HF grouped_mm": hf_block(moe, "grouped_mm")}
    vllm = vllm_block(moe)
    if vllm is not None:
        out["vLLM CPU fused"] = vllm
    out["dense FFN"] = lambda x: dense(x)
    if wanted:
        out = {name: fn for name, fn in out.items() if name in wanted or name == "ours"}
    return out, which


def timed(fn, x: torch.Tensor, calls: int, percentile: float = 50) -> float:
    """Seconds of one call over `calls` calls: their `percentile` (the median by default; a low one
    reads the call undisturbed by other jobs)."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[min(len(times) - 1, int(len(times) * percentile / 100))]


def per_round(times: dict, a: str, b: str, n: int) -> str:
    """a / b read as bench/pairs.py reads a pair: the median of the rounds' ratios (each round times
    both within milliseconds of each other), with the interquartile range of those ratios."""
    ratios = sorted(x / y for x, y in zip(times[(a, n)], times[(b, n)], strict=False))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return f"{statistics.median(ratios):.2f}, {q[0]:.2f}-{q[2]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--tokens", type=int, nargs="+", default=[8, 64, 2048])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--percentile", type=float, default=50,
                        help="the percentile of a round's calls that times it (default 50, the median)")
    parser.add_argument("--policy", default="dropless", help="our block's routing preset (default dropless, "
                        "as the peers route)")
    parser.add_argument("--contenders", nargs="+", help="the contenders beside ours (default: every one)")
    parser.add_argument("--scaling", action="store_true",
                        help="also time every contender at 1, 2, 4, ... threads up to every core")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    policy = RoutingPolicy.preset(args.policy)
    kernel = f"kernels {choose().path}"
    print(f"threads {args.threads}, repeats {args.repeats}, percentile {args.percentile:g} of a round's "
          f"calls, policy {args.policy}, our experts: {kernel}; cores {os.cpu_count()}, "
          f"load {load_average():.2f}")
    for size in args.sizes:
        fns, which = contenders(size, policy, args.contenders)
        C = SIZES[size][0]
        xs = {n: torch.randn(1, n, C, generator=torch.Generator().manual_seed(n)) for n in args.tokens}
        gc.collect()
        gc.freeze()  # the imports' millions of objects: a collection during a timed call times them
        with torch.no_grad():
            for n, x in xs.items():
                ref = fns["ours"](x)
                worst = max((fn(x) - ref).abs().max().item()
                            for name, fn in fns.items() if name != "dense FFN")
                print(f"{size} ({which}), {n} tokens: largest difference from ours {worst:.2e} "
                      f"(outputs up to {ref.abs().max().item():.2f})")
            load_before = load_average()
            times: dict[tuple[str, int], list[float]] = {}
            calls = {n: max(3, min(200, 400_000 // (n * C))) for n in args.tokens}
            for fn in fns.values():  # warm-up
                for x in xs.values():
                    timed(fn, x, 3)
            order = list(fns.items())
            for r in range(args.repeats):
                for n, x in xs.items():
                    # each round starts with another contender: none always follows the same one
                    for name, fn in order[r % len(order):] + order[:r % len(order)]:
                        times.setdefault((name, n), []).append(timed(fn, x, calls[n], args.percentile))
        load_after = load_average()
        print(f"\n{size}: C = {C}, {E} experts of {SIZES[size][1]}, top-{K}; load {load_before:.2f} -> "
              f"{load_after:.2f}")
        names = list(fns)
        print(f"| tokens | {' | '.join(names)} |")
        print("|---" * (len(names) + 1) + "|")
        for n in args.tokens:
            med = {name: statistics.median(times[(name, n)]) * 1e6 for name in names}
            cells = []
            for name in names:
                cell = f"{med[name]:,.0f}"
                if name not in ("ours", "dense FFN"):
                    cell += f" (ours/peer {per_round(times, 'ours', name, n)})"
                if name != "dense FFN" and "dense FFN" in names:
                    cell += f" [{per_round(times, name, 'dense FFN', n)} of dense]"
                cells.append(cell)
            print(f"| {n} | {' | '.join(cells)} |")
        if args.scaling:
            scaling(fns, xs, calls, args)
        torch.set_num_threads(args.threads)
    return 0


def scaling(fns: dict, xs: dict, calls: dict, args) -> None:
    """Each contender's speed-up from 1 thread to 2, 4, ... and every core: the median of `args.repeats`
    rounds at each count (contenders interleaved as in the table), over its own 1-thread median."""
    cores = os.cpu_count() or 1
    counts = sorted({1, cores} | {2 ** i for i in range(1, 8) if 2 ** i < cores})
    times: dict[tuple[str, int, int], list[float]] = {}
    with torch.no_grad():
        for threads in counts:
            torch.set_num_threads(threads)
            for _ in range(args.repeats):
                for n, x in xs.items():
                    for name, fn in fns.items():
                        times.setdefault((name, n, threads), []).append(
                            timed(fn, x, calls[n], args.percentile))
    print(f"\nscaling over threads {', '.join(map(str, counts))}: median microseconds "
          "(speed-up over 1 thread)")
    print(f"| contender | tokens | {' | '.join(f'{t} threads' for t in counts)} |")
    print("|---" * (len(counts) + 2) + "|")
    for name in fns:
        for n in xs:
            med = {t: statistics.median(times[(name, n, t)]) for t in counts}
            cells = [f"{med[t] * 1e6:,.0f} ({med[1] / med[t]:.2f}x)" for t in counts]
            print(f"| {name} | {n} | {' | '.join(cells)} |")


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # vLLM's bindings report leaks at a normal exit; the results are printed
