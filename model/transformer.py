"""The decoder-only MoE transformer: byte embedding, blocks of attention + (MoE or dense) FFN, head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn as nn

from model import experts as backends
from model import kernels
from model.config import ModelConfig
from model.kv_cache import KVCache
from model.layers import Attention, RMSNorm, SwiGLU
from model.moe import LayerRouting, MoE
from model.routing_policy import RoutingPolicy
from model.step import StepInputs
from model.tokenizer import EOS, PAD, vocab_strings


@dataclass(frozen=True)
class ForwardOutput:
    """Logits of every position and the routing of every MoE layer (in `config.moe_layers` order)."""

    logits: torch.Tensor  # [B,T,V] float32
    routing: list[LayerRouting]  # length L


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + ffn(norm(x)); the FFN is MoE or dense."""

    def __init__(self, config: ModelConfig, moe: bool):
        super().__init__()
        self.norm1 = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config.d_model, config.n_heads, config.context, config.rope_base)
        self.norm2 = RMSNorm(config.d_model, config.norm_eps)
        self.ffn = MoE(config.d_model, config.n_experts, config.expert_d_ff) if moe else \
            SwiGLU(config.d_model, config.dense_d_ff)

    @property
    def is_moe(self) -> bool:
        return isinstance(self.ffn, MoE)


class MoETransformer(nn.Module):
    """Decoder-only transformer whose FFN blocks in `config.moe_layers` are MoE blocks
    (a `model.protocols.GenerationModel`)."""

    pad_id: int | None = PAD  # short rows are filled with PAD, which the model never routes
    fill_id: int | None = None  # pads hold pad_id
    eos_ids: tuple[int, ...] = (EOS,)
    admits_arrivals = True  # each row has its own cache columns: rows may join a running batch

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"MoETransformer needs a ModelConfig, got {type(config).__name__}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, i in config.moe_layers) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.head = None if config.tie_embeddings else nn.Parameter(
            torch.empty(config.vocab_size, config.d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 initialisation; output projections scaled by 1/sqrt(2 * n_layers)."""
        std = self.config.init_std
        out_std = std / (2 * self.config.n_layers) ** 0.5
        for name, p in self.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
                nn.init.ones_(p)
            elif name.endswith("proj") or name.endswith("w_out"):
                nn.init.normal_(p, std=out_std)
            else:
                nn.init.normal_(p, std=std)

    def _kernel_parts(self) -> list[nn.Module]:
        """The modules that run the project's kernels (attention, MoE blocks)."""
        return [block.attn for block in self.layers] + [block.ffn for block in self.layers if block.is_moe]

    @property
    def kernels(self) -> backends.Kernels:
        """The kernels this model runs (`model.experts.Kernels`): one choice for all its parts."""
        return self.layers[0].attn.kernels

    @property
    def layers(self) -> list[Block]:
        """The blocks, in order (`blocks` as their own type)."""
        return cast("list[Block]", list(self.blocks))

    @property
    def kernel_version(self) -> int:
        """The version of the project's kernels this model runs (`model.kernels.KERNEL_VERSION`)."""
        return self.kernels.version

    @property
    def kernel_path(self) -> str:
        """The kernels' version and instruction-set path, as the fingerprint records them (`3-avx512`)."""
        return self.kernels.path

    def use_kernels(self, version: int, isa: str | None = None) -> int:
        """Run the kernels of a trace's `version` where this build has them (to reproduce its bits), on
        path `isa` where given and available; returns the version now run: the compiled kernels from
        version 3 on where built, else the pure-PyTorch path (versions 1-2 share it)."""
        chosen = backends.choose(version, isa)
        for m in self._kernel_parts():
            setattr(m, "kernels", chosen)  # noqa: B010 - every part has it (`_kernel_parts`)
        return self.kernel_version

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    def trace_meta(self, kernel_mode: str) -> dict:
        """No root attributes beyond the recorder's: the trace's model_config describes this model."""
        kernels.check_mode(kernel_mode)
        return {}

    def adapt_policy(self, policy: RoutingPolicy) -> RoutingPolicy:
        """`policy` as given: the model runs every routing policy."""
        return policy

    def vocab(self) -> list[str]:
        """Display string of every logit id (bytes and the special tokens)."""
        return vocab_strings(self.config.vocab_size)

    def new_cache(self, B: int) -> KVCache:
        """An empty KV cache for B rows."""
        c = self.config
        return KVCache(c.n_layers, B, c.n_heads, c.context, c.head_dim, self.device, self.dtype)

    def forward(self, tokens: torch.Tensor, policy=None, *, kernel_mode: str = "native",
                step: StepInputs | None = None) -> ForwardOutput:
        """Logits and routing for tokens[B,T] under routing `policy` and `kernel_mode`.

        `step` (`model.step.StepInputs`) says which tokens to route, their positions, the pads, the
        KV cache, the step index and what to impose on routing (replay, interventions); by default
        every non-PAD token at positions 0..T-1, recomputed without a cache.
        """
        B, T = tokens.shape
        c = self.config
        kernels.check_mode(kernel_mode)
        if step is None:
            step = StepInputs()
        cache, valid, positions = step.cache, step.valid, step.positions
        if valid is None:
            valid = tokens != PAD
        if positions is None:
            positions = torch.arange(T, device=tokens.device).expand(B, T)
        if c.is_moe and policy is None:
            raise ValueError("a routing policy is needed for an MoE model "
                             "(e.g. RoutingPolicy.preset('dropless'))")
        tile = c.kernel_tile
        x = self.embed(tokens.clamp(0, c.vocab_size - 1))  # [B,T,C]
        routing: list[LayerRouting] = []
        for i, block in enumerate(self.layers):
            x = x + block.attn(block.norm1(x), positions, valid, mode=kernel_mode, tile=tile, cache=cache,
                               layer=i)
            h = block.norm2(x)
            if block.is_moe:
                li = len(routing)
                y, r = block.ffn(h, valid, policy, mode=kernel_mode, tile=tile, pad=step.pad,
                                 forced=step.forced_at(li), seed_offset=step.seed_offset(li),
                                 edit=step.edit_at(li), copies=step.copies)
                routing.append(r)
            else:
                y = block.ffn(h, kernel_mode, tile)
            x = x + y
        x = self.norm(x)
        head = self.embed.weight if self.head is None else self.head
        logits = kernels.linear(x, head, kernel_mode, tile).float()  # [B,T,V]
        return ForwardOutput(logits, routing)

    def num_parameters(self, active: bool = False) -> int:
        """Parameter count; `active` counts only K of the E experts per MoE layer (per-token compute)."""
        total = sum(p.numel() for p in self.parameters())
        if active:
            c = self.config
            for block in self.layers:
                if isinstance(block.ffn, MoE):
                    per_expert = block.ffn.w_in[0].numel() + block.ffn.w_out[0].numel()
                    total -= (c.n_experts - c.top_k) * per_expert
        return total
