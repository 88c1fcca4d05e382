"""Building blocks of the transformer: RMSNorm, rotary positions, causal attention, SwiGLU FFN."""

from __future__ import annotations

from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import experts as backends
from model import kernels
from model.kv_cache import KVCache


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019); the reduction is per row, so batch-invariant."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


class Rotary(nn.Module):
    """Rotary position embedding (RoFormer), indexed by each token's position in its own sequence."""

    def __init__(self, head_dim: int, context: int, base: float):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        angles = torch.arange(context, dtype=torch.float64)[:, None] * inv_freq[None]  # [C, D/2]
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x[B,H,T,D] rotated by positions[B,T]."""
        half = x.shape[-1] // 2
        cos = cast(torch.Tensor, self.cos)[positions][:, None].to(x.dtype)  # [B,1,T,D/2]
        sin = cast(torch.Tensor, self.sin)[positions][:, None].to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    """Multi-head causal self-attention with an optional KV cache in each sequence's own positions."""

    def __init__(self, d_model: int, n_heads: int, context: int, rope_base: float):
        super().__init__()
        self.n_heads = n_heads
        self.context = context
        self.qkv = nn.Parameter(torch.empty(3 * d_model, d_model))
        self.proj = nn.Parameter(torch.empty(d_model, d_model))
        self.rotary = Rotary(d_model // n_heads, context, rope_base)
        #: the kernels it runs (`model.experts.choose`): batch-invariant attention by the compiled kernel
        self.kernels = backends.choose()

    def forward(self, x: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor, *, mode: str,
                tile: int, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = kernels.linear(x, self.qkv, mode, tile).split(C, dim=-1)  # 3 x [B,T,C]
        q = self.rotary(q.view(B, T, H, C // H).transpose(1, 2), positions)  # [B,H,T,D]
        k = self.rotary(k.view(B, T, H, C // H).transpose(1, 2), positions)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        if cache is None:
            # Full recomputation: keys are this call's tokens; right padding keeps index == position.
            y = kernels.attention(q, k, v, positions, mode, tile, causal_square=True,
                                  compiled=self.kernels.module)
        else:
            k_all, v_all = cache.write(layer, k, v, positions, valid)  # [B,H,Tk,D]
            y = kernels.attention(q, k_all, v_all, positions, mode, tile, compiled=self.kernels.module)
        y = y.transpose(1, 2).reshape(B, T, C)  # [B,T,C]
        return kernels.linear(y, self.proj, mode, tile)


class SwiGLU(nn.Module):
    """Feed-forward block down(silu(gate(x)) * up(x)) (Shazeer 2020); gate and up share one weight."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w_in = nn.Parameter(torch.empty(2 * d_ff, d_model))  # [2F, C]: gate rows, then up rows
        self.w_out = nn.Parameter(torch.empty(d_model, d_ff))  # [C, F]

    def forward(self, x: torch.Tensor, mode: str = "native", tile: int = 4) -> torch.Tensor:
        return swiglu(x, self.w_in, self.w_out, mode, tile)


def swiglu(x: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor, mode: str, tile: int) -> torch.Tensor:
    """SwiGLU on x[..., C] with w_in[2F, C] and w_out[C, F] (shared by the dense FFN and each expert)."""
    gate, up = kernels.linear(x, w_in, mode, tile).chunk(2, dim=-1)  # [..., F] each
    return kernels.linear(F.silu(gate) * up, w_out, mode, tile)
