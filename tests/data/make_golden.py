"""Write tests/data/golden_v1.h5: a small schema-v1 trace kept so later readers keep reading v1.

Run once when the golden file is created (`python tests/data/make_golden.py`); never regenerate it
for a new schema version: add a golden file of the new version beside it instead.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np

from traces import TraceWriter
from traces.synthetic import synthetic_meta, synthetic_routing, synthetic_run_arrays

OUT = Path(__file__).resolve().parent / "golden_v1.h5"
L, E, K, T = 2, 4, 2, 16
VOCAB = ["<pad>", *"abcdefghijklmnopqrstuvwxyz", " ", ".", "é", "→", "\n"]  # V = 32
REQUESTS = ["the probe → é", "a partner", "another partner."]


def main() -> None:
    rng = np.random.default_rng(20261129)
    prompts = [np.array([VOCAB.index(c) for c in text], dtype=np.int32)[:6] for text in REQUESTS]
    meta = replace(synthetic_meta(L, E, K, len(VOCAB), seed=1, capacity_factor=0.75),
                   model_config={"n_layers": 3, "n_experts": E, "top_k": K, "vocab_size": len(VOCAB),
                                 "d_model": 16},
                   moe_layers=[1, 2])
    compositions = {"alone": ([0], 0), "batch": ([1, 0, 2], 1), "cut": ([2, 0], 1)}
    with TraceWriter(OUT, meta=meta, vocab=VOCAB, requests=REQUESTS, prompt_tokens=prompts) as writer:
        for name, (ids, probe_row) in compositions.items():
            ids = np.array(ids)
            arrays = synthetic_run_arrays(L, len(ids), T, K, E, len(VOCAB), rng,
                                          prompts=[prompts[i] for i in ids], request_ids=ids, seed=1,
                                          capacity_factor=0.75)
            attrs = {"request_ids": ids, "probe_row": probe_row, "batch_size": len(ids),
                     "max_new_tokens": T - 6, "label": f"{name}: requests {ids.tolist()}",
                     "condition": "batch cf=0.75 native", "experiment": "golden",
                     "routing": synthetic_routing(0.75), "kernel_mode": "native", "seed": 1,
                     "wall_time_s": 0.5}
            writer.add_run(name, attrs=attrs, arrays=arrays)
        writer.write_table("causes", {"run": ["batch"], "position": [9], "cause": ["capacity"]},
                           {"reference": "alone"})
    with h5py.File(OUT, "r+") as f:  # what a writer killed before marking the run complete leaves
        f["runs/cut"].attrs["complete"] = False
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
