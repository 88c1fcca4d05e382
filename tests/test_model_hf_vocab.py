"""The trace's vocabulary for a Hugging Face tokenizer: every id legible on its own."""

from __future__ import annotations

from hf_tiny import tiny_tokenizer, transformers

from model.hf.vocab import vocab_strings


def sentencepiece_like():
    """A SentencePiece-style BPE (word marker ▁, byte fallback) built by hand, offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = ["<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>", "▁the", "▁", "t", "h", "e", "▁list"]
    tok = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=[], unk_token="<unk>",
                               byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                unk_token="<unk>")


def test_sentencepiece_pieces_byte_fallback_and_specials():
    v = vocab_strings(sentencepiece_like(), 14)
    assert v[:3] == ["<unk>", "<s>", "</s>"]
    assert v[3:6] == ["<0x0A>", "<0xC3>", "<0xA9>"]  # byte fallback keeps its legible form
    assert v[6] == " the" and v[7] == " " and v[11] == " list"
    assert v[12:] == ["<12>", "<13>"]  # ids past the tokenizer: the logits' padded vocabulary


def test_byte_level_bpe_shows_text_and_partial_utf8_as_bytes():
    tok = tiny_tokenizer(300)
    v = vocab_strings(tok, len(tok))
    assert v[:3] == ["<s>", "</s>", "<pad>"]
    byte = {tok.convert_tokens_to_ids(ch): s for ch, s in (("Ġ", " "), ("Ċ", "\n"), ("Ã", "<0xC3>"))}
    for token_id, shown in byte.items():
        assert v[token_id] == shown
    assert any(s.startswith(" ") and len(s) > 2 for s in v)  # merged subwords with their space
    assert all(s for s in v) and not any("\ufffd" in s for s in v)
