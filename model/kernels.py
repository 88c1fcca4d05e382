"""The two kernel modes: `native` (plain torch ops, fast) and `batch_invariant` (fixed-shape tiles).

On common CPUs fp32 `F.linear` gives a row bitwise different values at batch size 1 than at 2+, because
the GEMM picks its reduction order by matrix shape. In `batch_invariant` mode every matrix product a
row takes part in has one fixed shape: linear layers run over tiles of exactly `tile` rows (padded),
and attention runs over fixed-size key blocks with an online softmax, one query tile per GEMM. The
result for a row then depends on nothing but that row (Thinking Machines 2025, "Defeating
Nondeterminism in LLM Inference": fix the reduction strategy, not the batch).
"""

from __future__ import annotations

from types import ModuleType

import torch
import torch.nn.functional as F

from traces.schema import KERNEL_MODES, KernelMode

#: Version of the project's own kernels (this module, the routing and the MoE block's experts), stored
#: in every trace's machine fingerprint: a rerun under other kernels may reproduce a trace only at the
#: decisions level. Traces without the field were recorded with version 1. Version 2: batch-invariant
#: experts run their fixed-shape tiles as one `mm` each through the grouped GEMM, skipping idle experts
#: (other bits than version 1's bmm over all experts); small steps route and sort their candidates on
#: the host (the bits of the tensor paths). Native results keep version 1's bits.
#: Version 3: the compiled kernels of `model.native` (built by the set-up): the MoE block's experts in
#: every step of both modes (one fused multiply-add chain per output, so a row's bits do not depend on
#: its step), a step of a few tokens in one call, and batch-invariant attention one query row at a
#: time. The router's logits and the routing decision keep their bits. Each instruction-set path
#: (AVX-512, AVX2 with FMA, generic) has its own bits: the fingerprint records the path (`3-avx512`).
#: Where the kernels are not built the model runs version 2's pure-PyTorch path and records version 2.
KERNEL_VERSION = 3
#: The version the pure-PyTorch path reproduces.
TORCH_KERNEL_VERSION = 2

#: Keys per block of batch-invariant attention (a fixed split size, not a fixed number of splits).
KEY_BLOCK = 64


def check_mode(mode: str) -> str:
    """Return `mode` if it is a kernel mode, else raise a ValueError naming the choices."""
    if mode not in KERNEL_MODES:
        raise ValueError(f"kernel_mode must be one of {', '.join(KERNEL_MODES)}, got {mode!r}")
    return mode


def pad_rows(x: torch.Tensor, tile: int) -> torch.Tensor:
    """x[N, ...] with zero rows appended up to a multiple of `tile` (at least one tile)."""
    extra = max(tile, -(-x.shape[0] // tile) * tile) - x.shape[0]
    return F.pad(x, (0, 0) * (x.dim() - 1) + (0, extra)) if extra else x


def linear(x: torch.Tensor, weight: torch.Tensor, mode: str = "native", tile: int = 4) -> torch.Tensor:
    """x[..., d_in] @ weight[d_out, d_in].T -> [..., d_out] in the given kernel mode."""
    if mode == KernelMode.NATIVE:
        return F.linear(x, weight)
    *lead, d_in = x.shape
    d_out = weight.shape[0]
    flat = x.reshape(-1, d_in)
    N = flat.shape[0]
    tiles = pad_rows(flat, tile).view(-1, tile, d_in)  # [n, M, d_in]
    # One GEMM of shape [M, d_in] @ [d_in, d_out] per tile; the weight is a stride-0 view, not a copy.
    out = torch.bmm(tiles, weight.t().expand(tiles.shape[0], d_in, d_out))  # [n, M, d_out]
    return out.view(-1, d_out)[:N].view(*lead, d_out)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor, mode: str = "native",
              tile: int = 4, causal_square: bool = False, compiled: ModuleType | None = None) -> torch.Tensor:
    """Scaled dot-product attention of q[B,H,Tq,D] over k/v[B,H,Tk,D], key j sitting at position j.

    A query at position q_pos[B,Tq] sees keys 0..q_pos. `causal_square`: Tq == Tk and q_pos[b,t] == t
    (full recomputation), which lets native mode use SDPA's causal kernel. `compiled` (the module of a
    model's compiled kernels, `model.experts.Kernels.module`): batch-invariant mode runs its kernel, one
    query row at a time (no tile of padded queries, no key blocks), float32 on the CPU without autograd.
    """
    if compiled is not None and mode == KernelMode.BATCH_INVARIANT and q.dtype == torch.float32 \
            and q.device.type == "cpu" \
            and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        return compiled.attention(q, k, v, q_pos)
    if mode == KernelMode.NATIVE:
        if causal_square:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B,H,Tq,D]
        key_pos = torch.arange(k.shape[2], device=q.device)
        allowed = key_pos[None, None, :] <= q_pos[:, :, None]  # [B,Tq,Tk]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None])
    return _blocked_attention(q, k, v, q_pos, tile)


def _blocked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor,
                       tile: int) -> torch.Tensor:
    """Batch-invariant attention: online softmax over fixed blocks of KEY_BLOCK keys, in block order.

    Every GEMM has one shape ([tile, D] @ [D, KEY_BLOCK] and [tile, KEY_BLOCK] @ [KEY_BLOCK, D]) and every
    reduction one length, whatever the batch, the step or the row. The first block initialises the
    running max, sum and output; each later block rescales them. A later block whose keys are all
    masked is an exact no-op (its exp() terms are 0 and the rescale factor is exp(0) = 1), so a query's
    result does not depend on how many trailing blocks its batch computes: decoding with a KV cache
    equals full recomputation bitwise (a fixed split size, not a fixed number of splits, as Thinking
    Machines 2025 prescribe for FlashDecoding).
    """
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    n_q = -(-Tq // tile)
    Tq_pad = n_q * tile
    n_blocks = -(-Tk // KEY_BLOCK)
    Tk_pad = n_blocks * KEY_BLOCK
    qs = q * D ** -0.5
    if Tq_pad != Tq:  # zero query rows that see every key: finite, and thrown away
        qs = F.pad(qs, (0, 0, 0, Tq_pad - Tq))
        q_pos = F.pad(q_pos, (0, Tq_pad - Tq), value=Tk_pad)
    if Tk_pad != Tk:
        k, v = F.pad(k, (0, 0, 0, Tk_pad - Tk)), F.pad(v, (0, 0, 0, Tk_pad - Tk))
    qs = qs.reshape(B * H * n_q, tile, D)  # [B*H*n_q, M, D]
    key_pos = torch.arange(Tk_pad, device=q.device)
    # Additive mask: s + 0 == s exactly, s + -inf == -inf.
    bias = torch.zeros(B, 1, Tq_pad, Tk_pad, device=q.device).masked_fill_(
        (key_pos[None, None, :] > q_pos[:, :, None])[:, None], float("-inf"))  # [B,1,Tq',Tk']

    def block(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores [B,H,Tq',Kb] (float32, masked) of block i, and its values per query tile."""
        kb, vb = k[:, :, i * KEY_BLOCK:(i + 1) * KEY_BLOCK], v[:, :, i * KEY_BLOCK:(i + 1) * KEY_BLOCK]
        kt = kb.transpose(2, 3).unsqueeze(2).expand(B, H, n_q, D, KEY_BLOCK).reshape(-1, D, KEY_BLOCK)
        s = torch.bmm(qs, kt).view(B, H, Tq_pad, KEY_BLOCK).float()
        s = s + bias[..., i * KEY_BLOCK:(i + 1) * KEY_BLOCK]
        vt = vb.unsqueeze(2).expand(B, H, n_q, KEY_BLOCK, D).reshape(-1, KEY_BLOCK, D)
        return s, vt

    def weighted(p: torch.Tensor, vt: torch.Tensor) -> torch.Tensor:
        return torch.bmm(p.to(v.dtype).view(-1, tile, KEY_BLOCK), vt).view(B, H, Tq_pad, D).float()

    s, vt = block(0)
    m = s.amax(-1, keepdim=True)  # running max [B,H,Tq',1]; finite: every query sees key 0
    p = torch.exp(s - m)
    denom = p.sum(-1, keepdim=True)
    acc = weighted(p, vt)  # [B,H,Tq',D]
    for i in range(1, n_blocks):
        s, vt = block(i)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)  # 1 exactly when this block is all masked
        p = torch.exp(s - m_new)
        denom = denom * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + weighted(p, vt)
        m = m_new
    return (acc / denom)[:, :, :Tq].to(q.dtype)  # [B,H,Tq,D]
