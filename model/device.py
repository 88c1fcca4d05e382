"""The torch device a command line names with --device."""

from __future__ import annotations

import torch


def resolve_device(text: str, error: type[ValueError] = ValueError) -> torch.device:
    """The torch device named by --device; `error` (a one-line message) when it is unknown or absent."""
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise error(f"--device: {text!r} is not a torch device (e.g. cpu, cuda, cuda:1)") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise error(f"--device: device type {device.type!r} is not supported (cpu, cuda, mps)")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise error(f"--device: {text} requested but torch sees no CUDA device")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise error(f"--device: {text} requested but torch sees no MPS device")
    return device
