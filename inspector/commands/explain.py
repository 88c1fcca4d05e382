"""`moe-inspector explain TRACE`: confirm divergence causes by counterfactual reruns, map how much each
differing routing cell moves each split (the causal map, docs/experiments.md), store them.

A thin shell over `lab.counterfactual`, imported only when the command runs (with `record`, the
one place the inspector reaches the model). Bad traces and option values leave as a `UsageError`:
exit status 2 with the message. Ctrl-C stops the reruns, stores what is done and exits with 130.
"""

from __future__ import annotations

import argparse
import signal
import sys

from inspector.commands.errors import UsageError, message
from inspector.terminal import printable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", metavar="TRACE", help="trace file (.h5) whose divergences to explain")
    parser.add_argument("--request", type=int, action="append", metavar="R",
                        help="explain only request R (repeat for several; default every request with "
                             "two or more runs of one condition)")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="model checkpoint stem or .safetensors/.json file (default the one the trace "
                             "names, else assets/moe-default)")
    parser.add_argument("--device", default="cpu", help="torch device of the reruns (default cpu)")
    parser.add_argument("--limit", type=int, metavar="N",
                        help="rerun at most N divergent runs in this call, taken in turns across requests "
                             "and conditions (the table keeps earlier ones)")
    parser.add_argument("--redo", action="store_true",
                        help="rerun runs the table already explains (default: keep them, so an interrupted "
                             "or --limit call resumes)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch CPU threads (default the thread count of the trace's recorded machine, "
                             "else 1: native kernels may round differently with another count; the reruns "
                             "then reproduce the decisions, not the bits)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Rerun, store the confirmed causes in the trace and print their summary; 130 after Ctrl-C."""
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads: must be at least 1, got {args.threads}")
    import torch

    from lab.counterfactual import ExplainError, explain
    from lab.counterfactual.report import describe
    from lab.experiments.progress import ProgressBar, no_progress
    from traces import TraceError
    from traces.prompts import PromptMismatch

    try:
        if _engine_name(args.trace):
            return _engine_trace(args)
    except TraceError as exc:
        raise UsageError(message(exc)) from None
    bar = no_progress if args.quiet else ProgressBar(sys.stderr)
    terminated: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: _stop_as_on_ctrl_c(terminated, signum))
    try:
        threads = args.threads or _recorded_threads(args.trace)
        torch.set_num_threads(threads)
        result = explain(args.trace, checkpoint=args.checkpoint, device=args.device, requests=args.request,
                         limit=args.limit, redo=args.redo, progress=bar)
    except (TraceError, ExplainError, PromptMismatch) as exc:
        raise UsageError(message(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if isinstance(bar, ProgressBar):
            bar.finish()
    print(printable(describe(result)))
    if result.interrupted:
        how = "terminated" if terminated else "interrupted"
        print(f"moe-inspector explain: {how}: the runs explained so far are stored", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else 130
    return 0


def _stop_as_on_ctrl_c(terminated: list[int], signum: int) -> None:
    """SIGTERM (a service manager stopping the job, `kill`) stops the reruns as Ctrl-C does: what is
    done is stored."""
    terminated.append(signum)
    raise KeyboardInterrupt


def _engine_name(path: str) -> str:
    """The serving engine that generated the trace ('' for the project's own loop)."""
    from traces import open_trace

    with open_trace(path) as trace:
        engine = trace.record.engine
        return str(engine.get("name", "")) if isinstance(engine, dict) else ""


def _engine_trace(args: argparse.Namespace) -> int:
    """A serving engine's runs cannot be intervened on: say so, and make the one check there is (the
    probe alone through the Hugging Face path; docs/engines.md)."""
    from lab.engine_reference import reference_check
    from traces import TraceError

    try:
        check = reference_check(args.trace, device=args.device, checkpoint=args.checkpoint)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        raise UsageError(f"{args.trace}: {exc}") from None
    except TraceError as exc:
        raise UsageError(message(exc)) from None
    print(printable(check.describe()))
    return 0


def _recorded_threads(path: str) -> int:
    """The thread count of the trace's recorded machine fingerprint (at most this machine's CPUs), else 1."""
    from traces import open_trace
    from traces.steering import usable_threads

    with open_trace(path) as trace:
        machine = trace.record.machine
        return usable_threads(machine.get("threads", 1) if isinstance(machine, dict) else 1)
