"""Seconds per divergent pair of `explain`'s search, by part, on the shipped example.

    python bench/explain_pairs.py [--pairs 6] [--latest] [--threads 1]

For the first divergent probe pairs of traces/examples/example.h5 (with --latest, those whose tokens
split latest; a copy, the trace is not changed): the whole search (`lab.counterfactual.search.prove`:
the complete scan in time order, the placebo, necessity, reach and the chain) with its trials resumed
from kept generation states (the scan's, the placebo's and reach's from the run rerun as recorded,
the chain's from the rerun with its links so far), and the same search with every trial rerun from
the prefill, interleaved pair by pair. Both must
find the same proof and chain; the ratio is the resumed states' gain. Prints one row per pair and
the totals.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.counterfactual.pairs import plan_groups  # noqa: E402
from lab.counterfactual.reruns import Reruns  # noqa: E402
from lab.counterfactual.search import prove  # noqa: E402
from lab.counterfactual.source import load_model, resolve_checkpoint  # noqa: E402
from traces import open_trace  # noqa: E402
from traces.analysis import explain_pair, probe_request, row_trace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--latest", action="store_true", help="the pairs that split latest")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp())
    copy = folder / "example.h5"
    shutil.copy(ROOT / "traces" / "examples" / "example.h5", copy)
    with open_trace(copy) as trace:
        model = load_model(trace.record, resolve_checkpoint(trace.record, copy, None), torch.device("cpu"))
        probe = probe_request(trace)
        pairs = []
        for group in plan_groups(trace, [probe]):
            ref = row_trace(trace.run(group.reference[0]), group.reference[1])
            for run, row in group.others:
                v = explain_pair(ref, row_trace(trace.run(run), row))
                if v.diverged:
                    pairs.append(v)
        if args.latest:
            pairs.sort(key=lambda v: -v.t_star)
        pairs = pairs[: args.pairs]
        print(f"{len(pairs)} divergent probe pairs of the shipped example, {args.threads} thread(s)")
        print("| pair | t* | candidates | sufficient | chain events | reruns | resumed (s) "
              "| from prefill (s) | ratio |")
        print("|---|---|---|---|---|---|---|---|---|")
        totals = [0.0, 0.0]
        for v in pairs:
            times, proofs = [], []
            for resume in (True, False):
                reruns = Reruns(trace, model)
                reruns.reproduction(v.ref_run), reruns.reproduction(v.run)   # not timed: done once per run
                start = time.perf_counter()
                proofs.append(prove(v, reruns, resume=resume))
                times.append(time.perf_counter() - start)
            a, b = proofs
            same = all(getattr(a, f) == getattr(b, f) for f in ("events", "alternatives", "chain", "placebo"))
            if not same:
                print(f"resumed and from-prefill searches differ on {v.run} row {v.row}", file=sys.stderr)
                return 1
            totals = [totals[0] + times[0], totals[1] + times[1]]
            events = len(a.events) + sum(len(link.cells) for link in a.chain)
            print(f"| {v.run} row {v.row} | {v.t_star} | {a.candidates} | {len(a.alternatives)} | {events} "
                  f"| {a.reruns} | {times[0]:.2f} | {times[1]:.2f} | {times[1] / times[0]:.2f} |")
        n = max(len(pairs), 1)
        print(f"per pair: resumed {totals[0] / n:.2f} s, from the prefill {totals[1] / n:.2f} s "
              f"(x{totals[1] / max(totals[0], 1e-9):.2f})")
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
