"""A Hugging Face MoE causal LM behind the project's model protocol, so `model.generate.generate`,
the recorder, the experiments and `explain` run it as they run the shipped byte-level model.

The protocol (`model.protocols.GenerationModel`): `config` (vocab_size, context, moe_layers, n_experts,
top_k, is_moe, to_dict), `device`, `dtype`, `pad_id`, `fill_id`, `eos_ids`, `admits_arrivals`,
`new_cache(B)`, `trace_meta`, and a call `model(tokens[B,T], policy, kernel_mode=, step=)` (the step's
`model.step.StepInputs`: valid tokens, positions, pads, cache, replay, index, edits) that returns
next-token logits[B,T,V] (float32) and one `LayerRouting` per MoE layer, in the caller's layout: right
padding, positions in each row's own coordinates.

Inside, the prefill is laid out with left padding, as transformers' own `generate` does it: each
row's real tokens end at the last column, so every later token of every row sits in one shared cache
column and sliding-window attention counts real tokens only. The cache is transformers'
`DynamicCache`; a 2-D attention mask (0 = a pad) grows by one column of ones per step, and every
row moves one position on per step, as in transformers' `generate`. Routing is
decided in the caller's layout (right padding), so pads arrive after a row's tokens as in the
shipped model.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from model.hf import kernels as hf_kernels
from model.hf.families import RouterFamily
from model.hf.moe_layers import moe_layers
from model.hf.tap import RouterTap, StepContext
from model.kernels import KERNEL_VERSION, check_mode
from model.routing import RoutingPolicy
from model.step import StepInputs
from model.transformer import ForwardOutput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HFConfigView:
    """The few configuration facts the generation loop and the experiments read."""

    vocab_size: int  # V of the logits (may exceed the tokenizer's length)
    context: int  # max_position_embeddings
    moe_layers: list[int]  # decoder-layer index of each MoE block (L of them)
    n_experts: int  # E
    top_k: int  # K
    model_type: str
    hf: dict = field(repr=False, default_factory=dict)  # the transformers config as JSON

    is_moe = True

    def to_dict(self) -> dict:
        return dict(self.hf)


class HFCache:
    """transformers' DynamicCache plus the 2-D attention mask of the columns it holds."""

    def __init__(self, hf_config, B: int, device: torch.device):
        from transformers import DynamicCache

        self.kv = DynamicCache(config=hf_config)
        self.mask = torch.zeros(B, 0, dtype=torch.long, device=device)  # [B, columns]
        self.last_pos = torch.zeros(B, dtype=torch.long, device=device)  # [B]


class HFMoEModel:
    """A transformers MoE causal LM, its tokenizer and its router family, hooked at the router seam."""

    pad_id = None  # pads are masked, no id is reserved
    admits_arrivals = False  # one shared cache column per step: no rows joining a running batch
    tile = 4  # rows per GEMM tile in batch-invariant mode (as the shipped model's kernel_tile)

    def __init__(self, model, tokenizer, family: RouterFamily, *, source: str = "", impose: str = "auto"):
        if impose not in ("auto", "always"):
            raise ValueError(f"impose must be 'auto' or 'always', got {impose!r}")
        self.hf = model
        self.tokenizer = tokenizer
        self.family = family
        self.source = source
        self.impose = impose
        cfg = model.config
        layers = model.model.layers
        moe = moe_layers(cfg)
        found = [i for i, layer in enumerate(layers) if family.is_moe_block(getattr(layer, "mlp", None))]
        if found != moe:
            raise ValueError(f"{cfg.model_type}: MoE blocks in decoder layers {found}, but its config "
                             f"gives {moe} (model.hf.moe_layers)")
        self.config = HFConfigView(
            vocab_size=int(cfg.vocab_size), context=int(cfg.max_position_embeddings), moe_layers=moe,
            n_experts=family.num_experts(cfg), top_k=family.top_k(cfg), model_type=str(cfg.model_type),
            hf=json.loads(cfg.to_json_string(use_diff=False)))
        self.tap = RouterTap([layers[i].mlp for i in moe], family, cfg)
        eos = getattr(model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = getattr(cfg, "eos_token_id", None)
        if eos is None and tokenizer is not None:
            eos = tokenizer.eos_token_id
        self.eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (int(eos),))
        # Pads are computed (transformers routes them like any token), and which experts they reach
        # changes the shapes of the batch's expert GEMMs: fill them as transformers' generate does.
        fill = getattr(model.generation_config, "pad_token_id", None)
        if fill is None and tokenizer is not None:
            fill = tokenizer.pad_token_id
        if fill is None:
            fill = self.eos_ids[0] if self.eos_ids else 0
        self.fill_id = int(fill[0] if isinstance(fill, (list, tuple)) else fill)

    # ---- the protocol ---------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return self.hf.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.hf.dtype

    @property
    def training(self) -> bool:
        return self.hf.training

    def eval(self):
        self.hf.eval()
        return self

    def train(self, mode: bool = True):
        self.hf.train(mode)
        return self

    def new_cache(self, B: int) -> HFCache:
        return HFCache(self.hf.config, B, self.device)

    @property
    def kernel_version(self) -> int:
        """The version of the project's kernels recorded for this model (its batch-invariant wrappers,
        `model.hf.kernels`; transformers computes the rest)."""
        return KERNEL_VERSION

    @property
    def kernel_path(self) -> str:
        """The kernel version and its path: transformers' own operators (no compiled path)."""
        return f"{self.kernel_version}-torch"

    def use_kernels(self, version: int, isa: str | None = None) -> int:
        """Nothing to switch: this model runs one set of kernels whatever the trace's `version`."""
        return self.kernel_version

    def adapt_policy(self, policy: RoutingPolicy) -> RoutingPolicy:
        """`policy` with this model's K and score function (the candidates are the router's own)."""
        if policy.priority == "expert_choice":
            raise ValueError("expert_choice priority does not apply to a Hugging Face model: its router "
                             "chooses each token's candidates")
        return policy.replace(top_k=self.config.top_k, score_fn=self.family.score_fn)

    def encode(self, text: str) -> list[int]:
        """Token ids of a prompt, with the special tokens the tokenizer adds (e.g. BOS)."""
        return list(self.tokenizer(text)["input_ids"])

    def vocab(self) -> list[str]:
        """Display string of every logit id, for the trace's `/vocab`."""
        from model.hf.vocab import vocab_strings

        return vocab_strings(self.tokenizer, self.config.vocab_size)

    def trace_meta(self, kernel_mode: str) -> dict:
        """Root attributes a trace of this model adds: `checkpoint` (what `explain` loads), the
        tokenizer's name, and `kernel_coverage` (what each kernel mode covers, `model.hf.kernels`).
        A folder inside the repository is named relative to its root, so a clone elsewhere finds it."""
        check_mode(kernel_mode)
        source = Path(self.source)
        where = _portable(source.resolve()) if self.source and source.exists() else self.source
        return {"checkpoint": where, "model_source": "huggingface",
                "tokenizer": _tokenizer_name(self.tokenizer, self.source, where),
                "kernel_coverage": {m: dict(c) for m, c in hf_kernels.COVERAGE.items()}}

    def close(self) -> None:
        """Remove the router hooks."""
        self.tap.close()

    @torch.no_grad()
    def __call__(self, tokens: torch.Tensor, policy: RoutingPolicy, *, kernel_mode: str = "native",
                 step: StepInputs) -> ForwardOutput:
        """Logits[B,T,V] and routing for tokens[B,T] (right padding, see the module docstring); `step`
        must say which tokens are valid (its positions are the cache's, as in transformers' generate)."""
        if policy is None or policy.top_k != self.config.top_k:
            raise ValueError(f"the routing policy must have top_k = {self.config.top_k} (the model's K); "
                             f"pass it through adapt_policy()")
        if step.valid is None:
            raise ValueError("the Hugging Face bridge needs the step's valid tokens (StepInputs.valid)")
        kernel_mode_name = check_mode(kernel_mode)
        B, T = tokens.shape
        valid = step.valid
        cache: HFCache = step.cache if step.cache is not None else self.new_cache(B)
        first = cache.mask.shape[1] == 0
        if first:  # right padding -> left padding: row b rolls right by T - len_b
            lengths = valid.sum(1)  # [B]
            shift = T - lengths
            col = torch.arange(T, device=tokens.device)
            to_left = (col[None, :] - shift[:, None]) % T  # [B,T] left column u <- right column
            to_right = (col[None, :] + shift[:, None]) % T  # [B,T] right column t <- left column
            ids = tokens.gather(1, to_left)
            mask = valid.gather(1, to_left).long()
            pos = (mask.cumsum(1) - 1).masked_fill(mask == 0, 0)  # as transformers' generate
            cache.last_pos = pos[:, -1]
        else:
            # As transformers' generate: every row, finished or not, attends to its new column and
            # moves one position on; a running row's position is then its own (`positions`).
            to_left = to_right = None  # type: ignore[assignment]  # (no left pads to move)
            ids, mask = tokens, torch.ones_like(tokens)
            pos = cache.last_pos[:, None] + 1  # [B,1]
            cache.last_pos = pos[:, 0]
        cache.mask = torch.cat([cache.mask, mask], 1)
        impose = self.impose == "always" or not policy.dropless
        ctx = StepContext(B, T, valid, policy, impose, step, to_left=to_left, to_right=to_right)
        self.tap.context = ctx
        try:
            with hf_kernels.kernel_mode(self.hf, kernel_mode_name, self.tile):
                out = self.hf(input_ids=ids, attention_mask=cache.mask, position_ids=pos, cache=cache.kv,
                              use_cache=True)
        finally:
            self.tap.context = None
        logits = out.logits.float()  # [B,T,V]
        if to_right is not None:
            logits = logits.gather(1, to_right[..., None].expand(B, T, logits.shape[-1]))
        return ForwardOutput(logits, ctx.routing)


def _portable(folder: Path) -> str:
    """`folder` relative to the repository root when it lies inside it, else absolute."""
    root = Path(__file__).resolve().parents[2]
    return str(folder.relative_to(root)) if folder.is_relative_to(root) else str(folder)


def _tokenizer_name(tokenizer, source: str, where: str) -> str:
    """The tokenizer's name; the model's own (portable) name when it came from the model's folder."""
    name = getattr(tokenizer, "name_or_path", "") or ""
    return where if not name or name == source else name
