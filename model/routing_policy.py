"""The routing knobs of docs/routing.md as one validated, JSON-serialisable dataclass, plus presets.

A preset is only a set of knob values: `RoutingPolicy.preset("gshard")` returns an ordinary policy
whose `to_dict()` is what a trace stores (the resolved knobs, never the preset's name).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import torch

from traces.schema import DROPLESS_CAPACITY

GROUP_BY = ("sequence", "batch", "fixed")
FLATTEN = ("batch_major", "seq_major")
CAPACITY_MODES = ("factor", "fixed", "dropless")
CAPACITY_FORMULAS = (
    "deepspeed", "t5x", "vmoe", "megatron", "tutel", "megablocks", "gshard_train", "gshard_eval",
)
PRIORITIES = (
    "kmajor_position", "token_major_position", "kmajor_score", "probs", "random", "expert_choice",
)
SCORE_FNS = ("softmax", "sigmoid")
NORMS = ("none", "before_drop", "after_drop")



def _bad(field: str, allowed: str, value: Any) -> ValueError:
    return ValueError(f"routing policy: {field} must be {allowed}, got {value!r}")


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class RoutingPolicy:
    """Every knob that decides which candidates an expert keeps (docs/routing.md describes each)."""

    top_k: int = 2                        # candidates per token (expert choice: average experts per token)
    group_by: str = "batch"               # which tokens compete for the same expert buffers
    group_size: int | None = None         # tokens per group when group_by == "fixed" (T5X, V-MoE)
    flatten: str = "batch_major"          # arrival order: b*T+t (most stacks) or t*B+b (Megatron, Megablocks)
    capacity_mode: str = "dropless"       # "factor": formula of S; "fixed": C = fixed_capacity; "dropless"
    capacity_factor: float = 1.0          # cf of the formula (gshard_eval: the token fraction)
    min_capacity: int = 0                 # C = max(formula(S), min_capacity)
    capacity_formula: str = "deepspeed"   # whose formula, rounding included (see capacity())
    fixed_capacity: int | None = None     # C when capacity_mode == "fixed" (HF Switch expert_capacity)
    priority: str = "kmajor_position"     # total order of a group's candidates
    seed: int = 0                         # seed of random priority; the trace records it
    score_fn: str = "softmax"             # router scores from logits (DeepSeek-V3: sigmoid)
    norm: str = "before_drop"             # gate renormalisation: none, before_drop (Mixtral), after_drop
    pads_routed: bool = False             # pad tokens take part in routing (HF Switch, DeepSpeed)
    pads_count_toward_capacity: bool = False  # pad tokens count in S (HF Switch, fairseq, T5X)

    def __post_init__(self) -> None:
        self._check_choices()
        self._check_numbers()
        self._check_combinations()

    def _check_choices(self) -> None:
        for name, allowed in (
            ("group_by", GROUP_BY), ("flatten", FLATTEN), ("capacity_mode", CAPACITY_MODES),
            ("capacity_formula", CAPACITY_FORMULAS), ("priority", PRIORITIES),
            ("score_fn", SCORE_FNS), ("norm", NORMS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise _bad(name, "one of " + ", ".join(allowed), value)
        for name in ("pads_routed", "pads_count_toward_capacity"):
            if not isinstance(getattr(self, name), bool):
                raise _bad(name, "true or false", getattr(self, name))

    def _check_numbers(self) -> None:
        if not _is_int(self.top_k) or self.top_k < 1:
            raise _bad("top_k", "an integer >= 1", self.top_k)
        if not _is_int(self.min_capacity) or self.min_capacity < 0:
            raise _bad("min_capacity", "an integer >= 0", self.min_capacity)
        if not _is_int(self.seed) or not 0 <= self.seed < 2**62:
            raise _bad("seed", "an integer in [0, 2**62)", self.seed)
        cf = self.capacity_factor
        if not isinstance(cf, (int, float)) or isinstance(cf, bool) or not math.isfinite(cf) or cf <= 0:
            raise _bad("capacity_factor", "a finite number > 0", cf)
        if self.group_by == "fixed":
            if not _is_int(self.group_size) or self.group_size < 1:
                raise _bad("group_size", "an integer >= 1 when group_by is fixed", self.group_size)
        elif self.group_size is not None:
            raise _bad("group_size", "None unless group_by is fixed", self.group_size)
        if self.capacity_mode == "fixed":
            if not _is_int(self.fixed_capacity) or self.fixed_capacity < 0:
                raise _bad("fixed_capacity", "an integer >= 0 when capacity_mode is fixed",
                           self.fixed_capacity)
        elif self.fixed_capacity is not None:
            raise _bad("fixed_capacity", "None unless capacity_mode is fixed", self.fixed_capacity)

    def _check_combinations(self) -> None:
        if self.pads_routed and not self.pads_count_toward_capacity:
            raise _bad("pads_count_toward_capacity", "true when pads_routed is true (a routed pad "
                       "occupies a slot)", self.pads_count_toward_capacity)
        if self.priority == "expert_choice" and self.capacity_mode == "dropless":
            raise _bad("capacity_mode", "factor or fixed when priority is expert_choice (a dropless "
                       "expert choice is a dense layer)", self.capacity_mode)
        if (self.capacity_mode == "factor" and self.capacity_formula == "gshard_train"
                and self.capacity_factor != 1.0):
            raise _bad("capacity_factor", "1.0 with capacity_formula gshard_train (GShard's training "
                       "capacity has no factor)", self.capacity_factor)

    # ---- derived quantities -------------------------------------------------------------------

    @property
    def dropless(self) -> bool:
        """Whether no candidate can ever be dropped."""
        return self.capacity_mode == "dropless"

    def candidates_per_token(self, num_experts: int) -> int:
        """K of a routing decision: top_k, or E for expert choice (every expert may take a token)."""
        return num_experts if self.priority == "expert_choice" else self.top_k

    def capacity(self, tokens: torch.Tensor, num_experts: int) -> torch.Tensor:
        """Capacity C[G] (int64) of groups holding `tokens[G]` tokens (S); -2 for dropless.

        Formulas (k = top_k, cf = capacity_factor; every result is then max(C, min_capacity)):
        deepspeed ceil(S/E*k*cf) · t5x round(cf*S/E) (half to even, as Python's round) ·
        vmoe ceil(S*k*cf/E) rounded up to a multiple of 4 · megatron ceil(S*k/E*cf) ·
        tutel k*int(cf*ceil(S/E)) · megablocks int(cf*(S*k/E)) · gshard_train k*ceil(S/E) ·
        gshard_eval ceil(cf*S). Float steps run in float64 in each system's order of operations.
        """
        S = tokens.to(torch.int64)
        return torch.from_numpy(self.capacity_host(S.cpu().numpy(), num_experts)).to(S.device)

    def capacity_host(self, tokens: np.ndarray, num_experts: int) -> np.ndarray:
        """`capacity` in host integers: C[G] (int64 array) for tokens[G] (S) given as a numpy array.

        The one place the formulas live; float steps run in float64 in each system's order of operations.
        """
        S = np.asarray(tokens, dtype=np.int64)
        if self.capacity_mode == "dropless":
            return np.full_like(S, DROPLESS_CAPACITY)
        if self.capacity_mode == "fixed":
            return np.full_like(S, self.fixed_capacity)
        E, k, cf = num_experts, self.top_k, float(self.capacity_factor)
        s = S.astype(np.float64)
        ceil_div = (S + E - 1) // E
        f = self.capacity_formula
        if f == "deepspeed":
            c = np.ceil(s / E * k * cf)
        elif f == "t5x":
            c = np.round(cf * s / E)  # half to even, as Python's round
        elif f == "vmoe":
            c = np.ceil(np.ceil(s * k * cf / E) / 4) * 4
        elif f == "megatron":
            c = np.ceil(s * k / E * cf)
        elif f == "tutel":
            c = k * np.trunc(cf * ceil_div.astype(np.float64))
        elif f == "megablocks":
            c = np.trunc(cf * (s * k / E))
        elif f == "gshard_train":
            c = k * ceil_div
        else:  # gshard_eval: fairseq's moe_eval_capacity_token_fraction
            c = np.ceil(cf * s)
        return np.maximum(c.astype(np.int64), self.min_capacity)

    # ---- serialisation ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The resolved knobs as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoutingPolicy:
        """Inverse of `to_dict`; unknown keys raise ValueError naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"routing policy: expected a dict of knobs, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"routing policy: unknown knob(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        return cls(**data)

    def replace(self, **overrides: Any) -> RoutingPolicy:
        """A copy with some knobs changed (validated again)."""
        return RoutingPolicy.from_dict({**self.to_dict(), **overrides})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> RoutingPolicy:
        """The knobs of a named system (see `PRESETS`), with `overrides` applied on top."""
        if name not in PRESETS:
            raise ValueError(f"routing policy: preset must be one of {', '.join(PRESETS)}, got {name!r}")
        return cls.from_dict({**PRESETS[name], **overrides})


_FACTOR = {"capacity_mode": "factor"}

#: Knob values of each named system; every knob not named keeps its dataclass default.
PRESETS: dict[str, dict[str, Any]] = {
    # HF transformers SwitchTransformers: fixed expert_capacity per sequence, position order,
    # the top-1 probability as gate; pads are routed like any token.
    "switch_hf": dict(top_k=1, group_by="sequence", capacity_mode="fixed", fixed_capacity=64,
                      priority="kmajor_position", norm="none", pads_routed=True,
                      pads_count_toward_capacity=True),
    # T5X / Flaxformer Switch: fixed-size groups, max(round(cf*S/E), 4); pads counted, not routed.
    "switch_t5x": dict(top_k=1, group_by="fixed", group_size=512, **_FACTOR, capacity_factor=1.25,
                       capacity_formula="t5x", min_capacity=4, priority="kmajor_position", norm="none",
                       pads_count_toward_capacity=True),
    # GShard / fairseq top-2 (training capacity 2*ceil(S/E)); gates renormalised after the drop.
    "gshard": dict(top_k=2, group_by="batch", **_FACTOR, capacity_formula="gshard_train",
                   priority="kmajor_position", norm="after_drop", pads_count_toward_capacity=True),
    # DeepSpeed top-1 with random token selection (use_rts), min_capacity 4.
    "deepspeed_top1": dict(top_k=1, group_by="batch", **_FACTOR, capacity_formula="deepspeed",
                           min_capacity=4, priority="random", norm="none", pads_routed=True,
                           pads_count_toward_capacity=True),
    # DeepSpeed top-2: k-major position order, after-drop renormalisation.
    "deepspeed_top2": dict(top_k=2, group_by="batch", **_FACTOR, capacity_formula="deepspeed",
                           min_capacity=4, priority="kmajor_position", norm="after_drop",
                           pads_routed=True, pads_count_toward_capacity=True),
    # Megatron-LM: sequence-major tokens, drop policy "probs", top-k gates normalised before the drop.
    "megatron": dict(top_k=2, group_by="batch", flatten="seq_major", **_FACTOR,
                     capacity_formula="megatron", priority="probs", norm="before_drop",
                     pads_routed=True, pads_count_toward_capacity=True),
    # Tutel: k*int(cf*ceil(S/E)), position order, normalize_gate before the capacity cut.
    "tutel": dict(top_k=2, group_by="batch", **_FACTOR, capacity_formula="tutel",
                  priority="kmajor_position", norm="before_drop", pads_routed=True,
                  pads_count_toward_capacity=True),
    # Megablocks (capacity MoE): sequence-major, a token's choices together, raw gates.
    "megablocks": dict(top_k=2, group_by="batch", flatten="seq_major", **_FACTOR,
                       capacity_formula="megablocks", priority="token_major_position", norm="none",
                       pads_routed=True, pads_count_toward_capacity=True),
    # V-MoE: fixed-size groups, Batch Prioritized Routing, capacity rounded up to a multiple of 4.
    "vmoe": dict(top_k=2, group_by="fixed", group_size=512, **_FACTOR, capacity_factor=1.05,
                 capacity_formula="vmoe", priority="kmajor_score", norm="none", pads_routed=True,
                 pads_count_toward_capacity=True),
    # Expert choice (Zhou et al. 2022): each expert takes its top-C tokens, C = ceil(S*2/E).
    "expert_choice": dict(top_k=2, group_by="batch", **_FACTOR, capacity_formula="megatron",
                          priority="expert_choice", norm="none"),
    # Mixtral-style dropless top-2 with renormalised gates (Mixtral, Qwen-MoE, OLMoE, vLLM, SGLang).
    "dropless": dict(top_k=2, group_by="batch", capacity_mode="dropless", norm="before_drop"),
}
