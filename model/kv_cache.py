"""Per-layer key/value cache, indexed by each sequence's own positions (right padding)."""

from __future__ import annotations

import torch

from model.kernels import KEY_BLOCK


class KVCache:
    """Keys and values of every attention layer: k[l], v[l] of shape [B,H,C,D], C = context.

    Row b's token at position p lives at index p, so rows of different lengths share one tensor and
    decoding row b writes at its own length. `filled` is one past the highest position any query has
    reached; attention reads keys [0, filled) rounded up to whole key blocks, and masks each row's keys
    past its query's position.
    """

    def __init__(self, n_layers: int, B: int, n_heads: int, context: int, head_dim: int,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
        shape = (B, n_heads, context, head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.context = context
        self.filled = 0
        self._flat: list[torch.Tensor] = []   # a repeated cache's memory (`repeat`), for the next to reuse

    def compact(self) -> KVCache:
        """A copy of the positions written so far only (`filled`): the generation's state at a step, kept
        to resume from. `clone()` of it is a cache to write to again."""
        copy = KVCache.__new__(KVCache)
        copy.k = [t[:, :, :self.filled].clone() for t in self.k]
        copy.v = [t[:, :, :self.filled].clone() for t in self.v]
        copy.context, copy.filled = self.context, self.filled
        return copy

    def clone(self) -> KVCache:
        """An independent, full-size copy (of a compact one too: the positions past it are zeros)."""
        copy = KVCache.__new__(KVCache)

        def full(t: torch.Tensor) -> torch.Tensor:
            out = t.new_zeros((*t.shape[:2], self.context, t.shape[3]))
            out[:, :, :t.shape[2]] = t
            return out

        copy.k = [full(t) for t in self.k]
        copy.v = [full(t) for t in self.v]
        copy.context, copy.filled = self.context, self.filled
        return copy

    def repeat(self, copies: int, context: int | None = None, reuse: KVCache | None = None) -> KVCache:
        """An independent cache of `copies` stacked copies of this one's rows (copy-major: copy i holds
        rows i*B..(i+1)*B-1), with `context` positions (default this one's; at least `filled`), to run
        several counterfactual reruns of one batch in one forward (`model.step.StepInputs.copies`).
        `reuse`: an earlier repeated cache, no longer used, whose memory it takes where large enough
        (a fresh large allocation costs more than the copy itself)."""
        context = self.context if context is None else context
        if not self.filled <= context <= self.context:
            raise ValueError(f"a repeated cache holds {self.filled}..{self.context} positions, got {context}")
        copy = KVCache.__new__(KVCache)
        old = getattr(reuse, "_flat", None)
        copy._flat = []

        def stacked(t: torch.Tensor, i: int) -> torch.Tensor:
            B, H, _, D = t.shape
            n = copies * B * H * context * D
            flat = old[i] if old is not None and old[i].numel() >= n and old[i].dtype == t.dtype \
                and old[i].device == t.device else t.new_empty(n)
            copy._flat.append(flat)
            out = flat[:n].view(copies, B, H, context, D)
            out[:, :, :, :self.filled] = t[:, :, :self.filled]
            out[:, :, :, self.filled:] = 0
            return out.view(copies * B, H, context, D)

        n_layers = len(self.k)
        copy.k = [stacked(t, i) for i, t in enumerate(self.k)]
        copy.v = [stacked(t, n_layers + i) for i, t in enumerate(self.v)]
        copy.context, copy.filled = context, self.filled
        return copy

    def load(self, first: int, state: KVCache, copies: int = 1) -> None:
        """Rows first.. of this (repeated) cache set to `copies` copies of `state`'s rows, positions past
        its `filled` zeroed: copies that join a stacked rerun at the step `state` was kept at."""
        for mine, theirs in ((self.k, state.k), (self.v, state.v)):
            for t, s in zip(mine, theirs, strict=True):
                B = s.shape[0]
                rows = t[first:first + copies * B].view(copies, B, *t.shape[1:])
                rows[:, :, :, :state.filled] = s[:, :, :state.filled]
                rows[:, :, :, state.filled:] = 0

    def rows(self, n: int) -> KVCache:
        """The first n rows of this cache as a cache of their own (the same memory: what it writes, this
        one holds; its `filled` is this one's until it writes)."""
        view = KVCache.__new__(KVCache)
        view.k, view.v = [t[:n] for t in self.k], [t[:n] for t in self.v]
        view.context, view.filled, view._flat = self.context, self.filled, []
        return view

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
              valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k/v[B,H,T,D] of the valid tokens at their positions[B,T]; return the keys to attend."""
        b_idx, t_idx = valid.nonzero(as_tuple=True)  # [n], [n]
        p_idx = positions[b_idx, t_idx]
        if p_idx.numel() and int(p_idx.max()) >= self.context:
            raise ValueError(f"position {int(p_idx.max())} is past the context length {self.context}")
        self.k[layer][b_idx, :, p_idx] = k[b_idx, :, t_idx]
        self.v[layer][b_idx, :, p_idx] = v[b_idx, :, t_idx]
        if layer == 0:
            # Even invalid queries read a key of their own, so keys up to each query position count.
            top = int(positions.max()) + 1 if positions.numel() else 0
            self.filled = max(self.filled, min(top, self.context))
        # Whole key blocks, so batch-invariant attention slices the cache instead of padding a copy.
        end = min(self.context, -(-self.filled // KEY_BLOCK) * KEY_BLOCK)
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]
