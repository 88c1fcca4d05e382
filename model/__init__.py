"""The MoE language model: config, tokenizer, transformer, routing, generation, recording, training.

Modules: `config` (ModelConfig), `tokenizer` (bytes + BOS/EOS/PAD), `transformer` (MoETransformer),
`moe` (the MoE block), `layers` and `kernels` (native and batch-invariant kernels), `kv_cache`,
`routing` (capacity-limited routing), `generate` (batched greedy generation), `replay` (routing
replay), `recorder` (trace runs), `checkpoint` (safetensors + JSON card), `corpus` and `train`.
"""
