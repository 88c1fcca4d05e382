"""Speed of the model's parts as ratios measured side by side in one process (default model size).

    .venv/bin/python bench/model_speed.py [--repeats 9] [--threads 2] [--new-tokens 64] [--no-profile]
                                          [--cpu-time]

Ratios (target in brackets):
- generation with the recorder / without                      (<= 1.10)
- MoE block / dense SwiGLU FFN of equal active parameters      (<= 1.3 at 2048 tokens, <= 2.0 at 8)
- generation of the shipped MoE model / of the dense control model of equal active parameters (<= 1.3)
- batch_invariant / native generation                          (<= 1.10)
  and beside it the same on one decode step of 8 rows: the whole forward step, and in one layer the
  attention over 128 cached keys, the qkv linear and the MoE block (where the difference goes)
Reported beside the MoE block: route() alone, the experts and their combination alone, the part of
the block whose float results the traces depend on (router logits, softmax, expert GEMMs and
activation), and on one decode step route() and the expert GEMMs alone: the floor of the step, since
at a few rows a GEMM's time follows the weights it reads (the experts touched) more than its rows;
beside them the same grouped GEMMs with one row per touched expert (their weights read once: what a kernel
streaming each expert once for all its rows would pay) and the weight bytes each side reads.
Each pair is timed interleaved (A, B, A, B, ...), so load changes on a shared machine hit both sides;
each ratio is read as in bench/pairs.py (ratio of medians, median and spread of the per-pair ratios,
load before and after; "noisy — rerun" when they cannot tell). The profiles show where the MoE
block's time goes and where the extra time of the batch-invariant kernels goes (self CPU time per
operator). `--cpu-time` (with `--threads 1`) times the CPU time of the one thread instead of wall
time: on a machine other jobs load, it shows the ratios far less disturbed.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, PROMPTS, add_clock_option, clock_of, paired, steady_allocator  # noqa: E402
from shipped import load_dense, load_model  # noqa: E402

from model import kernels  # noqa: E402
from model.generate import generate  # noqa: E402
from model.layers import SwiGLU  # noqa: E402
from model.recorder import Recorder  # noqa: E402
from model.routing import RoutingPolicy, route  # noqa: E402
from model.step import StepInputs  # noqa: E402
from model.tokenizer import encode  # noqa: E402


def profile_table(fn) -> tuple[dict[str, float], float]:
    """Self CPU milliseconds per operator of one call of fn, and the call's wall milliseconds."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        fn()
        wall = (time.perf_counter() - t0) * 1e3
    return {e.key: e.self_cpu_time_total / 1000 for e in prof.key_averages()}, wall


def fixed_bits(moe, x: torch.Tensor, decision):
    """The part of the MoE block whose float results the traces depend on, alone: the router's
    logits, torch's softmax over them and the experts (two grouped GEMMs and the activation) on the
    rows the decision kept, sorted by expert beforehand. No rewrite of the block that keeps today's
    bits can take less; the rest of the block (choosing, counting and sorting candidates, gathering
    their rows and adding them back) is the part open to change."""
    B, T, C = x.shape
    E, K = moe.n_experts, decision.expert.shape[-1]
    flat = torch.where(decision.kept, decision.expert, E).reshape(-1)  # [N*K]
    counts = torch.bincount(flat, minlength=E + 1).tolist()
    rows = torch.sort(flat, stable=True).indices[:sum(counts[:E])] // K
    xs = x.reshape(B * T, C).index_select(0, rows)  # [n,C] the kept candidates' rows, by expert

    def run():
        torch.softmax(kernels.linear(x, moe.router).float(), dim=-1)
        moe._experts_grouped(xs, counts[:E])
    return run


def weights_once(moe, experts: list[int], row: torch.Tensor):
    """The block's two grouped GEMMs with one row for each touched expert: what reading those experts'
    weights once costs through this machine's BLAS, in the same calls, whatever rows they serve. A
    kernel that streamed each expert's weights once for all its rows would pay about this; MKL pays
    part of it again for every further row of an expert."""
    counts = [int(e in experts) for e in range(moe.n_experts)]
    rows = row.expand(len(experts), row.shape[-1]).contiguous()  # [n,C]
    return lambda: moe._experts_grouped(rows, counts)


def decode_bytes(moe, dense, experts: list[int], K: int, tokens: int) -> str:
    """A line saying how many weight bytes one decode step of `tokens` tokens reads in the MoE block
    (its router and the experts it touched) and in the dense FFN, and how many experts such a step
    touches on average when each token's K experts are spread evenly."""
    one = moe.w_in[0].nbytes + moe.w_out[0].nbytes
    moe_bytes = moe.router.nbytes + len(experts) * one
    dense_bytes = dense.w_in.nbytes + dense.w_out.nbytes
    E = moe.n_experts
    expected = E * (1 - (1 - K / E) ** tokens)  # P(an expert serves none of the tokens) = (1 - K/E)^tokens
    return (f"weights one decode step reads: MoE block {moe_bytes / 1024:.0f} KiB (router + {len(experts)} "
            f"experts of {one / 1024:.0f} KiB), dense FFN {dense_bytes / 1024:.0f} KiB: "
            f"{moe_bytes / dense_bytes:.2f}x; with top-{K} of {E} experts, {tokens} tokens touch "
            f"{expected:.1f} experts on average ({expected * one / dense_bytes:.2f}x)")


def decode_parts(model, policy, B: int, keys: int = 128):
    """(name, mode -> call) for one decode step of B rows with `keys` keys in the cache: the whole
    forward step and its parts in one layer, to set batch_invariant against native where it costs."""
    torch.manual_seed(2)
    cfg = model.config
    H, D = cfg.n_heads, cfg.head_dim
    block = model.blocks[0]
    x = block.norm2(torch.randn(B, 1, cfg.d_model))  # [B,1,C]
    valid = torch.ones(B, 1, dtype=torch.bool)
    positions = torch.randint(keys // 2, keys, (B, 1))
    tokens = torch.randint(0, 256, (B, 1))
    q, k, v = torch.randn(B, H, 1, D), torch.randn(B, H, keys, D), torch.randn(B, H, keys, D)
    cache = model.new_cache(B)

    def forward(mode):
        step = StepInputs(valid=valid, positions=positions, cache=cache)
        return lambda: model(tokens, policy, kernel_mode=mode, step=step)
    return [
        ("decode step forward, bi / native", forward),
        (f"  attention over {keys} keys, one layer", lambda mode: lambda: kernels.attention(
            q, k, v, positions, mode, cfg.kernel_tile, compiled=block.attn.kernels.module)),
        ("  qkv linear, one layer", lambda mode: lambda: kernels.linear(x, block.attn.qkv, mode,
                                                                         cfg.kernel_tile)),
        ("  MoE block, one layer", lambda mode: lambda: block.ffn(x, valid, policy, mode=mode,
                                                                 tile=cfg.kernel_tile)),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=9, help="interleaved pairs per generation ratio "
                   "(the MoE block takes 3x as many)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--no-profile", action="store_true")
    add_clock_option(p)
    args = p.parse_args(argv)
    if args.repeats < 1 or args.threads < 1 or args.new_tokens < 1:
        p.error("--repeats, --threads and --new-tokens must be positive")
    timed = functools.partial(paired, clock=clock_of(p, args))
    torch.set_num_threads(args.threads)
    allocator = steady_allocator()
    model, origin = load_model()
    cfg = model.config
    policy = RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=1.25)
    prompts = [encode(t) for t in PROMPTS]
    n = args.new_tokens
    load = os.getloadavg()[0]
    print(f"model: {origin}; {model.num_parameters() / 1e6:.2f} M parameters, "
          f"{model.num_parameters(active=True) / 1e6:.2f} M active per token; {args.threads} threads; "
          f"load average {load:.2f} on {os.cpu_count()} CPUs; {allocator}")
    print(f"workload: B={len(prompts)} prompts of {min(map(len, prompts))}-{max(map(len, prompts))} tokens, "
          f"{n} new tokens, routing gshard cf=1.25 batch groups; {args.repeats} interleaved pairs each "
          f"(the MoE block {3 * args.repeats}); {'thread CPU' if args.cpu_time else 'wall'} time\n")

    def gen(mode: str, recorder: bool = False):
        def run():
            rec = Recorder() if recorder else None
            result = generate(model, prompts, n, policy, kernel_mode=mode, recorder=rec, stop_at_eos=False)
            if rec is not None:
                rec.arrays(result)
        return run

    rows = [("generation + recorder / generation", timed(gen("native"), gen("native", recorder=True),
                                                          args.repeats), 1.10)]
    dense_model = load_dense()
    if dense_model is not None:
        def gen_dense():
            generate(dense_model, prompts, n, None, stop_at_eos=False)
        moe_dense = timed(gen_dense, gen("native"), args.repeats)
        rows.append(("generation, MoE model / dense model", moe_dense, 1.3))

    # The MoE block against a dense FFN with the same active parameters per token, on the same tokens.
    torch.manual_seed(1)
    x = torch.randn(8, 256, cfg.d_model)  # [B,T,C]
    valid = torch.ones(8, 256, dtype=torch.bool)
    moe = model.blocks[0].ffn
    dense = SwiGLU(cfg.d_model, cfg.top_k * cfg.expert_d_ff).eval()
    torch.nn.init.normal_(dense.w_in, std=0.02)
    torch.nn.init.normal_(dense.w_out, std=0.02)
    with torch.no_grad():
        block = timed(lambda: dense(x), lambda: moe(x, valid, policy), args.repeats * 3)
        rows.append(("MoE block / dense FFN (2048 tokens)", block, 1.3))
        # Where the MoE block's time goes: the routing decision, then the experts and their combination.
        logits = kernels.linear(x, moe.router).float()
        decision = route(logits, valid, policy)
        rows.append(("  route() / dense FFN", timed(lambda: dense(x), lambda: route(logits, valid, policy),
                                                    args.repeats * 3), None))
        rows.append(("  experts + combine / dense FFN", timed(
            lambda: dense(x), lambda: moe.combine(x, decision.expert, decision.kept, decision.gate, "native",
                                                   cfg.kernel_tile), args.repeats * 3), None))
        rows.append(("  fixed-bits part / dense FFN", timed(lambda: dense(x), fixed_bits(moe, x, decision),
                                                            args.repeats * 3), None))
        step = x[:, :1].contiguous()  # [B,1,C]: one decode step of B tokens
        step_valid = valid[:, :1].contiguous()
        decode = timed(lambda: dense(step), lambda: moe(step, step_valid, policy), args.repeats * 3)
        rows.append((f"MoE block / dense FFN ({step.shape[0]} tokens, a decode step)", decode, 2.0))
        step_logits = kernels.linear(step, moe.router).float()
        rows.append(("  route() / dense FFN, decode step", timed(
            lambda: dense(step), lambda: route(step_logits, step_valid, policy), args.repeats * 3), None))
        d = route(step_logits, step_valid, policy)
        flat = torch.where(d.kept, d.expert, cfg.n_experts).reshape(-1)
        counts = torch.bincount(flat, minlength=cfg.n_experts + 1).tolist()[:-1]
        rows_by_expert = step.reshape(-1, cfg.d_model)[torch.sort(flat, stable=True).indices[:sum(counts)]
                                                       // cfg.top_k]
        gemms = timed(lambda: dense(step), lambda: moe._experts_grouped(rows_by_expert, counts),
                      args.repeats * 3)
        rows.append((f"  expert GEMMs alone / dense FFN ({sum(c > 0 for c in counts)} experts)", gemms, None))
        touched = [e for e, c in enumerate(counts) if c]
        rows.append(("  same experts, 1 row each / dense", timed(
            lambda: dense(step), weights_once(moe, touched, step.reshape(-1, cfg.d_model)[:1]),
            args.repeats * 3), None))
        bytes_line = decode_bytes(moe, dense, touched, cfg.top_k, step.shape[0])

    rows.append(("batch_invariant / native generation", timed(gen("native"), gen("batch_invariant"),
                                                               args.repeats), 1.10))
    with torch.no_grad():
        rows += [(f"  {name}", timed(fn("native"), fn("batch_invariant"), args.repeats * 3), None)
                 for name, fn in decode_parts(model, policy, len(prompts))]

    print(HEADER)
    for name, pair, target in rows:
        print(pair.line(name, target))
    print(f"\n{bytes_line}")

    if not args.no_profile:
        native, wall_n = profile_table(gen("native"))
        invariant, wall_i = profile_table(gen("batch_invariant"))
        total_n, total_i = sum(native.values()), sum(invariant.values())
        print("\nwhere the batch-invariant time goes (ms of one profiled generation; operators by self time, "
              "largest changes first):")
        print(f"{'operator':<36}{'native':>10}{'invariant':>11}{'change':>9}")
        keys = sorted(set(native) | set(invariant), key=lambda k: invariant.get(k, 0) - native.get(k, 0),
                      reverse=True)
        for key in keys[:10] + keys[-4:]:
            a, b = native.get(key, 0.0), invariant.get(key, 0.0)
            print(f"{key[:35]:<36}{a:>10.1f}{b:>11.1f}{b - a:>+9.1f}")
        print(f"{'all operators':<36}{total_n:>10.1f}{total_i:>11.1f}{total_i - total_n:>+9.1f}")
        out_n, out_i = wall_n - total_n, wall_i - total_i
        print(f"{'outside operators (Python)':<36}{out_n:>10.1f}{out_i:>11.1f}{out_i - out_n:>+9.1f}")
        print(f"{'wall':<36}{wall_n:>10.1f}{wall_i:>11.1f}{wall_i - wall_n:>+9.1f}")
        moe_prof, _ = profile_table(lambda: moe(x, valid, policy))
        dense_prof, _ = profile_table(lambda: dense(x))
        print(f"\nMoE block against the dense FFN, one call on 2048 tokens (self CPU ms; totals "
              f"{sum(moe_prof.values()):.1f} and {sum(dense_prof.values()):.1f}):")
        print(f"{'operator':<36}{'MoE':>10}{'dense':>10}")
        for key, ms in sorted(moe_prof.items(), key=lambda kv: -kv[1])[:12]:
            print(f"{key[:35]:<36}{ms:>10.2f}{dense_prof.get(key, 0.0):>10.2f}")
    return 0


if __name__ == "__main__":
    with torch.no_grad():
        sys.exit(main())
