"""Can the counterfactual trials of `explain` share one batched generation, and what does a trial cost?

Two measurements on the shipped example (`traces/examples/example.h5`, its first divergent pair):

1. Stacking: the recorded batch (B rows) is generated once alone and once as R stacked copies in one
   batch of R x B rows, dropless (so capacity cannot couple the copies). Are the router logits and
   next-token logits of every copy bitwise those of the batch alone? Under native kernels a matrix
   product's rounding depends on the number of rows, so they are not: a trial stacked with others
   would not be the recorded computation. (With capacity grouped per batch the copies would moreover
   compete for the same expert slots.) So `explain` runs one trial per generation.
2. Early stop: a sufficiency trial needs the watched row's tokens through t* only; `Reruns.trial`
   stops the generation as soon as they leave the target or reach t*. Timed against the full
   rerun, in interleaved pairs (`pairs.py`), and the whole search of the pair (`search.prove`).

    .venv/bin/python bench/intervention_batching.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from pairs import HEADER, paired

from lab.counterfactual.reruns import Reruns
from lab.counterfactual.search import prove
from lab.counterfactual.source import load_model, resolve_checkpoint
from model.generate import generate
from model.recorder import Recorder
from model.routing_policy import RoutingPolicy
from traces import open_trace, schema
from traces.analysis import explain_pair, row_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "traces" / "examples" / "example.h5"
REFERENCE, DIVERGENT = ("c00-gshard-cf1.0-batch-native", 2), ("c01-gshard-cf1.0-batch-native", 0)


def stacked_equal(model, prompts, n_new: int, mode: str, copies: int) -> bool:
    """Whether every copy of a batch stacked `copies` times keeps the bits of the batch alone."""
    dropless = RoutingPolicy.preset("dropless")
    alone, stacked = Recorder(), Recorder()
    a = alone.arrays(generate(model, prompts, n_new, dropless, mode, recorder=alone))
    s = stacked.arrays(generate(model, prompts * copies, n_new, dropless, mode, recorder=stacked))
    B = len(prompts)
    for key, axis in ((schema.ROUTER_LOGITS, 1), (schema.LOGITS, 0)):
        x, y = np.asarray(a[key]), np.asarray(s[key])
        for c in range(copies):
            for b in range(B):
                if not np.array_equal(x.take(b, axis=axis), y.take(c * B + b, axis=axis)):
                    return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open_trace(EXAMPLE) as trace:
        model = load_model(trace.record, resolve_checkpoint(trace.record, EXAMPLE, None), torch.device("cpu"))
        reruns = Reruns(trace, model)
        s = reruns.settings(DIVERGENT[0])
        print(f"1. the batch of {DIVERGENT[0]} (B = {len(s.prompts)}) stacked R times in one dropless batch: "
              f"are every copy's router logits and logits bitwise the batch's alone?")
        for mode in ("native", "batch_invariant"):
            answers = {r: stacked_equal(model, s.prompts, s.max_new_tokens, mode, r) for r in (2, 4)}
            words = "  ".join(f"R={r}: {'bitwise' if ok else 'differ'}" for r, ok in answers.items())
            print(f"   {mode:<16}{words}")
        a = row_trace(trace.run(REFERENCE[0]), REFERENCE[1])
        b = row_trace(trace.run(DIVERGENT[0]), DIVERGENT[1])
        v = explain_pair(a, b)
        target = a.tokens[: v.t_star + 1].astype(int).tolist()
        replay = {v.row: reruns.reference_routing(v.ref_run, v.ref_row)}
        pair = paired(lambda: reruns.trial(v.run, v.row, target, replay=replay, full=True),
                      lambda: reruns.trial(v.run, v.row, target, replay=replay), repeats=args.repeats)
        print(f"\n2. one trial (the whole-routing replay of the pair, t* = new token {v.new_index}): A full "
              f"rerun of {s.max_new_tokens} new tokens, B stopped at t*")
        print(HEADER)
        print(pair.line("trial stopped at t* / full rerun"))
        trials = reruns.trials
        started = time.perf_counter()
        proof = prove(v, reruns)
        seconds = time.perf_counter() - started
        print(f"\n3. the search of this pair: {reruns.trials - trials} trials in {seconds:.2f} s "
              f"({proof.scope}, {proof.words(v)}; necessary {proof.necessary}; reach {proof.reach} of "
              f"{proof.n_new})")


if __name__ == "__main__":
    main()
