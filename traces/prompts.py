"""Every run of a request holds the same prompt: the rule the views and `explain` rely on when they
compare runs of one request position by position (`validate` checks it over the whole trace,
`analyse_request` over the runs it compares)."""

from __future__ import annotations

import numpy as np


class PromptMismatch(ValueError):
    """Runs of one request that hold different prompts; the message names them."""


class Prompts:
    """The prompt each request's rows hold, as first seen, to compare the next rows with."""

    def __init__(self) -> None:
        self._first: dict[int, tuple[np.ndarray, str]] = {}

    def mismatch(self, request: int, prompt: np.ndarray, where: str) -> str | None:
        """Why the prompt of a row (`where`: "run X row b") of `request` is not the one its request's
        first row held, or None."""
        prompt = np.asarray(prompt)
        first = self._first.setdefault(int(request), (prompt, where))
        return differs(first[0], prompt, int(request), first[1], where)


def differs(a: np.ndarray, b: np.ndarray, request: int, where_a: str, where_b: str) -> str | None:
    """Why two rows of one request do not hold the same prompt, or None."""
    if a.shape != b.shape:
        return (f"expected every run of request {request} to hold its prompt, found {len(b)} prompt tokens "
                f"in {where_b} and {len(a)} in {where_a}")
    at = np.flatnonzero(a != b)
    if at.size:
        t = int(at[0])
        return (f"expected every run of request {request} to hold its prompt, found token {int(b[t])} at "
                f"prompt position {t} in {where_b} where {where_a} holds {int(a[t])}")
    return None
