"""Every run of a request holds that request's prompt: the rule the views and `explain` rely on when
they compare runs of one request position by position."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def prompt_mismatch(tokens: np.ndarray, prompt_len: np.ndarray, request_ids: np.ndarray,
                    prompt_of: Callable[[int], np.ndarray]) -> str | None:
    """What is wrong with the first row of a run (tokens [B, T], prompt_len [B], request_ids [B]) whose
    prompt is not its request's (`prompt_of(r)`, the pool's prompt), or None when every row's is."""
    for b, (r, p) in enumerate(zip(request_ids.tolist(), prompt_len.tolist(), strict=True)):
        expected = np.asarray(prompt_of(int(r)))
        if p != expected.shape[0] or p > tokens.shape[1]:
            return (f"expected row {b} to hold request {r}'s prompt of {expected.shape[0]} tokens (every "
                    f"run of a request holds its prompt), found a prompt length of {p}")
        differs = np.flatnonzero(tokens[b, :p] != expected)
        if differs.size:
            t = int(differs[0])
            return (f"expected row {b} to hold request {r}'s prompt (every run of a request holds it), "
                    f"found token {int(tokens[b, t])} at prompt position {t} where the request has "
                    f"{int(expected[t])}")
    return None
