"""Comparing the floats of two different computations of one value.

Bits are comparable only between two runs of the same operations on the same shapes on one machine.
Two different computations (the project's loop against transformers' `generate`, grouped GEMM against
a per-expert loop) may round differently on another CPU, so they are held to a tolerance stated in
units in the last place (ulps) of the reference's magnitude: the spacing of floats at the largest
absolute value of the reference, in its own dtype.
"""

from __future__ import annotations

import numpy as np
import torch


def ulp_of_magnitude(reference: torch.Tensor) -> float:
    """The spacing of `reference`'s dtype at its largest absolute value (one ulp of its magnitude)."""
    top = reference.detach().abs().max().float().item() if reference.numel() else 0.0
    eps = torch.finfo(reference.dtype).eps
    return float(2.0 ** np.floor(np.log2(top)) * eps) if top > 0 else float(torch.finfo(reference.dtype).tiny)


def ulps_apart(mine: torch.Tensor, reference: torch.Tensor) -> float:
    """How many ulps of the reference's magnitude the two tensors are apart at most."""
    assert mine.shape == reference.shape, (mine.shape, reference.shape)
    gap = (mine.detach().double() - reference.detach().double()).abs().max().item() if mine.numel() else 0.0
    return gap / ulp_of_magnitude(reference)


def assert_within_ulps(mine: torch.Tensor, reference: torch.Tensor, ulps: float, what: str = "") -> None:
    """Fail unless `mine` is within `ulps` ulps of `reference`'s magnitude, element by element."""
    apart = ulps_apart(mine, reference)
    assert apart <= ulps, f"{what}: {apart:.1f} ulps of the reference's magnitude apart (allowed {ulps})"
