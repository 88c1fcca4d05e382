"""The model the benchmarks time: the shipped checkpoint, or the default configuration randomly
initialised when the checkpoint is absent."""

from __future__ import annotations

from pathlib import Path

import torch

from model.checkpoint import load_checkpoint
from model.config import ModelConfig
from model.transformer import MoETransformer

ROOT = Path(__file__).resolve().parent.parent


def load_model() -> tuple[MoETransformer, str]:
    """(model in eval mode, a phrase saying which)."""
    path = ROOT / "assets" / "moe-default.safetensors"
    if path.exists():
        return load_checkpoint(path)[0], "assets/moe-default (trained)"
    torch.manual_seed(0)
    return MoETransformer(ModelConfig()).eval(), "default config, random init"


def load_dense() -> MoETransformer | None:
    """The shipped dense control model (equal active parameters per token), or None when absent."""
    path = ROOT / "assets" / "dense-control.safetensors"
    return load_checkpoint(path)[0] if path.exists() else None
