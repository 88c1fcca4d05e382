"""The full route check beside the engine's own time, and the near-tie window it needs, measured on
the docs' E1 through vLLM's offline engine (assets/mixtral-docs, 30 compositions of batch 1-8).

    .venv/bin/python bench/route_check.py [--compositions 30] [--new-tokens 128] [--dtype bfloat16]

For each composition: the engine's `generate` (what `wall_time_s` measures), then the check of every
row (`RouterReference.check`, share 1: every row through transformers' model alone). Prints the two
times summed and their ratio (check / engine), the (layer, token) pairs checked, and, over the
pairs where the engine's expert set differs from the router's top-K, their router gap z_(K) -
z_(K+1) in units in the last place of the dtype (`traces.route_check.gap_ulps`): its largest value
and quantiles, and which share of all pairs each candidate window (1..8 ulps) covers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

from lab.experiments.compositions import random_compositions, read_partners  # noqa: E402
from lab.experiments.engine import eos_ids  # noqa: E402
from lab.experiments.options import DEFAULT_PARTNERS, DEFAULT_PROBE  # noqa: E402
from lab.experiments.session import RequestPool  # noqa: E402
from model.hf.moe_layers import engine_rows  # noqa: E402
from model.vllm.arrays import run_arrays  # noqa: E402
from model.vllm.route_check import RouterReference  # noqa: E402
from traces import schema  # noqa: E402
from traces.route_check import NULL_RATE, gap_ulps  # noqa: E402
from traces.route_stats import tail, upper_bound  # noqa: E402

MODEL = ROOT / "assets" / "mixtral-docs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compositions", type=int, default=30)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--dtype", default=None,
                        help="the engine's dtype (default vLLM's own: bfloat16 here)")
    parser.add_argument("--dump", help="save every pair's (differs, layer, z_(K), z_(K+1), max |z|) as .npy")
    args = parser.parse_args()

    from transformers import AutoConfig, AutoTokenizer

    from model.vllm.offline import OfflineEngine

    tok = AutoTokenizer.from_pretrained(MODEL, local_files_only=True)
    config = AutoConfig.from_pretrained(MODEL, local_files_only=True)
    pool = RequestPool.build(DEFAULT_PROBE, read_partners(DEFAULT_PARTNERS),
                             encode=lambda text: list(tok(text)["input_ids"]))
    engine = OfflineEngine(str(MODEL), dtype=args.dtype, logprobs=20, quiet=True)
    dtype = engine.settings()["dtype"]
    reference = RouterReference(str(MODEL), dtype)
    eos = eos_ids(str(MODEL), tok)
    layers = engine_rows(config, engine.generate([list(pool.tokens[0])], 1)[0].routed.shape[1])
    engine_s = check_s = 0.0
    checked = agreeing = near = 0
    gaps, all_gaps, rows = [], [], []
    comps = random_compositions(0, args.compositions, pool.n_partners, tuple(range(1, 9)))
    try:
        for comp in comps:
            started = time.perf_counter()
            outputs = engine.generate(pool.prompts(comp), args.new_tokens)
            engine_s += time.perf_counter() - started
            arrays = run_arrays(outputs, args.new_tokens, 20, eos, layers)
            check = reference.check(arrays, config.num_local_experts)
            check_s += check.seconds
            checked, agreeing = checked + check.checked, agreeing + check.agreeing
            near += check.near_ties
            expert, tokens = arrays[schema.EXPERT], arrays[schema.TOKENS]
            for b in range(tokens.shape[0]):  # the gaps, for the window (outside the timed check)
                T = int((tokens[b] >= 0).sum())
                z, _ = reference._forward(tokens[b, :T])
                K = expert.shape[-1]
                top = np.sort(np.argsort(-z, axis=-1, kind="stable")[..., :K], axis=-1)
                differ = ~(np.sort(expert[:, b, :T], axis=-1) == top).all(axis=-1)
                g = gap_ulps(z, K, dtype)
                gaps.extend(g[differ].tolist())
                all_gaps.extend(g.reshape(-1).tolist())
                ordered = np.sort(z, axis=-1)[..., ::-1]  # [L, T, E]
                layer = np.broadcast_to(np.arange(z.shape[0])[:, None], differ.shape)
                rows.append(np.stack([differ, layer, ordered[..., K - 1], ordered[..., K],
                                      np.abs(z).max(axis=-1)], axis=-1).reshape(-1, 5))
    finally:
        reference.close()
        engine.close()
    print(f"vLLM {engine.version} offline, {dtype}, {len(comps)} compositions, {args.new_tokens} new tokens")
    print(f"engine generate: {engine_s:.2f} s   full route check (every row): {check_s:.2f} s   "
          f"check / engine = {check_s / engine_s:.2f}")
    x = checked - agreeing - near
    print(f"pairs checked {checked:,}: agree {agreeing:,}, near ties {near}, elsewhere {x} "
          f"(rate {x / checked:.2g}, "
          f"95% upper bound {upper_bound(x, checked):.2g}; p = {tail(x, checked, NULL_RATE):.2g} under "
          f"{NULL_RATE:g})")
    if args.dump:
        np.save(args.dump, np.concatenate(rows))  # [pairs, 5]: differ, layer, z_(K), z_(K+1), max |z|
    all_g = np.asarray(all_gaps)
    if gaps:
        g = np.asarray(gaps)
        print(f"disagreements: {len(g)}; gap in ulps: max {g.max():.2f}, quantiles 50/90/99% "
              f"{np.quantile(g, 0.5):.2f}/{np.quantile(g, 0.9):.2f}/{np.quantile(g, 0.99):.2f}")
    for w in (1, 2, 3, 4):
        covered = (np.asarray(gaps) <= w).sum() if gaps else 0
        print(f"window {w} ulps: covers {(all_g <= w).mean():.2%} of all pairs, {covered} of {len(gaps)} "
              f"disagreements")


if __name__ == "__main__":
    main()
