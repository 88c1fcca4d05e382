"""The models and engines have every attribute of the protocols the loop and the experiments read
(`model.protocols`), so nothing reads them with a guessed default."""

from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig
from model.protocols import Engine, GenerationModel, ModelConfigLike, SnapshotCache
from model.transformer import MoETransformer


def members(protocol: type) -> set[str]:
    """The attributes and methods a protocol declares (its own, not `typing.Protocol`'s)."""
    return {name for name in vars(protocol) if not name.startswith("_")} | (
        {"__call__"} if "__call__" in vars(protocol) else set())


def tiny() -> MoETransformer:
    torch.manual_seed(0)
    return MoETransformer(ModelConfig(vocab_size=260, d_model=16, n_layers=2, n_heads=2, n_experts=4,
                                      top_k=2, expert_d_ff=16, context=32))


def test_the_shipped_model_is_a_generation_model():
    model = tiny()
    assert {n for n in members(GenerationModel) if not hasattr(model, n)} == set()
    assert {n for n in members(ModelConfigLike) if not hasattr(model.config, n)} == set()
    assert model.pad_id is not None and model.fill_id is None and model.admits_arrivals
    assert model.trace_meta("native") == {}
    assert isinstance(model.new_cache(2), SnapshotCache)


@pytest.mark.hf
def test_the_hugging_face_bridge_is_a_generation_model():
    pytest.importorskip("transformers")
    from model.hf.bridge import HFMoEModel
    from model.hf.families import family_of
    from model.hf.tiny import tiny_model

    model = HFMoEModel(tiny_model("mixtral"), None, family_of("mixtral"))
    try:
        assert {n for n in members(GenerationModel) if not hasattr(model, n)} == set()
        assert {n for n in members(ModelConfigLike) if not hasattr(model.config, n)} == set()
        assert model.pad_id is None and not model.admits_arrivals and isinstance(model.fill_id, int)
        assert not isinstance(model.new_cache(2), SnapshotCache)  # one shared column per step: no states
    finally:
        model.close()


@pytest.mark.parametrize("module, name", [("model.vllm.offline", "OfflineEngine"),
                                          ("model.vllm.server", "ServerEngine")])
def test_the_vllm_engines_are_engines(module, name):
    """Checked on the classes (starting an engine needs vLLM or a server): every method, and the name."""
    import importlib

    cls = getattr(importlib.import_module(module), name)
    methods = {n for n in members(Engine) if callable(vars(Engine)[n])}
    assert methods == {"check_tokenizer", "generate", "settings", "close"}
    assert all(callable(getattr(cls, n, None)) for n in methods)
    assert isinstance(cls.name, str)
