"""Byte-level tokenizer: UTF-8 bytes 0-255 plus BOS, EOS and PAD."""

from __future__ import annotations

BOS = 256  # begins every training document and prompt
EOS = 257  # ends a document; generation stops a row there
PAD = 258  # fills rows shorter than the batch's longest; never routed, never attended to
VOCAB_SIZE = 259

_SPECIAL_NAMES = {BOS: "<bos>", EOS: "<eos>", PAD: "<pad>"}
# Whitespace keeps its own text, so a viewer can rebuild the completion from `/vocab` alone; how to
# make it visible (a dot for a space, an arrow for a newline) is the viewer's choice.
_WHITESPACE = {0x20: " ", 0x0A: "\n", 0x09: "\t", 0x0D: "\r"}


def encode(text: str, *, bos: bool = True, eos: bool = False) -> list[int]:
    """Token ids of `text`: its UTF-8 bytes, optionally wrapped in BOS/EOS."""
    if not isinstance(text, str):
        raise ValueError(f"encode expects a str, got {type(text).__name__}")
    ids = list(text.encode("utf-8"))
    return ([BOS] if bos else []) + ids + ([EOS] if eos else [])


def decode(ids: list[int] | tuple[int, ...]) -> str:
    """Text of token ids; special tokens are dropped, invalid UTF-8 becomes U+FFFD."""
    data = bytes(int(i) for i in ids if 0 <= int(i) < 256)
    return data.decode("utf-8", errors="replace")


def token_name(token: int) -> str:
    """Text of one token id for the trace's `/vocab` (`"a"`, `" "`, `"\\n"`, `"<0xC3>"`, `"<bos>"`)."""
    token = int(token)
    if token in _SPECIAL_NAMES:
        return _SPECIAL_NAMES[token]
    if not 0 <= token < 256:
        return f"<{token}>"
    if token in _WHITESPACE:
        return _WHITESPACE[token]
    if 0x21 <= token <= 0x7E:
        return chr(token)
    # Control bytes, DEL and every non-ASCII byte (a fragment of a UTF-8 sequence) shown as hex.
    return f"<0x{token:02X}>"


def vocab_strings(vocab_size: int = VOCAB_SIZE) -> list[str]:
    """Display name of every token id 0..vocab_size-1, for the trace's `/vocab`."""
    return [token_name(i) for i in range(vocab_size)]
