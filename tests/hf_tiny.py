"""Tiny random Hugging Face MoE models and a BPE tokenizer, built offline for the tests.

Each family gets a config of a few hundred kB (hidden 32, 2 layers, 4-8 experts); the tokenizer is
trained by `tokenizers` on a few kB of text that ships with CPython, in milliseconds. Nothing is
downloaded.
"""

from __future__ import annotations

import pydoc_data.topics

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import torch  # noqa: E402

FAMILY_CONFIGS = {
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

TEXT = pydoc_data.topics.topics["assignment"][:6000]


def tiny_tokenizer(vocab_size: int = 300):
    """A byte-level BPE `PreTrainedTokenizerFast` with <s>, </s> and <pad>, trained on TEXT."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TEXT], trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>")


def tiny_config(family: str, vocab_size: int):
    name, extra = FAMILY_CONFIGS[family]
    base = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=128, bos_token_id=0, eos_token_id=1,
                pad_token_id=2, tie_word_embeddings=False)
    base.update(extra)
    if base.get("layer_types", "x") is None:
        base.pop("layer_types")
    return getattr(transformers, name)(**base)


def tiny_model(family: str, vocab_size: int = 160, seed: int = 0, dtype=torch.float32):
    """A random-initialised causal LM of `family` (eval mode, float32 by default)."""
    torch.manual_seed(seed)
    config = tiny_config(family, vocab_size)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    # A random init with std 0.02 gives near-uniform routers; widen them so top-k choices are clear.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("gate.weight", "router.weight")) and p.dim() == 2:
                p.normal_(0.0, 1.0)
    return model.eval()


def save_tiny(path, family: str = "mixtral", seed: int = 0):
    """Save a tiny model and its tokenizer with `save_pretrained` into folder `path`."""
    tok = tiny_tokenizer(300)
    model = tiny_model(family, len(tok), seed)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model, tok
