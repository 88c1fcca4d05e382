"""Load a Hugging Face MoE causal LM and its tokenizer, offline, as an `HFMoEModel`.

`load_hf(name)` takes a local folder or a hub id already in the Hugging Face cache: everything is read
with `local_files_only=True`, so nothing is downloaded. Each failure is one `HFLoadError` line: no such
path; an id not in the cache (the hub is not reached: pass a local folder); not an MoE model; a
`model_type` without a router adapter, listing the supported ones.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from pathlib import Path

import torch

from model.hf.families import SUPPORTED, family_of

log = logging.getLogger(__name__)

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
#: Config fields that mark a mixture of experts, for telling "unsupported MoE" from "not an MoE".
_MOE_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


class HFLoadError(ValueError):
    """A model that cannot be loaded or recorded; the message is one line for the command line."""


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).exists() or name.count("/") > 1 or "\\" in name


def _config(name: str):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        if Path(name).is_dir():
            raise HFLoadError(f"{name}: no readable config.json ({str(exc).splitlines()[0]})") from None
        if _looks_like_path(name):
            raise HFLoadError(f"{name}: no such path") from None
        raise HFLoadError(f"{name}: not a local folder and not in the Hugging Face cache; the hub is not "
                          f"reached from here: pass a local folder") from None


def check_config(config) -> None:
    """HFLoadError unless `config` is a supported MoE causal LM."""
    model_type = str(getattr(config, "model_type", ""))
    if model_type not in SUPPORTED:
        if any(getattr(config, f, None) for f in _MOE_FIELDS):
            raise HFLoadError(f"model_type {model_type!r} is not supported; "
                              f"supported: {', '.join(SUPPORTED)}")
        raise HFLoadError(f"model_type {model_type!r} is not an MoE model (no experts in its config)")
    family = family_of(model_type)
    if family.num_experts(config) < 1:
        raise HFLoadError(f"model_type {model_type!r} with no experts is not an MoE model")


def load_hf(name: str | Path, *, dtype: str = "float32", device: str | torch.device = "cpu",
            device_map: str | None = None, impose: str = "auto"):
    """The `HFMoEModel` of folder or cached hub id `name` (see the module docstring).

    `dtype` is one of DTYPES; `device_map="auto"` (needs accelerate) spreads a model too large for one
    device over the available ones, else the model goes to `device`.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from model.hf.bridge import HFMoEModel

    hf_logging.disable_progress_bar()  # progress goes through our own logging, not tqdm on stderr
    name = str(name)
    if dtype not in DTYPES:
        raise HFLoadError(f"--dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if device_map not in (None, "auto"):
        raise HFLoadError(f"--device-map: {device_map!r} is not 'auto'")
    if device_map == "auto" and importlib.util.find_spec("accelerate") is None:
        raise HFLoadError("--device-map auto needs accelerate (pip install accelerate)")
    if _looks_like_path(name) and not Path(name).expanduser().exists():
        raise HFLoadError(f"{name}: no such path")
    name = str(Path(name).expanduser()) if _looks_like_path(name) else name
    config = _config(name)
    check_config(config)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, TypeError) as exc:
        raise HFLoadError(f"{name}: no usable tokenizer ({str(exc).splitlines()[0]})") from None
    kwargs = dict(dtype=DTYPES[dtype], local_files_only=True, trust_remote_code=False)
    if device_map == "auto":
        kwargs["device_map"] = "auto"
    try:
        with warnings.catch_warnings():  # torch's note on a pickle it refuses: our one line says it
            warnings.filterwarnings("ignore", message=".*pickle.*", category=UserWarning)
            model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    except Exception as exc:  # OSError, ValueError, and pickle's UnpicklingError for a refused payload
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        if "weights_only" in str(exc) or type(exc).__name__ == "UnpicklingError":
            first = "a pickled file holds more than weights, and pickles are not run"
        raise HFLoadError(f"{name}: the weights could not be loaded ({first})") from None
    if device_map is None:
        model = model.to(torch.device(device))  # type: ignore[arg-type]  # (transformers' stub)
    model.eval()
    wrapped = HFMoEModel(model, tokenizer, family_of(config.model_type), source=name, impose=impose)
    if not wrapped.config.moe_layers:
        raise HFLoadError(f"{name}: no MoE block found in the model's layers")
    log.info("loaded %s (%s, %d MoE layers, E=%d, K=%d) in %s on %s", name, config.model_type,
             len(wrapped.config.moe_layers), wrapped.config.n_experts, wrapped.config.top_k, dtype,
             wrapped.device)
    return wrapped
