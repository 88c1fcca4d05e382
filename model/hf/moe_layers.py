"""Which decoder layers of a Hugging Face config hold an MoE block: one rule for the project's bridge
and for a serving engine's routes.

transformers (and vLLM) decide per decoder layer `i`, from the config alone:

- Qwen2-MoE, Qwen3-MoE: MoE unless `i` is in `mlp_only_layers`, and only every `decoder_sparse_step`-th
  layer (`(i + 1) % decoder_sparse_step == 0`), and only with `num_experts > 0`;
- DeepSeek-V3 (and V2): dense for the first `first_k_dense_replace` layers, then MoE every
  `moe_layer_freq`-th layer (V3 has no such field: every layer);
- Mixtral, OLMoE, GPT-OSS: every layer.

`model.hf.bridge` checks this list against the blocks it finds in the loaded model; a serving engine
reports routes for every decoder layer (vLLM's capture buffer has one slot per layer, by the layer's
index), so its recorder keeps the rows of these layers (`engine_rows`).
"""

from __future__ import annotations


def moe_layers(config) -> list[int]:
    """Decoder-layer index of each MoE block of a transformers `config`, in order."""
    total = int(config.num_hidden_layers)
    model_type = str(getattr(config, "model_type", ""))
    if model_type in ("qwen2_moe", "qwen3_moe"):
        dense = set(getattr(config, "mlp_only_layers", None) or ())
        step = int(getattr(config, "decoder_sparse_step", 1) or 1)
        if int(getattr(config, "num_experts", 0) or 0) <= 0:
            return []
        return [i for i in range(total) if i not in dense and (i + 1) % step == 0]
    first = int(getattr(config, "first_k_dense_replace", 0) or 0)
    every = int(getattr(config, "moe_layer_freq", 1) or 1)
    return [i for i in range(first, total) if i % every == 0]


def engine_rows(config, reported: int) -> list[int]:
    """The rows of an engine's routes `[tokens, reported, K]` that hold the MoE layers, in order: all
    of them when the engine reports one per MoE layer, else the MoE layers' decoder indices when it
    reports one per decoder layer. ValueError when `reported` is neither."""
    layers = moe_layers(config)
    if reported == len(layers):
        return list(range(reported))
    if reported == int(config.num_hidden_layers):
        return layers
    raise ValueError(f"the engine reported routes for {reported} layers; the model has "
                     f"{config.num_hidden_layers} decoder layers, {len(layers)} of them MoE")
