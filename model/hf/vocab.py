"""Display strings of a Hugging Face tokenizer's ids, for the trace's `/vocab`.

A viewer labels heatmap axes and the text strip with these, so each must be legible on its own:
- special tokens keep their name (`<s>`, `<|endoftext|>`);
- byte-fallback pieces (SentencePiece `<0x0A>`) keep that form, as the byte-level model shows bytes;
- SentencePiece's word marker `▁` becomes a space;
- a byte-level BPE piece (GPT-2's alphabet, `Ġ` for a space) that decodes to text shows that text;
  one that holds only part of a UTF-8 character shows its printable ASCII and `<0xHH>` for the rest;
- ids past the tokenizer's length (a vocabulary padded for the logits) show as `<id>`.
Whitespace keeps its own text (" ", "\\n"), as in the shipped byte-level vocabulary.
"""

from __future__ import annotations

import re

_BYTE_FALLBACK = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: printable character -> byte (Radford et al. 2019, encoder.py)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


_BYTES = _byte_decoder()


def _show_bytes(data: bytes) -> str:
    """Text of `data` where it is valid UTF-8, `<0xHH>` for each byte that is not."""
    out, i = [], 0
    while i < len(data):
        for n in (1, 2, 3, 4):  # the shortest valid UTF-8 sequence starting at i
            try:
                ch = data[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            # control characters other than tab, newline and return would be invisible: show the byte
            out.append(f"<0x{data[i]:02X}>" if n == 1 and _CONTROL.fullmatch(ch) else ch)
            i += n
            break
        else:
            out.append(f"<0x{data[i]:02X}>")
            i += 1
    return "".join(out)


def is_byte_level(tokenizer) -> bool:
    """Whether the tokenizer's pieces are written in GPT-2's byte-level alphabet."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None) if backend is not None else None
    return decoder is not None and "ByteLevel" in type(decoder).__name__ + repr(decoder)


def token_string(tokenizer, token_id: int, special: set[int], byte_level: bool) -> str:
    """The display string of one id (see the module docstring)."""
    if token_id in special:
        return str(tokenizer.convert_ids_to_tokens(token_id))
    piece = tokenizer.convert_ids_to_tokens(token_id)
    if piece is None:
        return f"<{token_id}>"
    piece = str(piece)
    if _BYTE_FALLBACK.fullmatch(piece):
        return piece.upper().replace("0X", "0x")
    if "\u2581" in piece:
        return piece.replace("\u2581", " ")
    if byte_level and piece and all(ch in _BYTES for ch in piece):
        return _show_bytes(bytes(_BYTES[ch] for ch in piece))
    text = tokenizer.decode([token_id], clean_up_tokenization_spaces=False)
    if not text or "\ufffd" in text:
        return piece
    return _show_bytes(text.encode("utf-8"))


def vocab_strings(tokenizer, vocab_size: int) -> list[str]:
    """Display string of every id 0..vocab_size-1 (V of the logits)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    byte_level = is_byte_level(tokenizer)
    n = len(tokenizer)
    return [token_string(tokenizer, i, special, byte_level) if i < n else f"<{i}>" for i in range(vocab_size)]
