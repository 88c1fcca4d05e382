"""One small adapter per Hugging Face router family, chosen by `config.model_type`.

In transformers 5 every supported MoE block holds a router submodule that maps the block's tokens
x[N,C] to (router_logits[N,E], weights[N,K], indices[N,K]) and an `experts` module that takes the
indices and weights. The adapter names that submodule, reads E and K off the config, and says how the
router turns logits into (weights, indices), so an intervention that replaces a token's router
logits routes it the way the model would. The model code itself stays in transformers.

Router semantics (checked against transformers 5 `modeling_<family>.py`):
- Mixtral: softmax in float32, top-k, weights renormalised to sum 1 (kept in float32).
- Qwen2-MoE, Qwen3-MoE, OLMoE: softmax in float32, top-k, renormalised when `norm_topk_prob`,
  cast back to the logits' dtype. Qwen2-MoE adds a shared expert behind a sigmoid gate; it is outside
  the router and runs unchanged.
- DeepSeek-V3: logits in float32, sigmoid scores plus `e_score_correction_bias` rank the experts;
  grouped top-k keeps the `topk_group` best of `n_group` groups (a group scores the sum of its two
  best); weights are the unbiased scores, renormalised when `norm_topk_prob`, times
  `routed_scaling_factor`. Shared experts run outside the router, unchanged.
- GPT-OSS: top-k of the logits (router with a bias), then softmax over those k only.

A dropped candidate goes to the sentinel index E with weight 0 where the experts module ignores E
(`one_hot(..., num_classes=E + 1)`, its eager implementation); GPT-OSS's experts one-hot over E
classes only, and the grouped kernels index weights by expert, so there, and for every family run
with another experts implementation, a dropped candidate keeps its expert index with weight 0: its
product is computed and multiplied by zero, which adds exactly nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class RouterFamily(ABC):
    """How one family's MoE blocks are routed. `choose` maps logits[N,E] to (weights, indices)[N,K]."""

    model_types: tuple[str, ...]
    router_attr: str = "gate"       # the router submodule inside the MoE block
    experts_key: str = "num_experts"  # config field holding E
    score_fn: str = "softmax"        # scores the imposed policy records (DeepSeek-V3: sigmoid)
    sentinel_ok: bool = True         # the eager experts module skips index E

    def is_moe_block(self, module: torch.nn.Module | None) -> bool:
        router = getattr(module, self.router_attr, None)
        return isinstance(router, torch.nn.Module) and hasattr(module, "experts")

    def num_experts(self, config) -> int:
        return int(getattr(config, self.experts_key))

    def top_k(self, config) -> int:
        return int(config.num_experts_per_tok)

    def uses_sentinel(self, config) -> bool:
        """Whether a dropped candidate may go to index E (else: its expert, weight 0)."""
        return self.sentinel_ok and getattr(config, "_experts_implementation", "eager") == "eager"

    @abstractmethod
    def choose(self, router: torch.nn.Module, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights[N,K], indices[N,K]) the router gives for logits[N,E] (each family its own)."""


class _Softmax(RouterFamily):
    """Mixtral, Qwen2/3-MoE, OLMoE: softmax over E, top-k, optional renormalisation."""

    def choose(self, router, logits):
        probs = torch.softmax(logits, dim=-1, dtype=torch.float)  # [N,E]
        top, index = torch.topk(probs, router.top_k, dim=-1)  # [N,K]
        if getattr(router, "norm_topk_prob", True):  # Mixtral has no flag: always renormalised
            top = top / top.sum(dim=-1, keepdim=True)
        if hasattr(router, "norm_topk_prob"):  # the Qwen and OLMoE routers return the logits' dtype
            top = top.to(logits.dtype)
        return top, index


class _DeepseekV3(RouterFamily):
    def choose(self, router, logits):
        N, E = logits.shape
        scores = logits.float().sigmoid()  # [N,E]
        for_choice = scores + router.e_score_correction_bias
        G = router.num_group
        group_scores = for_choice.view(N, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)  # [N,G]
        group_idx = torch.topk(group_scores, k=router.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(N, G, E // G).reshape(N, E)
        for_choice = for_choice.masked_fill(~score_mask.bool(), float("-inf"))
        index = torch.topk(for_choice, k=router.top_k, dim=-1, sorted=False)[1]  # [N,K]
        weights = scores.gather(1, index)
        if router.norm_topk_prob:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return weights * router.routed_scaling_factor, index


class _GptOss(RouterFamily):
    def choose(self, router, logits):
        top, index = torch.topk(logits, router.top_k, dim=-1)  # [N,K]
        return F.softmax(top, dim=1, dtype=top.dtype), index


FAMILIES: dict[str, RouterFamily] = {}
for _family in (
    _Softmax(("mixtral",), experts_key="num_local_experts"),
    _Softmax(("qwen2_moe", "qwen3_moe", "olmoe")),
    _DeepseekV3(("deepseek_v3",), experts_key="n_routed_experts", score_fn="sigmoid"),
    _GptOss(("gpt_oss",), router_attr="router", experts_key="num_local_experts", sentinel_ok=False),
):
    for _name in _family.model_types:
        FAMILIES[_name] = _family

SUPPORTED = tuple(FAMILIES)


def family_of(model_type: str) -> RouterFamily:
    """The adapter of a `config.model_type`; ValueError listing the supported ones otherwise."""
    if model_type not in FAMILIES:
        raise ValueError(f"model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED)}")
    return FAMILIES[model_type]
