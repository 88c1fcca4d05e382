"""Train the default MoE (or its dense control) on the CPython documentation corpus.

    python -m model.train            # assets/moe-default.safetensors + .json
    python -m model.train --dense    # assets/dense-control.safetensors + .json

Deterministic for a seed: fixed step count, seeded batches, 2 threads. Loss = next-byte cross entropy
+ Switch load-balancing loss (Fedus et al. 2021, eq. 4) + ST-MoE router z-loss (Zoph et al. 2022),
with capacity applied during training (GShard-style top-2, batch grouping, cf 1.25, after-drop
renormalisation).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from model.checkpoint import load_checkpoint, save_checkpoint
from model.config import WEIGHT_DTYPES, ModelConfig
from model.corpus import build_corpus
from model.train_loop import train_steps
from model.transformer import MoETransformer

log = logging.getLogger(__name__)

SAMPLE_PROMPTS = (
    "Return a list of",
    "The default value is",
    "def __init__(self",
    "# If the file",
    "This module provides",
)


def training_policy(cf: float):
    """GShard-style top-2: batch grouping, k-major position priority, after-drop renormalisation."""
    from model.routing import RoutingPolicy

    return RoutingPolicy.preset("gshard", capacity_formula="deepspeed", capacity_factor=cf)


def balance_loss(routing, E: int) -> torch.Tensor:
    """Switch load-balancing loss E * sum_e f_e * P_e, averaged over MoE layers.

    f_e: share of the router's candidates (all K choices, before drops) sent to expert e;
    P_e: mean router probability of e. Minimal (1.0) when both are uniform.
    """
    losses = []
    for r in routing:
        probs = torch.softmax(r.router_logits, dim=-1).reshape(-1, E)  # [N,E]
        chosen = r.decision.expert.reshape(-1)
        f = torch.bincount(chosen[chosen >= 0], minlength=E).float()
        f = f / f.sum().clamp_min(1)
        losses.append(E * (f * probs.mean(0)).sum())
    return torch.stack(losses).mean()


def z_loss(routing) -> torch.Tensor:
    """ST-MoE router z-loss: mean over tokens of logsumexp(router logits)^2, averaged over layers."""
    return torch.stack([torch.logsumexp(r.router_logits, dim=-1).pow(2).mean() for r in routing]).mean()


@torch.no_grad()
def evaluate(model: MoETransformer, stream: np.ndarray, policy, T: int = 512, B: int = 16) -> dict:
    """Held-out bits per byte (byte targets only) and per-layer expert usage of the router's choices."""
    model.eval()
    n_windows = (len(stream) - 1) // T
    data = torch.from_numpy(stream[: n_windows * T + 1].astype(np.int64))
    nll, count = 0.0, 0
    E = model.config.n_experts
    L = len(model.config.moe_layers)
    usage = torch.zeros(L, E, dtype=torch.float64)
    for start in range(0, n_windows, B):
        idx = torch.arange(start, min(start + B, n_windows))
        x = torch.stack([data[i * T:(i + 1) * T] for i in idx.tolist()])  # [B,T]
        y = torch.stack([data[i * T + 1:(i + 1) * T + 1] for i in idx.tolist()])
        out = model(x, policy)
        loss = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), y.reshape(-1), reduction="none")
        is_byte = y.reshape(-1) < 256
        nll += float(loss[is_byte].sum())
        count += int(is_byte.sum())
        for li, r in enumerate(out.routing):
            e = r.decision.expert.reshape(-1)
            usage[li] += torch.bincount(e[e >= 0], minlength=E).double()
    result: dict[str, object] = {"bits_per_byte": nll / count / math.log(2), "bytes": count}
    if L:
        share = usage / usage.sum(-1, keepdim=True)
        entropy = -(share * share.clamp_min(1e-300).log()).sum(-1) / math.log(E)
        result["expert_usage_entropy_over_log_E"] = [round(float(h), 4) for h in entropy]
        result["expert_usage_share"] = [[round(float(s), 4) for s in row] for row in share]
    return result


def samples(model: MoETransformer, policy, max_new_tokens: int = 120) -> list[dict]:
    """Greedy completions of documentation-style prompts, for the card."""
    from model.generate import generate
    from model.tokenizer import decode, encode

    prompts = [encode(p) for p in SAMPLE_PROMPTS]
    result = generate(model, prompts, max_new_tokens, policy, stop_at_eos=True)
    return [{"prompt": p, "completion": decode(new)}
            for p, new in zip(SAMPLE_PROMPTS, result.new_tokens, strict=True)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--dense", action="store_true", help="train the dense control (same active parameters)")
    p.add_argument("--steps", type=int, default=3000, help="optimizer steps (fixed: determinism)")
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW)")
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps")
    p.add_argument("--balance", type=float, default=0.001, help="Switch load-balancing loss coefficient")
    p.add_argument("--zloss", type=float, default=1e-3, help="ST-MoE router z-loss coefficient")
    p.add_argument("--capacity-factor", type=float, default=1.25, help="training capacity factor")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="checkpoint stem (default assets/moe-default "
                   "or assets/dense-control)")
    p.add_argument("--weights-dtype", default="bfloat16", choices=WEIGHT_DTYPES)
    args = p.parse_args(argv)
    for name in ("steps", "batch", "seq", "threads", "warmup"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be positive")
    if args.lr <= 0 or args.balance < 0 or args.zloss < 0 or args.capacity_factor <= 0:
        p.error("--lr and --capacity-factor must be positive, --balance and --zloss non-negative")
    return args


def train(args: argparse.Namespace) -> dict:
    """Train, save, reload the saved weights, measure them and write the card. Returns the card."""
    from model.routing import RoutingPolicy

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    corpus = build_corpus()
    moe_config = ModelConfig()
    config = ModelConfig.dense_control(moe_config) if args.dense else moe_config
    if args.seq > config.context:
        raise ValueError(f"--seq {args.seq} exceeds the context length {config.context}")
    model = MoETransformer(config)
    policy = training_policy(args.capacity_factor) if config.is_moe else None
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    E = config.n_experts

    def step_loss(windows: torch.Tensor):
        """Next-byte cross entropy, plus the balance and z losses of an MoE model."""
        x, y = windows[:, :-1], windows[:, 1:]  # [B,T]
        out = model(x, policy)
        ce = F.cross_entropy(out.logits.reshape(-1, config.vocab_size), y.reshape(-1))
        if not out.routing:
            return ce, lambda step, seconds: {"step": step, "loss": round(ce.item(), 4), "seconds": seconds}
        aux_b, aux_z = balance_loss(out.routing, E), z_loss(out.routing)

        def describe(step: int, seconds: float) -> dict:
            dropped = float(torch.stack([(~r.decision.kept).float().mean() for r in out.routing]).mean())
            return {"step": step, "loss": round(ce.item(), 4), "seconds": seconds,
                    "balance": round(aux_b.item(), 4), "z": round(aux_z.item(), 3),
                    "dropped": round(dropped, 4)}

        return ce + args.balance * aux_b + args.zloss * aux_z, describe

    run = train_steps(model, opt, torch.from_numpy(corpus.train), rng, steps=args.steps, batch=args.batch,
                      seq=args.seq, lr=args.lr, warmup=args.warmup, step_loss=step_loss)
    history, train_seconds, cpu_seconds = run.history, run.seconds, run.cpu_seconds

    stem = args.out or Path("assets") / ("dense-control" if args.dense else "moe-default")
    card = {
        "name": stem.name,
        "kind": "dense control" if args.dense else "MoE",
        "parameters": model.num_parameters(),
        "active_parameters_per_token": model.num_parameters(active=True),
        "corpus": corpus.description,
        "training": {
            "steps": args.steps, "batch": args.batch, "seq": args.seq,
            "tokens_seen": args.steps * args.batch * args.seq, "lr": args.lr, "warmup": args.warmup,
            "optimizer": "AdamW(0.9, 0.95), wd 0.1, clip 1.0, cosine to 10%",
            "balance_loss_coef": args.balance, "z_loss_coef": args.zloss, "seed": args.seed,
            "threads": args.threads, "seconds": round(train_seconds, 1), "cpu_seconds": round(cpu_seconds, 1),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "routing": policy.to_dict() if policy else None,
            "history": history,
        },
        "environment": {"torch": torch.__version__, "python": sys.version.split()[0],
                        "platform": platform.platform()},
    }
    save_checkpoint(model, stem, card, dtype=args.weights_dtype)
    # Measure the weights as shipped (after the cast to the stored dtype), not the training copy.
    shipped, card = load_checkpoint(stem)
    dropless = RoutingPolicy.preset("dropless") if config.is_moe else None
    eval_started = time.perf_counter()
    card["held_out"] = {"routing": "dropless", **evaluate(shipped, corpus.held_out, dropless)}
    if config.is_moe:
        trained = evaluate(shipped, corpus.held_out, training_policy(args.capacity_factor))
        card["held_out_training_policy"] = {
            "routing": f"training policy (batch of 16x512, cf {args.capacity_factor})",
            "bits_per_byte": trained["bits_per_byte"]}
    card["held_out"]["seconds"] = round(time.perf_counter() - eval_started, 1)
    card["samples"] = {"routing": "dropless" if config.is_moe else None, "kernel_mode": "native",
                       "max_new_tokens": 120, "completions": samples(shipped, dropless)}
    save_checkpoint(shipped, stem, {k: v for k, v in card.items()
                                    if k not in ("format", "weights", "weights_dtype", "model_config")},
                    dtype=args.weights_dtype)
    return card


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = parse_args(argv)
    try:
        card = train(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{card['name']}: held-out {card['held_out']['bits_per_byte']:.3f} bits/byte, "
          f"{card['training']['seconds']:.0f} s")
    if "expert_usage_entropy_over_log_E" in card["held_out"]:
        print("expert usage entropy / log E per layer:", card["held_out"]["expert_usage_entropy_over_log_E"])
    for s in card["samples"]["completions"]:
        print(repr(s["prompt"]), "->", repr(s["completion"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
