"""One trace written from a serving engine's outputs, one run per batch composition, each run's routes
checked before it is written (`traces.route_check`): their structure always, and, unless the recording
was asked not to, every row (or a random share of rows) replayed through the router.

The trace file is created with its first run, so a recording that fails before any run leaves no
file behind; one that fails later keeps its complete runs and says how many (`kept`). A run whose
routes cannot be the router's is refused with the likely cause (`RoutesRefused`), and nothing of it
is written.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lab.experiments import ExperimentError
from lab.experiments.session import RequestPool
from model.engines import EngineName
from model.protocols import Engine
from model.vllm.arrays import ENGINE_NOT_RECORDED, cached_tokens, run_arrays
from model.vllm.settings import COMPILED_ADVICE
from traces.records import RootMeta, RunAttrs

#: Top-k log-probabilities kept per generated token (vLLM's default `max_logprobs`).
LOGPROBS = 20


class RoutesRefused(ExperimentError):
    """An engine's run whose routes fail the spot check: not written."""


def likely_cause(settings: dict) -> str:
    """Why an engine's routes would not be its router's, from the settings it shows."""
    mode = settings.get("compilation_mode")
    if mode not in (None, "NONE"):
        return f"it runs compiled ({mode}), where vLLM may not capture routes; {COMPILED_ADVICE}"
    if mode is None:
        return ("a server started without --enforce-eager runs compiled, where vLLM does not capture routes: "
                "restart it with --enforce-eager (docs/engines.md)")
    return "vLLM's routed-experts capture did not return this model's routes"


def refuse_unless_routed(check, settings: dict, what: str) -> None:
    """RoutesRefused naming the likely cause when `check` (a RouteCheck) refuses."""
    reason = check.refusal() if check is not None else ""
    if not reason:
        return
    if "log-probabilities" in reason:  # the stated dtype is not the one computed
        stated = settings.get("name") == EngineName.VLLM_SERVER and \
            str(settings.get("dtype_from", "")).startswith("--dtype")
        cause = "record with --dtype as the engine computes" if stated else \
            "vLLM's kernels differ from transformers' more than the dtype allows"
    else:
        cause = likely_cause(settings)
    raise RoutesRefused(f"--engine {settings['name']}: the routes of {what} cannot be the router's: "
                        f"{reason}; {cause}")


def routes_check(arrays: dict, reference, n_experts: int, dtype: str, share: float = 1.0):
    """The RouteCheck of one run's arrays: replayed through `reference` (a RouterReference) at
    `share`, or its structure alone when there is none (--no-route-check)."""
    from model.vllm.route_check import structure_check

    if reference is None:
        return structure_check(arrays, n_experts, dtype)
    return reference.check(arrays, n_experts, share)


class EngineRecording:
    """The trace at `path` written from `engine`'s outputs (created with the first run)."""

    def __init__(self, path: Path, engine: Engine, pool: RequestPool, meta: RootMeta, vocab: list[str],
                 experiment: str, eos_ids: tuple[int, ...] = (), layers: list[int] | None = None,
                 reference=None, n_experts: int = 0, share: float = 1.0):
        self.path, self.engine, self.pool, self.meta, self.vocab = path, engine, pool, meta, vocab
        self.experiment, self.eos_ids, self.layers = experiment, eos_ids, layers
        self.reference, self.n_experts, self.share = reference, n_experts, share
        self.condition = f"{engine.name}, dropless (the engine's routing and kernels)"
        self.routing = meta.routing
        self._writer = None
        self.closed: int | None = None  # complete runs, once closed
        self.runs = 0  # engine runs written
        self.check_seconds = 0.0  # time spent replaying routes through the reference

    @property
    def writer(self):
        """The trace's writer, created on first use."""
        if self._writer is None:
            from traces import TraceWriter

            try:
                self._writer = TraceWriter(self.path, meta=self.meta, vocab=self.vocab,
                                           requests=list(self.pool.texts),
                                           prompt_tokens=[list(t) for t in self.pool.tokens])
            except OSError as exc:
                raise ExperimentError(f"-o/--output: cannot write {self.path} ({exc})") from None
        return self._writer

    def record(self, name: str, comp, max_new_tokens: int, seed: int) -> dict[str, np.ndarray]:
        """Generate composition `comp`, check its routes and write it as run `name`."""
        started = time.perf_counter()
        outputs = self.engine.generate(self.pool.prompts(comp), max_new_tokens)
        wall = time.perf_counter() - started
        arrays = run_arrays(outputs, max_new_tokens, LOGPROBS, self.eos_ids, self.layers)
        check = routes_check(arrays, self.reference, self.n_experts, self.meta.dtype, self.share)
        self.check_seconds += 0.0 if check.seconds != check.seconds else check.seconds
        refuse_unless_routed(check, self.engine.settings(), f"run {name}")
        attrs = RunAttrs(request_ids=comp.requests, probe_row=comp.probe_row, batch_size=comp.batch_size,
                         max_new_tokens=max_new_tokens, label=comp.label, condition=self.condition,
                         experiment=self.experiment, routing=self.routing, kernel_mode="native", seed=seed,
                         wall_time_s=wall, not_recorded=list(ENGINE_NOT_RECORDED), topk_values="log_probs",
                         cached_tokens=cached_tokens(outputs),
                         route_check=check.to_attr())
        self.writer.add_run(name, attrs=attrs, arrays=arrays)
        self.runs += 1
        return arrays

    def close(self) -> int:
        """Close the trace (once) and return its complete runs; a trace that holds none is removed (a
        failure before any run was written)."""
        if self._writer is None or self.closed is not None:
            return self.closed or 0
        self._writer.close()
        from traces import TraceError, open_trace

        try:
            with open_trace(self.path) as trace:
                self.closed = len(trace.run_names)
        except TraceError:
            self.closed = 0
        if not self.closed:
            Path(self.path).unlink(missing_ok=True)
        return self.closed

    def kept(self, runs: int) -> str:
        """What a failed recording leaves: '; N complete runs kept in PATH', or '; no trace written'."""
        if not runs:
            return "; no trace written"
        return f"; {runs} complete run{'s' if runs != 1 else ''} kept in {self.path}"
