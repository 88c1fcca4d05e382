"""`moe-inspector record`: the options of the recorder and its entry point.

`add_arguments` imports nothing heavy (the command line builds every subcommand's parser at each
start); `run` loads torch, the checkpoint and the chosen experiment. Bad option values raise
`ExperimentError`, which the caller turns into exit status 2 with the message. Ctrl-C stops the
recording: every run written so far stays in the trace, and `run` returns 130 after saying so.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import time
from pathlib import Path

from lab.experiments import ExperimentError, options
from model.engines import EngineName

#: Experiment -> (module, function) that runs it.
RUNNERS = {
    "e0": ("lab.experiments.e0_kernels", "run_e0"),
    "e1": ("lab.experiments.e1_table", "run_e1"),
    "e3": ("lab.experiments.e3_capacity", "run_e3"),
    "e4": ("lab.experiments.e4_near_tie", "run_e4"),
    "e7": ("lab.experiments.e7_cost", "run_e7"),
    "quality": ("lab.experiments.quality", "run_quality"),
    "continuous": ("lab.experiments.continuous", "run_continuous"),
    "example": ("lab.experiments.example", "run_example"),
}


EPILOG = """examples:
  moe-inspector record -e e1 -o e1.h5                            the 30-call table (U at 128 and 256 tokens)
  moe-inspector record -e e1 -n 10 --new-tokens 64 --repeats 1   a quick look
  moe-inspector record -e example -o traces/examples/example.h5  the shipped example trace
  moe-inspector record -e e1 --probes assets/probes.txt          five probes, U with 95% intervals
  moe-inspector record -e quality                                what capacity costs in bits per byte
  moe-inspector record -e continuous                             continuous batching, batch sizes 1-64
  moe-inspector record -e e7 --threads 2                         mitigation cost on two threads
  moe-inspector record -e e1 --model DIR -n 4 --new-tokens 16    a Hugging Face MoE model (docs/hf-models.md)
  moe-inspector record -e e1 --engine vllm --model assets/mixtral-docs --repeats 1
                                                                 through vLLM (docs/engines.md)

Ctrl-C (or SIGTERM) stops a recording; every run written so far stays in the trace."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recorder's options (values are checked in `run`, against the chosen experiment)."""
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("-e", "--experiment", default="e1", choices=options.EXPERIMENTS,
                        help="experiment (docs/experiments.md): e0 kernel probe, e1 the 30-call table, "
                             "e3 capacity sweep, e4 near-tie study, e7 mitigation cost, quality held-out "
                             "bits per byte under each routing condition, continuous rows arriving and "
                             "leaving (batch sizes 1-64), example the "
                             "shipped example trace, against the probe through the project's loop and "
                             "through --engine in one trace (default e1)")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="model checkpoint stem or .safetensors/.json file (default assets/moe-default)")
    parser.add_argument("--model", metavar="PATH_OR_ID",
                        help="a Hugging Face MoE causal LM instead of the shipped model: a folder saved with "
                             "save_pretrained (with its tokenizer) or a hub id already in the local cache; "
                             "nothing is downloaded (docs/hf-models.md)")
    parser.add_argument("--engine", choices=EngineName.names(), default=EngineName.PROJECT.value,
                        help="what generates the runs: the project's own loop (default), vLLM's offline "
                             "engine on the --model folder, or a running vLLM server at --url serving it "
                             "(e1 and example; docs/engines.md)")
    parser.add_argument("--engine-arg", action="append", metavar="NAME=VALUE",
                        help="a vLLM engine argument, passed through (repeatable), e.g. "
                             "tensor_parallel_size=2, enable_expert_parallel=true, "
                             "enable_prefix_caching=false")
    parser.add_argument("--url", metavar="URL",
                        help="--engine vllm-server: the server's address, e.g. http://127.0.0.1:8000")
    parser.add_argument("--no-route-check", action="store_true",
                        help="--engine: do not replay the engine's routes through the Hugging Face router "
                             "(for a model too large to load beside the engine); their structure is still "
                             "checked, and info and the app then say the routes were not replayed")
    parser.add_argument("--route-check-sample", type=float, metavar="F",
                        help="--engine: replay a random share F (0 < F < 1) of each run's rows through the "
                             "router instead of every row, drawn from fresh entropy; the trace stores the "
                             "draw and the 95%% upper bound of the disagreement rate it allows")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"),
                        help="compute dtype of a --model (default float32; --engine vllm: vLLM's own "
                             "default; --engine vllm-server: the dtype the server was started with, "
                             "checked when the server shows it)")
    parser.add_argument("--device-map", choices=("auto",),
                        help="spread a --model too large for one device over all of them (needs accelerate)")
    parser.add_argument("--logits", choices=("auto", "full", "topk"),
                        help="next-token logits to store: full [B,T,V], or the top-k form (the K largest "
                             "with their ids, the log-sum-exp and the following token's logit; "
                             "docs/trace-format.md); auto (default): full up to V = 4096, top-k above")
    parser.add_argument("--logits-k", type=int, metavar="K",
                        help="logits kept per position by the top-k form (default 64)")
    parser.add_argument("--dense-checkpoint", metavar="PATH",
                        help="dense control checkpoint for e1 (default assets/dense-control; skipped with a "
                             "note when absent)")
    parser.add_argument("--probe", default=options.DEFAULT_PROBE, metavar="TEXT",
                        help=f"the probe prompt whose completions are compared "
                             f"(default {options.DEFAULT_PROBE!r})")
    parser.add_argument("--probes", metavar="FILE",
                        help="e1: several probe prompts, one per line (e.g. assets/probes.txt); each gets "
                             "its own trace and the table pools them with bootstrap intervals")
    parser.add_argument("--partners", metavar="FILE",
                        help="partner prompts, one per line; '#' lines before the first prompt are comments "
                             "(default assets/partners.txt)")
    parser.add_argument("-n", "--compositions", type=int, metavar="N",
                        help="batch compositions (e1: per repeat, default 30)")
    parser.add_argument("--batch-sizes", metavar="LIST", help="batch sizes to draw from, e.g. 1-8 or 2,4,8")
    parser.add_argument("--capacity-factors", metavar="LIST", help="capacity factors, e.g. 1.0,1.25,2.0")
    parser.add_argument("--presets", metavar="LIST",
                        help="routing presets of the capacity conditions (default gshard, the training "
                             "policy)")
    parser.add_argument("--priorities", metavar="LIST",
                        help="e3: capacity priorities to sweep (default kmajor_position,kmajor_score)")
    parser.add_argument("--min-capacities", metavar="LIST",
                        help="capacity floors of the capacity conditions (DeepSpeed's min_capacity), e.g. "
                             "0,1,4 (e1, e3 default 0; quality default 0,1,4)")
    parser.add_argument("--kernel-mode", choices=options.KERNEL_CHOICES,
                        help="kernel modes to run (e1: restricts the conditions; default per experiment)")
    parser.add_argument("--new-tokens", metavar="LIST", help="new tokens per completion, e.g. 128,256")
    parser.add_argument("--repeats", type=int, metavar="R",
                        help="repeats (e1: fresh compositions each; e7: timings)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the composition draws (default 0)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="torch CPU threads (default 1: the model's matrices are small, and extra "
                             "threads only wait on a busy machine)")
    parser.add_argument("-o", "--output", metavar="FILE", help="trace to write (default <experiment>.h5)")
    parser.add_argument("--force", action="store_true",
                        help="replace existing traces (the output and every sibling the experiment "
                             "writes, e.g. FILE-dense.h5); without it an existing one is refused")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def output_paths(settings: options.Settings) -> list[Path]:
    """Every trace the experiment may write."""
    if settings.experiment == "e1":
        from lab.experiments.e1_table import dense_trace_path, probe_trace_path
        probes = [probe_trace_path(settings.output, i) for i in range(len(settings.all_probes))]
        return [p for probe in probes for p in (probe, dense_trace_path(probe))]
    return [settings.output]


def check_outputs(paths: list[Path], force: bool) -> None:
    """Refuse a trace another process is writing, and existing traces unless `force`, naming each one
    before anything is written."""
    from traces.lock import is_locked

    names = ", ".join(str(p) for p in paths)
    busy = [str(p) for p in paths if is_locked(p)]
    if busy:
        raise ExperimentError(f"-o/--output: another process is writing {', '.join(busy)}")
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        one = len(existing) == 1
        raise ExperimentError(f"-o/--output: {', '.join(existing)} already exist{'s' if one else ''} "
                              f"(this experiment writes {names}); pass --force to replace "
                              f"{'it' if one else 'them'}")


def kept_runs(paths: list[Path], since: float) -> list[tuple[Path, int, int]]:
    """(path, complete runs, incomplete runs) of each trace written since `since`."""
    from traces import TraceError, open_trace

    out = []
    for path in paths:
        if not path.exists() or path.stat().st_mtime < since - 1:
            continue
        try:
            with open_trace(path) as trace:
                out.append((path, len(trace.run_names), len(trace.incomplete_runs)))
        except TraceError:
            out.append((path, 0, 0))
    return out


class Terminated(KeyboardInterrupt):
    """SIGTERM during a recording: stopped like Ctrl-C, every complete run kept."""


def _terminate(signum, frame) -> None:
    raise Terminated


def run(args: argparse.Namespace, stream=None, progress=None) -> int:
    """Run the experiment with SIGTERM handled like Ctrl-C (see `_run`)."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: leave signals alone
        return _run(args, stream, progress)
    try:
        return _run(args, stream, progress)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, stream=None, progress=None) -> int:
    """Run the chosen experiment and print its results table to `stream` (stdout); 130 after Ctrl-C.

    `progress(done, total, label)` replaces the progress bar when given.
    """
    import torch

    from lab.experiments.compositions import read_partners
    from lab.experiments.progress import ProgressBar, no_progress
    from lab.experiments.session import RequestPool, load_hf_models, load_models
    from model.device import resolve_device
    from model.routing_policy import PRESETS, PRIORITIES
    from traces import TraceError

    out = stream or sys.stdout
    settings = options.resolve(args, tuple(PRESETS), PRIORITIES)
    check_outputs(output_paths(settings), bool(getattr(args, "force", False)))
    if EngineName(getattr(args, "engine", EngineName.PROJECT)).serving:
        return _run_engine(args, settings, out, progress)
    if settings.experiment == "against":
        raise ExperimentError("-e against: compares the project's loop with a serving engine; pass --engine "
                              "vllm or vllm-server")
    engine_only = ("engine_arg", "url", "no_route_check", "route_check_sample")
    if any(getattr(args, flag, None) for flag in engine_only):
        raise ExperimentError("--engine-arg/--url/--no-route-check/--route-check-sample: apply to --engine "
                              "vllm or vllm-server")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = resolve_device(settings.device, ExperimentError)
    if settings.hf_model is not None:
        models, settings = load_hf_models(settings, device)
        pool = RequestPool.build(settings.probe, read_partners(settings.partners), encode=models.moe.encode)
    else:
        pool = RequestPool.build(settings.probe, read_partners(settings.partners))
        models = load_models(settings.checkpoint, settings.dense_checkpoint, settings.dense_required, device,
                             want_dense=settings.experiment == "e1")
    module, function = RUNNERS[settings.experiment]
    runner = getattr(importlib.import_module(module), function)
    bar = progress or (no_progress if getattr(args, "quiet", False) else ProgressBar(sys.stderr))
    started = time.time()
    try:
        result = runner(settings, models, pool, bar)
    except OSError as exc:  # the trace could not be written (permissions, ...)
        raise ExperimentError(f"-o/--output: writing {settings.output} failed ({exc})") from None
    except TraceError as exc:  # the writer's boundary: disk full, an I/O error, another writer
        if isinstance(bar, ProgressBar):
            bar.finish()
        if "disk full" not in exc.expected:
            raise ExperimentError(str(exc)) from None
        kept = kept_runs(output_paths(settings), started)
        text = "; ".join(f"{c} complete run{'s' if c != 1 else ''} kept in {p}" for p, c, _ in kept)
        raise ExperimentError(f"disk full: {text or 'no trace written'}") from None
    except KeyboardInterrupt as exc:
        if isinstance(bar, ProgressBar):
            bar.finish()
        kept = kept_runs(output_paths(settings), started)
        text = "; ".join(f"{c} complete run{'s' if c != 1 else ''} kept in {p}"
                         + (f" ({i} incomplete)" if i else "") for p, c, i in kept) or "no trace written"
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"moe-inspector record: {how}: {text}", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    if isinstance(bar, ProgressBar):
        bar.finish()
    print(result.table(), file=out)
    return 0


def _run_engine(args: argparse.Namespace, settings: options.Settings, out, progress=None) -> int:
    """Record through a serving engine (lab/experiments/engine.py); 130 after Ctrl-C, the runs so far kept."""
    from lab.experiments.engine import run as run_engine
    from lab.experiments.progress import ProgressBar, no_progress

    bar = progress or (no_progress if getattr(args, "quiet", False) else ProgressBar(sys.stderr))
    started = time.time()
    try:
        result = run_engine(args, settings, bar)
    except KeyboardInterrupt as exc:
        kept = kept_runs(output_paths(settings), started)
        text = "; ".join(f"{c} complete run{'s' if c != 1 else ''} kept in {p}" for p, c, _ in kept)
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"moe-inspector record: {how}: {text or 'no trace written'}", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        if isinstance(bar, ProgressBar):
            bar.finish()
    print(result.table(), file=out)
    return 0
