"""Train a small Mixtral with transformers' own `MixtralForCausalLM` on the shipped corpus.

    python -m model.hf.train_mixtral                 # assets/mixtral-docs (folder) + its card.json

The checkpoint is a folder saved with `save_pretrained` (bfloat16 weights, config, a byte-level BPE
tokenizer trained on the corpus's training split, `card.json`), so the Hugging Face path
(`record --model`) and a serving engine (`record --engine vllm`) load the same trained router. The
shape suits vLLM's CPU attention: head size 32 (it takes 32, 64, 80 and up). Training uses
transformers' loss with its load-balancing term (`output_router_logits`, `router_aux_loss_coef`), a
fixed step count, seeded batches and 2 threads. The card records the held-out loss, the router's
expert usage per layer (entropy over log E: 1 is perfectly even use) and the mean entropy of each
token's router distribution (a random router is near log E; a trained one much lower).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

from model.corpus import documents, is_held_out
from model.train_loop import train_steps

log = logging.getLogger(__name__)

SAMPLE_PROMPTS = ("Return a list of", "The default value is", "This module provides", "# If the file")
SPECIALS = ("<s>", "</s>", "<pad>")


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE `PreTrainedTokenizerFast` trained on `texts`; it prepends <s> to every text."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>")


def encode_stream(tokenizer, texts: list[str]) -> np.ndarray:
    """<s> text </s> for every text, concatenated (int64)."""
    eos = tokenizer.eos_token_id
    ids = tokenizer(texts)["input_ids"]  # each starts with <s>
    return np.concatenate([np.asarray(row + [eos], np.int64) for row in ids])


def mixtral_config(vocab_size: int, hidden: int, ffn: int, layers: int, heads: int, experts: int,
                   context: int, aux: float):
    import transformers

    return transformers.MixtralConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), head_dim=hidden // heads,
        num_local_experts=experts, num_experts_per_tok=2, max_position_embeddings=context,
        router_aux_loss_coef=aux, bos_token_id=0, eos_token_id=1, pad_token_id=2,
        tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})


@torch.no_grad()
def evaluate(model, stream: np.ndarray, seq: int, batch: int = 16) -> dict:
    """Held-out cross entropy (nats per token), expert usage per layer and the router's per-token
    entropy, over non-overlapping windows of `seq` tokens."""
    model.eval()
    n = (len(stream) - 1) // seq
    data = torch.from_numpy(stream[: n * seq + 1])
    E = model.config.num_local_experts
    K = model.config.num_experts_per_tok
    L = model.config.num_hidden_layers
    nll, count = 0.0, 0
    usage = torch.zeros(L, E, dtype=torch.float64)
    token_entropy = torch.zeros(L, dtype=torch.float64)
    for start in range(0, n, batch):
        rows = range(start, min(start + batch, n))
        x = torch.stack([data[i * seq:(i + 1) * seq] for i in rows])  # [B,T]
        y = torch.stack([data[i * seq + 1:(i + 1) * seq + 1] for i in rows])
        out = model(input_ids=x, output_router_logits=True)
        logp = torch.log_softmax(out.logits.float(), -1)
        nll -= float(logp.gather(-1, y[..., None]).sum())
        count += y.numel()
        for li, router_logits in enumerate(out.router_logits):  # [B*T, E]
            p = torch.softmax(router_logits.float(), -1)
            chosen = p.topk(K, -1).indices.reshape(-1)
            usage[li] += torch.bincount(chosen, minlength=E).double()
            token_entropy[li] += float(-(p * p.clamp_min(1e-30).log()).sum())
    share = usage / usage.sum(-1, keepdim=True)
    usage_entropy = -(share * share.clamp_min(1e-300).log()).sum(-1) / math.log(E)
    return {
        "tokens": count,
        "loss_nats_per_token": round(nll / count, 4),
        "expert_usage_entropy_over_log_E": [round(float(h), 4) for h in usage_entropy],
        "router_token_entropy_over_log_E": [round(float(h) / count / math.log(E), 4) for h in token_entropy],
        "expert_usage_share": [[round(float(s), 4) for s in row] for row in share],
    }


def samples(model, tokenizer, new_tokens: int = 48) -> list[dict]:
    out = []
    for prompt in SAMPLE_PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        gen = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, pad_token_id=2)
        out.append({"prompt": prompt, "completion": tokenizer.decode(gen[0, ids.shape[1]:])})
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.hf.train_mixtral", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("assets/mixtral-docs"), help="checkpoint folder")
    p.add_argument("--steps", type=int, default=350)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--vocab", type=int, default=512, help="BPE vocabulary size (specials included)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--ffn", type=int, default=256, help="expert FFN size")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4, help="attention heads (head size = hidden / heads)")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--aux", type=float, default=0.01, help="router_aux_loss_coef (load balancing)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    if args.hidden % args.heads or args.hidden // args.heads < 32:
        p.error("--hidden / --heads must be a whole head size >= 32 (vLLM's CPU attention)")
    return args


def train(args: argparse.Namespace) -> dict:
    """Train, save in bfloat16, reload what was saved, measure it and write the card."""
    import transformers

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    docs = documents()
    train_texts = [d.text for d in docs if not is_held_out(d.name)]
    held_texts = [d.text for d in docs if is_held_out(d.name)]
    tokenizer = train_tokenizer(train_texts, args.vocab)
    train_stream, held_stream = encode_stream(tokenizer, train_texts), encode_stream(tokenizer, held_texts)
    config = mixtral_config(len(tokenizer), args.hidden, args.ffn, args.layers, args.heads, args.experts,
                            context=512, aux=args.aux)
    model = transformers.MixtralForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    def step_loss(windows: torch.Tensor):
        """transformers' loss (next-token cross entropy plus `aux` times its load-balancing loss)."""
        x = windows[:, :-1]  # [B,T]: transformers shifts the labels itself
        out = model(input_ids=x, labels=x, output_router_logits=True)

        def describe(step: int, seconds: float) -> dict:
            aux = float(out.aux_loss.detach())
            return {"step": step, "loss": round(float(out.loss.detach()) - args.aux * aux, 4),
                    "aux": round(aux, 4), "seconds": seconds}

        return out.loss, describe

    trained = train_steps(model, opt, torch.from_numpy(train_stream), rng, steps=args.steps, batch=args.batch,
                          seq=args.seq, lr=args.lr, warmup=args.warmup, step_loss=step_loss)
    history, seconds, cpu_seconds = trained.history, trained.seconds, trained.cpu_seconds

    args.out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out)  # type: ignore[arg-type]  # (transformers' stub)
    tokenizer.save_pretrained(args.out)
    for path in args.out.iterdir():  # safetensors writes owner-only files; a checkpoint is for everyone
        path.chmod(0o644)
    shipped = transformers.MixtralForCausalLM.from_pretrained(args.out, dtype=torch.float32,
                                                              trust_remote_code=False)
    held = evaluate(shipped, held_stream, args.seq)
    card = {
        "name": args.out.name,
        "architecture": "MixtralForCausalLM (transformers " + transformers.__version__ + ")",
        "parameters": sum(p.numel() for p in shipped.parameters()),
        "weights_dtype": "bfloat16",
        "shape": {"hidden": args.hidden, "layers": args.layers, "heads": args.heads,
                  "head_size": args.hidden // args.heads, "kv_heads": config.num_key_value_heads,
                  "experts": args.experts, "top_k": 2, "expert_ffn": args.ffn, "vocab": len(tokenizer)},
        "tokenizer": f"byte-level BPE, {len(tokenizer)} ids, trained on the training split; prepends <s>",
        "corpus": {"source": "pydoc_data.topics + standard library docstrings and comments "
                             f"(Python {sys.version.split()[0]}; model/corpus.py)",
                   "train_documents": len(train_texts), "held_out_documents": len(held_texts),
                   "train_tokens": int(train_stream.size), "held_out_tokens": int(held_stream.size)},
        "training": {"steps": args.steps, "batch": args.batch, "seq": args.seq,
                     "tokens_seen": args.steps * args.batch * args.seq, "lr": args.lr, "warmup": args.warmup,
                     "optimizer": "AdamW(0.9, 0.95), wd 0.1, clip 1.0, cosine to 10%",
                     "loss": "cross entropy + router_aux_loss_coef x transformers' load-balancing loss",
                     "router_aux_loss_coef": args.aux, "seed": args.seed, "threads": args.threads,
                     "seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1),
                     "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "history": history},
        "held_out": {"weights": "as saved (bfloat16), evaluated in float32", **held},
        "samples": {"greedy, float32": samples(shipped, tokenizer)},
        "environment": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "python": sys.version.split()[0], "platform": platform.platform()},
        "command": "python -m model.hf.train_mixtral " + " ".join(sys.argv[1:]),
    }
    (args.out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return card


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    card = train(parse_args(argv))
    held = card["held_out"]
    print(f"{card['name']}: held-out {held['loss_nats_per_token']} nats/token, "
          f"{card['training']['seconds']:.0f} s")
    print("expert usage entropy / log E:", held["expert_usage_entropy_over_log_E"])
    print("router per-token entropy / log E:", held["router_token_entropy_over_log_E"])
    for s in card["samples"]["greedy, float32"]:
        print(repr(s["prompt"]), "->", repr(s["completion"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
