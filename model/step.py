"""One forward step as the generation loop sees it, apart from its tokens: which tokens to route, where
they sit in their sequences, the KV cache, and what the step imposes on routing (a replay, an
intervention). The model's forward (and the Hugging Face bridge's) takes it whole, so a new control
of a step is one field here, not one more argument threaded through every caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from model.moe import ForcedRouting

#: Layers per step in the seed of random routing priorities: step s, MoE layer l draw with
#: seed offset s * SEED_STRIDE + l, so no two (step, layer) share a stream.
SEED_STRIDE = 4096


@dataclass(frozen=True)
class StepInputs:
    """A forward step's controls besides its tokens[B,T]; every field has the default of a plain
    full-sequence forward (route every non-PAD token at positions 0..T-1, no cache)."""

    valid: torch.Tensor | None = None      # [B,T] tokens to route (default: tokens != PAD)
    positions: torch.Tensor | None = None  # [B,T] each token's position in its own sequence (default 0..T-1)
    pad: torch.Tensor | None = None        # [B,T] pad positions the policy may count toward capacity
    cache: Any = None                      # KV cache to read and extend (None: full causal recomputation)
    forced: list[ForcedRouting | None] | None = None  # per MoE layer, routing to impose (replay)
    index: int = 0                         # forward step index, mixed into the seed of random routing
    edit: Any = None                       # `model.intervention.LayerEdit` or `StepEdits` of this step
    copies: int = 1                        # the rows are this many stacked copies of one batch (copy i:
    #                                        rows i*B0..(i+1)*B0-1), each routed alone (`model.routing`)

    def seed_offset(self, layer: int) -> int:
        """The seed offset of random routing priorities at MoE layer `layer` of this step."""
        return self.index * SEED_STRIDE + layer

    def forced_at(self, layer: int) -> ForcedRouting | None:
        """The routing imposed on MoE layer `layer` (None: the router's own)."""
        return None if self.forced is None else self.forced[layer]

    def edit_at(self, layer: int):
        """The interventions of this step that act in MoE layer `layer` (None: none)."""
        return None if self.edit is None else self.edit.for_layer(layer)
