"""Model configuration, tokenizer and dense control: validation and invariants."""

import pytest

from model.config import ModelConfig
from model.tokenizer import BOS, EOS, PAD, VOCAB_SIZE, decode, encode, token_name, vocab_strings
from model.transformer import MoETransformer


@pytest.mark.parametrize("field, value", [
    ("d_model", 0), ("d_model", 33), ("n_heads", -1), ("n_experts", 0), ("top_k", 9), ("context", 2.5),
    ("moe_layers", [4]), ("moe_layers", [0, 0]), ("moe_layers", "all"), ("vocab_size", 100),
    ("expert_d_ff", True), ("dense_d_ff", 0), ("rope_base", 0.5), ("norm_eps", 0), ("kernel_tile", 0),
    ("init_std", -1.0), ("tie_embeddings", "yes"),
])
def test_bad_config_value_raises_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ModelConfig(**{field: value})


def test_config_round_trips_through_dict_and_rejects_unknown_keys():
    config = ModelConfig(n_layers=3, moe_layers=[2, 0])
    assert config.moe_layers == [0, 2]
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="n_expert"):
        ModelConfig.from_dict({**config.to_dict(), "n_expert": 3})


def test_dense_control_has_the_moe_models_active_parameters():
    moe = ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_d_ff=24, context=32)
    dense = ModelConfig.dense_control(moe)
    assert dense.moe_layers == [] and dense.dense_d_ff == 48
    moe_model, dense_model = MoETransformer(moe), MoETransformer(dense)
    router_params = moe.n_layers * moe.n_experts * moe.d_model  # the router is the only extra per token
    assert moe_model.num_parameters(active=True) == dense_model.num_parameters() + router_params
    assert moe_model.num_parameters() > dense_model.num_parameters()


def test_tokenizer_round_trips_utf8_and_names_every_token():
    text = "déf f(x):\n\treturn 1 "
    ids = encode(text, bos=True, eos=True)
    assert ids[0] == BOS and ids[-1] == EOS and decode(ids) == text
    names = vocab_strings()
    assert len(names) == VOCAB_SIZE == 259
    assert names[ord("a")] == "a" and names[0x20] == " " and names[0x0A] == "\n"
    assert names[0xC3] == "<0xC3>" and names[BOS] == "<bos>" and names[PAD] == "<pad>"
    # Every name is text a viewer can show: printable, or one whitespace character it makes visible.
    assert all(name and (name.isprintable() or name in ("\n", "\t", "\r")) for name in names)
    # The vocabulary alone rebuilds ASCII text.
    assert "".join(names[i] for i in encode("a b\n\tc", bos=False)) == "a b\n\tc"
    assert token_name(EOS) == "<eos>"
    with pytest.raises(ValueError, match="str"):
        encode(b"bytes")
