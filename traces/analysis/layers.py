"""MoE layers and model layers: a trace numbers its MoE layers 0..L-1 (the `layer` of every array);
the root attribute `moe_layers` gives the model's own layer number of each (docs/trace-format.md)."""

from __future__ import annotations

from collections.abc import Sequence


def model_layer(moe_layers: Sequence[int] | None, layer: int) -> int:
    """The model layer of MoE layer `layer` (the MoE index itself where `moe_layers` does not say)."""
    if moe_layers is not None and 0 <= layer < len(moe_layers):
        return int(moe_layers[layer])
    return layer
