"""Tiny random-initialised Hugging Face MoE models and a BPE tokenizer, built offline.

Each family gets a config of a few hundred kB to a few MB (2 layers, 4-8 experts); the tokenizer is
trained by `tokenizers` on a few kB of text that ships with CPython, in milliseconds. Nothing is
downloaded. The tests build their models here, and the second shipped example trace
(`traces/examples/tiny-mixtral-bf16.h5`) was recorded with the model this module's command saves:

    python -m model.hf.tiny assets/tiny-mixtral --family mixtral --hidden 64 --ffn 128 --experts 8

A random init of std 0.02 gives near-uniform routers, so the router weights are widened to std 1:
top-k choices are then clear, while the logits over the vocabulary stay near-tied, the situation in
which kernel rounding between batch shapes flips greedy choices.
"""

from __future__ import annotations

import argparse
import pydoc_data.topics
from pathlib import Path

import torch

#: Per family: the transformers config class and the fields that make it small and MoE-shaped.
FAMILY_CONFIGS: dict[str, tuple[str, dict[str, object]]] = {
    "mixtral": ("MixtralConfig", dict(num_local_experts=4, num_experts_per_tok=2, num_key_value_heads=2)),
    "qwen2_moe": ("Qwen2MoeConfig", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                         shared_expert_intermediate_size=48, norm_topk_prob=False,
                                         num_key_value_heads=2)),
    "qwen3_moe": ("Qwen3MoeConfig", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                         norm_topk_prob=True, num_key_value_heads=2, head_dim=8)),
    "olmoe": ("OlmoeConfig", dict(num_experts=4, num_experts_per_tok=2, num_key_value_heads=2)),
    "deepseek_v3": ("DeepseekV3Config", dict(n_routed_experts=8, num_experts_per_tok=2, n_group=4,
                                             topk_group=2, n_shared_experts=1, moe_intermediate_size=16,
                                             first_k_dense_replace=1, num_hidden_layers=3,
                                             routed_scaling_factor=2.5, norm_topk_prob=True,
                                             kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8,
                                             qk_nope_head_dim=8, v_head_dim=8, num_key_value_heads=4)),
    "gpt_oss": ("GptOssConfig", dict(num_local_experts=4, num_experts_per_tok=2, num_key_value_heads=2,
                                     head_dim=8, sliding_window=8, layer_types=None)),
}
FAMILIES = tuple(FAMILY_CONFIGS)
#: The config field that holds the number of routed experts, per family.
EXPERT_FIELD = {"mixtral": "num_local_experts", "gpt_oss": "num_local_experts",
                "deepseek_v3": "n_routed_experts"}

#: The tokenizer's training text: a section of Python's own documentation.
TEXT = pydoc_data.topics.topics["assignment"][:6000]


def tiny_tokenizer(vocab_size: int = 300):
    """A byte-level BPE `PreTrainedTokenizerFast` with <s>, </s> and <pad>, trained on TEXT."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TEXT], trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>")


def tiny_config(family: str, vocab_size: int, hidden: int = 32, experts: int | None = None,
                ffn: int | None = None):
    """A small config of `family`: `hidden` wide, FFN `ffn` (default 1.5x hidden), 2 layers (3 for
    DeepSeek-V3)."""
    import transformers

    name, extra = FAMILY_CONFIGS[family]
    base: dict[str, object]
    base = dict(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=ffn or hidden * 3 // 2,
                num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256, bos_token_id=0,
                eos_token_id=1, pad_token_id=2, tie_word_embeddings=False)
    base.update(extra)
    if experts is not None:
        base[EXPERT_FIELD.get(family, "num_experts")] = experts
    if base.get("layer_types", "x") is None:
        base.pop("layer_types")
    return getattr(transformers, name)(**base)


def tiny_model(family: str, vocab_size: int = 160, seed: int = 0, dtype=torch.float32, hidden: int = 32,
               experts: int | None = None, ffn: int | None = None):
    """A random-initialised causal LM of `family` (eval mode, float32 by default)."""
    import transformers

    torch.manual_seed(seed)
    config = tiny_config(family, vocab_size, hidden, experts, ffn)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("gate.weight", "router.weight")) and p.dim() == 2:
                p.normal_(0.0, 1.0)
    return model.eval()


def save_tiny(path, family: str = "mixtral", seed: int = 0, hidden: int = 32, experts: int | None = None,
              ffn: int | None = None):
    """Save a tiny model and its tokenizer with `save_pretrained` into folder `path`."""
    tok = tiny_tokenizer(300)
    model = tiny_model(family, len(tok), seed, hidden=hidden, experts=experts, ffn=ffn)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model, tok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model.hf.tiny",
                                     description="save a tiny random HF MoE model and its tokenizer")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--family", choices=FAMILIES, default="mixtral")
    parser.add_argument("--hidden", type=int, default=32, help="hidden size (default 32)")
    parser.add_argument("--experts", type=int, default=None, help="routed experts (default per family)")
    parser.add_argument("--ffn", type=int, default=None, help="expert FFN size (default 1.5x hidden)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    model, _ = save_tiny(args.folder, args.family, args.seed, args.hidden, args.experts, args.ffn)
    n = sum(p.numel() for p in model.parameters())
    print(f"saved a random {args.family} model ({n / 1e6:.2f} M parameters) and its tokenizer "
          f"to {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
