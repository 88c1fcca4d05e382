"""A kept KV cache repeated for stacked copies of a batch (`KVCache.repeat`), copies joining from
another kept state (`KVCache.load`) and the first rows as a cache of their own (`KVCache.rows`)."""

import pytest
import torch

from model.kv_cache import KVCache


def _kept(B: int = 2, filled: int = 5, seed: int = 0) -> KVCache:
    torch.manual_seed(seed)
    cache = KVCache(2, B, 3, 128, 4)
    for layer in range(2):
        cache.k[layer][:, :, :filled] = torch.randn(B, 3, filled, 4)
        cache.v[layer][:, :, :filled] = torch.randn(B, 3, filled, 4)
    cache.filled = filled
    return cache.compact()


def test_repeat_stacks_copy_major_and_zeroes_past_filled():
    kept = _kept()
    stacked = kept.repeat(3, 64)
    assert stacked.context == 64 and stacked.filled == 5
    for mine, theirs in ((stacked.k, kept.k), (stacked.v, kept.v)):
        for t, s in zip(mine, theirs, strict=True):
            assert t.shape == (6, 3, 64, 4)
            for i in range(3):
                assert torch.equal(t[2 * i: 2 * i + 2, :, :5], s)
            assert not t[:, :, 5:].any()


def test_repeat_reuses_memory_and_copies_are_independent():
    kept = _kept()
    first = kept.repeat(4, 64)
    first.k[0].fill_(7.0)                       # a finished rerun wrote everywhere
    again = kept.repeat(2, 64, reuse=first)     # takes its memory, fully rewritten
    assert again.k[0].data_ptr() == first.k[0].data_ptr()
    assert torch.equal(again.k[0][2:4, :, :5], kept.k[0]) and not again.k[0][:, :, 5:].any()
    again.k[1][0, 0, 0, 0] = 99.0
    assert again.k[1][2, 0, 0, 0] != 99.0 and kept.k[1][0, 0, 0, 0] != 99.0


def test_load_and_rows():
    early, late = _kept(filled=5, seed=1), _kept(filled=6, seed=2)
    stacked = early.repeat(3, 64)
    stacked.load(2, late, 2)                    # copies 1 and 2 join from the later state
    assert torch.equal(stacked.v[0][:2, :, :5], early.v[0])
    for rows in (slice(2, 4), slice(4, 6)):
        assert torch.equal(stacked.v[0][rows, :, :6], late.v[0])
    view = stacked.rows(2)
    assert view.k[0].shape[0] == 2 and view.k[0].data_ptr() == stacked.k[0].data_ptr()
    view.k[0][1, 0, 7, 0] = 3.0
    assert stacked.k[0][1, 0, 7, 0] == 3.0


def test_repeat_refuses_a_context_that_cannot_hold_the_state():
    kept = _kept(filled=5)
    with pytest.raises(ValueError, match="positions"):
        kept.repeat(2, 4)
