"""Cost of recording a Hugging Face MoE model, as ratios measured side by side in one process.

    .venv/bin/python bench/hf_recording.py [--repeats 7] [--threads 1] [--new-tokens 32] [--vocab 32768]
                                           [--family mixtral]

A random-initialised model of the family (hidden 256, 4 layers, 8 experts top-2, vocabulary 32768
by default; nothing is downloaded), a batch of 8 prompts. Ratios (target in brackets):
- the bridge's generation with the recorder (logits in the form `record --logits auto` picks: top-64
  above V = 4096) and the run written through the recording's writer thread / without   (<= 1.10)
- the same with the recorder alone, nothing written (reported)
- the bridge's generation without the recorder / transformers' own generate (reported)
- imposed capacity policy (gshard, cf 1.0) / native, whole generation, and the extra time per MoE
  block call (reported)
Each pair is timed interleaved (A, B, A, B, ...); each ratio is read as in bench/pairs.py (ratio of
medians, median and spread of the per-pair ratios, load before and after; "noisy — rerun" when they
cannot tell).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pairs import HEADER, block, paired  # noqa: E402

from lab.experiments.session import writer_threads  # noqa: E402
from model.generate import generate  # noqa: E402
from model.hf.bridge import HFMoEModel  # noqa: E402
from model.hf.families import family_of  # noqa: E402
from model.recorder import Recorder, logits_form_for, trace_meta  # noqa: E402
from model.routing import RoutingPolicy  # noqa: E402
from traces import TraceWriter  # noqa: E402
from traces.background import BackgroundWriter  # noqa: E402

CONFIGS = {
    "mixtral": ("MixtralConfig", dict(num_local_experts=8, num_experts_per_tok=2, num_key_value_heads=4)),
    "qwen2_moe": ("Qwen2MoeConfig", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=256,
                                         shared_expert_intermediate_size=512, num_key_value_heads=4)),
}


def build(family: str, vocab: int):
    import transformers

    name, extra = CONFIGS[family]
    config = getattr(transformers, name)(vocab_size=vocab, hidden_size=256, intermediate_size=512,
                                         num_hidden_layers=4, num_attention_heads=8,
                                         max_position_embeddings=512, pad_token_id=0, eos_token_id=None,
                                         bos_token_id=None, **extra)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as `record`)")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--family", choices=tuple(CONFIGS), default="mixtral")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = build(args.family, args.vocab)
    w = HFMoEModel(model, None, family_of(model.config.model_type))
    g = torch.Generator().manual_seed(1)
    lengths = (12, 20, 16, 9, 24, 14, 18, 10)
    prompts = [torch.randint(1, args.vocab, (int(n),), generator=g).tolist() for n in lengths]
    n = args.new_tokens
    native = w.adapt_policy(RoutingPolicy.preset("dropless"))
    imposed = w.adapt_policy(RoutingPolicy.preset("gshard", capacity_factor=1.0,
                                                  capacity_formula="deepspeed"))
    T = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (T - len(p)) + p for p in prompts])
    mask = (torch.arange(T)[None] >= torch.tensor([T - len(p) for p in prompts])[:, None]).long()

    def hf():
        with torch.no_grad():
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                           pad_token_id=0)

    def plain():
        generate(w, prompts, n, native, stop_at_eos=False)

    form = logits_form_for("auto", args.vocab)
    names = itertools.count()
    path = os.path.join(tempfile.gettempdir(), "bench_hf_recording.h5")
    meta = trace_meta(w, native)
    writer = BackgroundWriter(TraceWriter(path, meta=meta, vocab=[f"<{i}>" for i in range(args.vocab)],
                                          requests=[f"prompt {i}" for i in range(len(prompts))],
                                          prompt_tokens=prompts, threads=writer_threads()))

    def recorded():
        rec = Recorder(form)
        rec.arrays(generate(w, prompts, n, native, recorder=rec, stop_at_eos=False))

    def written():
        rec = Recorder(form)
        result = generate(w, prompts, n, native, recorder=rec, stop_at_eos=False)
        rec.write_run(writer, f"r{next(names):04d}", result, policy=native, request_ids=range(len(prompts)))

    def capped():
        generate(w, prompts, n, imposed, stop_at_eos=False)

    print(f"{args.family}: hidden 256, 4 layers, 8 experts top-2, V {args.vocab} ({form} logits); B=8, "
          f"{n} new tokens, {args.threads} torch threads, {args.repeats} pairs")
    print(HEADER)
    try:
        # Blocks of 3 runs, each ending when its last write is done (bench/pairs.py `block`).
        pair = paired(block(plain, 3), block(written, 3, writer.flush), args.repeats)
        print(pair.line("3 x (recorder + writer thread) / no recorder", 1.10, 1e3 / 3))
        writer.close()
        print(f"trace: {os.path.getsize(path) / ((args.repeats + 1) * 3) / 1e6:.2f} MB per run on disk")
    finally:
        writer.close()
        if os.path.exists(path):
            os.remove(path)
    print(paired(plain, recorded, args.repeats).line("recorder, nothing written / no recorder", 1.10))
    print(paired(hf, plain, args.repeats).line("bridge / transformers generate"))
    capacity = paired(plain, capped, args.repeats)
    print(capacity.line("imposed gshard cf1 / native"))
    calls = len(w.config.moe_layers) * (n + 1)
    print(f"imposed capacity: {(capacity.median_b - capacity.median_a) / calls * 1e3:+.2f} ms per MoE block "
          f"call ({calls} calls)")


if __name__ == "__main__":
    main()
