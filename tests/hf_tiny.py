"""The tests' tiny random Hugging Face MoE models (`model.hf.tiny`), skipped without transformers."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from model.hf.tiny import FAMILIES, save_tiny, tiny_model, tiny_tokenizer  # noqa: E402

__all__ = ["FAMILIES", "save_tiny", "tiny_model", "tiny_tokenizer", "transformers"]
