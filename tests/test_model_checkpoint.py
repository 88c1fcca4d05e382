"""Checkpoints: safetensors + JSON card round trip, clear errors, and the shipped checkpoints, whose
held-out bits per byte and expert usage are measured here on a small fixed slice."""

import json

import pytest
import torch
from paths import ASSETS

from model.checkpoint import load_card, load_checkpoint, save_checkpoint
from model.corpus import build_corpus
from model.generate import generate
from model.routing import RoutingPolicy
from model.tokenizer import decode, encode
from model.train import evaluate

#: The held-out slice measured: 8 windows of 512 bytes from the held-out documents of the first
#: 120 standard-library files (a few seconds; the card's figure is over the whole held-out split).
SLICE_FILES, SLICE_WINDOWS, SLICE_T = 120, 8, 512


@pytest.fixture(scope="module")
def held_out_slice():
    return build_corpus(max_files=SLICE_FILES).held_out[: SLICE_WINDOWS * SLICE_T + 1]


def test_checkpoint_round_trips_weights_config_and_card(tmp_path, tiny_model):
    model = tiny_model()
    weights, card_path = save_checkpoint(model, tmp_path / "tiny", {"note": "test"})
    assert weights.name == "tiny.safetensors" and card_path.name == "tiny.json"
    loaded, card = load_checkpoint(tmp_path / "tiny.safetensors")
    assert card["note"] == "test" and loaded.config == model.config
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    tokens = torch.tensor([encode("abc def")])
    policy = RoutingPolicy.preset("dropless")
    assert torch.equal(loaded(tokens, policy).logits, model(tokens, policy).logits)


def test_bfloat16_weights_load_as_float32(tmp_path, tiny_model):
    save_checkpoint(tiny_model(), tmp_path / "half", dtype="bfloat16")
    loaded, card = load_checkpoint(tmp_path / "half")
    assert card["weights_dtype"] == "bfloat16" and loaded.dtype == torch.float32
    with pytest.raises(ValueError, match="dtype"):
        save_checkpoint(tiny_model(), tmp_path / "bad", dtype="int8")


def test_broken_checkpoints_give_clear_errors(tmp_path, tiny_model):
    with pytest.raises(ValueError, match="card not found"):
        load_checkpoint(tmp_path / "missing")
    save_checkpoint(tiny_model(), tmp_path / "ok")
    (tmp_path / "ok.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON checkpoint card"):
        load_card(tmp_path / "ok")
    save_checkpoint(tiny_model(), tmp_path / "other")
    card = json.loads((tmp_path / "other.json").read_text())
    card["model_config"]["d_model"] = 64
    (tmp_path / "other.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="shape"):
        load_checkpoint(tmp_path / "other")
    save_checkpoint(tiny_model(), tmp_path / "garbage")
    (tmp_path / "garbage.safetensors").write_bytes(b"\x00" * 20)
    with pytest.raises(ValueError, match="safetensors"):
        load_checkpoint(tmp_path / "garbage")
    card["model_config"]["n_experts"] = 0
    (tmp_path / "other.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="n_experts"):
        load_checkpoint(tmp_path / "other")


@pytest.mark.parametrize("name", ["moe-default", "dense-control"])
def test_shipped_checkpoint_loads_meets_its_targets_and_generates_deterministically(name, held_out_slice):
    model, card = load_checkpoint(ASSETS / name)
    policy = RoutingPolicy.preset("dropless") if model.config.is_moe else None
    measured = evaluate(model, held_out_slice, policy, T=SLICE_T, B=SLICE_WINDOWS)
    assert measured["bytes"] >= 0.95 * SLICE_WINDOWS * SLICE_T  # the slice is full: no empty split
    assert measured["bits_per_byte"] <= 2.2
    if model.config.is_moe:
        assert all(0.70 <= h <= 0.98 for h in measured["expert_usage_entropy_over_log_E"])
    prompts = [encode("Return a list of"), encode("def __init__(self")]
    first = generate(model, prompts, 24, policy, kernel_mode="batch_invariant")
    second = generate(model, prompts[:1], 24, policy, kernel_mode="batch_invariant")
    assert first.tokens[0] == second.tokens[0]
    text = decode(first.new_tokens[0])
    assert sum(c.isalpha() or c in " .,()_\n" for c in text) >= 0.8 * len(text), text
