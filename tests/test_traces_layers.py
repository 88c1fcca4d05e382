"""MoE layer -> model layer, the one helper every view and export uses."""

from traces.analysis.layers import model_layer


def test_model_layer_reads_moe_layers_and_falls_back_on_the_index():
    assert model_layer([2, 5], 1) == 5
    assert model_layer([2, 5], 0) == 2
    assert model_layer([2, 5], 2) == 2      # beyond the list: the MoE index itself
    assert model_layer(None, 3) == 3
    assert model_layer([2, 5], -1) == -1
