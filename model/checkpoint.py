"""Weights as safetensors plus a JSON card beside them (config, training facts, measured results)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from model.config import WEIGHT_DTYPES, ModelConfig
from model.transformer import MoETransformer

log = logging.getLogger(__name__)

CARD_FORMAT = "moe-inspector-checkpoint"
_DTYPES = {name: getattr(torch, name) for name in WEIGHT_DTYPES}


def checkpoint_paths(path: str | Path) -> tuple[Path, Path]:
    """(`<stem>.safetensors`, `<stem>.json`) for a stem or either file's path."""
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".safetensors", ".json") else path
    return stem.with_name(stem.name + ".safetensors"), stem.with_name(stem.name + ".json")


def save_checkpoint(model: MoETransformer, path: str | Path, card: dict | None = None,
                    dtype: str = "float32") -> tuple[Path, Path]:
    """Write the weights (cast to `dtype`) and a card holding `model_config` and `card`'s entries."""
    from safetensors.torch import save_file

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    weights_path, card_path = checkpoint_paths(path)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().to("cpu", _DTYPES[dtype]).contiguous()
               for name, t in model.state_dict().items()}
    save_file(tensors, str(weights_path), metadata={"format": CARD_FORMAT, "dtype": dtype})
    weights_path.chmod(0o644)  # safetensors creates the file owner-only; a checkpoint is for everyone
    full_card = {"format": CARD_FORMAT, "weights": weights_path.name, "weights_dtype": dtype,
                 "model_config": model.config.to_dict(), **(card or {})}
    card_path.write_text(json.dumps(full_card, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    log.info("saved %s and %s", weights_path, card_path)
    return weights_path, card_path


def load_card(path: str | Path) -> dict:
    """The JSON card of a checkpoint; a ValueError names the file when it is missing or malformed."""
    _, card_path = checkpoint_paths(path)
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{card_path}: checkpoint card not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{card_path}: not a JSON checkpoint card ({exc})") from None
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT or "model_config" not in card:
        raise ValueError(f"{card_path}: expected a {CARD_FORMAT} card with a model_config")
    return card


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu",
                    dtype: torch.dtype = torch.float32) -> tuple[MoETransformer, dict]:
    """The model of a checkpoint (eval mode, on `device`, in `dtype`) and its card."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    weights_path, _ = checkpoint_paths(path)
    card = load_card(path)
    config = ModelConfig.from_dict(card["model_config"])
    model = MoETransformer(config)
    try:
        tensors = load_file(str(weights_path))
    except FileNotFoundError:
        raise ValueError(f"{weights_path}: checkpoint weights not found") from None
    except (SafetensorError, OSError) as exc:
        raise ValueError(f"{weights_path}: not a readable safetensors file ({exc})") from None
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{weights_path}: weights do not match the card's config "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise ValueError(f"{weights_path}: {name} has shape {tuple(t.shape)}, the config needs "
                             f"{tuple(expected[name].shape)}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    model.to(device=device, dtype=dtype).eval()
    return model, card
