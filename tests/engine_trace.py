"""A serving engine's runs written without an engine: the arrays the vLLM adapter writes (no router
logits, gates or slots, no next-token logits for the prompt), for the tests of what a figure or a
table does with what was not recorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from model.vllm.arrays import ENGINE_NOT_RECORDED, run_arrays
from model.vllm.outputs import EngineOutput
from traces import TraceWriter

PROMPT = [3, 4, 5, 6]
GENERATED = [7, 8, 9, 10, 11, 12, 13]


def _engine_output(generated=GENERATED, change=None) -> EngineOutput:
    """One row as an engine returns it: routed experts [P + G - 1, L, K] and top log-probabilities."""
    rng = np.random.default_rng(0)
    routed = rng.integers(0, 8, (len(PROMPT) + len(generated) - 1, 2, 2)).astype(np.uint8)
    routed[..., 1] = (routed[..., 0] + 1) % 8
    if change is not None:
        t, layer = change
        routed[t, layer, 0] = (routed[t, layer, 0] + 3) % 8
    return EngineOutput(PROMPT, list(generated), routed, [{tok: -0.1, 20: -0.25} for tok in generated])


def write_engine_trace(path: Path) -> Path:
    meta = {"model_config": {}, "moe_layers": [0, 1], "tokenizer": "ids", "routing": {},
            "kernel_mode": "native", "device": "cpu", "dtype": "float32", "torch_version": "2", "seed": 0,
            "engine": {"name": "an engine", "version": "1", "experts": 8}}
    runs = {"alone": _engine_output(), "routing": _engine_output(change=(5, 1)),
            "token": _engine_output(GENERATED[:3] + [20, 21, 22, 23], change=(5, 1))}
    writer = TraceWriter(path, meta=meta, vocab=[f"t{i}" for i in range(30)], requests=["probe"],
                         prompt_tokens=[PROMPT])
    for name, out in runs.items():
        attrs = {"request_ids": np.array([0], np.int32), "probe_row": 0, "batch_size": 1,
                 "max_new_tokens": 6, "label": name, "condition": "engine", "experiment": "example",
                 "routing": {}, "kernel_mode": "native", "seed": 0, "wall_time_s": 0.1,
                 "not_recorded": list(ENGINE_NOT_RECORDED)}
        writer.add_run(name, attrs=attrs, arrays=run_arrays([out], 6, 4, eos_ids=(1,)))
    writer.close()
    return path
