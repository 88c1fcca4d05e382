"""The MoE language model: config, tokenizer, transformer, routing, generation, recording, training.

Modules: `config` (ModelConfig), `tokenizer` (bytes + BOS/EOS/PAD), `transformer` (MoETransformer),
`moe` (the MoE block), `layers` and `kernels` (native and batch-invariant kernels), `kv_cache`,
`routing` (capacity-limited routing), `generate` (batched greedy generation), `intervention` (edits
of routing events the generation loop applies), `replay` (routing replay), `recorder` (trace runs),
`checkpoint` (safetensors + JSON card), `quality`, `corpus`, `train`, `fingerprint` and `hf` (Hugging
Face MoE models). The experiments and the counterfactual search that use the model live in `lab/`.
"""
